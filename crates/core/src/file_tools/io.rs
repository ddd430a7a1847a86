//! The file tools' file system access: every open beneath a root descriptor with
//! `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)`, so no path the
//! model names, and no symlink a command planted, leads out of the root or through a link;
//! `O_NONBLOCK` and `fstat` so that a FIFO, device or socket is refused without waiting; and
//! writes that are atomic (a temporary file beside the target, fsync, rename, fsync of the
//! directory), keeping the mode and, for a root server, the owner.

use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;

use rustix::fs::{AtFlags, FileType, Mode, OFlags, RenameFlags};

/// A file that was read: its bytes and what the write keeps of it.
#[derive(Debug)]
pub(crate) struct Existing {
    pub(crate) bytes: Vec<u8>,
    pub(crate) mode: u32,
    pub(crate) uid: u32,
    pub(crate) gid: u32,
}

/// Why the file system refused.
#[derive(Debug)]
pub(crate) enum IoRefusal {
    /// Nothing there.
    Missing,
    /// A symlink, or a path through one (never followed).
    Symlink,
    /// Not a regular file (FIFO, device, socket, directory).
    NotRegular(&'static str),
    /// More than one hard link: a write would change the other names too.
    HardLinked(u64),
    /// Over the size cap.
    TooBig(u64),
    /// Exists (create_only).
    Exists,
    /// Anything else, with the errno's words.
    Failed(String),
}

fn failed(what: &str, e: rustix::io::Errno) -> IoRefusal {
    match e {
        rustix::io::Errno::NOENT => IoRefusal::Missing,
        rustix::io::Errno::LOOP | rustix::io::Errno::XDEV => IoRefusal::Symlink,
        e => IoRefusal::Failed(format!("{what}: {}", std::io::Error::from(e))),
    }
}

/// Opens the root directory (canonical, from the policy).
pub(crate) fn open_root(root: &Path) -> Result<OwnedFd, IoRefusal> {
    rustix::fs::open(
        root,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| failed("the root", e))
}

/// The directory `rel` names beneath `root` (each component a real directory), made with
/// its missing parents when `make`.
pub(crate) fn open_dir(root: &OwnedFd, rel: &Path, make: bool) -> Result<OwnedFd, IoRefusal> {
    let mut dir = crate::beneath::open(
        root,
        ".",
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| failed("the root", e))?;
    for part in rel.components() {
        let name = part.as_os_str();
        let open = |d: &OwnedFd| {
            crate::beneath::open(
                d,
                name,
                OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
                Mode::empty(),
            )
        };
        dir = match open(&dir) {
            Ok(d) => d,
            Err(rustix::io::Errno::NOENT) if make => {
                rustix::fs::mkdirat(&dir, name, Mode::from_raw_mode(0o755))
                    .or_else(|e| {
                        if e == rustix::io::Errno::EXIST {
                            Ok(())
                        } else {
                            Err(e)
                        }
                    })
                    .map_err(|e| failed("making a folder", e))?;
                open(&dir).map_err(|e| failed("a folder", e))?
            }
            Err(rustix::io::Errno::NOTDIR) => {
                return Err(IoRefusal::NotRegular("a file where a folder is named"));
            }
            Err(e) => return Err(failed("a folder", e)),
        };
    }
    Ok(dir)
}

/// Reads the regular file `name` in `dir`, at most `max` bytes.
pub(crate) fn read(dir: &OwnedFd, name: &Path, max: u64) -> Result<Existing, IoRefusal> {
    let fd = crate::beneath::open(
        dir,
        name,
        OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| failed("the file", e))?;
    let st = rustix::fs::fstat(&fd).map_err(|e| failed("the file", e))?;
    match FileType::from_raw_mode(st.st_mode) {
        FileType::RegularFile => {}
        FileType::Directory => return Err(IoRefusal::NotRegular("a folder")),
        FileType::Fifo => return Err(IoRefusal::NotRegular("a FIFO")),
        FileType::Socket => return Err(IoRefusal::NotRegular("a socket")),
        FileType::CharacterDevice | FileType::BlockDevice => {
            return Err(IoRefusal::NotRegular("a device"));
        }
        _ => return Err(IoRefusal::NotRegular("not a regular file")),
    }
    let size = st.st_size as u64;
    if size > max {
        return Err(IoRefusal::TooBig(size));
    }
    let mut bytes = Vec::with_capacity(size as usize);
    std::fs::File::from(fd)
        .take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| IoRefusal::Failed(format!("reading: {e}")))?;
    if bytes.len() as u64 > max {
        return Err(IoRefusal::TooBig(bytes.len() as u64));
    }
    Ok(Existing {
        bytes,
        mode: st.st_mode & 0o7777,
        uid: st.st_uid,
        gid: st.st_gid,
    })
}

