//! The workspace as a directory descriptor: every path resolves beneath it, no symlinks.
//!
//! Owns all filesystem access of the organizer. Every open is `openat2` with
//! `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS` from the root descriptor,
//! and every move is `renameat2(RENAME_NOREPLACE)` between directory descriptors, so no path
//! is checked and then used: the kernel refuses an escape or a symlink at the moment of use,
//! and refuses to overwrite. It never deletes a file; it removes only empty directories it
//! created itself (on undo).

use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;

use rustix::fs::{AtFlags, FileType, Mode, OFlags, RenameFlags};
use rustix::io::Errno;

/// What went wrong, in the organizer's terms.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FsError {
    /// The path leaves the workspace, or goes through a symlink.
    #[error("{0:?} leaves the workspace or goes through a symlink")]
    Escape(String),
    /// Nothing is there.
    #[error("{0:?} does not exist")]
    NotFound(String),
    /// The destination exists.
    #[error("{0:?} already exists")]
    Occupied(String),
    /// A move across filesystems, which would be a copy.
    #[error("moving {0:?} would cross filesystems, which would mean copying; refused")]
    CrossDevice(String),
    /// The path is not a usable relative path.
    #[error("{0:?} is not a plain relative path inside the workspace")]
    BadPath(String),
    /// Anything else.
    #[error("{path:?}: {message}")]
    Io { path: String, message: String },
}

/// The kind of an entry, never following symlinks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// A regular file.
    File,
    /// A directory.
    Directory,
    /// A symbolic link.
    Symlink,
    /// A FIFO, socket or device.
    Special,
}

/// One directory entry's metadata, as `lstat` gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryInfo {
    /// The name as UTF-8 (invalid bytes replaced).
    pub name: String,
    /// Whether the raw name was valid UTF-8.
    pub valid_utf8: bool,
    /// File, directory, symlink, special.
    pub kind: Kind,
    /// Size in bytes.
    pub size: u64,
    /// Permission bits.
    pub mode: u32,
    /// Hard links.
    pub nlink: u64,
    /// Identity: device and inode.
    pub dev: u64,
    /// Identity: inode.
    pub ino: u64,
    /// Modification time, nanoseconds since the epoch.
    pub mtime_ns: i128,
}

/// A workspace root opened once.
#[derive(Debug)]
pub struct Workspace {
    root: OwnedFd,
}

fn io(path: &str, e: Errno) -> FsError {
    match e {
        Errno::XDEV | Errno::LOOP => FsError::Escape(path.to_owned()),
        Errno::NOENT => FsError::NotFound(path.to_owned()),
        Errno::EXIST | Errno::NOTEMPTY => FsError::Occupied(path.to_owned()),
        other => FsError::Io {
            path: path.to_owned(),
            message: std::io::Error::from(other).to_string(),
        },
    }
}

/// Splits a relative path into (parent, name) after refusing anything but plain components.
pub fn split(rel: &str) -> Result<(&str, &str), FsError> {
    let rel = rel.trim_end_matches('/');
    if rel.is_empty() || rel.starts_with('/') || rel.contains('\0') {
        return Err(FsError::BadPath(rel.to_owned()));
    }
    if rel
        .split('/')
        .any(|c| c.is_empty() || c == "." || c == "..")
    {
        return Err(FsError::Escape(rel.to_owned()));
    }
    Ok(match rel.rsplit_once('/') {
        Some((parent, name)) => (parent, name),
        None => ("", rel),
    })
}

