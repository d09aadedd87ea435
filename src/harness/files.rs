//! Reading the files a run is given (corpus files, known failures, baselines, tokenizers,
//! saved reports): only regular files are read. A FIFO would block the run until something
//! wrote to it, a device might never end; both are named instead, whatever path led to them.

use std::fs::{File, Metadata};
use std::io::Read;
use std::path::Path;

/// What a file's type makes it when it is not a regular file (`None` for a regular file).
pub fn not_regular(meta: &Metadata) -> Option<&'static str> {
    let t = meta.file_type();
    if t.is_file() {
        return None;
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_fifo() {
            return Some("a FIFO (named pipe)");
        }
        if t.is_socket() {
            return Some("a socket");
        }
        if t.is_char_device() || t.is_block_device() {
            return Some("a device");
        }
    }
    if t.is_dir() {
        return Some("a directory");
    }
    Some("not a regular file")
}

/// Opens `path` for reading only if it is a regular file. The type is checked on the opened
/// file (opened without blocking, so a FIFO cannot hold the open), not on a path that may
/// change in between. Errors do not name the path: callers do.
pub fn open_regular(path: &Path) -> Result<(File, Metadata), String> {
    let mut opts = std::fs::OpenOptions::new();
    opts.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        // Regular files ignore O_NONBLOCK; a FIFO opened with it does not wait for a writer.
        opts.custom_flags(libc::O_NONBLOCK);
    }
    let f = opts.open(path).map_err(|e| format!("cannot read: {e}"))?;
    let meta = f.metadata().map_err(|e| format!("cannot read: {e}"))?;
    if let Some(what) = not_regular(&meta) {
        return Err(format!("{what}, not a regular file: not read"));
    }
    Ok((f, meta))
}

/// Reads a regular file whole (see [`open_regular`]).
pub fn read_regular(path: &Path) -> Result<Vec<u8>, String> {
    let (mut f, meta) = open_regular(path)?;
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    f.read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read: {e}"))?;
    Ok(bytes)
}

/// Reads a regular file whole as UTF-8 text (see [`open_regular`]).
pub fn read_regular_to_string(path: &Path) -> Result<String, String> {
    String::from_utf8(read_regular(path)?).map_err(|e| format!("not UTF-8 text: {e}"))
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn a_fifo_is_named_at_once() {
        let d = tempfile::tempdir().unwrap();
        let fifo = d.path().join("p");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
        let e = read_regular(&fifo).unwrap_err();
        assert!(e.contains("FIFO"), "{e}");
        assert!(read_regular(d.path()).unwrap_err().contains("directory"));
        std::fs::write(d.path().join("f"), "x").unwrap();
        assert_eq!(read_regular(&d.path().join("f")).unwrap(), b"x");
    }
}
