//! The report directory: probed before the first replay, its files replaced as one set.
//!
//! A run's files (report.json, report.md, junit.xml) are staged as temporaries, then a manifest
//! (`MANIFEST_FILE`) marked `writing` names the run, the files are renamed into place, and the
//! manifest is rewritten `complete` with each file's SHA-256. A reader that finds the manifest
//! `writing`, or a file whose digest differs from the manifest's, knows the set is torn (the
//! writer was killed) instead of mixing one run's JSON with another's Markdown.

use crate::harness::report::Report;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The manifest of the report set in a directory.
pub const MANIFEST_FILE: &str = "conform-manifest.json";

/// Prefix of every temporary conform writes: `.conform-<pid>-<random>.tmp`.
const TEMP_PREFIX: &str = ".conform-";
const TEMP_SUFFIX: &str = ".tmp";

/// The manifest: which run wrote the set, and whether the set is whole.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// An id of the run that wrote (or is writing) the set.
    pub run: String,
    /// `writing` while files are being replaced; `complete` once all are in place.
    pub state: String,
    /// SHA-256 (hex) of each file of the set, by file name (empty while writing).
    #[serde(default)]
    pub files: BTreeMap<String, String>,
}

/// A report directory locked for one writer (an exclusive `flock` on the directory itself,
/// released when this is dropped or the process ends, however it ends).
#[derive(Debug)]
pub struct DirLock {
    dir: PathBuf,
    #[cfg(unix)]
    _fd: std::fs::File,
}

impl DirLock {
    /// The locked directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

/// Locks `dir` for this process, or says that another writer holds it: two runs writing one
/// report set at once would leave it torn, each exiting as if its set were whole.
fn lock(dir: &Path) -> Result<DirLock, String> {
    #[cfg(unix)]
    {
        use std::os::fd::AsRawFd;
        let fd = std::fs::File::open(dir)
            .map_err(|e| format!("{}: cannot lock the report directory: {e}", dir.display()))?;
        // SAFETY: flock on a descriptor this function owns; it only takes an advisory lock.
        let r = unsafe { libc::flock(fd.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if r != 0 {
            let e = std::io::Error::last_os_error();
            return Err(if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
                format!(
                    "{}: another conform is writing its reports into this directory; \
                     give each run its own --report-dir",
                    dir.display()
                )
            } else {
                format!("{}: cannot lock the report directory: {e}", dir.display())
            });
        }
        Ok(DirLock {
            dir: dir.to_path_buf(),
            _fd: fd,
        })
    }
    #[cfg(not(unix))]
    {
        Ok(DirLock {
            dir: dir.to_path_buf(),
        })
    }
}

/// Creates `dir` (with parents), locks it for this process ([`DirLock`]) and proves it
/// writable by creating and removing a file in it, so that a run whose report could not be
/// saved fails before its first replay; stale temporaries of killed writers are removed.
pub fn prepare(dir: &Path) -> Result<DirLock, String> {
    if dir.exists() && !dir.is_dir() {
        return Err(format!(
            "{}: the report directory is not a directory",
            dir.display()
        ));
    }
    std::fs::create_dir_all(dir)
        .map_err(|e| format!("{}: cannot create the report directory: {e}", dir.display()))?;
    let locked = lock(dir)?;
    let probe = temp_in(dir).map_err(|e| {
        format!(
            "{}: the report directory is not writable: {e}",
            dir.display()
        )
    })?;
    drop(probe);
    for name in SET_FILES.iter().chain([&MANIFEST_FILE]) {
        set_member(dir, name)?;
    }
    clean_stale(dir);
    Ok(locked)
}

/// A new temporary file in `dir`, named so that [`clean_stale`] knows its writer.
pub fn temp_in(dir: &Path) -> std::io::Result<tempfile::NamedTempFile> {
    tempfile::Builder::new()
        .prefix(&format!("{TEMP_PREFIX}{}-", std::process::id()))
        .suffix(TEMP_SUFFIX)
        .tempfile_in(dir)
}

/// Removes temporaries left in `dir` by writers that no longer run (killed mid-write).
pub fn clean_stale(dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut removed = 0;
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(name) = name.to_str() else { continue };
        let stale = match name
            .strip_prefix(TEMP_PREFIX)
            .and_then(|r| r.strip_suffix(TEMP_SUFFIX))
            .and_then(|r| r.split_once('-'))
            .and_then(|(pid, _)| pid.parse::<u32>().ok())
        {
            Some(pid) => !process_alive(pid),
            None => false,
        };
        if stale
            && e.file_type().is_ok_and(|t| t.is_file())
            && std::fs::remove_file(e.path()).is_ok()
        {
            removed += 1;
        }
    }
    removed
}

/// Whether a process with this id runs (on other systems: assumed, so nothing is removed).
fn process_alive(pid: u32) -> bool {
    if pid == std::process::id() {
        return true;
    }
    #[cfg(unix)]
    {
        let Ok(pid) = libc::pid_t::try_from(pid) else {
            return false;
        };
        // Signal 0 checks existence; EPERM means it exists under another user.
        // SAFETY: kill with signal 0 sends nothing and has no memory effects.
        let r = unsafe { libc::kill(pid, 0) };
        r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
    }
    #[cfg(not(unix))]
    {
        true
    }
}

/// Where an output named by the user really goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A regular file, or none yet, at this path (a symbolic link's resolved target): written
    /// atomically beside it and renamed over it.
    File(PathBuf),
    /// A FIFO or a character device (`/dev/null`, `/dev/stdout`, a process substitution):
    /// written into directly, as `cp` does, never replaced.
    Stream,
}

