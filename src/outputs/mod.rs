//! What a run produces: the terminal table, aggregates and reports.

pub mod junit;
pub mod known;
pub mod markdown;
pub mod report;
pub mod table;
