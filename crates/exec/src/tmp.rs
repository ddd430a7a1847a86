//! Each call's private temporary directory.
//!
//! Many tools need a writable temporary directory (git, sort, compilers, pip, npm), and a
//! shared one (`/tmp`) would let one command read or plant another's files. At start the
//! server makes a root of its own beneath its temporary directory (mode 0700, never inside
//! the jail); each call gets a fresh directory beneath it, which `TMPDIR`, `TMP` and `TEMP`
//! name and which that call's Landlock ruleset alone may write (`confine`), and which is
//! removed, with everything in it, when the call ends. In the private view the root is bound
//! at its host path, so the path is the same in either view. `/tmp` itself stays unwritable.
//!
//! Making and removing a directory costs ~0.2 ms on this machine kind's ext4 (its journal),
//! more than a third of a bare spawn, and most calls leave their directory as they found it.
//! So a directory that is still exactly as made goes back to a small pool for a later call;
//! anything else is removed. "As made" is its inode and change time as recorded at mkdir
//! (every chmod, xattr, flag or entry change moves the change time), besides empty, mode
//! 0700, ours and no ACL.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::fault::AtPath;
use crate::rundir::{self, TmpError};

const ROOT_PREFIX: &str = "safe-mcp-tmp-";

/// The server's root of temporary directories; removed, with what is left in it, on drop.
#[derive(Debug)]
pub(crate) struct TmpRoot {
    dir: PathBuf,
    pool: Pool,
}

/// Directories of finished calls that are as good as new, with their stamps.
type Pool = Arc<Mutex<Vec<(PathBuf, Stamp)>>>;

/// A directory's inode and change time (seconds, nanoseconds).
type Stamp = (u64, i64, i64);

fn stamp_of(meta: &std::fs::Metadata) -> Stamp {
    use std::os::unix::fs::MetadataExt;
    (meta.ino(), meta.ctime(), meta.ctime_nsec())
}

/// How many untouched directories are kept for reuse (about the calls that run at once).
const POOL_SIZE: usize = 16;

impl TmpRoot {
    /// Makes the root beneath the server's temporary directory, which must lie outside
    /// `jail`.
    pub(crate) fn create(jail: &Path) -> Result<TmpRoot, TmpError> {
        Ok(TmpRoot {
            dir: rundir::create_outside(jail, ROOT_PREFIX)?,
            pool: Pool::default(),
        })
    }

    /// The root itself.
    pub(crate) fn path(&self) -> &Path {
        &self.dir
    }

    /// An empty directory for one call: an untouched one from the pool, or a new one.
    pub(crate) fn for_call(&self) -> Result<CallTmp, AtPath> {
        let reused = self.pool.lock().unwrap_or_else(|e| e.into_inner()).pop();
        if let Some((dir, made)) = reused {
            return Ok(CallTmp {
                dir,
                made: Some(made),
                pool: Arc::clone(&self.pool),
            });
        }
        let dir = rundir::make_named(&self.dir, 0o700, rundir::random_hex)?;
        let made = std::fs::symlink_metadata(&dir).ok().map(|m| stamp_of(&m));
        Ok(CallTmp {
            dir,
            made,
            pool: Arc::clone(&self.pool),
        })
    }
}

impl Drop for TmpRoot {
    fn drop(&mut self) {
        let _ = rundir::remove_tree(&self.dir);
    }
}

/// One call's temporary directory; on drop (after the call's whole process tree is gone)
/// back to the pool if untouched, else removed with everything in it.
#[derive(Debug)]
pub(crate) struct CallTmp {
    dir: PathBuf,
    /// Its stamp when made; `None` if it could not be read (never reused then).
    made: Option<Stamp>,
    pool: Pool,
}

impl CallTmp {
    pub(crate) fn path(&self) -> &Path {
        &self.dir
    }
}

impl Drop for CallTmp {
    fn drop(&mut self) {
        if let Some(made) = self.made
            && untouched(&self.dir, made)
        {
            let mut pool = self.pool.lock().unwrap_or_else(|e| e.into_inner());
            if pool.len() < POOL_SIZE {
                pool.push((std::mem::take(&mut self.dir), made));
                return;
            }
        }
        if let Err(e) = rundir::remove_tree(&self.dir) {
            tracing::warn!(
                "a command's temporary directory {} could not be removed: {e}",
                self.dir.display()
            );
        }
    }
}

/// Whether `dir` is exactly as [`TmpRoot::for_call`] made it: the same inode and change
/// time as `made`, a directory of ours, mode 0700, empty, with no ACL that could let another
/// user in.
fn untouched(dir: &Path, made: Stamp) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(meta) = std::fs::symlink_metadata(dir) else {
        return false;
    };
    let ours = stamp_of(&meta) == made
        && meta.is_dir()
        && meta.mode() & 0o7777 == 0o700
        && meta.uid() == rustix::process::geteuid().as_raw();
    let empty = std::fs::read_dir(dir).is_ok_and(|mut entries| entries.next().is_none());
    let no_acl = ["system.posix_acl_access", "system.posix_acl_default"]
        .iter()
        .all(|name| {
            let mut buf = [0u8; 0];
            matches!(
                rustix::fs::lgetxattr(dir, *name, &mut buf),
                Err(rustix::io::Errno::NODATA | rustix::io::Errno::NOTSUP)
            )
        });
    ours && empty && no_acl
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_untouched_directories_are_reused() {
        let jail = tempfile::tempdir().unwrap();
        let root = TmpRoot::create(jail.path()).unwrap();
        let first = root.for_call().unwrap();
        let path = first.path().to_path_buf();
        drop(first);
        let again = root.for_call().unwrap();
        assert_eq!(again.path(), path, "an untouched directory is reused");
        std::fs::write(again.path().join("f"), "x").unwrap();
        drop(again);
        assert!(!path.exists(), "a used directory is removed");
        let third = root.for_call().unwrap();
        assert_ne!(third.path(), path);
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(third.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let changed = third.path().to_path_buf();
        drop(third);
        assert!(
            !changed.exists(),
            "a directory whose mode changed is removed"
        );
        // A change undone still moved the change time: not reused.
        let fourth = root.for_call().unwrap();
        let path = fourth.path().to_path_buf();
        std::fs::write(path.join("gone"), "x").unwrap();
        std::fs::remove_file(path.join("gone")).unwrap();
        drop(fourth);
        assert!(!path.exists(), "a directory that was written in is removed");
    }

    /// A jail holding the server's temporary directory is refused by name, and a directory
    /// that cannot be made keeps its path and the system's error as the cause.
    #[test]
    fn a_tmp_inside_the_jail_is_refused_and_a_failure_keeps_its_cause() {
        let temp = std::fs::canonicalize(std::env::temp_dir()).unwrap();
        let refused = crate::confine::ConfineError::from(TmpRoot::create(&temp).unwrap_err());
        assert!(refused.to_string().contains("set TMPDIR"), "{refused}");
        let jail = tempfile::tempdir().unwrap();
        let root = TmpRoot::create(jail.path()).unwrap();
        let gone = root.path().join("gone");
        let failed = rundir::make_named(&gone, 0o700, rundir::random_hex).unwrap_err();
        let failed = crate::confine::ConfineError::Tmp(failed);
        let cause = std::error::Error::source(&failed).expect("the path's error");
        assert!(
            cause.to_string().starts_with(&gone.display().to_string()),
            "{cause}"
        );
        let io = std::error::Error::source(cause).expect("the system's error");
        assert!(io.to_string().contains("No such file"), "{io}");
    }
}
