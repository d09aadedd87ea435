//! What a run produces: the terminal table and reports.
