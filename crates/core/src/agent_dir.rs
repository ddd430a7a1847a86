//! Where commands reach the server's SSH agent (issue 54): a directory the terminal server
//! makes at start when the policy holds an ssh key, with the agent's socket in it.
//!
//! Owns the directory, as [`crate::nested`] owns the shims': made beneath the server's
//! temporary directory (mode 0700, the server user's; commands run as that user without
//! capabilities, so only they and the server reach the socket), never inside the jail or a
//! write path, in the view read-only (a socket connects on a read-only mount), removed when
//! the server ends, and those of servers gone removed at start. Commands find the socket
//! through `SSH_AUTH_SOCK`; the key's file is never in the view.

use std::path::{Path, PathBuf};

/// The variable that names the agent's socket to commands (and to `ssh`, `ssh-keygen`).
pub const AGENT_VARIABLE: &str = "SSH_AUTH_SOCK";

const PREFIX: &str = "safe-mcp-ssh-";

/// The agent's directory, removed on drop.
#[derive(Debug)]
pub struct AgentDir {
    dir: PathBuf,
}

impl AgentDir {
    /// Makes `<parent>/safe-mcp-ssh-<pid>-<tag>`, refusing a parent beneath one of
    /// `writable` (the jail and the write paths), where a command could plant a socket of
    /// its own there.
    pub fn create(parent: &Path, writable: &[&Path]) -> Result<AgentDir, String> {
        let parent = std::fs::canonicalize(parent)
            .map_err(|e| format!("the server's temporary directory {}: {e}", parent.display()))?;
        if writable.iter().any(|w| parent.starts_with(w)) {
            return Err(format!(
                "the server's temporary directory {} lies inside the jail or a write path; set TMPDIR for the server to a directory outside them",
                parent.display()
            ));
        }
        crate::nested::remove_stale(&parent, PREFIX);
        let dir = crate::nested::make_private_dir(&parent, PREFIX)?;
        Ok(AgentDir { dir })
    }

    /// The directory (in the view, read-only).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The agent's socket, which the binary binds.
    pub fn socket(&self) -> PathBuf {
        self.dir.join("agent.sock")
    }
}

impl Drop for AgentDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn made_private_outside_the_jail_and_gone_when_dropped() {
        let (_guard, base) = crate::testing::scratch(&["jail", "tmp"]);
        let made = AgentDir::create(&base.join("tmp"), &[&base.join("jail")]).unwrap();
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(made.dir()).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        assert!(made.socket().starts_with(made.dir()));
        let dir = made.dir().to_path_buf();
        drop(made);
        assert!(!dir.exists());
        let inside = AgentDir::create(&base.join("jail"), &[&base.join("jail")]);
        assert!(inside.unwrap_err().contains("inside the jail"));
    }
}
