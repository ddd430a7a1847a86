//! The policy file's types (DESIGN §4): what a loaded, validated policy is, and the settings
//! and reports its sections are made into.
//!
//! Only shapes and the judgements that need nothing but them (which programs are ruled,
//! which read paths a command may name). Reading the file, validating it against the disk
//! and the environment, and the serde shapes it is parsed into are `safe_mcp_core::config`,
//! which re-exports these under their old paths.

pub mod settings;
pub mod types;

pub use settings::{
    ApprovalMode, ApprovalSettings, CacheDir, Capacity, FileToolSettings, ProfileReport,
    ProjectReport, ShipFailure, ShipFormat, ShipSettings, StateKey,
};
pub use types::*;
