//! The safety core of safe-mcp.
//!
//! Every decision that can hurt someone lives here: the policy file ([`config`]), command
//! syntax without a shell ([`syntax`]), argument normalisation ([`args`]), evaluation
//! ([`policy`]), jail containment ([`jail`]), redaction ([`redact`]), the audit trail
//! ([`audit`]), the envelope ([`envelope`]), the order of the request flow ([`terminal`]) and the
//! built-in knowledge of what each allowlisted tool can be made to do ([`tools`]).
//! A policy is loaded through [`load`], which runs the file's checks and then its own
//! examples; [`lint`] lists what in a loaded policy deserves a second look. The servers and
//! the CLI only translate between MCP or argv and these calls.
//!
//! The decisions that need no I/O live in `safe-mcp-rules` and are re-exported here under
//! their old paths: [`syntax`], [`env_prefix`], [`egress`], [`envelope`], [`reader`], [`cut`],
//! [`paths`], [`tools`] (the catalog), [`args`], [`redact`], [`gitdir`]; and, within the
//! modules that add what touches the machine, the policy's verdicts ([`policy`]), the
//! configuration's types ([`config`]), the protected paths ([`protected`]) and what a
//! credential is ([`credentials`]).
//!
//! Imports point down only, floor by floor (`scripts/check_imports.py` holds the same list
//! and fails CI on a circle or an import that runs up):
//! 0. leaves, importing nothing of the crate but each other: [`beneath`], [`untrusted`],
//!    [`random`], [`protected`], [`held`], [`home`], [`nested`], [`programs`],
//!    [`usage`], [`jail`], [`credentials`], [`fleet`], [`agent_dir`];
//! 1. [`config`], the policy file and every settings type other modules are configured with;
//! 2. what is built from a loaded policy: [`audit`], [`preflight`], [`lint`],
//!    [`policy`];
//! 3. [`approval`], [`tickets`], [`scopes`], [`sessions`], [`progress`], [`load`];
//! 4. the request flow: [`terminal`] and [`file_tools`].
//!
//! ```
//! use safe_mcp_core::syntax::parse;
//! let list = parse(r#"echo "a;b" | wc -c"#).unwrap();
//! assert_eq!(list.pipelines[0][0], ["echo", "a;b"]);
//! assert!(parse("echo $HOME").is_err());
//! ```
#![forbid(unsafe_code)]

pub use safe_mcp_rules::{
    args, cut, egress, env_prefix, envelope, gateway, gitdir, paths, reader, redact, syntax, tools,
};

pub mod agent_dir;
pub mod approval;
pub mod audit;
pub mod beneath;
pub mod config;
pub mod credentials;
pub mod file_tools;
pub mod fleet;
pub mod held;
pub mod home;
pub mod jail;
pub mod lint;
pub mod load;
pub mod nested;
pub mod policy;
pub mod preflight;
pub mod programs;
pub mod progress;
pub mod protected;
pub mod random;
pub mod scopes;
pub mod sessions;
pub mod terminal;
#[cfg(test)]
mod testing;
pub mod tickets;
pub mod untrusted;
pub mod usage;

pub use envelope::{OperationResult, ResultCode};
