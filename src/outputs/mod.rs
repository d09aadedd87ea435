//! What a run produces: the terminal table, reports, baselines, the nightly HTML page
//! and the comparison matrix.

pub mod engines;
pub mod html;
pub mod junit;
pub mod markdown;
pub mod matrix;
pub mod report_dir;
pub mod table;
