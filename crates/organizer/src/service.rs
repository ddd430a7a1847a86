//! The six files tools as core calls: list, plan, apply, move, undo, redo. None deletes.
//!
//! Owns the order of each action: audit the attempt, re-check the filesystem, write the
//! journal ahead, rename with no-replace between directory descriptors, fsync the folders,
//! commit. Any mismatch (a file changed, vanished or appeared) refuses the whole action with
//! CONFLICT before anything moves; a failure mid-way rolls the finished moves back.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use safe_mcp_core::audit::{Attempt, AuditLog, CallId, Gate, Outcome, Server};
use safe_mcp_core::config::Policy;
use safe_mcp_core::{OperationResult, ResultCode};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::fsroot::{EntryInfo, FsError, Kind, Workspace, split};
use crate::journal::{Action, Journal, Move};
use crate::rules::{Rules, Skip};

/// Plans kept for apply_plan; older ones are dropped (apply then says "unknown plan id").
const MAX_PLANS: usize = 16;

struct StoredPlan {
    serial: u64,
    moves: Vec<PlannedMove>,
}

struct PlannedMove {
    mv: Move,
    info: EntryInfo,
}

/// Why the service could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// No `[files]` section or no journal.
    #[error("the policy has no [files] section with a journal")]
    NoFiles,
    /// No audit log.
    #[error("the policy sets no audit_log")]
    NoAudit,
    /// The workspace or the journal could not be opened.
    #[error("{0}")]
    Io(String),
}

/// The files server's core.
pub struct FilesService {
    ws: Workspace,
    root: PathBuf,
    rules: Rules,
    max_moves: usize,
    journal: Mutex<Journal>,
    plans: Mutex<HashMap<String, StoredPlan>>,
    gate: Gate,
    /// Numbers plans (their ids and their age).
    counter: AtomicU64,
}

impl std::fmt::Debug for FilesService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FilesService")
            .field("root", &self.root)
            .finish()
    }
}

fn now_ns() -> i128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i128)
}

fn fs_error(action: &str, e: &FsError) -> OperationResult {
    let code = match e {
        FsError::Escape(_) => ResultCode::PathEscape,
        FsError::Occupied(_) => ResultCode::Conflict,
        FsError::NotFound(_) | FsError::BadPath(_) => ResultCode::InvalidRequest,
        FsError::CrossDevice(_) | FsError::Io { .. } => ResultCode::OperationFailed,
    };
    OperationResult::new(action, code, e.to_string())
}

fn parent(rel: &str) -> &str {
    rel.rsplit_once('/').map_or("", |(p, _)| p)
}

impl FilesService {
    /// Opens the workspace and the journal (reconciling after a crash). Returns the service
    /// and notes for the operator's log.
    pub fn start(policy: &Policy) -> Result<(Self, Vec<String>), StartError> {
        let files = policy.files.as_ref().ok_or(StartError::NoFiles)?;
        let journal_path = files.journal.as_ref().ok_or(StartError::NoFiles)?;
        let log = policy.audit.log.as_ref().ok_or(StartError::NoAudit)?;
        let ws = Workspace::open(&files.workspace_root).map_err(|e| {
            StartError::Io(format!(
                "cannot open the workspace {}: {e}",
                files.workspace_root.display()
            ))
        })?;
        let (journal, notes) = Journal::open(journal_path, &ws).map_err(|e| {
            StartError::Io(format!(
                "cannot open the journal {}: {e}",
                journal_path.display()
            ))
        })?;
        let service = FilesService {
            ws,
            root: files.workspace_root.clone(),
            rules: Rules::from_policy(files),
            max_moves: files.max_plan_moves,
            journal: Mutex::new(journal),
            plans: Mutex::new(HashMap::new()),
            gate: Gate::new(AuditLog::open(log, policy.audit_options()), Server::Files),
            counter: AtomicU64::new(0),
        };
        Ok((service, notes))
    }

    /// The audit trail (for a startup check).
    pub fn audit(&self) -> &AuditLog {
        self.gate.log()
    }

    /// A path as given (relative, or absolute inside the workspace) → relative.
    fn relative(&self, given: &str) -> Result<String, FsError> {
        let p = Path::new(given);
        let rel = if p.is_absolute() {
            p.strip_prefix(&self.root)
                .map_err(|_| FsError::Escape(given.to_owned()))?
                .to_string_lossy()
                .into_owned()
        } else {
            given.to_owned()
        };
        split(&rel)?;
        Ok(rel.trim_end_matches('/').to_owned())
    }

