//! The server's runtime directories beneath its temporary directory: the private view's
//! skeleton, the commands' temporary directories.
//!
//! Owns their names (`<prefix><pid>-<64 random bits in hex>`, which nobody can guess and
//! pre-create), making them with a mode from the start, and removing the ones of servers
//! that are no longer running. Removal never follows a symlink (`remove_dir_all` does not).

use std::path::{Path, PathBuf};

use crate::fault::AtPath;

/// 64 random bits in hex.
pub(crate) fn random_hex() -> std::io::Result<String> {
    let mut bytes = [0u8; 8];
    let mut urandom = std::fs::File::open("/dev/urandom")?;
    std::io::Read::read_exact(&mut urandom, &mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Why a runtime directory could not be had.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TmpError {
    /// A directory could not be made.
    #[error("{0}")]
    At(#[from] AtPath),
    /// The server's temporary directory lies inside the jail.
    #[error(
        "the server's temporary directory {} lies inside the jail; set TMPDIR for the server to a directory outside it",
        .0.display()
    )]
    InsideJail(PathBuf),
}

/// A fresh `<prefix><pid>-<hex>` directory (mode 0700) beneath the server's temporary
/// directory, which must lie outside `jail`; the ones of servers no longer running are
/// removed first.
pub(crate) fn create_outside(jail: &Path, prefix: &str) -> Result<PathBuf, TmpError> {
    let parent = std::env::temp_dir();
    let parent = std::fs::canonicalize(&parent).map_err(|e| AtPath::new(&parent, e))?;
    if parent.starts_with(jail) {
        return Err(TmpError::InsideJail(parent));
    }
    remove_stale(&parent, prefix);
    Ok(make(&parent, prefix, 0o700)?)
}

/// Makes `<parent>/<prefix><pid>-<hex>` with `mode`.
fn make(parent: &Path, prefix: &str, mode: u32) -> Result<PathBuf, AtPath> {
    let pid = std::process::id();
    make_named(parent, mode, || {
        random_hex().map(|hex| format!("{prefix}{pid}-{hex}"))
    })
}

/// Makes a directory with `mode` in `parent`, named by `name` (a fresh name each try: one
/// that exists already is tried again, 16 times at most).
pub(crate) fn make_named(
    parent: &Path,
    mode: u32,
    mut name: impl FnMut() -> std::io::Result<String>,
) -> Result<PathBuf, AtPath> {
    use std::os::unix::fs::DirBuilderExt;
    for _ in 0..16 {
        let dir = parent.join(name().map_err(|e| AtPath::new(parent, e))?);
        match std::fs::DirBuilder::new().mode(mode).create(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(AtPath::new(dir, e)),
        }
    }
    let taken = std::io::Error::new(
        std::io::ErrorKind::AlreadyExists,
        "no free name in 16 tries",
    );
    Err(AtPath::new(parent, taken))
}

/// Removes the `<prefix>*` directories of servers that are no longer running.
pub(crate) fn remove_stale(parent: &Path, prefix: &str) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    use std::os::unix::fs::MetadataExt;
    let (uid, parent_dev) = (
        rustix::process::geteuid().as_raw(),
        std::fs::metadata(parent).map(|m| m.dev()).unwrap_or(0),
    );
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        // Exactly our own names: `<prefix><pid>-<hex>`, a directory we own, on this device.
        let Some((pid, tag)) = name
            .strip_prefix(prefix)
            .and_then(|rest| rest.split_once('-'))
        else {
            continue;
        };
        let ours = pid.bytes().all(|b| b.is_ascii_digit())
            && tag.bytes().all(|b| b.is_ascii_hexdigit())
            && entry
                .path()
                .symlink_metadata()
                .is_ok_and(|m| m.is_dir() && m.uid() == uid && m.dev() == parent_dev);
        if ours && !Path::new("/proc").join(pid).exists() {
            let _ = remove_tree(&entry.path());
        }
    }
}

/// Removes `dir` and everything in it. A command may have left a directory it made
/// unreadable or unwritable (`chmod 000`): those are opened up and the removal retried.
pub(crate) fn remove_tree(dir: &Path) -> std::io::Result<()> {
    match std::fs::remove_dir_all(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(_) => {
            open_up(dir);
            std::fs::remove_dir_all(dir)
        }
    }
}

/// Gives the owner rwx on every directory beneath `dir` (never through a symlink).
fn open_up(dir: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let mut queue = vec![dir.to_path_buf()];
    while let Some(d) = queue.pop() {
        let is_dir = d.symlink_metadata().is_ok_and(|m| m.is_dir());
        if !is_dir {
            continue;
        }
        let _ = std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700));
        if let Ok(entries) = std::fs::read_dir(&d) {
            queue.extend(entries.flatten().map(|e| e.path()));
        }
    }
}