impl Workspace {
    /// Opens `root` (canonical, from the policy).
    pub fn open(root: &Path) -> std::io::Result<Self> {
        let root = rustix::fs::open(
            root,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        Ok(Workspace { root })
    }

    /// Opens a directory beneath the root (`""` is the root itself).
    pub fn open_dir(&self, rel: &str) -> Result<OwnedFd, FsError> {
        let rel = rel.trim_end_matches('/');
        let path = if rel.is_empty() { "." } else { rel };
        if !rel.is_empty() {
            split(rel)?;
        }
        safe_mcp_core::beneath::open(
            &self.root,
            path,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| io(rel, e))
    }

    /// Lists a directory beneath the root, sorted by name.
    pub fn list(&self, rel: &str) -> Result<Vec<EntryInfo>, FsError> {
        let dir = self.open_dir(rel)?;
        let mut entries = Vec::new();
        let mut reader = rustix::fs::Dir::read_from(&dir).map_err(|e| io(rel, e))?;
        while let Some(entry) = reader.read() {
            let entry = entry.map_err(|e| io(rel, e))?;
            let raw = entry.file_name().to_bytes();
            if raw == b"." || raw == b".." {
                continue;
            }
            match stat_at(&dir, entry.file_name(), raw) {
                Ok(info) => entries.push(info),
                Err(FsError::NotFound(_)) => {} // vanished while listing
                Err(e) => return Err(e),
            }
        }
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(entries)
    }

    /// Metadata of `rel` without following a final symlink; `None` if nothing is there.
    pub fn stat(&self, rel: &str) -> Result<Option<EntryInfo>, FsError> {
        let (parent, name) = split(rel)?;
        let dir = match self.open_dir(parent) {
            Ok(d) => d,
            Err(FsError::NotFound(_)) => return Ok(None),
            Err(e) => return Err(e),
        };
        match stat_at(&dir, name, name.as_bytes()) {
            Ok(info) => Ok(Some(info)),
            Err(FsError::NotFound(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Creates the missing directories of `rel` (a directory path); returns those created,
    /// outermost first.
    pub fn ensure_dirs(&self, rel: &str) -> Result<Vec<String>, FsError> {
        let mut created = Vec::new();
        if rel.is_empty() {
            return Ok(created);
        }
        let mut so_far = String::new();
        for component in rel.split('/') {
            let parent = self.open_dir(&so_far)?;
            let path = if so_far.is_empty() {
                component.to_owned()
            } else {
                format!("{so_far}/{component}")
            };
            split(&path)?;
            match rustix::fs::mkdirat(&parent, component, Mode::from_raw_mode(0o755)) {
                Ok(()) => created.push(path.clone()),
                Err(Errno::EXIST) => {
                    // It must be a real directory, not a symlink or a file.
                    self.open_dir(&path)?;
                }
                Err(e) => return Err(io(&path, e)),
            }
            so_far = path;
        }
        Ok(created)
    }

    /// Moves `src` to `dst` atomically; never replaces anything at `dst`.
    pub fn rename_noreplace(&self, src: &str, dst: &str) -> Result<(), FsError> {
        let (sp, sn) = split(src)?;
        let (dp, dn) = split(dst)?;
        let from = self.open_dir(sp)?;
        let to = self.open_dir(dp)?;
        match rustix::fs::renameat_with(&from, sn, &to, dn, RenameFlags::NOREPLACE) {
            Ok(()) => Ok(()),
            Err(Errno::XDEV) => Err(FsError::CrossDevice(src.to_owned())),
            Err(Errno::EXIST) => Err(FsError::Occupied(dst.to_owned())),
            Err(Errno::NOENT) => Err(FsError::NotFound(src.to_owned())),
            Err(e) => Err(io(src, e)),
        }
    }

    /// Removes `rel` if it is an empty directory; leaves anything else alone.
    pub fn rmdir_if_empty(&self, rel: &str) {
        if let Ok((parent, name)) = split(rel)
            && let Ok(dir) = self.open_dir(parent)
        {
            let _ = rustix::fs::unlinkat(&dir, name, AtFlags::REMOVEDIR);
        }
    }

    /// Makes the directory `rel` durable (its entries), so a rename survives a crash.
    pub fn sync_dir(&self, rel: &str) {
        if let Ok(dir) = self.open_dir(rel) {
            let _ = rustix::fs::fsync(&dir);
        }
    }
}

fn stat_at<Fd: AsFd>(
    dir: Fd,
    name: impl rustix::path::Arg,
    raw: &[u8],
) -> Result<EntryInfo, FsError> {
    let display = String::from_utf8_lossy(raw).into_owned();
    let st =
        rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW).map_err(|e| io(&display, e))?;
    let kind = match FileType::from_raw_mode(st.st_mode) {
        FileType::RegularFile => Kind::File,
        FileType::Directory => Kind::Directory,
        FileType::Symlink => Kind::Symlink,
        _ => Kind::Special,
    };
    Ok(EntryInfo {
        valid_utf8: std::str::from_utf8(raw).is_ok(),
        name: display,
        kind,
        size: u64::try_from(st.st_size).unwrap_or(0),
        mode: st.st_mode & 0o7777,
        nlink: st.st_nlink as u64,
        dev: st.st_dev as u64,
        ino: st.st_ino as u64,
        mtime_ns: i128::from(st.st_mtime) * 1_000_000_000 + i128::from(st.st_mtime_nsec),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_and_symlinks_are_refused_by_the_kernel() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("ws");
        std::fs::create_dir(&root).unwrap();
        std::fs::write(root.join("a.txt"), "a").unwrap();
        std::os::unix::fs::symlink("/etc", root.join("out")).unwrap();
        let ws = Workspace::open(&root).unwrap();
        assert!(matches!(ws.open_dir("out"), Err(FsError::Escape(_))));
        assert!(matches!(ws.stat("out/passwd"), Err(FsError::Escape(_))));
        assert!(matches!(split("../x"), Err(FsError::Escape(_))));
        assert_eq!(ws.stat("out").unwrap().unwrap().kind, Kind::Symlink);
        ws.ensure_dirs("Docs/2024").unwrap();
        ws.rename_noreplace("a.txt", "Docs/2024/a.txt").unwrap();
        std::fs::write(root.join("a.txt"), "b").unwrap();
        assert_eq!(
            ws.rename_noreplace("a.txt", "Docs/2024/a.txt"),
            Err(FsError::Occupied("Docs/2024/a.txt".into()))
        );
        assert_eq!(
            std::fs::read_to_string(root.join("Docs/2024/a.txt")).unwrap(),
            "a",
            "never overwritten"
        );
        assert!(matches!(
            ws.rename_noreplace("a.txt", "out/a.txt"),
            Err(FsError::Escape(_))
        ));
    }
}