/// The most symbolic links followed to find an output's target.
const MAX_LINKS: usize = 40;

/// Where writing `path` goes: through symbolic links to their target, never replacing a
/// link, a device node or a FIFO with a regular file. A link to nothing, a directory, a
/// socket or a block device is refused, naming the path.
pub fn target(path: &Path) -> Result<Target, String> {
    let shown = path.display();
    let mut at = path.to_path_buf();
    for _ in 0..MAX_LINKS {
        let meta = match std::fs::symlink_metadata(&at) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if at == path {
                    return Ok(Target::File(at));
                }
                return Err(format!(
                    "{shown}: a symbolic link to nothing ({}): not written through",
                    at.display()
                ));
            }
            Err(e) => return Err(format!("{shown}: cannot write: {e}")),
        };
        let t = meta.file_type();
        if t.is_symlink() {
            let link =
                std::fs::read_link(&at).map_err(|e| format!("{shown}: cannot write: {e}"))?;
            // A link into /proc (/dev/stdout, /dev/fd/N) names an open file: write into it.
            if link.starts_with("/proc/") {
                return match std::fs::metadata(path) {
                    Ok(m) if m.is_dir() => Err(format!("{shown}: a directory, not written")),
                    _ => Ok(Target::Stream),
                };
            }
            at = match at.parent() {
                Some(dir) => dir.join(link),
                None => link,
            };
            continue;
        }
        if t.is_file() {
            return Ok(Target::File(at));
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::FileTypeExt;
            if t.is_fifo() || t.is_char_device() {
                return Ok(Target::Stream);
            }
            if t.is_socket() {
                return Err(format!("{shown}: a socket, not a file: not written"));
            }
            if t.is_block_device() {
                return Err(format!("{shown}: a block device, not a file: not written"));
            }
        }
        if t.is_dir() {
            return Err(format!("{shown}: a directory, not written"));
        }
        return Err(format!("{shown}: not a regular file: not written"));
    }
    Err(format!(
        "{shown}: more than {MAX_LINKS} symbolic links deep: not written through"
    ))
}

/// Writes `contents` to `path`: atomically (a synced temporary renamed over it) for a regular
/// file, through a symbolic link to its target (the link kept), and directly into a FIFO or
/// a character device; see [`target`].
pub fn write_atomic(path: &Path, contents: &[u8]) -> Result<(), String> {
    match target(path)? {
        Target::File(real) => {
            let tmp = stage(&real, contents)?;
            tmp.persist(&real)
                .map_err(|e| format!("{}: cannot write: {}", path.display(), e.error))?;
            Ok(())
        }
        Target::Stream => {
            use std::io::Write;
            std::fs::OpenOptions::new()
                .write(true)
                .open(path)
                .and_then(|mut f| f.write_all(contents).and_then(|()| f.flush()))
                .map_err(|e| format!("{}: cannot write: {e}", path.display()))
        }
    }
}

