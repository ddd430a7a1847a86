//! The binary's commands: [`serve`] starts a server (its tools are in `crate::mcp`); the
//! others each read their arguments, call the core, and print. None decides anything itself.

pub mod approvals;
pub mod audit;
mod credentials;
pub mod demo;
pub mod doctor;
pub mod gateway;
pub mod init;
pub mod policy;
pub mod report;
pub mod serve;
pub mod tail;

use std::path::Path;

use safe_mcp_core::config::{Policy, ProcessEnv, Section};
use safe_mcp_core::load::load_policy;

/// The policy for `section`, from `--config` (else `SAFE_MCP_POLICY_FILE`), or why not.
pub(crate) fn load(config: Option<&Path>, section: Section) -> Result<Policy, String> {
    load_policy(config, &ProcessEnv, section).map_err(|e| e.to_string())
}
