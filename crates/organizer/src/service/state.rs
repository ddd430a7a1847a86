//! The files server's state (the workspace, its rules, the journal, the plans, the trail),
//! its start, and the frame every acting call goes through: `FilesService::attempt`, then
//! `admit` or `refuse`, then `finish`. The tools are the facets beside it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::AtomicU64;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use safe_mcp_core::audit::{Attempt, AuditLog, CallId, Caller, Gate, Server};
use safe_mcp_core::config::Policy;
use safe_mcp_core::{OperationResult, ResultCode};
use serde_json::Value;

use crate::fsroot::{EntryInfo, FsError, Workspace, split};
use crate::journal::{Journal, Move};
use crate::rules::Rules;

/// What a long action asks and tells while it runs: whether to stop (checked between two
/// moves), and how many moves of how many are done.
pub struct Watch<'a> {
    /// True once the client has cancelled.
    pub stop: &'a (dyn Fn() -> bool + Sync),
    /// Called after each move with (done, total).
    pub moved: &'a (dyn Fn(usize, usize) + Sync),
}

impl Watch<'_> {
    /// Never stops, tells nobody.
    pub fn none() -> Watch<'static> {
        Watch {
            stop: &|| false,
            moved: &|_, _| {},
        }
    }
}

/// Plans kept for apply_plan; older ones are dropped (apply then says "unknown plan id").
pub(super) const MAX_PLANS: usize = 16;

pub(super) struct StoredPlan {
    pub(super) serial: u64,
    pub(super) moves: Vec<PlannedMove>,
    /// Who made it (an HTTP caller's `sub`); only they may apply it.
    pub(super) owner: Option<String>,
}

pub(super) struct PlannedMove {
    pub(super) mv: Move,
    pub(super) info: EntryInfo,
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
    pub(super) ws: Workspace,
    pub(super) root: PathBuf,
    pub(super) rules: Rules,
    pub(super) max_moves: usize,
    pub(super) journal: Mutex<Journal>,
    pub(super) plans: Mutex<HashMap<String, StoredPlan>>,
    pub(super) gate: Gate,
    /// Numbers plans (their ids and their age).
    pub(super) counter: AtomicU64,
}

/// An acting call under way: its id, its tool, its caller and when it began, carried to its
/// outcome record.
pub(super) struct Acting {
    pub(super) call: CallId,
    pub(super) tool: &'static str,
    pub(super) caller: Caller,
    pub(super) started: Instant,
}

impl std::fmt::Debug for FilesService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FilesService")
            .field("root", &self.root)
            .finish()
    }
}

pub(super) fn now_ns() -> i128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i128)
}

pub(super) fn fs_error(action: &str, e: &FsError) -> OperationResult {
    let code = match e {
        FsError::Escape(_) => ResultCode::PathEscape,
        FsError::Occupied(_) => ResultCode::Conflict,
        FsError::NotFound(_) | FsError::BadPath(_) => ResultCode::InvalidRequest,
        FsError::CrossDevice(_) | FsError::Io { .. } => ResultCode::OperationFailed,
    };
    OperationResult::new(action, code, e.to_string())
}

pub(super) fn parent(rel: &str) -> &str {
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
            gate: Gate::new(
                AuditLog::open(log, safe_mcp_core::load::audit_options(policy)),
                Server::Files,
            ),
            counter: AtomicU64::new(0),
        };
        Ok((service, notes))
    }

    /// The audit gate: the trail ([`Gate::log`]: a startup check) and its records
    /// ([`Gate::append`]: the HTTP transport's `http` refusals).
    pub fn gate(&self) -> &Gate {
        &self.gate
    }

    /// A path as given (relative, or absolute inside the workspace) → relative.
    pub(super) fn relative(&self, given: &str) -> Result<String, FsError> {
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

    /// Starts an acting call: names it and describes it for the trail.
    pub(super) fn attempt(
        &self,
        tool: &'static str,
        args: Value,
        caller: &Caller,
    ) -> (Acting, Attempt) {
        let call = self.gate.begin();
        let attempt = Attempt {
            args: Some(args.clone()),
            caller: caller.clone(),
            ..Attempt::new(&call, tool, format!("{tool} {args}"))
        };
        let acting = Acting {
            call,
            tool,
            caller: caller.clone(),
            started: Instant::now(),
        };
        (acting, attempt)
    }

    /// Records `result` as a refusal of a call that never acted, and returns it.
    pub(super) fn refuse(
        &self,
        call: &Acting,
        attempt: Attempt,
        result: OperationResult,
    ) -> OperationResult {
        let result = result.with_duration(call.started.elapsed());
        self.gate.record(attempt, &result);
        result
    }

    /// Records a call that did not act (a read-only tool, or arguments that do not parse)
    /// and returns its result.
    pub fn record_call(
        &self,
        tool: &'static str,
        args: Value,
        result: OperationResult,
        caller: &Caller,
    ) -> OperationResult {
        let (_, attempt) = self.attempt(tool, args, caller);
        self.gate.record(attempt, &result);
        result
    }

    /// Writes the attempt; `Err` is the AUDIT_UNAVAILABLE result (already recorded as far
    /// as the trail allows) when nothing may change.
    pub(super) fn admit(&self, call: &Acting, attempt: &Attempt) -> Result<(), OperationResult> {
        self.gate
            .admit(attempt)
            .map_err(|refused| self.finish(call, refused.result(attempt.tool)))
    }

    /// Records how an admitted call ended, and returns its result.
    pub(super) fn finish(&self, call: &Acting, result: OperationResult) -> OperationResult {
        self.finish_cancelled(call, result, false)
    }

    /// [`Self::finish`] with a result of `code` saying `reason`.
    pub(super) fn fail(
        &self,
        call: &Acting,
        code: ResultCode,
        reason: impl Into<String>,
    ) -> OperationResult {
        self.finish(call, OperationResult::new(call.tool, code, reason))
    }

    /// [`Self::finish`], saying in the outcome whether the client cancelled the call.
    pub(super) fn finish_cancelled(
        &self,
        call: &Acting,
        result: OperationResult,
        cancelled: bool,
    ) -> OperationResult {
        let result = result.with_duration(call.started.elapsed());
        self.gate.outcome(&call.call, &call.caller, &result, |o| {
            o.reason = Some(result.reason.clone());
            o.cancelled = cancelled;
        });
        result
    }
}
