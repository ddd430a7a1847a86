//! The terminal request flow (DESIGN §1): parse → evaluate → contain → audit attempt →
//! execute → redact → cap → audit outcome → envelope.
//!
//! Owns the order of those steps, which is itself a safety property: nothing reaches the
//! [`Executor`] before its attempt record is durable (or fail-open says otherwise), and no
//! output leaves before redaction. `explain` and `describe` are given no executor at all, so
//! they cannot run anything. The executor (the `safe-mcp-exec` crate) only runs an
//! [`ExecPlan`] this module approved.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

use crate::audit::{Attempt, AuditLog, CallId, Caller, Gate, Outcome, OutputCounts, Server};
use crate::config::{Policy, TerminalPolicy};
use crate::envelope::{OperationResult, ResultCode};
use crate::home::PrivateHome;
use crate::jail::JailRoot;
use crate::policy::{Decision, evaluate};
use crate::redact::{PatternError, Redactor};
use crate::sessions::SessionTable;
use crate::syntax::{self, CommandList, SyntaxError};

/// Extra raw bytes read past the cap, so a secret straddling the cap is redacted whole.
pub const REDACTION_SLACK_BYTES: usize = 16 * 1024;

/// The longest `stdin` a call may carry; like the command's own cap, an input bound.
pub const MAX_STDIN_BYTES: usize = 1024 * 1024;

/// `command`: a string split without a shell, or an argv array (one simple command).
#[derive(Debug, Clone)]
pub enum CommandInput {
    /// POSIX-quoted text.
    Line(String),
    /// One simple command, taken literally.
    Argv(Vec<String>),
}

impl CommandInput {
    fn parse(&self) -> Result<CommandList, SyntaxError> {
        match self {
            CommandInput::Line(s) => syntax::parse(s),
            CommandInput::Argv(v) => CommandList::from_argv(v.clone()),
        }
    }

    fn display(&self) -> String {
        match self {
            CommandInput::Line(s) => s.clone(),
            CommandInput::Argv(v) => v.join(" "),
        }
    }
}

/// A `run_command` call.
#[derive(Debug, Clone)]
pub struct RunRequest {
    /// What to run.
    pub command: CommandInput,
    /// Relative to the jail root, or absolute inside it.
    pub cwd: Option<String>,
    /// Text fed to the first stage.
    pub stdin: Option<String>,
    /// May lower, never raise, the policy's limit.
    pub timeout_seconds: Option<u64>,
    /// Told of the output as it comes, for progress notifications.
    pub observer: Option<Observer>,
    /// Asks a person when the command needs approval; `None`: this transport cannot.
    pub approver: Option<crate::approval::AskPerson>,
    /// Who asked (an authenticated HTTP caller); empty over stdio.
    pub caller: crate::audit::Caller,
}

pub use safe_mcp_contract::{
    Cancel, ConfinementReport, ConfinementSpec, ConfinementSummary, Durable, Egress, EgressGate,
    ExecFailure, ExecFuture, ExecOutcome, ExecPlan, ExecStage, Executor, Observer, OutputObserver,
    OutputStream, ProcessLimits, StageOutcome,
};

/// The confinement `policy` asks for, in the executor's terms.
pub fn confinement_spec(policy: &TerminalPolicy) -> ConfinementSpec {
    let sandbox = &policy.sandbox;
    let l = &policy.limits;
    ConfinementSpec {
        jail_root: policy.jail_root.clone(),
        mode: sandbox.mode,
        network: sandbox.network,
        egress: policy.network.mode == crate::egress::NetworkMode::Allowlist,
        unix_sockets: sandbox.unix_sockets,
        read_paths: sandbox.read_paths.clone(),
        write_paths: policy.write_paths.clone(),
        read_only_files: sandbox.read_only_files.clone(),
        pinned_dirs: Vec::new(),
        exec_in_jail: sandbox.exec_in_jail,
        namespaces: sandbox.namespaces,
        home: None,
        limits: ProcessLimits {
            cpu_seconds: l.cpu_seconds,
            memory_bytes: l.memory_bytes,
            file_size_bytes: l.file_size_bytes,
            open_files: l.open_files,
            processes: l.processes,
        },
    }
}