    fn entry_json(
        &self,
        rel: &str,
        e: &EntryInfo,
        verdict: Option<&Skip>,
        destination: Option<&str>,
    ) -> Value {
        json!({
            "name": e.name,
            "path": rel,
            "kind": e.kind,
            "size": e.size,
            "category": if e.kind == Kind::File { self.rules.category(&e.name) } else { None },
            "would_move": verdict.is_none() && destination.is_some(),
            "destination": destination,
            "skip": verdict,
        })
    }

    /// The verdict of `plan_organize` for one top-level entry: a destination or a skip.
    fn plan_entry(&self, e: &EntryInfo, now: i128) -> Result<String, Skip> {
        if let Some(skip) = self.rules.classify(e, now) {
            return Err(skip);
        }
        let Some(category) = self.rules.category(&e.name) else {
            return Err(Skip {
                layer: "restraint",
                code: ResultCode::NeedsExplicitRequest,
                rule: "uncategorized".into(),
                reason: "no category matches this file's extension".into(),
            });
        };
        let dst = format!("{category}/{}", e.name);
        match self.ws.stat(&dst) {
            Ok(None) => Ok(dst),
            Ok(Some(_)) => Err(Skip {
                layer: "protection",
                code: ResultCode::Conflict,
                rule: "occupied-target".into(),
                reason: format!("{dst} already exists and is never overwritten"),
            }),
            Err(e) => Err(Skip {
                layer: "protection",
                code: ResultCode::PathEscape,
                rule: "escape".into(),
                reason: e.to_string(),
            }),
        }
    }

    /// `list_files(subdir?)`.
    pub fn list_files(&self, subdir: Option<&str>) -> OperationResult {
        const A: &str = "list_files";
        let started = Instant::now();
        let rel = match subdir.filter(|s| !s.is_empty() && *s != ".") {
            Some(s) => match self.relative(s) {
                Ok(r) => r,
                Err(e) => return fs_error(A, &e),
            },
            None => String::new(),
        };
        let entries = match self.ws.list(&rel) {
            Ok(e) => e,
            Err(e) => return fs_error(A, &e),
        };
        let now = now_ns();
        let items: Vec<Value> = entries
            .iter()
            .map(|e| {
                let path = if rel.is_empty() {
                    e.name.clone()
                } else {
                    format!("{rel}/{}", e.name)
                };
                if rel.is_empty() {
                    match self.plan_entry(e, now) {
                        Ok(dst) => self.entry_json(&path, e, None, Some(&dst)),
                        Err(skip) => self.entry_json(&path, e, Some(&skip), None),
                    }
                } else {
                    let skip = self.rules.protection(e, now).unwrap_or(Skip {
                        layer: "restraint",
                        code: ResultCode::NeedsExplicitRequest,
                        rule: "top-level-only".into(),
                        reason: "plan_organize tidies only the top level of the workspace".into(),
                    });
                    self.entry_json(&path, e, Some(&skip), None)
                }
            })
            .collect();
        OperationResult::new(A, ResultCode::Ok, format!("{} entries", items.len()))
            .with_detail(json!({"dir": rel, "entries": items}))
            .with_duration(started.elapsed())
    }

    /// `plan_organize()`: changes nothing, not even folders.
    pub fn plan_organize(&self) -> OperationResult {
        const A: &str = "plan_organize";
        let started = Instant::now();
        let entries = match self.ws.list("") {
            Ok(e) => e,
            Err(e) => return fs_error(A, &e),
        };
        let now = now_ns();
        let mut moves: Vec<PlannedMove> = Vec::new();
        let mut skips: Vec<Value> = Vec::new();
        let mut truncated = 0usize;
        for e in entries {
            match self.plan_entry(&e, now) {
                Ok(dst) if moves.len() < self.max_moves => {
                    moves.push(PlannedMove { mv: Move { src: e.name.clone(), dst, dev: e.dev, ino: e.ino }, info: e });
                }
                Ok(_) => truncated += 1,
                Err(skip) => skips.push(json!({"path": e.name, "code": skip.code, "layer": skip.layer, "rule": skip.rule, "reason": skip.reason})),
            }
        }
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        let id_source = format!("{}:{n}:{}", std::process::id(), now);
        let plan_id = hex::encode(&Sha256::digest(id_source.as_bytes())[..12]);
        let move_list: Vec<Value> = moves
            .iter()
            .map(|m| json!({"src": m.mv.src, "dst": m.mv.dst}))
            .collect();
        let detail = json!({
            "plan_id": plan_id,
            "moves": move_list,
            "skips": skips,
            "move_count": moves.len(),
            "skip_count": skips.len(),
            "truncated": truncated > 0,
            "not_planned_over_limit": truncated,
            "max_plan_moves": self.max_moves,
        });
        let reason = format!(
            "{} moves planned, {} entries skipped; nothing has changed yet",
            moves.len(),
            skips.len()
        );
        if let Ok(mut plans) = self.plans.lock() {
            // Keep the newest few plans only: planning in a loop must not grow memory.
            while plans.len() >= MAX_PLANS {
                let Some(oldest) = plans
                    .iter()
                    .min_by_key(|(_, p)| p.serial)
                    .map(|(id, _)| id.clone())
                else {
                    break;
                };
                plans.remove(&oldest);
            }
            plans.insert(plan_id, StoredPlan { serial: n, moves });
        }
        OperationResult::new(A, ResultCode::Ok, reason)
            .with_detail(detail)
            .with_duration(started.elapsed())
    }