/// The number of hard links of `name` in `dir` (not following a symlink), or `None` when
/// nothing is there; a symlink is refused.
pub(crate) fn links(dir: &OwnedFd, name: &Path) -> Result<Option<u64>, IoRefusal> {
    match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::Symlink => {
            Err(IoRefusal::Symlink)
        }
        Ok(st) => Ok(Some(st.st_nlink)),
        Err(rustix::io::Errno::NOENT) => Ok(None),
        Err(e) => Err(failed("the file", e)),
    }
}

/// Writes `bytes` as `name` in `dir` atomically: a new temporary file beside it (mode and
/// owner as `keep`, else 0644), fsync, rename over it (or, with `no_clobber`, only where
/// nothing is), fsync of the directory. A crash at any moment leaves the old file or the new
/// one, never half of either (and at most its temporary file, `.<name>.safe-mcp.tmp`, which
/// the next write of that file removes).
pub(crate) fn write_atomic(
    dir: &OwnedFd,
    name: &Path,
    bytes: &[u8],
    keep: Option<&Existing>,
    no_clobber: bool,
) -> Result<(), IoRefusal> {
    // One temporary name per target: what a killed write left behind is removed by the next
    // write of the same file (unlinkat removes a link a command put there, never its target;
    // O_EXCL then refuses anything that appears in between).
    let temp = format!(".{}.safe-mcp.tmp", name.to_string_lossy());
    let _ = rustix::fs::unlinkat(dir, temp.as_str(), AtFlags::empty());
    let mode = keep.map_or(0o644, |k| k.mode & 0o777);
    let fd = crate::beneath::open(
        dir,
        temp.as_str(),
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::CLOEXEC,
        Mode::from_raw_mode(mode),
    )
    .map_err(|e| failed("a temporary file", e))?;
    let done = (|| {
        let mut file = std::fs::File::from(fd);
        file.write_all(bytes)
            .map_err(|e| IoRefusal::Failed(format!("writing: {e}")))?;
        rustix::fs::fchmod(file.as_fd(), Mode::from_raw_mode(mode))
            .map_err(|e| failed("its mode", e))?;
        if let Some(k) = keep
            && rustix::process::geteuid().is_root()
        {
            let _ = rustix::fs::fchown(
                file.as_fd(),
                Some(rustix::fs::Uid::from_raw(k.uid)),
                Some(rustix::fs::Gid::from_raw(k.gid)),
            );
        }
        rustix::fs::fsync(file.as_fd()).map_err(|e| failed("fsync", e))?;
        let flags = if no_clobber {
            RenameFlags::NOREPLACE
        } else {
            RenameFlags::empty()
        };
        rustix::fs::renameat_with(dir, temp.as_str(), dir, name, flags).map_err(|e| match e {
            rustix::io::Errno::EXIST => IoRefusal::Exists,
            e => failed("renaming into place", e),
        })?;
        // The rename is durable once the directory is.
        if let Ok(d) = crate::beneath::open(
            dir,
            ".",
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        ) {
            let _ = rustix::fs::fsync(&d);
        }
        Ok(())
    })();
    if done.is_err() {
        let _ = rustix::fs::unlinkat(dir, temp.as_str(), AtFlags::empty());
    }
    done
}
