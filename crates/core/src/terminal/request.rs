//! What a command call asks for, as the transports hand it in: the command (a line split
//! without a shell, or an argv), its cwd, stdin and timeout, who asked and how a person may
//! be asked; and for a nested call, its parent. The input bounds live here too.

use std::sync::Arc;

use safe_mcp_contract::Observer;

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
    pub(super) fn parse(&self) -> Result<CommandList, SyntaxError> {
        match self {
            CommandInput::Line(s) => syntax::parse(s),
            CommandInput::Argv(v) => CommandList::from_argv(v.clone()),
        }
    }

    pub(super) fn display(&self) -> String {
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
    /// The MCP session (connection) that asked: a ticket is bound to it.
    pub session: String,
    /// A ticket a person approved for this exact call (`safe-mcp approvals approve`).
    pub approval_ticket: Option<String>,
    /// A nested call: the call whose command asked for it, and that command's standard
    /// descriptors, which its stages use.
    pub parent: Option<NestedParent>,
}

/// A nested call's parent: the call whose command asked, that command's standard
/// descriptors, how deep the call is, and its place among the parent's running ones.
#[derive(Debug, Clone)]
pub struct NestedParent {
    /// The parent's call id.
    pub call: String,
    /// The asking command's stdin, stdout and stderr.
    pub stdio: safe_mcp_contract::GivenStdio,
    /// 1 for a call a top-level call's command made, 2 for one its nested call's made, …
    pub depth: u8,
    /// Held while the nested call runs: the parent's count of running ones.
    pub(super) slot: Arc<NestedSlot>,
}

/// One running nested call of a parent; dropping it frees the place.
#[derive(Debug)]
pub struct NestedSlot(pub(super) Arc<std::sync::atomic::AtomicUsize>);

impl Drop for NestedSlot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
    }
}
