//! The safety core of safe-mcp.
//!
//! Every decision that can hurt someone lives here: the policy file ([`config`]), command
//! syntax without a shell ([`syntax`]), argument normalisation ([`args`]), evaluation
//! ([`policy`]), jail containment ([`jail`]), redaction ([`redact`]), the audit trail
//! ([`audit`]), the envelope ([`envelope`]), the order of the request flow ([`terminal`]) and the
//! built-in knowledge of what each allowlisted tool can be made to do ([`tools`]).
//! A policy is loaded through [`load`], which runs the file's checks and then its own
//! examples. The servers and the CLI only translate between MCP or argv and these calls.
//!
//! Imports point down only: [`load`] → [`policy`] → [`jail`], [`config`] → [`paths`];
//! [`audit`] → [`config`]. [`config`] is the ground floor: it imports no other module of
//! this crate but [`paths`].
//!
//! ```
//! use safe_mcp_core::syntax::parse;
//! let list = parse(r#"echo "a;b" | wc -c"#).unwrap();
//! assert_eq!(list.pipelines[0][0], ["echo", "a;b"]);
//! assert!(parse("echo $HOME").is_err());
//! ```
#![forbid(unsafe_code)]

pub mod args;
pub mod audit;
pub mod config;
pub mod envelope;
pub mod jail;
pub mod load;
pub mod paths;
pub mod policy;
pub mod redact;
pub mod syntax;
pub mod terminal;
pub mod tools;

pub use envelope::{OperationResult, ResultCode};
