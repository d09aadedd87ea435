//! What a run produces: the terminal table, reports, baselines, the nightly HTML page, adapters
//! and the comparison matrix.

pub mod adapter;
pub mod html;
pub mod junit;
pub mod known;
pub mod markdown;
pub mod matrix;
pub mod report;
pub mod report_dir;
pub mod table;
