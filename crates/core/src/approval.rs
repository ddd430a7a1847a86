//! Approvals (DESIGN §10): a command whose rule's `confirm_args` match runs only once a
//! person has said yes, for this call.
//!
//! Owns what is asked and what counts as a yes. The transport asks (an MCP elicitation
//! through the client, or a one-time page the server serves; see the binary's
//! `mcp/approval.rs` and `safe_mcp_http::page`) through an [`Approver`]; this module turns
//! its answer into a verdict: only [`Answer::Approved`] lets the command run, everything else
//! (decline, cancel, `approve = false`, no capability, no answer in time, a failure) is
//! POLICY_DENIED with a reason that says which. The decision, who made it and how long it
//! took go into the attempt record.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use serde::Serialize;
use serde_json::{Value, json};

pub use crate::config::{ApprovalMode, ApprovalSettings};

/// What a person is asked to approve: exactly what would run.
#[derive(Debug, Clone, Serialize)]
pub struct ApprovalRequest {
    /// The call.
    pub call: String,
    /// The tool (`run_command`, `start_process`).
    pub tool: &'static str,
    /// Each stage's argv as it would run (redacted).
    pub stages: Vec<Vec<String>>,
    /// How the stages are joined (`|` within a pipeline, then `;`, `&&`, `||`).
    pub command: String,
    /// The working directory.
    pub cwd: String,
    /// The confinement it would run under, in a line.
    pub confinement: String,
    /// Why approval is needed (the rules that matched).
    pub reasons: Vec<String>,
    /// How long the call waits.
    #[serde(skip)]
    pub timeout: Duration,
    /// The digest of the exact command ([`crate::tickets::digest`]): what a sealed MRTR
    /// state or a ticket is bound to.
    #[serde(skip)]
    pub digest: [u8; 32],
    /// What each scope the person may choose would cover ([`crate::scopes`]); `None` when
    /// only this call can be approved (a pipeline, a list).
    pub preview: Option<crate::scopes::Preview>,
}

impl ApprovalRequest {
    /// The text shown to the person (the elicitation's message).
    pub fn message(&self) -> String {
        let stages = self
            .stages
            .iter()
            .map(|argv| format!("  {}", render_argv(argv)))
            .collect::<Vec<_>>()
            .join("\n");
        let preview = self
            .preview
            .as_ref()
            .map(|p| format!("{}\n", render_text(&p.text()).replace("\\u{a}", "\n")))
            .unwrap_or_default();
        format!(
            "safe-mcp asks for your approval to run ({}):\n{stages}\nin {}\nunder {}.\nWhy: {}.\n{}{preview}Approve only if you expect this exact command.",
            self.tool,
            render_text(&self.cwd),
            self.confinement,
            self.reasons.join("; "),
            self.hidden_note()
                .map(|n| format!("{n}\n"))
                .unwrap_or_default()
        )
    }

    /// A warning when an argument, the command or the cwd holds a control character or
    /// one that changes how text reads without showing itself (shown escaped, `\u{202e}`).
    pub fn hidden_note(&self) -> Option<&'static str> {
        let hidden = |s: &str| {
            s.chars()
                .any(|c| c.is_control() || crate::audit::is_hidden(c))
        };
        let any = self.stages.iter().flatten().any(|a| hidden(a))
            || hidden(&self.command)
            || hidden(&self.cwd);
        any.then_some(
            "Warning: the command holds invisible, control or direction-changing characters, shown escaped as \\u{...}: text around them may not read as it runs.",
        )
    }
}

