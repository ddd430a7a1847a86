//! What a run becomes for the client and the trail: output redacted, then capped; the
//! code and reason; every string of a refusal's detail redacted; and the one mapping of an
//! executor's failure to a code.

use std::path::PathBuf;

use safe_mcp_contract::{ConfinementSummary, ExecFailure, ExecOutcome, StageOutcome};
use serde_json::{Map, Value, json};

use super::request::REDACTION_SLACK_BYTES;
use crate::audit::{CallId, OutputCounts};
use crate::config::TerminalPolicy;
use crate::cut::{prefix, suffix};
use crate::envelope::{OperationResult, ResultCode};
use crate::policy::Decision;
use crate::redact::Redactor;
use crate::syntax::SyntaxError;

/// What the outcome record says of a command beyond its code.
#[derive(Debug, Clone, Default)]
pub(super) struct RunFacts {
    pub(super) exit_code: Option<i32>,
    pub(super) output: Option<OutputCounts>,
    pub(super) cancelled: bool,
    /// The exec log's list, for the outcome record.
    pub(super) executed: Option<Value>,
}

pub(super) const RUN: &str = "run_command";

/// What turns an outcome into the envelope: the policy's limits and the redactor.
#[derive(Clone, Copy)]
pub(super) struct Results<'a> {
    pub(super) policy: &'a TerminalPolicy,
    pub(super) redactor: &'a Redactor,
}

