//! One call of a downstream server's tool through the gateway, in the order a command's call
//! takes (DESIGN §1, §14):
//!
//! judged (the server's tool policy: deny, allow, argument rules against its jail and
//! network; [`safe_mcp_rules::gateway`]) → approved (a `confirm` tool climbs the approval
//! ladder commands climb: the form, the page, MRTR, tickets) → admitted (the attempt record
//! durable before the call is forwarded; fail closed) → forwarded (by the transport's
//! [`Downstream`], which bounds the wait) → finished (every string of the result redacted,
//! the whole held to `max_result_bytes`, the outcome record written with the server, the
//! tool, its pid, the result's size and duration).
//!
//! Runs on the terminal's own service (its trail, its approvals, its redactor); the
//! server's narrowed service lends its jail, network and credentials' redaction.

use std::future::Future;
use std::pin::Pin;
use std::time::Instant;

use serde_json::{Value, json};

use super::approval::Question;
use super::state::TerminalService;
use crate::approval::AskPerson;
use crate::audit::{Attempt, CallId, Caller};
use crate::config::GatewayServer;
use crate::envelope::{OperationResult, ResultCode};
use safe_mcp_rules::gateway::result::{Shaped, shape};
use safe_mcp_rules::gateway::{Bounds, ToolVerdict, judge};

/// The tool name gateway calls are recorded under.
pub const GATEWAY: &str = "gateway";

/// Why a forwarded call has no result.
#[derive(Debug, Clone)]
pub struct DownstreamError {
    /// TIMEOUT for no answer in time; OPERATION_FAILED for a server that is down, ended
    /// mid-call or answered with an error.
    pub code: ResultCode,
    /// Why, in a sentence.
    pub reason: String,
}

/// A downstream server as the pipeline reaches it: the transport's MCP client.
pub trait Downstream: Send + Sync {
    /// Calls `tool` with `args` and returns the `CallToolResult` as JSON; bounded by the
    /// server's `call_timeout_seconds`, and given up (the server told) once `cancel`
    /// resolves: the client cancelled.
    fn call<'a>(
        &'a self,
        tool: &'a str,
        args: Value,
        cancel: safe_mcp_contract::Cancel,
    ) -> Pin<Box<dyn Future<Output = Result<Value, DownstreamError>> + Send + 'a>>;

    /// The server's pid (in the gateway's view), while it runs.
    fn pid(&self) -> Option<u32>;
}

/// One call as the transport hands it in.
pub struct ToolCall<'a> {
    /// The server's entry.
    pub server: &'a GatewayServer,
    /// The server's narrowed service: its jail, network and redactor.
    pub narrowed: &'a TerminalService,
    /// The tool's name as the server knows it.
    pub tool: &'a str,
    /// The arguments (an object).
    pub args: Value,
    /// Who asked.
    pub caller: Caller,
    /// The MCP session that asked (a ticket is bound to it).
    pub session: String,
    /// Asks a person through the client, when it can.
    pub approver: Option<AskPerson>,
    /// A ticket a person approved for this exact call.
    pub ticket: Option<String>,
}

/// A resource read or a prompt passed through ([`Forwarder::relay`]).
pub struct Relay<'a> {
    /// The server's entry.
    pub server: &'a GatewayServer,
    /// Its narrowed service (its redactor).
    pub narrowed: &'a TerminalService,
    /// `resources/read` or `prompts/get`.
    pub what: &'static str,
    /// The resource's URI or the prompt's name.
    pub subject: &'a str,
    /// Who asked.
    pub caller: &'a Caller,
    /// Its arguments (a prompt's), recorded redacted.
    pub args: Option<Value>,
}

/// The answer to a call: the server's result made fit, or the gateway's refusal.
#[derive(Debug)]
pub enum Answer {
    /// The server's result, redacted and capped.
    Result(Value),
    /// Refused or failed before a result: the envelope.
    Refused(OperationResult),
}

/// The terminal's service as the gateway's forwarder: its trail, approvals and redactor.
pub struct Forwarder<'s>(&'s TerminalService);