/// The regular file a member of a report set in `dir` is written to: the set is replaced as
/// one unit by renames, so a member that is a FIFO or a device is refused, naming it.
fn set_member(dir: &Path, name: &str) -> Result<PathBuf, String> {
    let path = dir.join(name);
    match target(&path)? {
        Target::File(real) => Ok(real),
        Target::Stream => {
            let what = match std::fs::metadata(&path) {
                #[cfg(unix)]
                Ok(m) if std::os::unix::fs::FileTypeExt::is_fifo(&m.file_type()) => {
                    "a FIFO (named pipe)"
                }
                _ => "a device",
            };
            Err(format!(
                "{}: {what}, not a regular file: a report set is written as files, replaced as \
                 one unit; remove it or choose another --report-dir",
                path.display()
            ))
        }
    }
}

/// The files of a run's report set.
pub const SET_FILES: [&str; 3] = ["report.json", "report.md", "junit.xml"];

/// A synced temporary beside `path` holding `contents`.
fn stage(path: &Path, contents: &[u8]) -> Result<tempfile::NamedTempFile, String> {
    use std::io::Write;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: cannot create: {e}", dir.display()))?;
    let mut tmp = temp_in(dir).map_err(|e| format!("{}: cannot write: {e}", dir.display()))?;
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
    Ok(tmp)
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    crate::harness::corpus::hex(&Sha256::digest(bytes))
}

/// Replaces the files of a report set in the locked directory as one unit (see the module
/// comment); `run` names the run in the manifest.
pub fn write_set(locked: &DirLock, run: &str, files: &[(&str, Vec<u8>)]) -> Result<(), String> {
    let dir = locked.dir();
    set_member(dir, MANIFEST_FILE)?;
    // Everything is staged first, so a full disk fails before any file is replaced.
    let mut staged = Vec::with_capacity(files.len());
    for (name, contents) in files {
        let real = set_member(dir, name)?;
        staged.push((
            *name,
            real.clone(),
            stage(&real, contents)?,
            sha256_hex(contents),
        ));
    }
    let manifest = |state: &str, files: BTreeMap<String, String>| Manifest {
        run: run.to_string(),
        state: state.into(),
        files,
    };
    let write_manifest = |m: &Manifest| {
        let json = serde_json::to_string_pretty(m).map_err(|e| e.to_string())? + "\n";
        write_atomic(&dir.join(MANIFEST_FILE), json.as_bytes())
    };
    write_manifest(&manifest("writing", BTreeMap::new()))?;
    let mut digests = BTreeMap::new();
    for (name, real, tmp, digest) in staged {
        tmp.persist(&real)
            .map_err(|e| format!("{}: cannot write: {}", dir.join(name).display(), e.error))?;
        digests.insert(name.to_string(), digest);
    }
    write_manifest(&manifest("complete", digests))?;
    clean_stale(dir);
    Ok(())
}

/// Writes report.json, report.md and junit.xml of `rep` into the locked directory as one set.
pub fn write_reports(
    dir: &DirLock,
    rep: &Report,
    matrix: Option<&super::matrix::Matrix>,
) -> Result<(), String> {
    let json = rep.to_json();
    let md_matrix = matrix.map(super::matrix::markdown);
    let md = super::markdown::render(rep, md_matrix.as_deref());
    let junit = super::junit::render(rep)?;
    let generated = rep.timings.as_ref().map_or("", |t| t.generated_at.as_str());
    let run = format!("{generated} {}", &sha256_hex(json.as_bytes())[..16]);
    write_set(
        dir,
        run.trim(),
        &[
            ("report.json", json.into_bytes()),
            ("report.md", md.into_bytes()),
            ("junit.xml", junit.into_bytes()),
        ],
    )
}

