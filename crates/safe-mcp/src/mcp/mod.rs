//! The MCP side of the binary: the two servers' tools as rmcp handlers, and what they share.
//!
//! [`call`] is the path every tool call takes; [`terminal`] (with [`file_tools`]) and
//! [`files`] are the servers, [`gateway`] the downstream servers' tools in the terminal's; [`approval`] asks a person through the client (the form in [`approval_form`]); [`progress`]
//! sends progress notifications; [`stdio`] is the line transport. Nothing here decides:
//! every verdict comes from `safe_mcp_core`.

pub mod approval;
pub(crate) mod approval_form;
pub mod call;
pub mod expose;
pub mod file_tools;
pub mod files;
pub(crate) mod gateway;
pub mod mrtr;
pub mod nested;
pub mod progress;
pub(crate) mod session_args;
pub mod shared;
pub mod stdio;
pub mod terminal;
