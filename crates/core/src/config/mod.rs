//! The policy file (DESIGN §4): the validated types both servers are configured with.
//!
//! Owns the one TOML file both servers read. It fails closed: unknown keys,
//! missing roots, an audit log inside a root, a bad operator regex, an unlabelled skip rule:
//! each is a [`ConfigError`], and the binary prints `fatal: <reason>` and exits.
//!
//! This is floor 1 of the crate (the crate docs list the floors): it imports only floor-0
//! leaves ([`crate::paths`], [`crate::untrusted`], [`crate::egress`], [`crate::env_prefix`],
//! [`crate::protected`]), never a module above it (`audit`, `redact`, `policy`, `sessions`,
//! `load`, `terminal`, …).
//! The settings types those modules are configured with live in the rules crate and
//! are re-exported by them. What needs the modules above, running the policy's own examples
//! and building the audit options, is in [`crate::load`]. It must never guess a default
//! location for the policy or a root: no policy path means no server.
//!
//! Inside, this file only declares and re-exports: the public policy types and the settings
//! and report types are [`safe_mcp_rules::config`], `raw.rs` the serde shapes, `load.rs` the
//! loader with `checks.rs` (single values) and `sections.rs` (one section each), `env.rs` the
//! environment it reads, `error.rs` the typed [`ConfigError`].

mod checks;
mod credentials;
mod discover;
mod env;
mod error;
mod gateway;
mod load;
mod profiles;
mod project;
mod raw;
mod sections;
mod terminal;
#[cfg(test)]
mod tests;
mod writable;

pub use env::{Env, ProcessEnv};
pub use error::ConfigError;
pub(crate) use load::{from_toml, read};
pub use profiles::{make_caches, names as profile_names};
pub use project::FILE_NAME as PROJECT_FILE;
pub use safe_mcp_rules::config::*;