impl Results<'_> {
    /// With `[terminal.audit] exec_log`: what the tree executed, redacted, for the outcome
    /// record.
    pub(super) fn executed(&self, out: &ExecOutcome) -> Option<Value> {
        if !self.policy.exec_log {
            return None;
        }
        let programs: Vec<Value> = out
            .executed
            .iter()
            .map(|p| {
                json!({
                    "pid": p.pid,
                    "path": self.redactor.redact(&p.path),
                    "argv0": self.redactor.redact(&p.argv0),
                })
            })
            .collect();
        Some(json!({"programs": programs, "dropped": out.executed_dropped}))
    }

    /// Raw bytes the executor keeps per stream: the cap, and the slack a secret straddling
    /// it needs to be recognised whole.
    pub(super) fn capture_limit(&self) -> usize {
        // The executor keeps a quarter of this from the start and the rest from the end:
        // each part then holds its share of the cap, the slack at the seam, and (the tail)
        // room to start at a whole line.
        self.policy.limits.max_output_bytes + 4 * REDACTION_SLACK_BYTES
    }

    /// A verdict as the client and the trail see it: the reason and every string of the
    /// detail redacted, since both echo the arguments (a `--password` value, say).
    pub(super) fn redacted(&self, mut result: OperationResult) -> OperationResult {
        result.reason = self.redactor.redact(&result.reason);
        // The confinement report is the server's own text; everything else may echo input.
        let confinement = result.detail.remove("confinement");
        result.detail = redact_strings(self.redactor, std::mem::take(&mut result.detail));
        if let Some(c) = confinement {
            result.detail.insert("confinement".into(), c);
        }
        result
    }

    /// `argv` is each stage's argv, already redacted for the attempt record.
    pub(super) fn finish(
        &self,
        decision: &Decision,
        argv: &[Vec<String>],
        out: ExecOutcome,
        timeout: u64,
        cwd: PathBuf,
        confinement: ConfinementSummary,
    ) -> (OperationResult, RunFacts) {
        let cap = self.policy.limits.max_output_bytes;
        let (stdout, stdout_cut) = self.redact_and_cut(
            &out.stdout,
            &out.stdout_tail,
            out.stdout_bytes,
            out.stdout_lines,
            cap,
        );
        let (stderr, stderr_cut) = self.redact_and_cut(
            &out.stderr,
            &out.stderr_tail,
            out.stderr_bytes,
            out.stderr_lines,
            cap,
        );
        let stages = stage_rows(decision, argv, &out);
        // Fields that would say nothing are left out: a model reads the text block, and
        // every character of it costs. describe_policy has the confinement in full; a run
        // carries it only when it did not end OK.
        let mut detail = Map::new();
        detail.insert("exit_code".into(), json!(out.exit_code));
        detail.insert("stdout".into(), json!(stdout));
        detail.insert("stderr".into(), json!(stderr));
        self.cut_detail(&mut detail, &out, (stdout_cut, stderr_cut));
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
            detail.insert("limit".into(), json!("max_output_total_bytes"));
            (
                ResultCode::OutputTruncated,
                format!(
                    "the command printed more than {} bytes in all ([terminal.limits] max_output_total_bytes), far more than anyone will read, so it was stopped; its start and its end are shown. Print less (head, tail, grep, a quieter flag), or write the output to a file and read_file it",
                    self.policy.limits.max_output_total_bytes
                ),
            )
        } else if stdout_cut || stderr_cut {
            let status = out
                .exit_code
                .map_or_else(|| "no exit code".to_owned(), |c| format!("exit code {c}"));
            (
                ResultCode::OutputTruncated,
                format!(
                    "the command ran ({status}); its output passed the {cap}-byte cap ([terminal.limits] max_output_bytes), so its start and its end are shown and the middle is left out"
                ),
            )
        } else {
            (ResultCode::Ok, ran(decision, &out, &stderr))
        };
        let reason = self.with_hints(
            reason,
            &mut detail,
            (decision, &out, &stderr),
            &confinement,
            &cwd,
        );
        let facts = RunFacts {
            executed: self.executed(&out),
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
            detail.insert("confinement".into(), json!(confinement));
        }
        (
            OperationResult::new(RUN, code, reason).with_detail(Value::Object(detail)),
            facts,
        )
    }

    /// For each stream the cap cut: its size, that it was cut, and what the cut left out
    /// that looks like an error, line numbers first (a build's first error is often in the
    /// middle of its log).
    fn cut_detail(&self, detail: &mut Map<String, Value>, out: &ExecOutcome, cut: (bool, bool)) {
        for (key, bytes, cut, notable) in [
            ("stdout", out.stdout_bytes, cut.0, &out.stdout_notable),
            ("stderr", out.stderr_bytes, cut.1, &out.stderr_notable),
        ] {
            if !cut {
                continue;
            }
            detail.insert(format!("{key}_bytes"), json!(bytes));
            detail.insert(format!("{key}_truncated"), json!(true));
            if !notable.is_empty() {
                let lines: Vec<String> = notable
                    .iter()
                    .map(|(n, line)| {
                        let text = self.redactor.redact(&String::from_utf8_lossy(line));
                        format!("{n}: {text}")
                    })
                    .collect();
                detail.insert(format!("{key}_cut_errors"), json!(lines));
            }
        }
    }

    /// The reason, with what explains a failure: a limit that stopped the command (named
    /// with its key; the timeout's reason says it ran out of time already, this adds the key
    /// and what to do instead), a socket or a network the confinement refused, a program
    /// that may not run.
    fn with_hints(
        &self,
        reason: String,
        detail: &mut Map<String, Value>,
        (decision, out, stderr): (&Decision, &ExecOutcome, &str),
        confinement: &ConfinementSummary,
        cwd: &std::path::Path,
    ) -> String {
        let reason = match super::limits::limit_hit(out, stderr, &self.policy.limits) {
            Some((key, why)) => {
                detail.insert("limit".into(), json!(key));
                format!("{reason}; {why}")
            }
            None => {
                let off = self.policy.network.mode == crate::egress::NetworkMode::Off;
                match super::limits::socket_refused(out, stderr, confinement.tcp)
                    .or_else(|| super::limits::no_network(out, stderr, off))
                {
                    Some(why) => format!("{reason}; {why}"),
                    None => reason,
                }
            }
        };
        let programs: Vec<&std::path::Path> = decision
            .stages
            .iter()
            .filter_map(|s| s.program.as_deref())
            .collect();
        match super::executables::not_executable(self.policy, out, stderr, &programs, cwd) {
            Some((names, why)) => {
                detail.insert("not_executable".into(), json!(names));
                format!("{reason}; {why}")
            }
            None => reason,
        }
    }

    /// Redacts first, then keeps what fits in `cap`: all of it, or its first quarter and
    /// its last three quarters with one marker line between saying what was left out.
    /// Redaction runs before any cut. A stream the executor kept whole is redacted whole and
    /// then cut. Where the executor dropped its middle, a secret may straddle either seam:
    /// the head is shown only up to [`REDACTION_SLACK_BYTES`] before its end, and the tail
    /// only from the first line that starts that far into it (none at all when no line
    /// does), so no secret reaches the text in part.
    pub(super) fn redact_and_cut(
        &self,
        head: &[u8],
        tail: &[u8],
        total: u64,
        lines: u64,
        cap: usize,
    ) -> (String, bool) {
        let (head_cap, tail_cap) = (cap / 4, cap - cap / 4);
        let (first, last) = if tail.is_empty() {
            let text = self.redactor.redact(&String::from_utf8_lossy(head));
            if text.len() <= cap {
                return (text, false);
            }
            (prefix(&text, head_cap), suffix(&text, tail_cap))
        } else {
            let text = String::from_utf8_lossy(head);
            let safe_end = text.len().saturating_sub(REDACTION_SLACK_BYTES);
            let (redacted, safe) = self.redactor.redact_until(&text, safe_end);
            let first = prefix(&redacted[..safe], head_cap);
            let text = String::from_utf8_lossy(tail);
            let start = text
                .as_bytes()
                .iter()
                .skip(REDACTION_SLACK_BYTES)
                .position(|b| *b == b'\n')
                .map(|i| i + REDACTION_SLACK_BYTES + 1);
            let last = match start {
                Some(start) => suffix(&self.redactor.redact(&text[start..]), tail_cap),
                None => String::new(),
            };
            (first, last)
        };
        (crate::cut::joined(&first, &last, lines, total), true)
    }
}

