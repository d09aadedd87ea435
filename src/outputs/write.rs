//! Writing report files: each atomically, so a crash never leaves one half-written.

use super::matrix;
use super::{junit, markdown};
use crate::harness::report::Report;
use std::path::Path;

/// Writes `contents` to `path` atomically: a temporary file in the same directory, then rename.
pub fn write_atomic(path: &Path, contents: &[u8]) -> Result<(), String> {
    use std::io::Write;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: cannot create: {e}", dir.display()))?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir)
        .map_err(|e| format!("{}: cannot write: {e}", dir.display()))?;
    // Temporary files are private (0600); a report is meant to be read by others.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let _ = tmp
            .as_file()
            .set_permissions(std::fs::Permissions::from_mode(0o644));
    }
    tmp.write_all(contents)
        .and_then(|_| tmp.as_file().sync_all())
        .map_err(|e| format!("{}: cannot write: {e}", path.display()))?;
    tmp.persist(path)
        .map_err(|e| format!("{}: cannot write: {}", path.display(), e.error))?;
    Ok(())
}

/// Writes report.json, report.md and junit.xml, each atomically.
pub fn write_reports(
    dir: &Path,
    rep: &Report,
    matrix: Option<&matrix::Matrix>,
) -> Result<(), String> {
    write_atomic(&dir.join("report.json"), rep.to_json().as_bytes())?;
    let md_matrix = matrix.map(matrix::markdown);
    write_atomic(
        &dir.join("report.md"),
        markdown::render(rep, md_matrix.as_deref()).as_bytes(),
    )?;
    write_atomic(&dir.join("junit.xml"), junit::render(rep)?.as_bytes())?;
    Ok(())
}
