//! Where nested calls enter the server (issue 35, item 2): the shim directory a terminal
//! server makes at start when some allowlisted program has argument rules.
//!
//! A program with `deny_args` or `confirm_args` is not executable inside a command's tree
//! (the exec allowlist leaves it out); what a command starts by that name is found first
//! on PATH in this directory's `bin/`, a link to the server's own binary, which then runs as
//! the shim: it hands the argv, its cwd and its three standard descriptors to the server
//! over `nested.sock` beside it, and the server judges the call exactly as a top-level one
//! (rules, approvals, audit) and runs it confined, writing where the command writes. So
//! `python3 -c "subprocess.run(['git', 'push', '--force'])"` meets the `push --force` rule.
//!
//! Owns the directory: made beneath the server's temporary directory (mode 0700, the server
//! user's: commands run as that user without capabilities, so only they and the server
//! reach the socket), never inside the jail, removed when the server ends, and the ones
//! killed servers left behind removed at start. When the server's binary lies inside the
//! jail or a write path, where a command could replace it, the links point at a copy here.

use std::path::{Path, PathBuf};

/// The variable that tells the shim where the server is and which call asks:
/// `<token>@<socket>`.
pub const NESTED_VARIABLE: &str = "SAFE_MCP_NESTED";

const PREFIX: &str = "safe-mcp-nested-";

/// Why the shim directory could not be made.
#[derive(Debug, thiserror::Error)]
#[error("cannot make the nested-call shims under {parent}: {message}")]
pub struct ShimError {
    /// Where it was to be made.
    pub parent: PathBuf,
    /// What failed.
    pub message: String,
}

/// The shim directory, removed on drop.
#[derive(Debug)]
pub struct NestedShims {
    dir: PathBuf,
    /// What the links point at: the server's binary, or its copy in `dir`.
    exe: PathBuf,
    /// The ruled programs, one link each in `bin/`.
    names: Vec<String>,
}

impl NestedShims {
    /// Makes `<parent>/safe-mcp-nested-<pid>-<tag>/bin/<name>` for each of `names`, links to
    /// `exe` (or to a copy, when `exe` lies beneath one of `writable`).
    pub fn create(
        parent: &Path,
        exe: &Path,
        names: &[String],
        writable: &[&Path],
    ) -> Result<NestedShims, ShimError> {
        let err = |message: String| ShimError {
            parent: parent.to_path_buf(),
            message,
        };
        let parent = std::fs::canonicalize(parent).map_err(|e| err(e.to_string()))?;
        if writable.iter().any(|w| parent.starts_with(w)) {
            return Err(err(
                "it lies inside the jail or a write path; set TMPDIR for the server to a directory outside them".into(),
            ));
        }
        remove_stale(&parent, PREFIX);
        let exe = std::fs::canonicalize(exe).map_err(|e| err(format!("{}: {e}", exe.display())))?;
        let dir = make_private_dir(&parent, PREFIX).map_err(err)?;
        // Removed again (on drop) if anything below fails.
        let mut shims = NestedShims {
            dir,
            exe: exe.clone(),
            names: names.to_vec(),
        };
        let fill = |shims: &NestedShims| -> std::io::Result<PathBuf> {
            let target = if writable.iter().any(|w| exe.starts_with(w)) {
                let copy = shims.dir.join("safe-mcp");
                std::fs::copy(&exe, &copy)?;
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o555))?;
                copy
            } else {
                exe.clone()
            };
            std::fs::create_dir(shims.bin())?;
            for name in names {
                std::os::unix::fs::symlink(&target, shims.bin().join(name))?;
            }
            Ok(target)
        };
        shims.exe = fill(&shims).map_err(|e| err(e.to_string()))?;
        Ok(shims)
    }

    /// The directory the server's socket and the links live in (bound read-only into the
    /// private view).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The links, first on a command's PATH.
    pub fn bin(&self) -> PathBuf {
        self.dir.join("bin")
    }

    /// What every command may execute for them: the binary the links point at.
    pub fn exe(&self) -> &Path {
        &self.exe
    }

    /// The socket the server listens on for nested calls.
    pub fn socket(&self) -> PathBuf {
        self.dir.join("nested.sock")
    }

    /// The programs that are reached through the server.
    pub fn names(&self) -> &[String] {
        &self.names
    }
}

impl Drop for NestedShims {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A fresh `<parent>/<prefix><pid>-<tag>`, mode 0700 (the prefix names what it is for,
/// and lets the next server remove it once this one is gone: [`remove_stale`]).
pub(crate) fn make_private_dir(parent: &Path, prefix: &str) -> Result<PathBuf, String> {
    use std::os::unix::fs::DirBuilderExt;
    let pid = std::process::id();
    for _ in 0..16 {
        let tag = crate::random::hex(8).map_err(|e| e.to_string())?;
        let path = parent.join(format!("{prefix}{pid}-{tag}"));
        match std::fs::DirBuilder::new().mode(0o700).create(&path) {
            Ok(()) => return Ok(path),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e.to_string()),
        }
    }
    Err("no free name".into())
}

/// Removes the directories named `<prefix><pid>-…` of servers that are no longer running.
pub(crate) fn remove_stale(parent: &Path, prefix: &str) {
    crate::home::remove_dead_servers(parent, prefix, |path| {
        let _ = std::fs::remove_dir_all(path);
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_each_name_and_copies_a_binary_a_command_could_replace() {
        let (_dir, base) = crate::testing::scratch(&["jail", "tmp"]);
        let (jail, tmp) = (base.join("jail"), base.join("tmp"));
        let exe = jail.join("safe-mcp");
        std::fs::write(&exe, b"binary").unwrap();
        let names = vec!["git".to_owned(), "npm".to_owned()];
        let shims = NestedShims::create(&tmp, &exe, &names, &[&jail]).unwrap();
        let dir = shims.dir().to_path_buf();
        assert!(!shims.exe().starts_with(&jail), "{}", shims.exe().display());
        assert_eq!(std::fs::read(shims.exe()).unwrap(), b"binary");
        for name in &names {
            let link = std::fs::read_link(shims.bin().join(name)).unwrap();
            assert_eq!(link, shims.exe());
        }
        assert!(NestedShims::create(&jail, &exe, &names, &[&jail]).is_err());
        drop(shims);
        assert!(!dir.exists());
    }
}
