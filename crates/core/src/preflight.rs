//! Whether the user running this process can use what a policy names: write the audit log,
//! the journal and the roots. A policy can be valid and still useless to an unprivileged
//! server: every call is then AUDIT_UNAVAILABLE, or every file a command writes fails.
//!
//! Owns the checks `safe-mcp policy check` and each server's start run, and the advice they
//! print (which `chown` fixes it). It must never change a file or decide a verdict: it only
//! reports.

use std::fmt;
use std::path::{Path, PathBuf};

use crate::config::Policy;

/// One thing this user cannot do that the policy needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessProblem {
    /// What the path is for (`the audit log`, `the jail`, ...).
    pub what: &'static str,
    /// The path that must be writable (the file, or its directory when it does not exist).
    pub path: PathBuf,
    /// This process's uid.
    pub uid: u32,
}

impl fmt::Display for AccessProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} needs {} to be writable by uid {} (this server's user), and it is not: `chown {} {}` (or point the policy elsewhere)",
            self.what,
            self.path.display(),
            self.uid,
            self.uid,
            self.path.display()
        )
    }
}

/// What this process cannot write among the paths `policy` needs.
pub fn access_problems(policy: &Policy) -> Vec<AccessProblem> {
    let uid = rustix::process::geteuid().as_raw();
    let mut wanted: Vec<(&'static str, &Path, bool)> = Vec::new();
    if let Some(log) = &policy.audit.log {
        wanted.push(("the audit log", log, true));
    }
    if let Some(t) = &policy.terminal {
        wanted.push(("the jail (commands write there)", &t.jail_root, false));
    }
    if let Some(f) = &policy.files {
        wanted.push(("the workspace (files move there)", &f.workspace_root, false));
        if let Some(j) = &f.journal {
            wanted.push(("the journal", j, true));
        }
    }
    wanted
        .into_iter()
        .filter_map(|(what, path, file)| {
            // A file that does not exist yet is made in its directory.
            let target = if file && !path.exists() {
                path.parent().unwrap_or(path)
            } else {
                path
            };
            let writable = rustix::fs::access(target, rustix::fs::Access::WRITE_OK).is_ok();
            (!writable).then(|| AccessProblem {
                what,
                path: target.to_path_buf(),
                uid,
            })
        })
        .collect()
}
