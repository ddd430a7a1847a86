//! A gateway's downstream MCP server as one long run of its own service (`[[gateway.servers]]`).
//!
//! The server's policy is the terminal's narrowed to its entry ([`crate::config`]), so its
//! start takes the very path a command takes: judged against that allowlist (the program and
//! the entry's `exec`, nothing else), past the held-path sweep and the jail's size, its
//! attempt record durable before anything execs, then confined by the executor made for that
//! policy (private view, Landlock with its write paths only, seccomp, the exec allowlist for
//! its whole tree, egress only through its own proxy). Its stdin is a process session's pipe
//! and its stdout and stderr the transport's own ([`DownstreamIo`]), over which it speaks
//! MCP; its outcome record says how it ended. It must never decide a tool call: that is
//! [`super::gateway`].

use std::time::{Duration, Instant};

use safe_mcp_contract::{Cancel, Durable, Executor, Interactive};

use super::call::Begun;
use super::request::{CommandInput, RunRequest};
use super::result::Admission;
use super::state::TerminalService;
use crate::audit::Caller;
use crate::envelope::{OperationResult, ResultCode};

/// The tool name a downstream server's start and end are recorded under.
pub const SERVE: &str = "gateway_serve";

/// How long a downstream server may run: as long as the gateway does (its wall clock is not
/// a command's; the gateway stops it when it ends).
const LIFETIME: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// The transport's ends of a downstream server: it writes its stdout and stderr into the
/// pipes of `stdio` (the transport reads them itself, with no thread between), and its
/// stdin's write end (and pid) reaches `interactive` once it started.
pub struct DownstreamIo {
    /// Its stdout and stderr (descriptors 1 and 2; 0 is unused: its stdin is its own pipe).
    pub stdio: safe_mcp_contract::GivenStdio,
    /// Handed its stdin and pid; never idle.
    pub interactive: Interactive,
    /// Why the transport stopped the run (a flood, a hang), once it did: for the outcome.
    pub stopped_because: std::sync::Arc<dyn Fn() -> Option<Stopped> + Send + Sync>,
}

/// Why the transport stopped a run, as its outcome says it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stopped {
    /// For a cause of its own (a flood, a hang, the gateway stopping): said however the run
    /// then ended, since a server whose output is closed under it may exit with a code of its
    /// own (a broken pipe) before the kill lands.
    For(String),
    /// After its MCP connection ended: said only when a kill ended the run, since a server
    /// that exits on its own closes its connection first.
    After(String),
}

/// How a downstream server's run ended.
#[derive(Debug, Clone)]
pub struct DownstreamEnd {
    /// Its exit code, when it exited.
    pub exit_code: Option<i32>,
    /// The envelope its start or end was recorded with: OK when it ran, or why it could not
    /// start (refused by the policy, the sandbox, the trail).
    pub result: OperationResult,
}

/// A narrowed service as the runner of its downstream server.
pub struct Runner<'s>(&'s TerminalService);