impl<'s> Forwarder<'s> {
    /// The forwarder of the terminal's `service`.
    pub fn of(service: &'s TerminalService) -> Forwarder<'s> {
        Forwarder(service)
    }

    /// Judges, approves, records and forwards `call` to `downstream`.
    pub async fn call(
        &self,
        call: ToolCall<'_>,
        downstream: &dyn Downstream,
        cancel: safe_mcp_contract::Cancel,
    ) -> Answer {
        let started = Instant::now();
        let server = call.server.name.as_str();
        let mut attempt = self.attempt(GATEWAY, &call);
        let id = attempt.call.clone();
        let shown = attempt.command.clone();
        let bounds = Bounds {
            jail: &call.narrowed.jail,
            network: &call.narrowed.policy.network,
        };
        let verdict = judge(&call.server.tools, server, call.tool, &call.args, &bounds);
        let refuse = |attempt: Attempt, result: OperationResult| {
            let result = self.0.redacted(result).with_duration(started.elapsed());
            self.0.gate.record(attempt, &result);
            Answer::Refused(result)
        };
        match verdict {
            ToolVerdict::Refuse { code, rule, reason } => {
                attempt.rule = Some(rule.clone());
                let result = OperationResult::new(GATEWAY, code, reason)
                    .with_detail(json!({"server": server, "tool": call.tool, "rule": rule}));
                return refuse(attempt, result);
            }
            ToolVerdict::Allow { rule } => attempt.rule = Some(rule),
            ToolVerdict::Confirm { rule } => {
                attempt.rule = Some(rule.clone());
                let asked = self.confirm(&call, &id, &shown, &rule).await;
                match asked {
                    Ok(record) => attempt.approval = Some(record),
                    Err((result, record)) => {
                        attempt.approval = Some(record);
                        return refuse(attempt, result);
                    }
                }
            }
        }
        if let Err(refused) = self.0.gate.admit(&attempt) {
            return Answer::Refused(refused.result(GATEWAY).with_duration(started.elapsed()));
        }
        // The pid of the run the call is forwarded to (a restart after it would be another).
        let pid = downstream.pid();
        let forwarded = downstream.call(call.tool, call.args.clone(), cancel).await;
        self.finish(&call, &id, forwarded, pid, started)
    }

    /// `explain_command` for a gateway tool: the verdict `call` would get, without asking
    /// anyone or forwarding anything; recorded like every explain. `unlisted` is why the
    /// server lists no such tool now (the transport's word, as a call would be refused
    /// with it), unless the tool policy refuses the call anyway, which says more.
    pub fn explain(
        &self,
        call: &ToolCall<'_>,
        unlisted: Option<(&str, String)>,
    ) -> OperationResult {
        let started = Instant::now();
        let server = call.server.name.as_str();
        let bounds = Bounds {
            jail: &call.narrowed.jail,
            network: &call.narrowed.policy.network,
        };
        let verdict = judge(&call.server.tools, server, call.tool, &call.args, &bounds);
        let (code, rule, reason, needs_approval) = match verdict {
            ToolVerdict::Allow { rule } => (
                ResultCode::Ok,
                rule,
                format!("{server}.{} would be forwarded", call.tool),
                false,
            ),
            ToolVerdict::Confirm { rule } => (
                ResultCode::Ok,
                rule,
                format!(
                    "{server}.{} would be forwarded once a person approves it",
                    call.tool
                ),
                true,
            ),
            ToolVerdict::Refuse { code, rule, reason } => (code, rule, reason, false),
        };
        let (code, rule, reason, needs_approval) = match unlisted {
            Some((rule, why)) if code == ResultCode::Ok => {
                (ResultCode::PolicyDenied, rule.to_owned(), why, false)
            }
            _ => (code, rule, reason, needs_approval),
        };
        let detail = json!({
            "server": server, "tool": call.tool, "rule": rule,
            "would_run": code == ResultCode::Ok, "needs_approval": needs_approval,
        });
        let result = self
            .0
            .redacted(
                OperationResult::new(super::describe::EXPLAIN, code, reason).with_detail(detail),
            )
            .with_duration(started.elapsed());
        let attempt = self.attempt(super::describe::EXPLAIN, call);
        self.0.gate.record(attempt, &result);
        result
    }

    /// A server's resource read or prompt (`what`: `resources/read`, `prompts/get`) of
    /// `subject` (its URI or name), passed through: recorded before it is forwarded (fail
    /// closed), its answer redacted and held to `max_result_bytes`, the outcome recorded.
    pub async fn relay(
        &self,
        relay: Relay<'_>,
        answer: Pin<Box<dyn Future<Output = Result<Value, DownstreamError>> + Send + '_>>,
    ) -> Result<Value, OperationResult> {
        let started = Instant::now();
        let id = self.0.gate.begin();
        let server = relay.server.name.as_str();
        let subject = scrub_text(relay.subject, relay.narrowed, self.0);
        let mut attempt = Attempt::new(&id, GATEWAY, format!("{server} {} {subject}", relay.what));
        attempt.caller = relay.caller.clone();
        attempt.gateway = Some(json!({"server": server, relay.what: subject}));
        attempt.rule = Some(format!("[[gateway.servers]] {server}: resources = true"));
        if let Some(mut args) = relay.args.clone() {
            scrub(&mut args, relay.narrowed, self.0);
            attempt.args = Some(args);
        }
        if let Err(refused) = self.0.gate.admit(&attempt) {
            return Err(refused.result(GATEWAY).with_duration(started.elapsed()));
        }
        let done = |result: &OperationResult, bytes: usize| {
            self.0.gate.outcome(&id, relay.caller, result, |o| {
                o.gateway =
                    Some(json!({"server": server, relay.what: subject, "result_bytes": bytes}));
            });
        };
        match answer.await {
            Ok(mut value) => {
                let bytes = value.to_string().len();
                scrub(&mut value, relay.narrowed, self.0);
                if bytes > relay.server.max_result_bytes {
                    let result = OperationResult::new(
                        GATEWAY,
                        ResultCode::OutputTruncated,
                        format!(
                            "{server}'s answer to {} is {bytes} bytes, over its max_result_bytes ({}); nothing of it is passed on",
                            relay.what, relay.server.max_result_bytes
                        ),
                    )
                    .with_duration(started.elapsed());
                    done(&result, bytes);
                    return Err(result);
                }
                let result = OperationResult::new(GATEWAY, ResultCode::Ok, relay.what)
                    .with_duration(started.elapsed());
                done(&result, bytes);
                Ok(value)
            }
            Err(e) => {
                let reason = scrub_text(&e.reason, relay.narrowed, self.0);
                let result =
                    OperationResult::new(GATEWAY, e.code, reason).with_duration(started.elapsed());
                done(&result, 0);
                Err(result)
            }
        }
    }

    /// Records what a server asked of the client (`what`: `sampling/createMessage`,
    /// `elicitation/create`) in the call of `caller`, and whether its entry let it through:
    /// `Err` is the refusal's reason.
    pub fn asked(
        &self,
        server: &GatewayServer,
        what: &str,
        verdict: Result<(), String>,
        caller: &Caller,
    ) {
        let id = self.0.gate.begin();
        let mut attempt = Attempt::new(&id, GATEWAY, format!("{} asks {what}", server.name));
        attempt.caller = caller.clone();
        attempt.gateway = Some(json!({"server": server.name, "asks": what}));
        let (code, reason) = match verdict {
            Ok(()) => (ResultCode::Ok, format!("{what} passed to the client")),
            Err(why) => (ResultCode::PolicyDenied, why),
        };
        attempt.rule = Some(match what {
            "sampling/createMessage" => "allow_sampling".to_owned(),
            _ => "allow_elicitation".to_owned(),
        });
        self.0
            .gate
            .record(attempt, &OperationResult::new(GATEWAY, code, reason));
    }

    /// Refuses `call` of a tool its server does not list to the client now, `unlisted`
    /// saying why (the transport's rule and reason: not allowed or not the server's, or the
    /// server down): as the tool policy refuses it when it does (its rule says more), else
    /// as `unlisted`. Recorded as the server's call ([`Forwarder::refused_before`]).
    pub fn refuse_unlisted(
        &self,
        call: &ToolCall<'_>,
        (rule, why): (&str, String),
    ) -> OperationResult {
        let bounds = Bounds {
            jail: &call.narrowed.jail,
            network: &call.narrowed.policy.network,
        };
        let server = call.server.name.as_str();
        match judge(&call.server.tools, server, call.tool, &call.args, &bounds) {
            ToolVerdict::Refuse { code, rule, reason } => self.refused_before(
                call,
                Some(&rule),
                OperationResult::new(GATEWAY, code, reason),
            ),
            _ => self.refused_before(
                call,
                Some(rule),
                OperationResult::new(GATEWAY, ResultCode::PolicyDenied, why),
            ),
        }
    }

    /// Records a call of one of `server`'s tools that the transport refused before the
    /// pipeline could judge it (`result`: the server lists no such tool now, or it is down,
    /// or the transport's limits said no), under `rule` when one applies. The record names
    /// the server and the tool as asked, so `audit report` and `tail` count it with the
    /// server's calls. Returns the result as recorded (redacted).
    pub fn refused_before(
        &self,
        call: &ToolCall<'_>,
        rule: Option<&str>,
        result: OperationResult,
    ) -> OperationResult {
        let server = call.server.name.as_str();
        let mut attempt = self.attempt(GATEWAY, call);
        attempt.rule = rule.map(str::to_owned);
        let result = self.0.redacted(
            result.with_detail(json!({"server": server, "tool": call.tool, "rule": rule})),
        );
        self.0.gate.record(attempt, &result);
        result
    }

    /// The attempt record of `call` under `tool` (a call, or its explain): the server, the
    /// tool, the arguments redacted, who asked.
    fn attempt(&self, tool: &'static str, call: &ToolCall<'_>) -> Attempt {
        let server = call.server.name.as_str();
        let mut args = call.args.clone();
        scrub(&mut args, call.narrowed, self.0);
        let mut attempt = Attempt::new(
            &self.0.gate.begin(),
            tool,
            format!("{server}.{} {args}", call.tool),
        );
        attempt.args = Some(args);
        attempt.caller = call.caller.clone();
        attempt.gateway = Some(json!({"server": server, "tool": call.tool}));
        attempt
    }

    /// A `confirm` tool's call put to a person: `Ok` is the attempt's approval record.
    async fn confirm(
        &self,
        call: &ToolCall<'_>,
        id: &CallId,
        shown: &str,
        rule: &str,
    ) -> Result<Value, (OperationResult, Value)> {
        let exact = vec![vec![
            call.server.name.clone(),
            call.tool.to_owned(),
            call.args.to_string(),
        ]];
        let cwd = call.narrowed.jail.path().display().to_string();
        let reasons = vec![format!(
            "{rule} of [[gateway.servers]] {}: a person approves each call",
            call.server.name
        )];
        let question = Question {
            tool: GATEWAY,
            call: id.clone(),
            shown: vec![vec![
                format!("{}.{}", call.server.name, call.tool),
                shown.to_owned(),
            ]],
            command: shown.to_owned(),
            digest: crate::tickets::digest(GATEWAY, &exact, &cwd),
            cwd,
            confinement: format!(
                "forwarded to the {} server, which runs confined by its own [[gateway.servers]] entry",
                call.server.name
            ),
            reasons,
            caller: &call.caller,
            session: &call.session,
            ticket: call.ticket.as_deref(),
            approver: call.approver.as_ref(),
            nested: false,
            nothing: "nothing was forwarded",
            subject: "this tool call",
            scoped: None,
        };
        self.0
            .approvals()
            .ask_person(&question)
            .await
            .map_err(|not| not.into_result(GATEWAY, &question.reasons))
    }

    /// The forwarded call's end: the result made fit and the outcome record written.
    fn finish(
        &self,
        call: &ToolCall<'_>,
        id: &CallId,
        forwarded: Result<Value, DownstreamError>,
        pid: Option<u32>,
        started: Instant,
    ) -> Answer {
        let server = call.server.name.as_str();
        let facts = |bytes: usize, cut: usize, is_error: bool| json!({"server": server, "tool": call.tool, "pid": pid, "result_bytes": bytes, "cut_bytes": cut, "is_error": is_error});
        match forwarded {
            Ok(value) => {
                let Shaped {
                    mut value,
                    bytes,
                    cut,
                    is_error,
                } = shape(value, &call.narrowed.redactor, call.server.max_result_bytes);
                safe_mcp_rules::gateway::result::redact_value(&mut value, &self.0.redactor);
                let code = match (is_error, cut) {
                    (true, _) => ResultCode::OperationFailed,
                    (false, 0) => ResultCode::Ok,
                    (false, _) => ResultCode::OutputTruncated,
                };
                let result = OperationResult::new(GATEWAY, code, format!("{server}.{}", call.tool))
                    .with_duration(started.elapsed());
                self.0.gate.outcome(id, &call.caller, &result, |o| {
                    o.gateway = Some(facts(bytes, cut, is_error));
                });
                Answer::Result(value)
            }
            Err(e) => {
                // The server's words: its own secrets (its credentials) and the terminal's.
                let reason = scrub_text(&e.reason, call.narrowed, self.0);
                let result = OperationResult::new(GATEWAY, e.code, reason)
                    .with_detail(json!({"server": server, "tool": call.tool}))
                    .with_duration(started.elapsed());
                self.0.gate.outcome(id, &call.caller, &result, |o| {
                    o.reason = Some(result.reason.clone());
                    o.gateway = Some(facts(0, 0, true));
                });
                Answer::Refused(result)
            }
        }
    }
}

/// Every string of `value` (from or about a server) redacted as its narrowed service's
/// redactor (the server's own credentials) and the terminal's (its patterns and credentials)
/// would.
pub fn scrub(value: &mut Value, narrowed: &TerminalService, terminal: &TerminalService) {
    safe_mcp_rules::gateway::result::redact_value(value, &narrowed.redactor);
    safe_mcp_rules::gateway::result::redact_value(value, &terminal.redactor);
}

/// [`scrub`] for one text.
pub fn scrub_text(text: &str, narrowed: &TerminalService, terminal: &TerminalService) -> String {
    terminal.redactor.redact(&narrowed.redactor.redact(text))
}
