//! The policy's verdicts ([`safe_mcp_rules::policy`], re-exported), with the jail they are
//! judged in made against the real filesystem ([`jail_of`]) and a program found on the
//! server's `PATH` as the policy would find it ([`resolve_program`]).

use std::path::PathBuf;

pub use safe_mcp_rules::policy::*;

use crate::config::TerminalPolicy;
use crate::jail::JailRoot;

/// The jail of `policy`, with the write paths and the nameable read paths its arguments may
/// name.
pub fn jail_of(policy: &TerminalPolicy) -> JailRoot {
    JailRoot::with_paths(
        policy.jail_root.clone(),
        (policy.write_paths.clone(), policy.nameable_read_paths()),
        std::sync::Arc::new(crate::jail::RealFs),
    )
}

/// Finds `name` in the PATH directories: the first regular, executable file wins.
pub fn resolve_program(path: &[PathBuf], name: &str) -> Option<PathBuf> {
    crate::programs::find_on(path.iter().map(PathBuf::as_path), name)
}
