//! The six files tools as core calls: list, plan, apply, move, undo, redo. None deletes.
//!
//! Owns the order of each action: audit the attempt, re-check the filesystem, write the
//! journal ahead, rename with no-replace between directory descriptors, fsync the folders,
//! commit. Any mismatch (a file changed, vanished or appeared) refuses the whole action with
//! CONFLICT before anything moves; a failure mid-way rolls the finished moves back.
//!
//! `state` holds the service's state, start-up and audit plumbing (every acting call goes
//! through `FilesService::attempt`, then `admit` or `refuse`, then `finish`); this file, the
//! six tools' entry points, each handed to its facet: `plan` (list, plan: read-only),
//! `transaction` (apply, move: journaled moves) and `history` (undo, redo).

mod history;
mod plan;
mod state;
mod transaction;

use safe_mcp_core::OperationResult;
use safe_mcp_core::audit::Caller;

pub use state::{FilesService, StartError, Watch};

impl FilesService {
    /// `list_files(subdir?)`: what is in the workspace (or `subdir`), judged as a plan
    /// would judge it.
    pub fn list_files(&self, subdir: Option<&str>, caller: &Caller) -> OperationResult {
        plan::Planner(self).list_files(subdir, caller)
    }

    /// `plan_organize()`: what would move and why the rest would not; nothing moves.
    pub fn plan_organize(&self, caller: &Caller) -> OperationResult {
        plan::Planner(self).plan_organize(caller)
    }

    /// `apply_plan(plan_id)`: every move of the plan, each file checked again first.
    pub fn apply_plan(&self, plan_id: &str, caller: &Caller) -> OperationResult {
        transaction::Mover(self).apply_plan(plan_id, caller)
    }

    /// [`Self::apply_plan`], stopping between moves when `watch` says so.
    pub fn apply_plan_watched(
        &self,
        plan_id: &str,
        watch: &Watch<'_>,
        caller: &Caller,
    ) -> OperationResult {
        transaction::Mover(self).apply_plan_watched(plan_id, watch, caller)
    }

    /// `move_file(src, dest)`: one named move.
    pub fn move_file(&self, src: &str, dest: &str, caller: &Caller) -> OperationResult {
        transaction::Mover(self).move_file(src, dest, caller)
    }

    /// `undo_last_action()`: puts the last action's files back.
    pub fn undo_last_action(&self, caller: &Caller) -> OperationResult {
        history::History(self).undo_last_action(caller)
    }

    /// `redo_last_action()`: re-applies the last undone action.
    pub fn redo_last_action(&self, caller: &Caller) -> OperationResult {
        history::History(self).redo_last_action(caller)
    }
}
