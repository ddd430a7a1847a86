//! The HOME every command of a terminal server gets: an empty directory outside the jail
//! that commands can read but never write.
//!
//! With HOME at the jail root, every tool's rc file the model writes (`.gitconfig`,
//! `.vimrc`, `.curlrc`, `.npmrc`, `.manpath`, `~/.config/…`) configured the next command.
//! An empty, unwritable HOME closes that whole class at once; the tool catalog's hardening
//! stays as a second wall. Owns creating the directory (mode 0555, beneath the server's
//! temporary directory), removing it when the server ends, and removing the ones that
//! servers killed earlier left behind. It must never be inside the jail or writable by a
//! command: the kernel confinement grants it read access only.

use std::path::{Path, PathBuf};

/// Why the HOME directory could not be made.
#[derive(Debug, thiserror::Error)]
#[error("cannot make the commands' HOME under {parent}: {message}")]
pub struct HomeError {
    /// Where it was to be made.
    pub parent: PathBuf,
    /// What failed.
    pub message: String,
}

/// An empty, read-only directory, removed on drop.
#[derive(Debug)]
pub struct PrivateHome {
    path: PathBuf,
}

const PREFIX: &str = "safe-mcp-home-";

impl PrivateHome {
    /// Makes `<parent>/safe-mcp-home-<pid>-<n>`, refusing a parent inside `jail`.
    pub fn create(parent: &Path, jail: &Path) -> Result<PrivateHome, HomeError> {
        let err = |message: String| HomeError {
            parent: parent.to_path_buf(),
            message,
        };
        let parent = std::fs::canonicalize(parent).map_err(|e| err(e.to_string()))?;
        if parent.starts_with(jail) {
            return Err(err(format!(
                "it lies inside the jail {}; set TMPDIR for the server to a directory outside it",
                jail.display()
            )));
        }
        remove_stale(&parent);
        let pid = std::process::id();
        for _ in 0..16 {
            // A name nobody can guess and pre-create, read-only from the moment it exists:
            // there is no window in which another user could plant an rc file in it.
            let tag = crate::random::hex(8).map_err(|e| err(e.to_string()))?;
            let path = parent.join(format!("{PREFIX}{pid}-{tag}"));
            use std::os::unix::fs::DirBuilderExt;
            match std::fs::DirBuilder::new().mode(0o555).create(&path) {
                Ok(()) => return Ok(PrivateHome { path }),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(err(e.to_string())),
            }
        }
        Err(err("no free name".into()))
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for PrivateHome {
    fn drop(&mut self) {
        // Empty by construction (commands cannot write it), so rmdir is enough.
        let _ = std::fs::remove_dir(&self.path);
    }
}

/// Removes the empty HOMEs of servers that are no longer running.
fn remove_stale(parent: &Path) {
    remove_dead_servers(parent, PREFIX, |path| {
        let _ = std::fs::remove_dir(path);
    });
}

/// Calls `remove` on each entry of `parent` named `<prefix><pid>-…` whose server (`pid`) is
/// no longer running and that belongs to this user: what a server killed earlier left
/// behind (its HOME, its shims).
pub(crate) fn remove_dead_servers(parent: &Path, prefix: &str, remove: impl Fn(&Path)) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix(prefix)
            .and_then(|rest| rest.split('-').next())
            .filter(|pid| pid.bytes().all(|b| b.is_ascii_digit()))
        else {
            continue;
        };
        let ours = entry.metadata().is_ok_and(|m| {
            use std::os::unix::fs::MetadataExt;
            m.is_dir() && m.uid() == rustix::process::geteuid().as_raw()
        });
        if ours && !Path::new("/proc").join(pid).exists() {
            remove(&entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn made_read_only_outside_the_jail_and_removed_on_drop() {
        let (_dir, base) = crate::testing::scratch(&["jail"]);
        let jail = base.join("jail");
        let home = PrivateHome::create(&base, &jail).unwrap();
        let path = home.path().to_path_buf();
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o555
        );
        assert!(PrivateHome::create(&jail, &jail).is_err());
        drop(home);
        assert!(!path.exists());
    }
}