/// A call's admission as the executor's `durable` gate sees it, keeping why it was refused:
/// the gate only says yes or no, and a refusal must read as what it was (a shipping sink that
/// stopped acknowledging under `on_failure = "deny"`), not as an unwritten record.
#[derive(Default)]
pub(super) struct Admission(std::sync::OnceLock<crate::audit::NotAdmitted>);

impl Admission {
    /// Admits `attempt` through `gate` (the attempt record, durable), remembering a refusal.
    pub(super) fn admit(&self, gate: &crate::audit::Gate, attempt: &crate::audit::Attempt) -> bool {
        match gate.admit(attempt) {
            Ok(()) => true,
            Err(refused) => {
                let _ = self.0.set(refused);
                false
            }
        }
    }

    /// The result of a call the executor failed: [`exec_failure`], but a call the gate
    /// refused says why it was refused.
    pub(super) fn failure(
        &self,
        tool: &'static str,
        call: &CallId,
        e: &ExecFailure,
    ) -> OperationResult {
        match (e, self.0.get()) {
            (ExecFailure::NotDurable, Some(refused)) => refused.result(tool),
            _ => exec_failure(tool, call, e),
        }
    }
}

/// The result of `tool`'s call when the executor could not run it.
pub(super) fn exec_failure(tool: &'static str, call: &CallId, e: &ExecFailure) -> OperationResult {
    match e {
        ExecFailure::Spawn { program, message } => OperationResult::new(
            tool,
            ResultCode::OperationFailed,
            format!("`{program}` could not be started: {message}"),
        ),
        ExecFailure::Sandbox(message) => OperationResult::new(
            tool,
            ResultCode::SandboxUnavailable,
            format!("kernel confinement could not be applied, so nothing ran: {message}"),
        ),
        ExecFailure::NotDurable => crate::audit::NotAdmitted::UNWRITTEN.result(tool),
        ExecFailure::Internal(message) => {
            tracing::error!("internal error in call {call}: {message}");
            OperationResult::internal(tool)
        }
    }
}

/// Every string inside `map`, redacted.
pub(super) fn redact_strings(redactor: &Redactor, map: Map<String, Value>) -> Map<String, Value> {
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

pub(super) fn syntax_refusal(action: &str, e: &SyntaxError) -> OperationResult {
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

pub(super) fn decision_detail(d: &Decision) -> Map<String, Value> {
    let mut map = match serde_json::to_value(d) {
        Ok(Value::Object(map)) => map,
        _ => Map::new(),
    };
    // The envelope already carries the deciding code and reason.
    map.remove("code");
    map.remove("reason");
    map
}

/// Whether git's stderr says it could not write a configuration file the view holds
/// read-only (a bind mount: `EBUSY` on the rename over it, `EROFS` on a write).
fn held_config(stderr: &str) -> bool {
    stderr.lines().any(|l| {
        l.contains("config")
            && (l.contains("Device or resource busy") || l.contains("Read-only file system"))
    })
}

/// Each stage as the result shows it: its argv, program, whether it ran and how it ended.
fn stage_rows(decision: &Decision, argv: &[Vec<String>], out: &ExecOutcome) -> Vec<Value> {
    decision
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
        .collect()
}

/// The reason of a command that ran to its end: its status, and what git's own refusals
/// need from the operator.
fn ran(decision: &Decision, out: &ExecOutcome, stderr: &str) -> String {
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
    if git && held_config(stderr) {
        reason.push_str("; the repository's `.git/config` is held read-only (it configures the operator's own git, outside the sandbox), so what writes it (`git remote add`, `git push -u`, `git branch -u`, `git config`) cannot: the operator runs that command outside the sandbox, or names \".git/config\" in [terminal] unprotected_paths to let commands write it");
    }
    reason
}