impl<'s> Runner<'s> {
    /// The runner of `narrowed`'s server.
    pub fn of(narrowed: &'s TerminalService) -> Runner<'s> {
        Runner(narrowed)
    }

    /// Runs `command` as a downstream MCP server of this (narrowed) service until it ends or
    /// `stop` fires: judged, admitted and confined as a command is, with its stdio handed to
    /// `io`. Its start's attempt and its end's outcome are recorded.
    pub async fn serve(
        &self,
        command: Vec<String>,
        executor: &dyn Executor,
        io: DownstreamIo,
        stop: Cancel,
    ) -> DownstreamEnd {
        let service = self.0;
        let begun = Begun::new(service, SERVE);
        let (call, started) = (begun.call.clone(), begun.started());
        let caller = Caller::default();
        // The program is judged (the allowlist, the exec allowlist, its hardening); its
        // operands are the operator's, checked at load to lie outside the jail and the write
        // paths, and follow the judged argv.
        let (program, operands) = program_of(&command);
        let req = RunRequest {
            command: CommandInput::Argv(vec![program]),
            cwd: None,
            stdin: None,
            timeout_seconds: None,
            observer: None,
            approver: None,
            caller: caller.clone(),
            session: String::new(),
            approval_ticket: None,
            parent: None,
        };
        let refused = |result: OperationResult| DownstreamEnd {
            exit_code: None,
            result,
        };
        let judged = match begun.judge(req, executor) {
            Ok(j) => j,
            Err(r) => return refused(r.record()),
        };
        let approved = match judged.approve().await {
            Ok(a) => a,
            Err(r) => return refused(r.record()),
        };
        let prepared = approved.prepared;
        let (mut attempt, mut plan) = (prepared.attempt, prepared.plan);
        if let Some(stage) = plan.pipelines.first_mut().and_then(|p| p.first_mut()) {
            stage.argv.extend(operands.iter().cloned());
            attempt.argv = Some(vec![service.redactor.redact_argv(&stage.argv)]);
        }
        plan.timeout = LIFETIME;
        plan.stdin = None;
        plan.output_total_limit = 0;
        plan.observer = None;
        plan.stdio = Some(io.stdio);
        plan.interactive = Some(io.interactive);
        let why = io.stopped_because;
        let (gate, admission) = (&service.gate, Admission::default());
        let (admitting, attempt_ref) = (&admission, &attempt);
        let durable: Durable<'_> = Box::pin(async move { admitting.admit(gate, attempt_ref) });
        let egress = plan.egress.clone();
        let outcome = executor.execute(plan, stop, durable).await;
        if let Some(e) = &egress {
            e.0.finish().await;
        }
        service.sweep_protected(&call);
        let (result, exit_code) = match outcome {
            Ok(o) => {
                let stopped = match why() {
                    Some(Stopped::For(cause)) => Some(Stopped::For(cause)),
                    after if o.cancelled => Some(
                        after.unwrap_or_else(|| Stopped::After("stopped by the gateway".into())),
                    ),
                    _ => None,
                };
                (ended(o.exit_code, stopped, started), o.exit_code)
            }
            Err(failure) => (
                admission
                    .failure(SERVE, &call, &failure)
                    .with_duration(started.elapsed()),
                None,
            ),
        };
        service.gate.outcome(&call, &caller, &result, |o| {
            o.reason = Some(result.reason.clone());
            o.exit_code = exit_code;
        });
        DownstreamEnd { exit_code, result }
    }
}

/// The envelope of a downstream server that ran and ended: a cause the gateway stopped it
/// for, and the code it exited with if it did; else an exit of its own, whatever followed;
/// a kill (the code of a signal, 128 and above) is why the gateway stopped it, when it did.
fn ended(exit_code: Option<i32>, stopped: Option<Stopped>, started: Instant) -> OperationResult {
    let reason = match (exit_code, stopped) {
        (Some(code), Some(Stopped::For(why))) if code < 128 => {
            format!("{why}; it exited with code {code}")
        }
        (Some(code), _) if code < 128 => format!("exited with code {code}"),
        (_, Some(Stopped::For(why) | Stopped::After(why))) => why,
        (Some(code), None) => format!("ended by signal {}", code - 128),
        (None, None) => "ended by a signal".to_owned(),
    };
    OperationResult::new(SERVE, ResultCode::Ok, reason).with_duration(started.elapsed())
}

/// The program of a server's argv as its narrowed allowlist names it (an absolute path's
/// file name: the loader put its directory first on the server's PATH), and its operands.
pub fn program_of(command: &[String]) -> (String, Vec<String>) {
    match command.split_first() {
        Some((p, rest)) => {
            let name = std::path::Path::new(p)
                .file_name()
                .map_or_else(|| p.clone(), |n| n.to_string_lossy().into_owned());
            (name, rest.to_vec())
        }
        None => (String::new(), Vec::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::{Stopped, ended};
    use std::time::Instant;

    fn said(code: Option<i32>, stopped: Option<Stopped>) -> String {
        ended(code, stopped, Instant::now()).reason
    }

    #[test]
    fn a_cause_is_said_however_the_run_ends() {
        let flood = || Some(Stopped::For("stopped for flooding its output".into()));
        assert_eq!(
            said(Some(1), flood()),
            "stopped for flooding its output; it exited with code 1"
        );
        assert_eq!(said(Some(137), flood()), "stopped for flooding its output");
    }

    #[test]
    fn an_exit_of_its_own_is_not_put_down_to_its_connection() {
        let after = || Some(Stopped::After("its MCP connection ended".into()));
        assert_eq!(said(Some(3), after()), "exited with code 3");
        assert_eq!(said(Some(137), after()), "its MCP connection ended");
        assert_eq!(said(Some(137), None), "ended by signal 9");
        assert_eq!(said(None, None), "ended by a signal");
    }
}
