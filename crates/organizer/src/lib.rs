//! The files domain of safe-mcp: a safe organizer for one folder.
//!
//! [`service::FilesService`] serves six tools, none of which deletes: `list_files`,
//! `plan_organize`, `apply_plan`, `move_file`, `undo_last_action`, `redo_last_action`.
//! [`rules`] decides what may move (two labelled skip layers), [`fsroot`] does every
//! filesystem access beneath the workspace descriptor with `openat2` and
//! `renameat2(RENAME_NOREPLACE)`, and [`journal`] writes each action ahead so that after a
//! crash at any instant every file is at its source or its destination and undo restores what
//! was done.
#![forbid(unsafe_code)]

pub mod fsroot;
pub mod journal;
pub mod rules;
pub mod service;

pub use service::{FilesService, Watch};
