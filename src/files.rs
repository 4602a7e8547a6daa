//! Reading the project's own files (build.toml, sources, the Python package): regular files
//! only, opened so that a FIFO cannot block the build and read with a size cap, so that a link
//! to `/dev/zero` or a FIFO in the sources ends in an error naming the file instead of a hang.
//! And writing kbuild's own records atomically ([`write_atomic`]).
//!
//! A leaf module: it imports nothing from the crate. Links are followed (a project may link a
//! shared header in); whether the target stays inside the project is the caller's check.

use std::collections::BTreeSet;
use std::fs::{File, FileType};
use std::io::{self, Read, Write as _};
use std::os::unix::fs::{FileTypeExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};

/// What a path is, in words, when it is not a regular file: `FIFO`, `directory`, ….
pub fn kind_of(file_type: FileType) -> Option<&'static str> {
    Some(if file_type.is_file() {
        return None;
    } else if file_type.is_dir() {
        "directory"
    } else if file_type.is_symlink() {
        "symbolic link"
    } else if file_type.is_fifo() {
        "FIFO"
    } else if file_type.is_socket() {
        "socket"
    } else if file_type.is_block_device() {
        "block device"
    } else if file_type.is_char_device() {
        "character device"
    } else {
        "special file"
    })
}

/// Open `path` (following links) for reading, only if it is a regular file. `O_NONBLOCK` keeps
/// the open of a FIFO from waiting for a writer; the type is then checked on the open file, so
/// the file checked is the file read.
pub fn open_regular(path: &Path) -> io::Result<File> {
    let file = File::options()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    if let Some(kind) = kind_of(file.metadata()?.file_type()) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("it is a {kind}, not a regular file"),
        ));
    }
    Ok(file)
}

/// The bytes of the regular file `path`, refusing (with `ErrorKind::FileTooLarge`) one that
/// holds more than `limit` bytes.
pub fn read_regular(path: &Path, limit: u64) -> io::Result<Vec<u8>> {
    let file = open_regular(path)?;
    let mut bytes = Vec::new();
    // One byte past the limit tells "exactly at the limit" from "larger".
    file.take(limit.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(io::Error::new(
            io::ErrorKind::FileTooLarge,
            format!("it is larger than {}", human_size(limit)),
        ));
    }
    Ok(bytes)
}

/// `1 MiB`, `64 KiB`, `100 bytes`.
pub fn human_size(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{} KiB", b >> 10),
        b => format!("{b} bytes"),
    }
}

