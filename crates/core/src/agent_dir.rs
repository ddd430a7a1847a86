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

/// The variable that names the agent's directory to the binary started as `ssh` or
/// `proxy-shell` from it (issue 54, item 2).
pub const DIR_VARIABLE: &str = "SAFE_MCP_SSH";

/// What git runs for SSH: overrides `core.sshCommand` (the hardening's `false`).
pub const GIT_SSH_VARIABLE: &str = "GIT_SSH_COMMAND";

const PREFIX: &str = "safe-mcp-ssh-";

/// The agent's directory, removed on drop.
#[derive(Debug)]
pub struct AgentDir {
    dir: PathBuf,
    /// For logins: the server's binary the links point at, which every stage may execute.
    logins: Option<PathBuf>,
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
        Ok(AgentDir { dir, logins: None })
    }

    /// The directory (in the view, read-only).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The server's binary the links for logins point at, once [`Self::prepare_logins`]
    /// made them.
    pub fn login_binary(&self) -> Option<&Path> {
        self.logins.as_deref()
    }

    /// The agent's socket, which the binary binds.
    pub fn socket(&self) -> PathBuf {
        self.dir.join("agent.sock")
    }

    /// What SSH logins need here (issue 54, item 2): the pinned `known_hosts`, an
    /// `ssh_config` that uses only them, the agent and the proxy, and two links to the
    /// server's binary `exe`: `ssh` (what git runs: OpenSSH with that config) and
    /// `proxy-shell` (what that ssh runs its `ProxyCommand` with instead of a shell: the
    /// CONNECT through the proxy). No shell runs anywhere on the way.
    pub fn prepare_logins(&mut self, exe: &Path, known_hosts: &[String]) -> Result<(), String> {
        let io = |e: std::io::Error| format!("{}: {e}", self.dir.display());
        let mut pinned = known_hosts.join("\n");
        pinned.push('\n');
        std::fs::write(self.dir.join("known_hosts"), pinned).map_err(io)?;
        let config = format!(
            "# Written by safe-mcp: SSH only with the policy's pinned host keys, its agent, its proxy.\n\
             Host *\n\
             \x20 UserKnownHostsFile {dir}/known_hosts\n\
             \x20 GlobalKnownHostsFile /dev/null\n\
             \x20 StrictHostKeyChecking yes\n\
             \x20 UpdateHostKeys no\n\
             \x20 CheckHostIP no\n\
             \x20 IdentityAgent {dir}/agent.sock\n\
             \x20 IdentityFile none\n\
             \x20 PasswordAuthentication no\n\
             \x20 KbdInteractiveAuthentication no\n\
             \x20 BatchMode yes\n\
             \x20 ProxyCommand connect %h %p\n",
            dir = self.dir.display()
        );
        std::fs::write(self.dir.join("ssh_config"), config).map_err(io)?;
        for name in ["ssh", "proxy-shell"] {
            std::os::unix::fs::symlink(exe, self.dir.join(name)).map_err(io)?;
        }
        self.logins = Some(exe.to_path_buf());
        Ok(())
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
