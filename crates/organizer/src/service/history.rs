//! `undo_last_action` and `redo_last_action`: replay the last journaled action backwards or
//! forwards as one action, never overwriting; a file that moved since, or an occupied way
//! back, refuses the whole replay with CONFLICT.

use safe_mcp_core::audit::Caller;
use safe_mcp_core::{OperationResult, ResultCode};
use serde_json::json;

use super::state::{FilesService, fs_error};
use crate::journal::{Action, Move};

/// The files server's history facet: see the module docs.
pub(super) struct History<'a>(pub(super) &'a FilesService);

impl History<'_> {
    /// `undo_last_action()`: restores the last move or applied plan as one action.
    pub(super) fn undo_last_action(&self, caller: &Caller) -> OperationResult {
        self.reverse(Direction::Undo, caller)
    }

    /// `redo_last_action()`: re-applies the last undone action.
    pub(super) fn redo_last_action(&self, caller: &Caller) -> OperationResult {
        self.reverse(Direction::Redo, caller)
    }

    /// Why `action` cannot be undone (or redone) as it stands: every file must be exactly
    /// where the action left it, and its way back clear.
    fn blocked_reversal(&self, action: &Action, direction: Direction) -> Option<String> {
        for m in &action.moves {
            let (here, there) = direction.ends(m);
            let at_here = self
                .0
                .ws
                .stat(here)
                .ok()
                .flatten()
                .is_some_and(|e| e.ino == m.ino && e.dev == m.dev);
            if !at_here {
                return Some(format!(
                    "{here} is no longer the file that was moved, so nothing changed; undo (or redo) works again once that file is back at {here} (move_file can put it there)"
                ));
            }
            if !matches!(self.0.ws.stat(there), Ok(None)) {
                return Some(format!(
                    "{there} is occupied and is never overwritten, so nothing changed; move what is at {there} elsewhere (move_file), then try again"
                ));
            }
        }
        None
    }

    fn reverse(&self, direction: Direction, caller: &Caller) -> OperationResult {
        let tool = direction.tool();
        let undo = direction == Direction::Undo;
        let (call, attempt) = self.0.attempt(tool, json!({}), caller);
        if let Err(r) = self.0.admit(&call, &attempt) {
            return r;
        }
        let Ok(mut journal) = self.0.journal.lock() else {
            return self.0.finish(&call, OperationResult::internal(tool));
        };
        let last = if undo {
            journal.last_undo()
        } else {
            journal.last_redo()
        };
        let Some(action) = last.cloned() else {
            let what = if undo {
                "nothing to undo"
            } else {
                "nothing to redo (new work clears redo)"
            };
            drop(journal);
            return self.0.fail(&call, ResultCode::InvalidRequest, what);
        };
        if let Some(conflict) = self.blocked_reversal(&action, direction) {
            drop(journal);
            return self.0.fail(&call, ResultCode::Conflict, conflict);
        }
        let opened = if undo {
            journal.start_undo(&self.0.ws, action.id)
        } else {
            journal.start_redo(&self.0.ws, action.id)
        };
        if let Err(e) = opened {
            drop(journal);
            return self.0.fail(
                &call,
                ResultCode::OperationFailed,
                format!("the journal could not be written, so nothing changed: {e}"),
            );
        }
        if !undo {
            for d in &action.dirs {
                if let Err(e) = self.0.ws.ensure_dirs(d) {
                    drop(journal);
                    return self.0.finish(&call, fs_error(tool, &e));
                }
            }
        }
        let order: Vec<&Move> = if undo {
            action.moves.iter().rev().collect()
        } else {
            action.moves.iter().collect()
        };
        for m in order {
            let (from, to) = direction.ends(m);
            if let Err(e) = self.0.ws.rename_noreplace(from, to) {
                // The journal's open undo/redo record lets the next start reconcile this.
                drop(journal);
                return self.0.finish(&call, fs_error(tool, &e));
            }
        }
        super::transaction::Mover(self.0).sync_dirs(&action);
        if undo {
            for d in action.dirs.iter().rev() {
                self.0.ws.rmdir_if_empty(d);
            }
        }
        let done = if undo {
            journal.finish_undo(action.id)
        } else {
            journal.finish_redo(action.id)
        };
        drop(journal);
        if let Err(e) = done {
            return self.0.fail(
                &call,
                ResultCode::OperationFailed,
                format!("done, but the journal could not record it: {e}"),
            );
        }
        let verb = if undo { "restored" } else { "re-applied" };
        self.0.finish(
            &call,
            OperationResult::new(
                tool,
                ResultCode::Ok,
                format!(
                    "{verb} action {} ({}, {} file(s))",
                    action.id,
                    action.tool,
                    action.moves.len()
                ),
            )
            .with_detail(
                json!({"action_id": action.id, "tool": action.tool, "files": action.moves.len()}),
            ),
        )
    }
}

/// Which way a journaled action is replayed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Direction {
    /// Back to where the files were.
    Undo,
    /// Forward again, after an undo.
    Redo,
}

impl Direction {
    fn tool(self) -> &'static str {
        match self {
            Direction::Undo => "undo_last_action",
            Direction::Redo => "redo_last_action",
        }
    }

    /// Where a moved file is before this replay, and where it goes.
    fn ends(self, m: &Move) -> (&str, &str) {
        match self {
            Direction::Undo => (&m.dst, &m.src),
            Direction::Redo => (&m.src, &m.dst),
        }
    }
}