/// Text as a person should read it: control and hidden characters escaped as `\u{..}`.
pub fn render_text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c.is_control() || crate::audit::is_hidden(c) {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

/// An argv as a person reads it: words with spaces or quotes in single quotes.
pub fn render_argv(argv: &[String]) -> String {
    argv.iter()
        .map(|a| {
            if !a.is_empty()
                && a.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_./=:,@+%".contains(&b))
            {
                a.clone()
            } else {
                format!("'{}'", render_text(&a.replace('\'', r"'\''")))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The digest of a request that no later call can be matched to (a file write, whose
/// content the request does not bind): only an answer within the call approves it.
pub const UNBOUND: [u8; 32] = [0; 32];

/// What came back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// A person said yes.
    Approved,
    /// The person declined.
    Declined,
    /// The request was dismissed.
    Cancelled,
    /// The form came back with `approve = false`.
    ApproveFalse,
    /// The client cannot be asked (no elicitation capability, or not the mode needed).
    NoCapability(String),
    /// No answer within the timeout.
    TimedOut,
    /// Asking failed.
    Failed(String),
    /// MCP 2026-07-28: the call answers with the form to show (`InputRequiredResult`); the
    /// client repeats it with the person's answer.
    InputRequired,
}

/// The scope a person chose with a yes: how long it lasts, and the places marked free.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Choice {
    /// Once, for the session, or as a rule.
    pub kind: crate::scopes::ScopeKind,
    /// The places (1-based) whose word may vary; for a write, non-empty for its
    /// directory's files with its extension.
    pub free: Vec<usize>,
}

impl Choice {
    /// The choice in an answer's fields, as every channel sends them: `scope` (`once`,
    /// `session`, `rule`; absent means once) and `free` (the places, as numbers or strings
    /// of digits). `Err` for anything else: a yes with a choice that cannot be read runs
    /// nothing.
    pub fn from_answer(scope: Option<&Value>, free: Option<&Value>) -> Result<Choice, String> {
        let kind = match scope {
            None | Some(Value::Null) => crate::scopes::ScopeKind::Once,
            Some(Value::String(s)) => crate::scopes::ScopeKind::parse(s)
                .ok_or_else(|| format!("scope {s:?} is none of once, session, rule"))?,
            Some(other) => return Err(format!("scope {other} is not a string")),
        };
        let places = match free {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) => items
                .iter()
                .map(|v| match v {
                    Value::String(s) => s.parse::<usize>().ok(),
                    Value::Number(n) => n.as_u64().map(|n| n as usize),
                    _ => None,
                })
                .collect::<Option<Vec<usize>>>()
                .ok_or_else(|| "free holds something other than places".to_owned())?,
            Some(Value::String(s)) if s.is_empty() => Vec::new(),
            Some(Value::String(s)) => vec![
                s.parse::<usize>()
                    .map_err(|_| format!("free {s:?} is not a place"))?,
            ],
            Some(other) => return Err(format!("free {other} is not a list of places")),
        };
        Ok(Choice { kind, free: places })
    }
}

/// The answer, who gave it, and how long it took.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The scope the person chose with a yes (`None`: once).
    pub choice: Option<Choice>,
    /// The answer.
    pub answer: Answer,
    /// `elicitation` (the client's form) or `page` (the server's own page).
    pub via: &'static str,
    /// How long the call waited.
    pub waited: Duration,
}

/// An [`Approver`] a request can carry.
#[derive(Clone)]
pub struct AskPerson(pub std::sync::Arc<dyn Approver>);

impl std::fmt::Debug for AskPerson {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AskPerson")
    }
}

/// Asks a person. Implemented by the transport, per request.
pub trait Approver: Send + Sync {
    /// Asks about `request`; resolves within `request.timeout` (plus a little).
    fn ask<'a>(
        &'a self,
        request: &'a ApprovalRequest,
    ) -> Pin<Box<dyn Future<Output = Outcome> + Send + 'a>>;

    /// Whether it asks in the rounds of the request it was made for (MCP 2026-07-28), which
    /// only that call's own approval can use: a nested call is not asked through it.
    fn asks_in_rounds(&self) -> bool {
        false
    }
}

impl Outcome {
    /// Whether the command may run.
    pub fn approved(&self) -> bool {
        self.answer == Answer::Approved
    }

    /// Why it may not, for the model.
    pub fn refusal(&self, timeout: Duration) -> String {
        let why = match &self.answer {
            Answer::Approved => return String::new(),
            Answer::Declined => "the person declined".to_owned(),
            Answer::Cancelled => "the request was cancelled without an answer".to_owned(),
            Answer::ApproveFalse => "the answer was approve = false".to_owned(),
            Answer::NoCapability(what) => what.clone(),
            Answer::TimedOut => format!("no answer came within {} s", timeout.as_secs()),
            Answer::Failed(e) => format!("asking failed: {e}"),
            Answer::InputRequired => {
                return "this command needs a person's approval: the client is asked to show the form and repeat the call with the answer (MCP 2026-07-28); nothing ran yet".to_owned();
            }
        };
        format!("this command needs a person's approval, and it was not given: {why}; nothing ran")
    }

    /// The attempt record's `approval` field.
    pub fn record(&self, reasons: &[String]) -> Value {
        json!({
            "required": reasons,
            "via": self.via,
            "decision": match &self.answer {
                Answer::Approved => "approved",
                Answer::Declined => "declined",
                Answer::Cancelled => "cancelled",
                Answer::ApproveFalse => "approve-false",
                Answer::NoCapability(_) => "no-capability",
                Answer::TimedOut => "timeout",
                Answer::Failed(_) => "failed",
                Answer::InputRequired => "input-required",
            },
            "waited_ms": self.waited.as_millis() as u64,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_approval_lets_the_command_run() {
        let t = Duration::from_secs(5);
        for (answer, words) in [
            (Answer::Declined, "declined"),
            (Answer::Cancelled, "cancelled"),
            (Answer::ApproveFalse, "approve = false"),
            (
                Answer::NoCapability("the client did not declare elicitation".into()),
                "did not declare",
            ),
            (Answer::TimedOut, "within 5 s"),
            (Answer::Failed("broken pipe".into()), "broken pipe"),
        ] {
            let o = Outcome {
                choice: None,
                answer,
                via: "elicitation",
                waited: Duration::ZERO,
            };
            assert!(!o.approved());
            assert!(o.refusal(t).contains(words), "{}", o.refusal(t));
        }
        let yes = Outcome {
            choice: None,
            answer: Answer::Approved,
            via: "page",
            waited: Duration::from_millis(1500),
        };
        assert!(yes.approved());
        assert_eq!(yes.record(&["r".into()])["waited_ms"], 1500);
        assert_eq!(yes.record(&["r".into()])["via"], "page");
    }

    #[test]
    fn argv_renders_as_a_person_reads_it() {
        let argv = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            render_argv(&argv(&["git", "push", "origin", "main"])),
            "git push origin main"
        );
        assert_eq!(
            render_argv(&argv(&["echo", "a b", "it's", ""])),
            "echo 'a b' 'it'\\''s' ''"
        );
        // Round 3, item 11: U+202E would make the push read as `--dry-run`.
        assert_eq!(
            render_argv(&argv(&["git", "push", "\u{202e}nur-yrd--"])),
            "git push '\\u{202e}nur-yrd--'"
        );
    }
}
