//! What a run produces: the terminal table, aggregates and reports.

pub mod adapter;
pub mod matrix;
pub mod summary;
pub mod table;