/// Why the service could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServiceError {
    /// The policy has no terminal section.
    #[error("the policy has no [terminal] section")]
    NoTerminal,
    /// The policy has no audit log.
    #[error("the policy sets no audit_log")]
    NoAudit,
    /// A redaction pattern failed to compile.
    #[error(transparent)]
    Pattern(#[from] PatternError),
    /// The commands' HOME could not be made.
    #[error(transparent)]
    Home(#[from] crate::home::HomeError),
}

/// The terminal server's core: every rule, no transport.
#[derive(Debug)]
pub struct TerminalService {
    policy: TerminalPolicy,
    jail: JailRoot,
    redactor: Redactor,
    gate: std::sync::Arc<Gate>,
    env: Vec<(String, String)>,
    /// Every command's HOME: empty, outside the jail, read-only to commands.
    home: PrivateHome,
    /// The process sessions (see [`process`]).
    sessions: SessionTable,
    /// `jail_bytes`: what the jail and the write paths hold, measured after calls.
    usage: crate::usage::JailUsage,
    /// How the protected paths are held, once the server holds them ([`Self::hold_protected`]).
    protected: std::sync::OnceLock<crate::protected::Plan>,
    /// Egress: the proxy that serves each call's connections ([`Self::with_egress`]).
    egress: Option<std::sync::Arc<dyn EgressProvider>>,
}

/// Makes the proxy of one call (egress, DESIGN §9): the binary's proxy, which knows the
/// network policy and writes the call's `network` records.
pub trait EgressProvider: Send + Sync + std::fmt::Debug {
    /// The proxy for the call `call`.
    fn for_call(&self, call: &CallId) -> safe_mcp_contract::Egress;
}

#[path = "terminal_process.rs"]
pub mod process;

/// What the outcome record says of a command beyond its code.
#[derive(Debug, Clone, Copy, Default)]
struct RunFacts {
    exit_code: Option<i32>,
    output: Option<OutputCounts>,
    cancelled: bool,
}

const RUN: &str = "run_command";

/// A call judged and planned, not yet run.
struct Prepared {
    decision: Decision,
    argv: Vec<Vec<String>>,
    attempt: Attempt,
    plan: ExecPlan,
    timeout: u64,
    cwd: PathBuf,
    confinement: Value,
}

/// How a call ends before it runs.
enum Early {
    /// Refused; the attempt is still to be recorded.
    Refused(OperationResult, Box<Attempt>),
    /// A bug; already reported on stderr.
    Internal(OperationResult),
}
const EXPLAIN: &str = "explain_command";
const DESCRIBE: &str = "describe_policy";

impl TerminalService {
    /// Builds the service from a validated policy, without egress: under
    /// `[terminal.network] mode = "allowlist"` its commands then have no way out (the
    /// executor refuses them); [`Self::with_egress`] gives them the proxy.
    pub fn new(policy: &Policy) -> Result<Self, ServiceError> {
        Self::with_egress(policy, |_, _| None)
    }

    /// Builds the service, and under `mode = "allowlist"` its proxy: `egress` is handed the
    /// network policy and the trail the proxy's `network` records go to, and returns the
    /// proxy (or `None`). It is not called in any other mode.
    pub fn with_egress(
        policy: &Policy,
        egress: impl FnOnce(
            &crate::egress::NetworkPolicy,
            std::sync::Arc<Gate>,
        ) -> Option<std::sync::Arc<dyn EgressProvider>>,
    ) -> Result<Self, ServiceError> {
        let terminal = policy.terminal.clone().ok_or(ServiceError::NoTerminal)?;
        let log = policy.audit.log.as_deref().ok_or(ServiceError::NoAudit)?;
        let redactor = Redactor::new(&policy.redaction)?;
        let jail = crate::policy::jail_of(&terminal);
        let path = terminal
            .path
            .iter()
            .map(|p| p.to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join(":");
        let home = PrivateHome::create(&std::env::temp_dir(), &terminal.jail_root)?;
        let mut env = vec![
            ("PATH".to_owned(), path),
            // Not the jail: an rc file the model writes there must not configure the next
            // command (see `home`).
            (
                "HOME".to_owned(),
                home.path().to_string_lossy().into_owned(),
            ),
            ("LANG".to_owned(), "C.UTF-8".to_owned()),
            // Pins: no system git config, no credential prompts waiting on a terminal.
            ("GIT_CONFIG_NOSYSTEM".to_owned(), "1".to_owned()),
            ("GIT_TERMINAL_PROMPT".to_owned(), "0".to_owned()),
        ];
        // `[terminal.env]`: named variables of the server's own environment, then fixed
        // values; the names were checked at load (never PATH, HOME, TMPDIR or LD_*).
        let passed = terminal
            .env
            .pass
            .iter()
            .filter_map(|name| std::env::var(name).ok().map(|v| (name.clone(), v)));
        for (name, value) in passed.chain(terminal.env.set.iter().cloned()) {
            env.retain(|(n, _)| *n != name);
            env.push((name, value));
        }
        let usage = crate::usage::JailUsage::new(
            terminal.limits.jail_bytes,
            std::iter::once(terminal.jail_root.clone())
                .chain(terminal.write_paths.iter().cloned())
                .collect(),
        );
        let gate = std::sync::Arc::new(Gate::new(
            AuditLog::open(log, policy.audit_options()),
            Server::Terminal,
        ));
        let egress = match terminal.network.mode {
            crate::egress::NetworkMode::Allowlist => {
                egress(&terminal.network, std::sync::Arc::clone(&gate))
            }
            _ => None,
        };
        Ok(TerminalService {
            gate,
            policy: terminal,
            jail,
            redactor,
            env,
            home,
            sessions: SessionTable::default(),
            usage,
            protected: std::sync::OnceLock::new(),
            egress,
        })
    }

    /// The confinement this server's commands get: the policy's, plus read access to
    /// their HOME.
    pub fn confinement_spec(&self) -> ConfinementSpec {
        let mut spec = confinement_spec(&self.policy);
        spec.home = Some(self.home.path().to_path_buf());
        if let Some(plan) = self.protected.get() {
            spec.read_only_files.extend(plan.read_only.iter().cloned());
            spec.pinned_dirs.extend(plan.pinned.iter().cloned());
        }
        spec
    }

    /// What a starting server makes on disk before its confinement is built, once: the
    /// profiles' caches with their placeholders, and the missing directories and placeholders
    /// the protected paths' plan needs. `explain`, `policy check` and the reports never call
    /// it, so they change nothing on disk.
    pub fn hold_protected(&self) -> Result<(), String> {
        if self.protected.get().is_some() {
            return Ok(());
        }
        crate::config::make_caches(&self.policy.caches)?;
        let plan = crate::protected::plan(&self.policy.jail_root, &self.policy.protected, true)
            .map_err(|e| format!("[terminal] protected_paths: {e}"))?;
        let _ = self.protected.set(plan);
        Ok(())
    }

    /// Moves aside what a command made at a watched protected path, records each move, and
    /// returns a line for each (for the result).
    fn sweep_protected(&self, call: &CallId) -> Vec<String> {
        let moved = self
            .protected
            .get()
            .map(|plan| crate::protected::sweep(&plan.watched))
            .unwrap_or_default();
        moved
            .into_iter()
            .map(|(path, to)| {
                let record = crate::audit::ProtectedRecord {
                    call: call.to_string(),
                    event: "moved-aside",
                    path: path.display().to_string(),
                    to: to.display().to_string(),
                    rule: "protected-path",
                };
                if let Err(e) = self.record_event("protected", &record, false) {
                    eprintln!("safe-mcp: warning: a protected-path record was not written: {e}");
                }
                format!(
                    "{} is a protected path (it would configure programs outside the sandbox): moved aside to {}",
                    path.display(),
                    to.display()
                )
            })
            .collect()
    }

    /// The terminal policy in force.
    pub fn policy(&self) -> &TerminalPolicy {
        &self.policy
    }

    /// The audit trail.
    pub fn audit(&self) -> &AuditLog {
        self.gate.log()
    }

    /// Appends a record of `kind` (the transport's `http` records, the protected sweep's) to
    /// the trail.
    pub fn record_event(
        &self,
        kind: &str,
        record: &impl serde::Serialize,
        durable: bool,
    ) -> Result<(), crate::audit::AuditError> {
        self.gate.append(kind, record, durable)
    }

    /// The audit gate, for the file tools' records ([`crate::file_tools`]).
    pub(crate) fn gate(&self) -> &Gate {
        &self.gate
    }

    /// The redactor (shared with the CLI's `redact`).
    pub fn redactor(&self) -> &Redactor {
        &self.redactor
    }

    /// The verdict for `command` run from `cwd`, without running anything.
    pub fn explain(
        &self,
        command: &CommandInput,
        cwd: Option<&str>,
        confinement: &ConfinementReport,
    ) -> OperationResult {
        let started = Instant::now();
        let result = match command.parse() {
            Err(e) => syntax_refusal(EXPLAIN, &e),
            Ok(list) => {
                let decision = evaluate(&self.policy, &self.jail, &list, cwd);
                let mut detail = decision_detail(&decision);
                detail.insert("would_run".into(), json!(decision.code == ResultCode::Ok));
                // The gist; describe_policy has the confinement in full.
                detail.insert("confinement".into(), report_gist(confinement));
                detail.insert(
                    "timeout_seconds".into(),
                    json!(self.policy.limits.timeout_seconds),
                );
                // Which file tools answer here: the way to change a file without a command.
                let f = &self.policy.files;
                let writes = f.enabled && !f.read_only;
                detail.insert(
                    "file_tools".into(),
                    json!({"read_file": f.enabled, "write_file": writes, "edit_file": writes}),
                );
                OperationResult::new(EXPLAIN, decision.code, decision.reason.clone())
                    .with_detail(Value::Object(detail))
            }
        };
        self.redacted(result).with_duration(started.elapsed())
    }

    /// `explain`, recorded in the audit trail as every call of every tool is (the CLI's
    /// `explain` uses the unrecorded one).
    pub fn explain_call(
        &self,
        command: &CommandInput,
        cwd: Option<&str>,
        confinement: &ConfinementReport,
        caller: &Caller,
    ) -> OperationResult {
        let result = self.explain(command, cwd, confinement);
        let mut attempt = self.attempt_for(EXPLAIN, &command.display(), caller);
        attempt.cwd = cwd.map(str::to_owned);
        self.gate.record(attempt, &result);
        result
    }

    /// `describe`, recorded.
    pub fn describe_call(
        &self,
        confinement: &ConfinementReport,
        caller: &Caller,
    ) -> OperationResult {
        let result = self.describe(confinement);
        self.gate
            .record(self.attempt_for(DESCRIBE, DESCRIBE, caller), &result);
        result
    }

    /// Records a call refused before the core saw it (arguments that do not parse).
    /// `request` is what was asked, rendered; it is redacted.
    pub fn record_refusal(
        &self,
        tool: &'static str,
        request: &str,
        result: &OperationResult,
        caller: &Caller,
    ) {
        let attempt = self.attempt_for(tool, request, caller);
        self.gate.record(attempt, &self.redacted(result.clone()));
    }

    pub(crate) fn attempt_for(
        &self,
        tool: &'static str,
        request: &str,
        caller: &Caller,
    ) -> Attempt {
        let mut attempt = Attempt::new(&self.gate.begin(), tool, self.redactor.redact(request));
        attempt.caller = caller.clone();
        attempt
    }

    /// The policy as a model should read it.
    pub fn describe(&self, confinement: &ConfinementReport) -> OperationResult {
        let p = &self.policy;
        let rules: Vec<Value> = p
            .rules
            .iter()
            .map(|r| json!({"command": r.command, "deny_args": r.deny_args, "reason": r.reason}))
            .collect();
        let detail = json!({
            "jail_root": p.jail_root,
            "allowlist": p.allow,
            "denylist": p.deny,
            "rules": rules,
            "limits": {
                "timeout_seconds": p.limits.timeout_seconds,
                "max_output_bytes": p.limits.max_output_bytes,
                "cpu_seconds": p.limits.cpu_seconds,
                "memory_bytes": p.limits.memory_bytes,
                "file_size_bytes": p.limits.file_size_bytes,
                "open_files": p.limits.open_files,
                "processes": p.limits.processes,
                "jail_bytes": p.limits.jail_bytes,
            },
            "syntax": {
                "accepted": ["'single' and \"double\" quotes (tokenization only)", "\\ escapes", "|", "&&", "||", ";", "NAME=value before a command, for the names in env_prefixes"],
                "refused": ["$VAR and ${VAR}", "$(...) and backticks", "< > >> 2>&1 redirections", "<< here-docs", "& background", "( ) { } groups", "NAME=value for other names, or with no command after it", "unquoted # comments"],
                "expansion": "none: no globs, braces, tilde or variables; words are passed literally",
                "programs": "bare names resolved through the server's PATH; a name containing / is refused",
            },
            "env_prefixes": crate::env_prefix::DEFAULT_ALLOWED
                .iter()
                .map(|n| n.to_string())
                .chain(p.env.prefix_allow.iter().cloned())
                .collect::<Vec<_>>(),
            "environment": self
                .env
                .iter()
                .map(|(k, _)| k.as_str())
                .chain(safe_mcp_contract::CALL_TMP_VARIABLES.iter().copied())
                .collect::<Vec<_>>(),
            "sessions": {
                "max_sessions": p.sessions.max_sessions,
                "max_sessions_per_caller": p.sessions.capacity().per_caller,
                "idle_timeout_seconds": p.sessions.idle_timeout_seconds,
                "max_seconds": p.sessions.max_seconds,
                "buffer_bytes": p.sessions.buffer_bytes,
                "when": "use start_process instead of run_command for a command that runs longer than one call should wait, never ends by itself (a dev server, a watcher), or needs input after it starts (a REPL); then read_process_output, write_process_input, stop_process",
            },
            "profiles": p.profiles,
            "project_policy": p.project,
            "write_paths": p.write_paths,
            "network": {
                "mode": p.network.mode.as_str(),
                "allow_domains": p.network.allow.iter().map(|d| d.text()).collect::<Vec<_>>(),
                "deny_domains": p.network.deny.iter().map(|d| d.text()).collect::<Vec<_>>(),
                "allow_private": p.network.allow_private,
                "how": match p.network.mode {
                    crate::egress::NetworkMode::Off => "commands have no network (loopback only in the private view)",
                    crate::egress::NetworkMode::Allowlist => "only through the server's proxy (HTTP_PROXY, HTTPS_PROXY), to the allowed names; deny wins; IP literals and private addresses are refused",
                    crate::egress::NetworkMode::Open => "any network the view has (in the private view, its own loopback only)",
                },
            },
            "file_tools": {
                "read_file": p.files.enabled,
                "write_file": p.files.enabled && !p.files.read_only,
                "edit_file": p.files.enabled && !p.files.read_only,
                "max_file_bytes": p.files.max_file_bytes,
                "confirm_paths": p.files.confirm_paths,
                "how": "to change a file use edit_file (old_text -> new_text, all or nothing, returns the diff); to create or replace one write_file; to read one read_file (by lines). They work in the jail and the write paths, never through a symlink, never on a protected path",
            },
            "protected_paths": {
                "paths": p.protected.entries.iter().map(|e| e.path.as_str()).collect::<Vec<_>>(),
                "removed_by_the_operator": p.protected.removed,
                "how": "no command, file tool or move may write, create or replace these: they configure programs that run outside the sandbox (the operator's git, editor, agent client); in the private view they are bound read-only",
            },
            "caches": if p.sandbox.shared_cache {
                "shared_cache = true: the profile caches are shared with every project whose policy names the same cache_dir (the operator's choice); their tool configuration files stay read-only"
            } else {
                "per jail: the profile caches belong to this jail alone; their tool configuration files (config.toml, pip.conf, .npmrc, ...) are read-only"
            },
            "confinement": report_value(confinement),
            "warnings": crate::lint::interpreter_voids_rules(p)
                .map(|f| f.to_string())
                .into_iter()
                .collect::<Vec<_>>(),
        });
        OperationResult::new(
            DESCRIBE,
            ResultCode::Ok,
            format!(
                "{} commands allowlisted; everything else is denied",
                p.allow.len()
            ),
        )
        .with_detail(detail)
    }

    /// Runs a request end to end. Every path out of here is an envelope, and every call
    /// leaves an attempt and an outcome record, refusals included.
    pub async fn run(
        &self,
        req: RunRequest,
        executor: &dyn Executor,
        cancel: Cancel,
    ) -> OperationResult {
        let started = Instant::now();
        let call = self.gate.begin();
        let caller = req.caller.clone();
        match self.run_inner(&call, req, executor, cancel).await {
            Err((result, attempt)) => {
                let result = result.with_duration(started.elapsed());
                self.gate.record(attempt, &result);
                result
            }
            Ok((mut result, facts)) => {
                self.usage.call_ended();
                let moved = self.sweep_protected(&call);
                if !moved.is_empty() {
                    result.detail.insert("protected_moved".into(), json!(moved));
                }
                let result = result.with_duration(started.elapsed());
                let mut outcome = Outcome::of(&call, &result);
                outcome.caller = caller;
                outcome.exit_code = facts.exit_code;
                outcome.output = facts.output;
                outcome.cancelled = facts.cancelled;
                self.gate.finish(&outcome);
                result
            }
        }
    }

    /// Everything before execution, shared by run_command and start_process: parse, judge,
    /// build the attempt record and the plan. `Err` is a refusal (with its attempt) or an
    /// internal error.
    fn prepare(
        &self,
        call: &CallId,
        tool: &'static str,
        req: RunRequest,
        executor: &dyn Executor,
    ) -> Result<Prepared, Early> {
        let mut attempt = Attempt::new(call, tool, self.redactor.redact(&req.command.display()));
        attempt.cwd = req.cwd.clone();
        attempt.caller = req.caller.clone();

        let list = match req.command.parse() {
            Ok(list) => list,
            Err(e) => {
                return Err(Early::Refused(
                    self.redacted(syntax_refusal(tool, &e)),
                    Box::new(attempt),
                ));
            }
        };
        if req
            .stdin
            .as_ref()
            .is_some_and(|s| s.len() > MAX_STDIN_BYTES)
        {
            let result = OperationResult::new(
                tool,
                ResultCode::InvalidRequest,
                format!(
                    "stdin is too long (at most {MAX_STDIN_BYTES} bytes); write the data to a file in the jail and pass its name"
                ),
            );
            return Err(Early::Refused(result, Box::new(attempt)));
        }
        if req.timeout_seconds == Some(0) {
            let result = OperationResult::new(
                tool,
                ResultCode::InvalidRequest,
                "timeout_seconds must be at least 1",
            );
            return Err(Early::Refused(result, Box::new(attempt)));
        }
        let decision = evaluate(&self.policy, &self.jail, &list, req.cwd.as_deref());
        let argv: Vec<Vec<String>> = decision
            .stages
            .iter()
            .map(|s| self.redactor.redact_argv(&s.argv))
            .collect();
        attempt.argv = Some(argv.clone());
        attempt.rule = Some(decision.rule.clone());
        if decision.code != ResultCode::Ok {
            let mut detail = decision_detail(&decision);
            detail.insert("would_run".into(), json!(false));
            let result = OperationResult::new(tool, decision.code, decision.reason.clone())
                .with_detail(Value::Object(detail));
            return Err(Early::Refused(self.redacted(result), Box::new(attempt)));
        }
        let Some(approved) = decision.approve() else {
            eprintln!(
                "safe-mcp: internal error in call {call}: an allowed decision lacks a program or its cwd"
            );
            return Err(Early::Internal(OperationResult::internal(tool)));
        };
        let confinement = match serde_json::to_value(executor.confinement_summary()) {
            Ok(v) => v,
            Err(e) => {
                eprintln!("safe-mcp: internal error in call {call}: {e}");
                return Err(Early::Internal(OperationResult::internal(tool)));
            }
        };
        attempt.confinement = Some(confinement.clone());
        let limit = self.policy.limits.timeout_seconds;
        let timeout = req.timeout_seconds.map_or(limit, |t| t.min(limit));
        let cwd = approved.cwd.clone();
        let plan = ExecPlan {
            pipelines: approved.pipelines,
            joins: approved.joins,
            cwd: approved.cwd,
            env: self.env.clone(),
            stdin: req.stdin.map(String::into_bytes),
            timeout: Duration::from_secs(timeout),
            capture_limit: self.capture_limit(),
            observer: req.observer,
            interactive: None,
            egress: self.egress.as_ref().map(|p| p.for_call(call)),
        };
        Ok(Prepared {
            decision,
            argv,
            attempt,
            plan,
            timeout,
            cwd,
            confinement,
        })
    }

    /// `Err` is a refusal before admission, with the attempt to record; `Ok` is the result
    /// of an admitted call (it may still have failed to run).
    async fn run_inner(
        &self,
        call: &CallId,
        req: RunRequest,
        executor: &dyn Executor,
        cancel: Cancel,
    ) -> Result<(OperationResult, RunFacts), (OperationResult, Attempt)> {
        let prepared = match self.prepare_admissible(call, RUN, req, executor).await {
            Ok(p) => p,
            Err(Early::Refused(result, attempt)) => return Err((result, *attempt)),
            Err(Early::Internal(result)) => return Ok((result, RunFacts::default())),
        };
        let Prepared {
            decision,
            argv,
            attempt,
            plan,
            timeout,
            cwd,
            confinement,
        } = prepared;
        // The record is made durable while the executor forks and confines the children;
        // they wait at a gate and exec only once this resolves to true.
        let gate = &self.gate;
        let durable: Durable<'_> = Box::pin(async move { gate.admit(&attempt).is_ok() });
        let egress = plan.egress.clone();
        let result = match executor.execute(plan, cancel, durable).await {
            Ok(outcome) => {
                let (mut result, facts) =
                    self.finish(&decision, &argv, outcome, timeout, cwd, confinement);
                // What the proxy refused, and why: the tools' own errors do not say.
                let refused = match &egress {
                    Some(e) => e.0.finish().await,
                    None => Vec::new(),
                };
                if !refused.is_empty() {
                    let refused: Vec<String> =
                        refused.iter().map(|r| self.redactor.redact(r)).collect();
                    result
                        .detail
                        .insert("network_refused".into(), json!(refused));
                }
                return Ok((result, facts));
            }
            Err(ExecFailure::Spawn { program, message }) => OperationResult::new(
                RUN,
                ResultCode::OperationFailed,
                format!("`{program}` could not be started: {message}"),
            ),
            Err(ExecFailure::Sandbox(message)) => OperationResult::new(
                RUN,
                ResultCode::SandboxUnavailable,
                format!("kernel confinement could not be applied, so nothing ran: {message}"),
            ),
            Err(ExecFailure::NotDurable) => crate::audit::NotAdmitted::UNWRITTEN.result(RUN),
            Err(ExecFailure::Internal(message)) => {
                eprintln!("safe-mcp: internal error in call {call}: {message}");
                OperationResult::internal(RUN)
            }
        };
        Ok((result, RunFacts::default()))
    }

    /// [`Self::prepare`], then what may still refuse the call before it is admitted:
    /// shipping that refuses calls (`on_failure = "deny"` with a sink down), checked first
    /// so that no person is asked about a call that could not run, and approval. Shared by
    /// run_command and start_process.
    async fn prepare_admissible(
        &self,
        call: &CallId,
        tool: &'static str,
        req: RunRequest,
        executor: &dyn Executor,
    ) -> Result<Prepared, Early> {
        let approver = req.approver.clone();
        let mut prepared = self.prepare(call, tool, req, executor)?;
        if let Some(why) = self.gate.log().shipping_refusal() {
            let result = crate::audit::NotAdmitted::shipping(why).result(tool);
            return Err(Early::Refused(result, Box::new(prepared.attempt)));
        }
        // What a process session made since the last call goes before this one runs.
        self.sweep_protected(call);
        if let Some(why) = self.usage.refusal() {
            let result = OperationResult::new(tool, ResultCode::PolicyDenied, why);
            return Err(Early::Refused(result, Box::new(prepared.attempt)));
        }
        if let Err(result) = self
            .seek_approval(tool, &mut prepared, approver.as_ref())
            .await
        {
            return Err(Early::Refused(result, Box::new(prepared.attempt)));
        }
        Ok(prepared)
    }

    /// A command that needs approval runs only once a person has said yes (DESIGN §10):
    /// `Err` is the refusal; the attempt in `prepared` then says what was asked and why it
    /// was not given.
    async fn seek_approval(
        &self,
        tool: &'static str,
        prepared: &mut Prepared,
        approver: Option<&crate::approval::AskPerson>,
    ) -> Result<(), OperationResult> {
        use crate::approval::{ApprovalMode, ApprovalRequest};
        if !prepared.decision.needs_approval {
            return Ok(());
        }
        let reasons: Vec<String> = prepared
            .decision
            .stages
            .iter()
            .filter_map(|s| s.approval.clone())
            .collect();
        let settings = &self.policy.approvals;
        let refuse = |reason: String| {
            let mut detail = Map::new();
            detail.insert("needs_approval".into(), json!(true));
            detail.insert("approval_reasons".into(), json!(reasons));
            detail.insert("would_run".into(), json!(false));
            self.redacted(
                OperationResult::new(tool, ResultCode::PolicyDenied, reason)
                    .with_detail(Value::Object(detail)),
            )
        };
        let not_asked =
            |decision: &str| json!({"required": reasons, "decision": decision, "via": "none"});
        if settings.mode == ApprovalMode::Deny {
            prepared.attempt.approval = Some(not_asked("denied-by-mode"));
            return Err(refuse(format!(
                "{}; [terminal.approvals] mode = \"deny\" refuses it without asking",
                reasons.join("; ")
            )));
        }
        let Some(approver) = approver else {
            prepared.attempt.approval = Some(not_asked("no-transport"));
            return Err(refuse(format!(
                "{}; this server cannot ask a person here, so nothing ran",
                reasons.join("; ")
            )));
        };
        let request = ApprovalRequest {
            call: prepared.attempt.call.to_string(),
            tool,
            stages: prepared.argv.clone(),
            command: prepared.attempt.command.clone(),
            cwd: prepared.cwd.display().to_string(),
            confinement: confinement_line(&prepared.confinement),
            reasons: reasons.clone(),
            timeout: settings.timeout,
        };
        let asked = crate::audit::ApprovalAsked {
            call: prepared.attempt.call.clone(),
            event: "asked",
            tool,
            argv: request.stages.clone(),
            required: reasons.clone(),
            caller: prepared.attempt.caller.clone(),
        };
        if let Err(e) = self.gate.append("approval", &asked, false) {
            eprintln!("safe-mcp: warning: an approval request was not recorded: {e}");
        }
        let outcome = approver.0.ask(&request).await;
        prepared.attempt.approval = Some(outcome.record(&reasons));
        if outcome.approved() {
            Ok(())
        } else {
            Err(refuse(outcome.refusal(settings.timeout)))
        }
    }

    /// Raw bytes the executor keeps per stream: the cap, and the slack a secret straddling
    /// it needs to be recognised whole.
    pub fn capture_limit(&self) -> usize {
        self.policy.limits.max_output_bytes + REDACTION_SLACK_BYTES
    }

    /// A verdict as the client and the trail see it: the reason and every string of the
    /// detail redacted, since both echo the arguments (a `--password` value, say).
    fn redacted(&self, mut result: OperationResult) -> OperationResult {
        result.reason = self.redactor.redact(&result.reason);
        // The confinement report is the server's own text; everything else may echo input.
        let confinement = result.detail.remove("confinement");
        result.detail = redact_strings(&self.redactor, std::mem::take(&mut result.detail));
        if let Some(c) = confinement {
            result.detail.insert("confinement".into(), c);
        }
        result
    }

    /// `argv` is each stage's argv, already redacted for the attempt record.
    fn finish(
        &self,
        decision: &Decision,
        argv: &[Vec<String>],
        out: ExecOutcome,
        timeout: u64,
        cwd: PathBuf,
        confinement: Value,
    ) -> (OperationResult, RunFacts) {
        let cap = self.policy.limits.max_output_bytes;
        let (stdout, stdout_cut) =
            self.redact_and_cap(&out.stdout, out.stdout_bytes, cap, out.flooded);
        let (stderr, stderr_cut) =
            self.redact_and_cap(&out.stderr, out.stderr_bytes, cap, out.flooded);
        let stages: Vec<Value> = decision
            .stages
            .iter()
            .zip(argv)
            .zip(
                out.stages
                    .iter()
                    .chain(std::iter::repeat(&StageOutcome::default())),
            )
            .map(|((v, argv), o)| {
                json!({
                    "argv": argv,
                    "program": v.program,
                    "ran": o.ran,
                    "exit_code": o.exit_code,
                    "signal": o.signal,
                })
            })
            .collect();
        // Fields that would say nothing are left out: a model reads the text block, and
        // every character of it costs. describe_policy has the confinement in full; a run
        // carries it only when it did not end OK.
        let mut detail = Map::new();
        detail.insert("exit_code".into(), json!(out.exit_code));
        detail.insert("stdout".into(), json!(stdout));
        detail.insert("stderr".into(), json!(stderr));
        for (key, bytes, cut) in [
            ("stdout", out.stdout_bytes, stdout_cut),
            ("stderr", out.stderr_bytes, stderr_cut),
        ] {
            if cut {
                detail.insert(format!("{key}_bytes"), json!(bytes));
                detail.insert(format!("{key}_truncated"), json!(true));
            }
        }
        if stages.len() > 1 || out.exit_code.is_none() {
            detail.insert("stages".into(), json!(stages));
        }
        detail.insert("cwd".into(), json!(cwd));
        detail.insert("timeout_seconds".into(), json!(timeout));
        let (code, reason) = if out.timed_out {
            (
                ResultCode::Timeout,
                format!("the command exceeded {timeout}s; its whole process tree was killed"),
            )
        } else if out.cancelled {
            (
                ResultCode::OperationFailed,
                "the client cancelled the call; the whole process tree was killed".to_owned(),
            )
        } else if out.flooded {
            (
                ResultCode::OutputTruncated,
                format!(
                    "output passed the {cap}-byte cap; reading stopped and the process tree was killed"
                ),
            )
        } else if stdout_cut || stderr_cut {
            (
                ResultCode::OutputTruncated,
                format!("the command ran; output was cut at {cap} bytes"),
            )
        } else {
            let status = match out.exit_code {
                Some(c) => format!("exit code {c}"),
                None => "no exit code (killed by a signal)".to_owned(),
            };
            let mut reason = format!("the command ran ({status})");
            let git = decision.stages.iter().any(|s| s.argv[0] == "git");
            if git
                && (stderr.contains("Please tell me who you are")
                    || stderr.contains("Author identity unknown"))
            {
                reason.push_str("; git has no author identity here: the operator sets one in the policy, [terminal.env] set = { GIT_AUTHOR_NAME = \"…\", GIT_AUTHOR_EMAIL = \"…\", GIT_COMMITTER_NAME = \"…\", GIT_COMMITTER_EMAIL = \"…\" } (git -c and git config are refused)");
            }
            (ResultCode::Ok, reason)
        };
        let facts = RunFacts {
            exit_code: out.exit_code,
            output: Some(OutputCounts {
                stdout_bytes: out.stdout_bytes,
                stderr_bytes: out.stderr_bytes,
                stdout_truncated: stdout_cut,
                stderr_truncated: stderr_cut,
            }),
            cancelled: out.cancelled,
        };
        if code != ResultCode::Ok {
            detail.insert("confinement".into(), confinement);
        }
        (
            OperationResult::new(RUN, code, reason).with_detail(Value::Object(detail)),
            facts,
        )
    }

    /// Redacts first, then caps at a char boundary with a marker. When the stream was cut
    /// (more bytes existed than were kept), a secret may run past the end of what was read,
    /// so the last [`REDACTION_SLACK_BYTES`] are never shown: the cap falls before them.
    fn redact_and_cap(&self, raw: &[u8], total: u64, cap: usize, flooded: bool) -> (String, bool) {
        let text = String::from_utf8_lossy(raw);
        // A stream that produced nothing was not cut, even when the other one flooded.
        let cut = (flooded && total > 0) || total > raw.len() as u64;
        let safe_end = if cut {
            text.len().saturating_sub(REDACTION_SLACK_BYTES)
        } else {
            text.len()
        };
        let (redacted, safe) = self.redactor.redact_until(&text, safe_end);
        let limit = if cut { cap.min(safe) } else { cap };
        if !cut && redacted.len() <= limit {
            return (redacted, false);
        }
        let mut end = limit.min(redacted.len());
        while !redacted.is_char_boundary(end) {
            end -= 1;
        }
        let more = if cut { "at least " } else { "" };
        (
            format!(
                "{}\n[output truncated at {cap} bytes; {more}{total} bytes were produced]",
                &redacted[..end]
            ),
            true,
        )
    }
}

/// The confinement summary of a run in words, for a person approving it.
fn confinement_line(summary: &Value) -> String {
    let field = |k: &str| summary[k].as_str().unwrap_or("?").to_owned();
    let network = match summary["egress"].as_str() {
        Some(tier) => format!("network only through the allowlist proxy ({tier} tier)"),
        None if summary["network"] == true => "network open".to_owned(),
        None => "no network".to_owned(),
    };
    format!(
        "sandbox {}, {} view, Landlock {}, capabilities {}, {network}",
        field("mode"),
        field("view"),
        field("landlock"),
        field("capabilities")
    )
}

/// What confinement a command would get, in one line's worth of fields.
fn report_gist(r: &ConfinementReport) -> Value {
    let mut gist = json!({
        "mode": r.mode,
        "view": r.view.view,
        "landlock": r.landlock.enforced,
        "seccomp": r.seccomp.enabled,
        "capabilities": r.capabilities,
        "tcp": r.landlock.tcp,
    });
    if let Some(egress) = &r.egress {
        gist["egress"] = json!({ "tier": egress.tier, "detail": egress.detail });
    }
    gist
}

/// A confinement report as JSON (a plain struct: serializing it cannot fail).
fn report_value(report: &ConfinementReport) -> Value {
    serde_json::to_value(report).unwrap_or_default()
}

/// Every string inside `map`, redacted.
fn redact_strings(redactor: &Redactor, map: Map<String, Value>) -> Map<String, Value> {
    fn walk(redactor: &Redactor, v: Value) -> Value {
        match v {
            Value::String(s) => Value::String(redactor.redact(&s)),
            Value::Array(items) => {
                Value::Array(items.into_iter().map(|i| walk(redactor, i)).collect())
            }
            Value::Object(map) => Value::Object(redact_strings(redactor, map)),
            other => other,
        }
    }
    map.into_iter()
        .map(|(k, v)| (k, walk(redactor, v)))
        .collect()
}

fn syntax_refusal(action: &str, e: &SyntaxError) -> OperationResult {
    let code = if e.is_invalid_request() {
        ResultCode::InvalidRequest
    } else {
        ResultCode::PolicyDenied
    };
    let rule = match e {
        SyntaxError::Forbidden(f) => f.name(),
        _ => "syntax",
    };
    OperationResult::new(action, code, e.to_string())
        .with_detail(json!({"rule": rule, "would_run": false}))
}

fn decision_detail(d: &Decision) -> Map<String, Value> {
    let mut map = match serde_json::to_value(d) {
        Ok(Value::Object(map)) => map,
        _ => Map::new(),
    };
    // The envelope already carries the deciding code and reason.
    map.remove("code");
    map.remove("reason");
    map
}