/// Feed the regular file `path` to `sink` in blocks (no size limit: nothing is kept).
pub fn stream_regular(path: &Path, mut sink: impl FnMut(&[u8])) -> io::Result<u64> {
    let mut file = open_regular(path)?;
    let mut buf = vec![0u8; 1 << 16];
    let mut total = 0u64;
    loop {
        match file.read(&mut buf) {
            Ok(0) => return Ok(total),
            Ok(n) => {
                sink(&buf[..n]);
                total += n as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// Write through a temporary file in the same directory and rename it into place, so readers
/// see the old content or the new, never a torn one.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let mut tmp = temp_file_in(dir, "tmp")?;
    tmp.write_all(bytes)?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// A temporary file in `dir` (named as [`temp_prefix`] says) to be renamed into place, created
/// 0666 less the umask as `File::create` would: tempfile's own 0600 would leave a wheel or an
/// artifact unreadable to other users (a CI upload step running as another uid).
pub fn temp_file_in(dir: &Path, kind: &str) -> io::Result<tempfile::NamedTempFile> {
    use std::os::unix::fs::PermissionsExt as _;
    tempfile::Builder::new()
        .prefix(&temp_prefix(kind))
        .permissions(std::fs::Permissions::from_mode(0o666))
        .tempfile_in(dir)
}

/// `.<kind>-<pid>-`: the start of the name of a temporary file or directory this process
/// writes (`kind` is `tmp`, `stage` or `old`). The pid lets a later build tell leftovers of a
/// killed build from the files of a live one.
pub fn temp_prefix(kind: &str) -> String {
    format!(".{kind}-{}-", std::process::id())
}

/// Whether `name` is a temporary of `kind` (see [`temp_prefix`]) left by a process that is
/// gone. A name of the kind without a readable pid counts as stale (kbuild wrote it before
/// names carried the pid); one of this process or of another live one does not.
pub fn is_stale_temp(name: &std::ffi::OsStr, kind: &str) -> bool {
    let Some(rest) = name
        .to_str()
        .and_then(|n| n.strip_prefix('.'))
        .and_then(|n| n.strip_prefix(kind))
        .and_then(|n| n.strip_prefix('-'))
    else {
        return false;
    };
    let pid = rest
        .split_once('-')
        .and_then(|(pid, _)| pid.parse::<libc::pid_t>().ok())
        .filter(|pid| *pid > 0);
    match pid {
        Some(pid) => pid != std::process::id() as libc::pid_t && !process_alive(pid),
        None => true,
    }
}

fn process_alive(pid: libc::pid_t) -> bool {
    // SAFETY: kill(2) with signal 0 only checks that the process exists; no memory is touched.
    let rc = unsafe { libc::kill(pid, 0) };
    // EPERM: it exists but belongs to someone else.
    rc == 0 || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// Files reachable from `source` through `#include "…"`, transitively: each name is looked up
/// next to the including file, then in `include_dirs`. Files under `excluded` (toolchain
/// directories) are neither reported nor scanned, and `<…>` includes are ignored: the
/// compiler's dependency file covers those. Names that resolve nowhere are skipped (they may be
/// behind an `#if` that is false here).
pub fn scan_includes(
    source: &Path,
    include_dirs: &[PathBuf],
    excluded: &[PathBuf],
) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut seen = BTreeSet::from([source.to_path_buf()]);
    let mut queue = vec![source.to_path_buf()];
    while let Some(file) = queue.pop() {
        let Ok(bytes) = std::fs::read(&file) else {
            continue;
        };
        let text = String::from_utf8_lossy(&bytes);
        let here = file.parent().unwrap_or(Path::new("."));
        for name in quoted_includes(&text) {
            let candidates =
                std::iter::once(here.to_path_buf()).chain(include_dirs.iter().cloned());
            let Some(hit) = candidates.map(|d| d.join(name)).find(|p| p.is_file()) else {
                continue;
            };
            if excluded.iter().any(|dir| hit.starts_with(dir)) {
                continue;
            }
            if seen.insert(hit.clone()) {
                found.push(hit.clone());
                queue.push(hit);
            }
        }
    }
    found
}

/// The names in `#include "name"` lines (with any spacing around `#`).
fn quoted_includes(text: &str) -> impl Iterator<Item = &str> {
    text.lines().filter_map(|line| {
        let rest = line.trim_start().strip_prefix('#')?.trim_start();
        let rest = rest.strip_prefix("include")?.trim_start();
        let rest = rest.strip_prefix('"')?;
        rest.find('"').map(|end| &rest[..end])
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mkfifo(path: &Path) {
        let c_path = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path; mkfifo has no other preconditions.
        assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
    }

    #[test]
    fn a_fifo_is_refused_at_once_instead_of_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("pipe");
        mkfifo(&fifo);
        let err = read_regular(&fifo, 100).unwrap_err();
        assert_eq!(err.to_string(), "it is a FIFO, not a regular file");
    }

    #[test]
    fn a_link_to_dev_zero_is_refused_without_reading_it() {
        let dir = tempfile::tempdir().unwrap();
        let link = dir.path().join("build.toml");
        std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
        let err = read_regular(&link, 100).unwrap_err();
        assert_eq!(
            err.to_string(),
            "it is a character device, not a regular file"
        );
    }

    #[test]
    fn a_file_over_the_limit_is_refused_and_one_at_the_limit_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, [7u8; 1024]).unwrap();
        assert_eq!(read_regular(&path, 1024).unwrap().len(), 1024);
        let err = read_regular(&path, 1023).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::FileTooLarge);
        assert_eq!(err.to_string(), "it is larger than 1023 bytes");
    }

    #[test]
    fn temporaries_of_dead_processes_are_stale_and_ours_are_not() {
        use std::ffi::OsStr;
        let ours = format!("{}x.o", temp_prefix("tmp"));
        assert!(!is_stale_temp(OsStr::new(&ours), "tmp"));
        // pid 1 is always alive.
        assert!(!is_stale_temp(
            OsStr::new(".stage-1-torch-cpu-abc"),
            "stage"
        ));
        // Above the kernel's pid_max (4194304): no such process.
        assert!(is_stale_temp(
            OsStr::new(".stage-99999999-torch-cpu-abc"),
            "stage"
        ));
        assert!(is_stale_temp(OsStr::new(".old-Xy12ab"), "old"));
        assert!(!is_stale_temp(OsStr::new(".stage-1-x"), "old"));
        assert!(!is_stale_temp(OsStr::new("torch-cpu"), "stage"));
    }

    #[test]
    fn a_link_to_a_regular_file_is_read_through() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("real"), "x").unwrap();
        std::os::unix::fs::symlink("real", dir.path().join("link")).unwrap();
        assert_eq!(read_regular(&dir.path().join("link"), 10).unwrap(), b"x");
        let mut seen = Vec::new();
        let n = stream_regular(&dir.path().join("link"), |b| seen.extend_from_slice(b)).unwrap();
        assert_eq!((n, seen.as_slice()), (1, b"x".as_slice()));
    }

    #[test]
    fn quoted_includes_skip_system_includes_and_comments() {
        let src = "#include \"a.h\"\n  #  include \"sub/b.cuh\" // x\n#include <torch/all.h>\n// #include \"c.h\"\n";
        assert_eq!(
            quoted_includes(src).collect::<Vec<_>>(),
            ["a.h", "sub/b.cuh"]
        );
    }

    #[test]
    fn include_scan_follows_conditional_includes_but_not_toolchain_dirs() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::create_dir_all(d.join("inc")).unwrap();
        std::fs::create_dir_all(d.join("torch")).unwrap();
        std::fs::write(
            d.join("k.cu"),
            "#if __CUDA_ARCH__ >= 800\n#include \"sm80.cuh\"\n#endif\n#include \"t.h\"\n#include \"missing.h\"\n",
        )
        .unwrap();
        std::fs::write(d.join("inc/sm80.cuh"), "#include \"common.h\"\n").unwrap();
        std::fs::write(d.join("inc/common.h"), "#include \"k.cu\"\n").unwrap();
        std::fs::write(d.join("torch/t.h"), "#include \"never.h\"\n").unwrap();
        let found = scan_includes(
            &d.join("k.cu"),
            &[d.join("inc"), d.join("torch")],
            &[d.join("torch")],
        );
        assert_eq!(found, vec![d.join("inc/sm80.cuh"), d.join("inc/common.h")]);
    }
}
