//! Each call's private temporary directory.
//!
//! Many tools need a writable temporary directory (git, sort, compilers, pip, npm), and a
//! shared one (`/tmp`) would let one command read or plant another's files. At start the
//! server makes a root of its own beneath its temporary directory (mode 0700, never inside
//! the jail); each call gets a fresh directory beneath it, which `TMPDIR`, `TMP` and `TEMP`
//! name and which that call's Landlock ruleset alone may write (`confine`), and which is
//! removed, with everything in it, when the call ends. In the private view the root is bound
//! at its host path, so the path is the same in either view. `/tmp` itself stays unwritable.

use std::path::{Path, PathBuf};

use crate::rundir;

const ROOT_PREFIX: &str = "safe-mcp-tmp-";

/// The server's root of temporary directories; removed, with what is left in it, on drop.
#[derive(Debug)]
pub(crate) struct TmpRoot {
    dir: PathBuf,
}

impl TmpRoot {
    /// Makes the root beneath the server's temporary directory, which must lie outside
    /// `jail`.
    pub(crate) fn create(jail: &Path) -> Result<TmpRoot, String> {
        let parent = std::env::temp_dir();
        let parent = std::fs::canonicalize(&parent)
            .map_err(|e| format!("the temporary directory {}: {e}", parent.display()))?;
        if parent.starts_with(jail) {
            return Err(format!(
                "the server's temporary directory {} lies inside the jail; set TMPDIR for the server to a directory outside it",
                parent.display()
            ));
        }
        rundir::remove_stale(&parent, ROOT_PREFIX);
        Ok(TmpRoot {
            dir: rundir::make(&parent, ROOT_PREFIX, 0o700)?,
        })
    }

    /// The root itself.
    pub(crate) fn path(&self) -> &Path {
        &self.dir
    }

    /// A fresh directory for one call.
    pub(crate) fn for_call(&self) -> Result<CallTmp, String> {
        use std::os::unix::fs::DirBuilderExt;
        for _ in 0..16 {
            let dir = self.dir.join(rundir::random_hex()?);
            match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
                Ok(()) => return Ok(CallTmp { dir }),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(format!("cannot make {}: {e}", dir.display())),
            }
        }
        Err("no free name for a call's temporary directory".into())
    }
}

impl Drop for TmpRoot {
    fn drop(&mut self) {
        let _ = rundir::remove_tree(&self.dir);
    }
}

/// One call's temporary directory; removed, with everything in it, on drop (after the
/// call's whole process tree is gone).
#[derive(Debug)]
pub(crate) struct CallTmp {
    dir: PathBuf,
}

impl CallTmp {
    pub(crate) fn path(&self) -> &Path {
        &self.dir
    }
}

impl Drop for CallTmp {
    fn drop(&mut self) {
        if let Err(e) = rundir::remove_tree(&self.dir) {
            eprintln!(
                "safe-mcp: warning: a command's temporary directory {} could not be removed: {e}",
                self.dir.display()
            );
        }
    }
}
