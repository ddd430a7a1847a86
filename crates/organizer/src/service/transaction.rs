//! The tools that move files: `apply_plan` (all or nothing, re-checking every file of the
//! plan) and `move_file` (protection rules only). Both journal the action ahead, rename with
//! no-replace, fsync the folders and commit; a failure mid-way rolls back what moved.

use std::collections::BTreeSet;

use safe_mcp_core::audit::{Attempt, Caller};
use safe_mcp_core::{OperationResult, ResultCode};
use serde_json::json;

use super::state::{FilesService, Watch, fs_error, now_ns, parent};
use crate::fsroot::Kind;
use crate::journal::{Action, Journal, Move};

/// The deepest destination `move_file` makes (folders below the workspace root).
const MAX_DEPTH: usize = 16;
/// The most entries a folder may hold, all levels, for `move_file` to check and move it.
const MAX_FOLDER_ENTRIES: usize = 10_000;

/// The files server's mover facet: see the module docs.
pub(super) struct Mover<'a>(pub(super) &'a FilesService);

impl Mover<'_> {
    /// A folder moves whole only if every entry inside it could move on its own: none is
    /// sensitive, a tool's config, a hard link, a symlink or special file, or badly named.
    /// `None` when it may move; the refusal names the first entry that may not.
    fn folder_protection(&self, tool: &str, rel: &str) -> Option<OperationResult> {
        let now = now_ns();
        let mut pending = vec![rel.to_owned()];
        let mut seen = 0usize;
        while let Some(dir) = pending.pop() {
            let entries = match self.0.ws.list(&dir) {
                Ok(e) => e,
                Err(e) => return Some(fs_error(tool, &e)),
            };
            for e in entries {
                seen += 1;
                if seen > MAX_FOLDER_ENTRIES {
                    return Some(OperationResult::new(
                        tool,
                        ResultCode::InvalidRequest,
                        format!(
                            "{rel} holds more than {MAX_FOLDER_ENTRIES} entries; move its parts one by one"
                        ),
                    ));
                }
                let path = format!("{dir}/{}", e.name);
                let skip = self
                    .0
                    .rules
                    .destination_protection(&e.name)
                    .or_else(|| self.0.rules.protection(&e, now));
                if let Some(skip) = skip {
                    return Some(
                        OperationResult::new(
                            tool,
                            skip.code,
                            format!(
                                "{path} is inside the folder and may not move: {}; nothing moved",
                                skip.reason
                            ),
                        )
                        .with_detail(json!({"rule": skip.rule, "layer": skip.layer, "path": path})),
                    );
                }
                if e.kind == Kind::Directory {
                    pending.push(path);
                }
            }
        }
        None
    }
    /// `apply_plan(plan_id)`: all or nothing; the id is single-use.
    pub(super) fn apply_plan(&self, plan_id: &str, caller: &Caller) -> OperationResult {
        self.apply_plan_watched(plan_id, &Watch::none(), caller)
    }

    /// `apply_plan`, told to stop (between two moves) and telling how far it got. Stopped
    /// after some moves, those stand as one undoable action; stopped before the first,
    /// nothing moved. Either way the audit outcome says `cancelled`.
    pub(super) fn apply_plan_watched(
        &self,
        plan_id: &str,
        watch: &Watch<'_>,
        caller: &Caller,
    ) -> OperationResult {
        const A: &str = "apply_plan";
        let (call, attempt) = self.0.attempt(A, json!({"plan_id": plan_id}), caller);
        let here = self.0.gate().log().server_id();
        if let Some(owner) = safe_mcp_core::fleet::elsewhere(plan_id, &here) {
            let elsewhere = OperationResult::new(
                A,
                ResultCode::InvalidRequest,
                format!(
                    "this plan belongs to server {owner}, and this is server {here}: the call reached another replica than the one that made the plan (route each MCP session, or each caller, to one replica; docs/FLEET.md), or call plan_organize again here"
                ),
            );
            return self.0.refuse(&call, attempt, elsewhere);
        }
        // Another caller's plan reads as unknown: its id tells them nothing.
        let Some(plan) = self
            .0
            .plans
            .lock()
            .ok()
            .and_then(|mut p| {
                let mine = p.get(plan_id).is_some_and(|plan| plan.owner == caller.sub);
                if mine { p.remove(plan_id) } else { None }
            })
            .map(|p| p.moves)
        else {
            let unknown = OperationResult::new(
                A,
                ResultCode::InvalidRequest,
                "unknown plan id (plans are single-use; call plan_organize again)",
            );
            return self.0.refuse(&call, attempt, unknown);
        };
        let attempt = Attempt {
            args: Some(json!({"plan_id": plan_id, "moves": plan.len()})),
            ..attempt
        };
        if let Err(r) = self.0.admit(&call, &attempt) {
            return r;
        }
        let now = now_ns();
        for p in &plan {
            let current = match self.0.ws.stat(&p.mv.src) {
                Ok(c) => c,
                Err(e) => return self.0.finish(&call, fs_error(A, &e)),
            };
            let unchanged = current.as_ref().is_some_and(|c| {
                c.dev == p.info.dev
                    && c.ino == p.info.ino
                    && c.size == p.info.size
                    && c.mtime_ns == p.info.mtime_ns
                    && c.kind == p.info.kind
            });
            if !unchanged {
                let what = if current.is_none() {
                    "vanished"
                } else {
                    "changed"
                };
                return self.0.finish(
                    &call,
                    OperationResult::new(
                        A,
                        ResultCode::Conflict,
                        format!(
                            "{} {what} since the plan was made; nothing was moved. Call plan_organize again for a plan of what is there now",
                            p.mv.src
                        ),
                    )
                    .with_detail(json!({"path": p.mv.src})),
                );
            }
            if let Some(skip) = self.0.rules.protection(&p.info, now) {
                return self.0.fail(
                    &call,
                    skip.code,
                    format!("{}: {}; nothing was moved", p.mv.src, skip.reason),
                );
            }
            if let Some(refusal) = self.refuse_if_occupied(
                A,
                &p.mv.dst,
                "appeared since the plan was made; nothing was moved. Call plan_organize again for a plan of what is there now",
            ) {
                return self.0.finish(
                    &call,
                    refusal.with_detail(json!({"path": p.mv.dst})),
                );
            }
        }
        let moves: Vec<Move> = plan.into_iter().map(|p| p.mv).collect();
        let (result, cancelled) = self.perform_watched(A, moves, watch);
        self.0.finish_cancelled(&call, result, cancelled)
    }

    /// `None` when nothing is at `rel`; otherwise the refusal: CONFLICT saying `rel` and
    /// `why`, or the error met while looking.
    fn refuse_if_occupied(&self, tool: &str, rel: &str, why: &str) -> Option<OperationResult> {
        match self.0.ws.stat(rel) {
            Ok(None) => None,
            Ok(Some(_)) => Some(OperationResult::new(
                tool,
                ResultCode::Conflict,
                format!("{rel} {why}"),
            )),
            Err(e) => Some(fs_error(tool, &e)),
        }
    }

    /// Journals and performs `moves` as one action, rolling back on failure.
    fn perform(&self, tool: &str, moves: Vec<Move>) -> OperationResult {
        self.perform_watched(tool, moves, &Watch::none()).0
    }

    /// [`Self::perform`], stopping between two moves when `watch` says so; also says
    /// whether it stopped.
    fn perform_watched(
        &self,
        tool: &str,
        moves: Vec<Move>,
        watch: &Watch<'_>,
    ) -> (OperationResult, bool) {
        let Ok(mut journal) = self.0.journal.lock() else {
            return (OperationResult::internal(tool), false);
        };
        let dirs: BTreeSet<String> = moves
            .iter()
            .map(|m| parent(&m.dst).to_owned())
            .filter(|d| !d.is_empty())
            .collect();
        let missing: Vec<String> = dirs
            .iter()
            .filter(|d| !matches!(self.0.ws.stat(d), Ok(Some(_))))
            .cloned()
            .collect();
        let action = match journal.begin(&self.0.ws, tool, moves, missing.clone()) {
            Ok(a) => a,
            Err(e) => {
                let r = OperationResult::new(
                    tool,
                    ResultCode::OperationFailed,
                    format!("the journal could not be written, so nothing moved: {e}"),
                );
                return (r, false);
            }
        };
        let mut created: Vec<String> = Vec::new();
        for d in &missing {
            match self.0.ws.ensure_dirs(d) {
                Ok(c) => created.extend(c),
                Err(e) => {
                    self.rollback(&mut journal, &action, 0, &created);
                    return (fs_error(tool, &e), false);
                }
            }
        }
        let total = action.moves.len();
        for (i, m) in action.moves.iter().enumerate() {
            if (watch.stop)() {
                return (
                    self.stop_after(&mut journal, action, i, &created, tool),
                    true,
                );
            }
            if let Err(e) = self.0.ws.rename_noreplace(&m.src, &m.dst) {
                self.rollback(&mut journal, &action, i, &created);
                let mut r = fs_error(tool, &e);
                r.reason = format!(
                    "{}; the {i} moves already made were rolled back, so nothing changed",
                    r.reason
                );
                return (r, false);
            }
            (watch.moved)(i + 1, total);
        }
        self.sync_dirs(&action);
        let n = action.moves.len();
        let id = action.id;
        if let Err(e) = journal.commit(action) {
            let r = OperationResult::new(
                tool,
                ResultCode::OperationFailed,
                format!("moved, but the journal commit failed: {e}"),
            );
            return (r, false);
        }
        let r = OperationResult::new(
            tool,
            ResultCode::Ok,
            format!("moved {n} file(s); undo_last_action restores them"),
        )
        .with_detail(json!({"moved": n, "action_id": id, "created_folders": created}));
        (r, false)
    }

    /// Stops an action after its first `done` moves: with none made, it is rolled back;
    /// otherwise those moves stand as one undoable action.
    fn stop_after(
        &self,
        journal: &mut Journal,
        action: Action,
        done: usize,
        created: &[String],
        tool: &str,
    ) -> OperationResult {
        let total = action.moves.len();
        if done == 0 {
            self.rollback(journal, &action, 0, created);
            return OperationResult::new(
                tool,
                ResultCode::OperationFailed,
                format!("cancelled by the client before the first of {total} moves; nothing moved"),
            );
        }
        let id = action.id;
        let partial = Action {
            moves: action.moves[..done].to_vec(),
            ..action
        };
        self.sync_dirs(&partial);
        if let Err(e) = journal.commit_partial(partial, done) {
            return OperationResult::new(
                tool,
                ResultCode::OperationFailed,
                format!(
                    "cancelled after {done} of {total} moves, and the journal could not record them: {e}; the next start reconciles"
                ),
            );
        }
        OperationResult::new(
            tool,
            ResultCode::OperationFailed,
            format!("cancelled by the client after {done} of {total} moves; those stand as one action, and undo_last_action restores them"),
        )
        .with_detail(json!({"moved": done, "of": total, "action_id": id, "created_folders": created}))
    }

    fn rollback(&self, journal: &mut Journal, action: &Action, done: usize, created: &[String]) {
        for m in action.moves[..done].iter().rev() {
            if let Err(e) = self.0.ws.rename_noreplace(&m.dst, &m.src) {
                tracing::info!(
                    "rollback of {} failed: {e}; the journal keeps the action for reconciliation",
                    m.dst
                );
                return;
            }
        }
        for d in created.iter().rev() {
            self.0.ws.rmdir_if_empty(d);
        }
        let _ = journal.abort(action.id);
    }

    pub(super) fn sync_dirs(&self, action: &Action) {
        let dirs: BTreeSet<&str> = action
            .moves
            .iter()
            .flat_map(|m| [parent(&m.src), parent(&m.dst)])
            .collect();
        for d in dirs {
            self.0.ws.sync_dir(d);
        }
    }

    /// `move_file(src, dest)`: PROTECTION rules only; never overwrites.
    pub(super) fn move_file(&self, src: &str, dest: &str, caller: &Caller) -> OperationResult {
        const A: &str = "move_file";
        let (call, attempt) = self.0.attempt(A, json!({"src": src, "dest": dest}), caller);
        let (src_rel, dst_rel) = match (self.0.relative(src), self.0.relative(dest)) {
            (Ok(s), Ok(d)) => (s, d),
            (Err(e), _) | (_, Err(e)) => return self.0.refuse(&call, attempt, fs_error(A, &e)),
        };
        let attempt = Attempt {
            args: Some(json!({"src": src_rel, "dest": dst_rel})),
            ..attempt
        };
        if let Err(r) = self.0.admit(&call, &attempt) {
            return r;
        }
        let info = match self.0.ws.stat(&src_rel) {
            Ok(Some(i)) => i,
            Ok(None) => {
                return self.0.fail(
                    &call,
                    ResultCode::InvalidRequest,
                    format!("{src_rel} does not exist; list_files shows what is there"),
                );
            }
            Err(e) => return self.0.finish(&call, fs_error(A, &e)),
        };
        if let Some(skip) = self
            .0
            .rules
            .source_protection(&src_rel)
            .or_else(|| self.0.rules.destination_protection(&dst_rel))
        {
            return self
                .0
                .fail(&call, skip.code, skip.reason)
                .with_detail(json!({"rule": skip.rule, "layer": skip.layer}));
        }
        if let Some(skip) = self.0.rules.protection(&info, now_ns()) {
            return self
                .0
                .fail(&call, skip.code, format!("{src_rel}: {}", skip.reason))
                .with_detail(json!({"rule": skip.rule, "layer": skip.layer}));
        }
        let depth = dst_rel.split('/').count();
        if depth > MAX_DEPTH {
            return self.0.fail(&call, ResultCode::InvalidRequest, format!(
                        "the destination is {depth} folders deep; at most {MAX_DEPTH} are allowed. Choose a shallower destination"
                    ));
        }
        if info.kind == Kind::Directory
            && let Some(refusal) = self.folder_protection(A, &src_rel)
        {
            return self.0.finish(&call, refusal);
        }
        if dst_rel == src_rel || dst_rel.starts_with(&format!("{src_rel}/")) {
            return self.0.fail(
                &call,
                ResultCode::InvalidRequest,
                "a folder cannot move into itself; choose a destination outside it",
            );
        }
        if let Ok(Some(existing)) = self.0.ws.stat(&dst_rel)
            && existing.kind == Kind::Directory
        {
            let name = src_rel.rsplit('/').next().unwrap_or(&src_rel);
            return self.0.finish(
                &call,
                OperationResult::new(
                    A,
                    ResultCode::Conflict,
                    format!(
                        "{dst_rel} is an existing folder, and move_file never moves into or over one on its own: give the full new path, e.g. dest = \"{dst_rel}/{name}\""
                    ),
                )
                .with_detail(json!({"path": dst_rel, "suggested_dest": format!("{dst_rel}/{name}")})),
            );
        }
        if let Some(refusal) = self.refuse_if_occupied(
            A,
            &dst_rel,
            "already exists and is never overwritten or renamed around",
        ) {
            return self.0.finish(&call, refusal);
        }
        let result = self.perform(
            A,
            vec![Move {
                src: src_rel,
                dst: dst_rel,
                dev: info.dev,
                ino: info.ino,
            }],
        );
        self.0.finish(&call, result)
    }
}
