//! The server's runtime directories beneath its temporary directory: the private view's
//! skeleton, the commands' temporary directories.
//!
//! Owns their names (`<prefix><pid>-<64 random bits in hex>`, which nobody can guess and
//! pre-create), making them with a mode from the start, and removing the ones of servers
//! that are no longer running. Removal never follows a symlink (`remove_dir_all` does not).

use std::path::{Path, PathBuf};

/// 64 random bits in hex.
pub(crate) fn random_hex() -> Result<String, String> {
    let mut bytes = [0u8; 8];
    let mut urandom = std::fs::File::open("/dev/urandom").map_err(|e| e.to_string())?;
    std::io::Read::read_exact(&mut urandom, &mut bytes).map_err(|e| e.to_string())?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Makes `<parent>/<prefix><pid>-<hex>` with `mode`.
pub(crate) fn make(parent: &Path, prefix: &str, mode: u32) -> Result<PathBuf, String> {
    use std::os::unix::fs::DirBuilderExt;
    let pid = std::process::id();
    for _ in 0..16 {
        let dir = parent.join(format!("{prefix}{pid}-{}", random_hex()?));
        match std::fs::DirBuilder::new().mode(mode).create(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(format!("cannot make {}: {e}", dir.display())),
        }
    }
    Err(format!("no free name for a {prefix}* directory"))
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