/// Reads a report.json, naming the file in errors, and refuses one whose set is torn.
pub fn read(path: &Path) -> Result<Report, String> {
    let text = crate::harness::files::read_regular_to_string(path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    check_set_member(path, text.as_bytes())?;
    Report::from_json(&text, path)
}

/// Checks `file` (of a report set) against the manifest beside it, if any: an error when the
/// set is torn. Directories written before manifests existed have none and pass.
pub fn check_set_member(file: &Path, contents: &[u8]) -> Result<(), String> {
    let Some(name) = file.file_name().and_then(|n| n.to_str()) else {
        return Ok(());
    };
    let manifest_path: PathBuf = file.with_file_name(MANIFEST_FILE);
    if std::fs::symlink_metadata(&manifest_path).is_err() {
        return Ok(());
    }
    let text = crate::harness::files::read_regular_to_string(&manifest_path)
        .map_err(|e| format!("{}: {e}", manifest_path.display()))?;
    let m: Manifest = serde_json::from_str(&text)
        .map_err(|e| format!("{}: not a conform manifest: {e}", manifest_path.display()))?;
    if m.state != "complete" {
        return Err(format!(
            "{}: the report set of run {} was not completely written (the writer was interrupted); rerun to replace it",
            manifest_path.display(),
            m.run
        ));
    }
    match m.files.get(name) {
        Some(d) if *d != sha256_hex(contents) => Err(format!(
            "{}: not the file of run {} that {} names (a torn report set); rerun to replace it",
            file.display(),
            m.run,
            manifest_path.display()
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmpdir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("conform-rdir-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn prepare_creates_and_refuses_a_file() {
        let d = tmpdir("prep");
        drop(prepare(&d.join("a/b")).unwrap());
        assert!(d.join("a/b").is_dir());
        std::fs::write(d.join("f"), "x").unwrap();
        let e = prepare(&d.join("f")).unwrap_err();
        assert!(e.contains("not a directory"), "{e}");
        let e = prepare(&d.join("f/sub")).unwrap_err();
        assert!(e.contains("cannot create"), "{e}");
    }

    #[test]
    fn a_set_is_checked_against_its_manifest_and_stale_temporaries_go() {
        let d = tmpdir("set");
        let locked = prepare(&d).unwrap();
        write_set(
            &locked,
            "r1",
            &[("a.json", b"1".to_vec()), ("b.md", b"one".to_vec())],
        )
        .unwrap();
        check_set_member(&d.join("a.json"), b"1").unwrap();
        // A file of another run beside the manifest: torn.
        std::fs::write(d.join("a.json"), "2").unwrap();
        let e = check_set_member(&d.join("a.json"), b"2").unwrap_err();
        assert!(e.contains("torn"), "{e}");
        // A writer killed between the two manifests.
        write_atomic(
            &d.join(MANIFEST_FILE),
            br#"{"run":"r2","state":"writing","files":{}}"#,
        )
        .unwrap();
        let e = check_set_member(&d.join("b.md"), b"one").unwrap_err();
        assert!(e.contains("not completely written"), "{e}");
        write_set(&locked, "r3", &[("a.json", b"3".to_vec())]).unwrap();
        check_set_member(&d.join("a.json"), b"3").unwrap();

        // A temporary of a dead writer is removed; this process's are kept.
        let dead = d.join(format!("{TEMP_PREFIX}{}-abc{TEMP_SUFFIX}", u32::MAX - 7));
        std::fs::write(&dead, "x").unwrap();
        let live = temp_in(&d).unwrap();
        clean_stale(&d);
        assert!(!dead.exists());
        assert!(live.path().exists());
        let left: Vec<_> = std::fs::read_dir(&d)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().into_string().unwrap())
            .filter(|n| n.ends_with(TEMP_SUFFIX))
            .collect();
        assert_eq!(left.len(), 1, "{left:?}");
    }

    #[cfg(unix)]
    #[test]
    fn one_writer_at_a_time() {
        let d = tmpdir("lock");
        let first = prepare(&d).unwrap();
        let e = prepare(&d).unwrap_err();
        assert!(e.contains("another conform is writing"), "{e}");
        drop(first);
        prepare(&d).unwrap();
    }
}