    /// Starts an acting call: names it and describes it for the trail.
    fn attempt(&self, tool: &'static str, args: Value) -> (CallId, Attempt) {
        let call = self.gate.begin();
        let attempt = Attempt {
            args: Some(args.clone()),
            ..Attempt::new(&call, tool, format!("{tool} {args}"))
        };
        (call, attempt)
    }

    /// Records `result` as a refusal of a call that never acted, and returns it.
    fn refuse(
        &self,
        started: Instant,
        attempt: Attempt,
        result: OperationResult,
    ) -> OperationResult {
        let result = result.with_duration(started.elapsed());
        self.gate.refuse(attempt, &result);
        result
    }

    /// Writes the attempt; `Err` is the AUDIT_UNAVAILABLE result (already recorded as far
    /// as the trail allows) when nothing may change.
    fn admit(&self, started: Instant, attempt: &Attempt) -> Result<(), OperationResult> {
        self.gate
            .admit(attempt)
            .map_err(|refused| self.finish(&attempt.call, started, refused.result(attempt.tool)))
    }

    /// Records how an admitted call ended, and returns its result.
    fn finish(&self, call: &CallId, started: Instant, result: OperationResult) -> OperationResult {
        let result = result.with_duration(started.elapsed());
        let mut outcome = Outcome::of(call, &result);
        outcome.reason = Some(result.reason.clone());
        self.gate.finish(&outcome);
        result
    }

    /// `apply_plan(plan_id)`: all or nothing; the id is single-use.
    pub fn apply_plan(&self, plan_id: &str) -> OperationResult {
        const A: &str = "apply_plan";
        let started = Instant::now();
        let (call, attempt) = self.attempt(A, json!({"plan_id": plan_id}));
        let Some(plan) = self
            .plans
            .lock()
            .ok()
            .and_then(|mut p| p.remove(plan_id))
            .map(|p| p.moves)
        else {
            let unknown = OperationResult::new(
                A,
                ResultCode::InvalidRequest,
                "unknown plan id (plans are single-use; call plan_organize again)",
            );
            return self.refuse(started, attempt, unknown);
        };
        let attempt = Attempt {
            args: Some(json!({"plan_id": plan_id, "moves": plan.len()})),
            ..attempt
        };
        if let Err(r) = self.admit(started, &attempt) {
            return r;
        }
        let now = now_ns();
        for p in &plan {
            let current = match self.ws.stat(&p.mv.src) {
                Ok(c) => c,
                Err(e) => return self.finish(&call, started, fs_error(A, &e)),
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
                return self.finish(
                    &call,
                    started,
                    OperationResult::new(
                        A,
                        ResultCode::Conflict,
                        format!(
                            "{} {what} since the plan was made; nothing was moved",
                            p.mv.src
                        ),
                    )
                    .with_detail(json!({"path": p.mv.src})),
                );
            }
            if let Some(skip) = self.rules.protection(&p.info, now) {
                return self.finish(
                    &call,
                    started,
                    OperationResult::new(
                        A,
                        skip.code,
                        format!("{}: {}; nothing was moved", p.mv.src, skip.reason),
                    ),
                );
            }
            if let Some(refusal) = self.refuse_if_occupied(
                A,
                &p.mv.dst,
                "appeared since the plan was made; nothing was moved",
            ) {
                return self.finish(
                    &call,
                    started,
                    refusal.with_detail(json!({"path": p.mv.dst})),
                );
            }
        }
        let moves: Vec<Move> = plan.into_iter().map(|p| p.mv).collect();
        let result = self.perform(A, moves);
        self.finish(&call, started, result)
    }

