//! What a run produces: the terminal table, aggregates and reports.

pub mod summary;
pub mod table;