    /// `None` when nothing is at `rel`; otherwise the refusal: CONFLICT saying `rel` and
    /// `why`, or the error met while looking.
    fn refuse_if_occupied(&self, tool: &str, rel: &str, why: &str) -> Option<OperationResult> {
        match self.ws.stat(rel) {
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
        let Ok(mut journal) = self.journal.lock() else {
            return OperationResult::internal(tool);
        };
        let dirs: BTreeSet<String> = moves
            .iter()
            .map(|m| parent(&m.dst).to_owned())
            .filter(|d| !d.is_empty())
            .collect();
        let missing: Vec<String> = dirs
            .iter()
            .filter(|d| !matches!(self.ws.stat(d), Ok(Some(_))))
            .cloned()
            .collect();
        let action = match journal.begin(&self.ws, tool, moves, missing.clone()) {
            Ok(a) => a,
            Err(e) => {
                return OperationResult::new(
                    tool,
                    ResultCode::OperationFailed,
                    format!("the journal could not be written, so nothing moved: {e}"),
                );
            }
        };
        let mut created: Vec<String> = Vec::new();
        for d in &missing {
            match self.ws.ensure_dirs(d) {
                Ok(c) => created.extend(c),
                Err(e) => {
                    self.rollback(&mut journal, &action, 0, &created);
                    return fs_error(tool, &e);
                }
            }
        }
        for (i, m) in action.moves.iter().enumerate() {
            if let Err(e) = self.ws.rename_noreplace(&m.src, &m.dst) {
                self.rollback(&mut journal, &action, i, &created);
                let mut r = fs_error(tool, &e);
                r.reason = format!(
                    "{}; the {i} moves already made were rolled back, so nothing changed",
                    r.reason
                );
                return r;
            }
        }
        self.sync_dirs(&action);
        let n = action.moves.len();
        let id = action.id;
        if let Err(e) = journal.commit(action) {
            return OperationResult::new(
                tool,
                ResultCode::OperationFailed,
                format!("moved, but the journal commit failed: {e}"),
            );
        }
        OperationResult::new(
            tool,
            ResultCode::Ok,
            format!("moved {n} file(s); undo_last_action restores them"),
        )
        .with_detail(json!({"moved": n, "action_id": id, "created_folders": created}))
    }

    fn rollback(&self, journal: &mut Journal, action: &Action, done: usize, created: &[String]) {
        for m in action.moves[..done].iter().rev() {
            if let Err(e) = self.ws.rename_noreplace(&m.dst, &m.src) {
                eprintln!(
                    "safe-mcp: rollback of {} failed: {e}; the journal keeps the action for reconciliation",
                    m.dst
                );
                return;
            }
        }
        for d in created.iter().rev() {
            self.ws.rmdir_if_empty(d);
        }
        let _ = journal.abort(action.id);
    }

    fn sync_dirs(&self, action: &Action) {
        let dirs: BTreeSet<&str> = action
            .moves
            .iter()
            .flat_map(|m| [parent(&m.src), parent(&m.dst)])
            .collect();
        for d in dirs {
            self.ws.sync_dir(d);
        }
    }

    /// `move_file(src, dest)`: PROTECTION rules only; never overwrites.
    pub fn move_file(&self, src: &str, dest: &str) -> OperationResult {
        const A: &str = "move_file";
        let started = Instant::now();
        let (call, attempt) = self.attempt(A, json!({"src": src, "dest": dest}));
        let (src_rel, dst_rel) = match (self.relative(src), self.relative(dest)) {
            (Ok(s), Ok(d)) => (s, d),
            (Err(e), _) | (_, Err(e)) => return self.refuse(started, attempt, fs_error(A, &e)),
        };
        let attempt = Attempt {
            args: Some(json!({"src": src_rel, "dest": dst_rel})),
            ..attempt
        };
        if let Err(r) = self.admit(started, &attempt) {
            return r;
        }
        let info = match self.ws.stat(&src_rel) {
            Ok(Some(i)) => i,
            Ok(None) => {
                return self.finish(
                    &call,
                    started,
                    OperationResult::new(
                        A,
                        ResultCode::InvalidRequest,
                        format!("{src_rel} does not exist"),
                    ),
                );
            }
            Err(e) => return self.finish(&call, started, fs_error(A, &e)),
        };
        if let Some(skip) = self
            .rules
            .path_protection(&src_rel)
            .or_else(|| self.rules.path_protection(&dst_rel))
        {
            return self.finish(
                &call,
                started,
                OperationResult::new(A, skip.code, skip.reason)
                    .with_detail(json!({"rule": skip.rule, "layer": skip.layer})),
            );
        }
        if let Some(skip) = self.rules.protection(&info, now_ns()) {
            return self.finish(
                &call,
                started,
                OperationResult::new(A, skip.code, format!("{src_rel}: {}", skip.reason))
                    .with_detail(json!({"rule": skip.rule, "layer": skip.layer})),
            );
        }
        if dst_rel == src_rel || dst_rel.starts_with(&format!("{src_rel}/")) {
            return self.finish(
                &call,
                started,
                OperationResult::new(
                    A,
                    ResultCode::InvalidRequest,
                    "a folder cannot move into itself",
                ),
            );
        }
        if let Some(refusal) = self.refuse_if_occupied(
            A,
            &dst_rel,
            "already exists and is never overwritten or renamed around",
        ) {
            return self.finish(&call, started, refusal);
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
        self.finish(&call, started, result)
    }

    /// `undo_last_action()`: restores the last move or applied plan as one action.
    pub fn undo_last_action(&self) -> OperationResult {
        self.reverse(Direction::Undo)
    }

    /// `redo_last_action()`: re-applies the last undone action.
    pub fn redo_last_action(&self) -> OperationResult {
        self.reverse(Direction::Redo)
    }

    /// Why `action` cannot be undone (or redone) as it stands: every file must be exactly
    /// where the action left it, and its way back clear.
    fn blocked_reversal(&self, action: &Action, direction: Direction) -> Option<String> {
        for m in &action.moves {
            let (here, there) = direction.ends(m);
            let at_here = self
                .ws
                .stat(here)
                .ok()
                .flatten()
                .is_some_and(|e| e.ino == m.ino && e.dev == m.dev);
            if !at_here {
                return Some(format!(
                    "{here} is no longer the file that was moved; nothing changed"
                ));
            }
            if !matches!(self.ws.stat(there), Ok(None)) {
                return Some(format!(
                    "{there} is occupied and is never overwritten; nothing changed"
                ));
            }
        }
        None
    }

    fn reverse(&self, direction: Direction) -> OperationResult {
        let tool = direction.tool();
        let undo = direction == Direction::Undo;
        let started = Instant::now();
        let (call, attempt) = self.attempt(tool, json!({}));
        if let Err(r) = self.admit(started, &attempt) {
            return r;
        }
        let Ok(mut journal) = self.journal.lock() else {
            return self.finish(&call, started, OperationResult::internal(tool));
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
            return self.finish(
                &call,
                started,
                OperationResult::new(tool, ResultCode::InvalidRequest, what),
            );
        };
        if let Some(conflict) = self.blocked_reversal(&action, direction) {
            drop(journal);
            return self.finish(
                &call,
                started,
                OperationResult::new(tool, ResultCode::Conflict, conflict),
            );
        }
        let opened = if undo {
            journal.start_undo(&self.ws, action.id)
        } else {
            journal.start_redo(&self.ws, action.id)
        };
        if let Err(e) = opened {
            drop(journal);
            return self.finish(
                &call,
                started,
                OperationResult::new(
                    tool,
                    ResultCode::OperationFailed,
                    format!("the journal could not be written, so nothing changed: {e}"),
                ),
            );
        }
        if !undo {
            for d in &action.dirs {
                if let Err(e) = self.ws.ensure_dirs(d) {
                    drop(journal);
                    return self.finish(&call, started, fs_error(tool, &e));
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
            if let Err(e) = self.ws.rename_noreplace(from, to) {
                // The journal's open undo/redo record lets the next start reconcile this.
                drop(journal);
                return self.finish(&call, started, fs_error(tool, &e));
            }
        }
        self.sync_dirs(&action);
        if undo {
            for d in action.dirs.iter().rev() {
                self.ws.rmdir_if_empty(d);
            }
        }
        let done = if undo {
            journal.finish_undo(action.id)
        } else {
            journal.finish_redo(action.id)
        };
        drop(journal);
        if let Err(e) = done {
            return self.finish(
                &call,
                started,
                OperationResult::new(
                    tool,
                    ResultCode::OperationFailed,
                    format!("done, but the journal could not record it: {e}"),
                ),
            );
        }
        let verb = if undo { "restored" } else { "re-applied" };
        self.finish(
            &call,
            started,
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
