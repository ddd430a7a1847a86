//! The arguments of the terminal's tools as their schemas show them: the process-session
//! tools (`start_process`, `read_process_output`, `write_process_input`, `stop_process`,
//! `list_processes`), `run_command`, `explain_command` and `describe_policy`, and the
//! `command` argument they share.

use schemars::JsonSchema;
use serde::Deserialize;

use crate::mcp::call::integral;
use safe_mcp_core::terminal::CommandInput;

/// `command`: a POSIX-quoted string (split without a shell) or an argv array.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum CommandArg {
    /// Quoting is tokenization only; `|`, `&&`, `||`, `;` are wired by the server.
    Line(String),
    /// One simple command, taken literally.
    Argv(Vec<String>),
}

impl From<CommandArg> for CommandInput {
    fn from(c: CommandArg) -> Self {
        match c {
            CommandArg::Line(s) => CommandInput::Line(s),
            CommandArg::Argv(v) => CommandInput::Argv(v),
        }
    }
}

/// Arguments of `start_process`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StartArgs {
    /// The command, as for run_command (pipelines and sequences too).
    pub command: CommandArg,
    /// Working directory, as for run_command.
    #[serde(default)]
    pub cwd: Option<String>,
    /// Lowers the session's wall-clock limit ([terminal.sessions] max_seconds).
    #[serde(default, deserialize_with = "integral")]
    pub timeout_seconds: Option<u64>,
    /// The port the command's server listens on (loopback of the sandbox): the host can
    /// reach it at the `exposed.url` the result gives, until the session ends.
    #[serde(default)]
    pub expose_port: Option<u16>,
    /// The ticket a refusal gave, once the person approved it (as for run_command).
    #[serde(default)]
    pub approval_ticket: Option<String>,
    /// Run the program on a terminal of this size (a REPL's prompt, `git add -p`, a pager,
    /// a TUI): reads then return its screen, and writes may name keys. One program, not a
    /// pipeline.
    #[serde(default)]
    pub pty: Option<PtySize>,
}

/// A terminal's size.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PtySize {
    /// Lines (24 is the usual).
    pub rows: u16,
    /// Columns (80 is the usual).
    pub cols: u16,
}

impl From<PtySize> for safe_mcp_contract::TerminalSize {
    fn from(p: PtySize) -> Self {
        safe_mcp_contract::TerminalSize {
            rows: p.rows,
            cols: p.cols,
        }
    }
}

/// Arguments of `read_process_output`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadArgs {
    /// The handle start_process returned.
    pub handle: String,
    /// Wait up to this many seconds for what `until` names (at most 30; 120 for "exit").
    #[serde(default, deserialize_with = "integral")]
    pub wait_seconds: Option<u64>,
    /// What to wait for within wait_seconds: "output" (default: the first new line),
    /// "exit" (the session's end: one read for a whole test run), or "quiet" (output that
    /// then pauses for 0.5 s: a prompt, or a dev server that is up).
    #[serde(default)]
    pub until: Option<Until>,
    /// A session on a terminal: also the bytes as the program printed them since the last
    /// read, escape sequences and all (redacted).
    #[serde(default)]
    pub raw: bool,
}

/// What `read_process_output` waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Until {
    /// New output, or the end.
    Output,
    /// The end.
    Exit,
    /// Output followed by a pause, or the end.
    Quiet,
}

/// Arguments of `write_process_input`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteArgs {
    /// The handle start_process returned.
    pub handle: String,
    /// Text written to the process's stdin (add "\n" to end a line).
    #[serde(default)]
    pub data: String,
    /// A session on a terminal: keys pressed after the text, by name: Enter, Tab, Esc,
    /// Backspace, Up, Down, Left, Right, PageUp, PageDown, Home, End, F1-F12, Ctrl-C,
    /// Ctrl-D, any `Ctrl-<letter>`, `Alt-<key>`.
    #[serde(default)]
    pub keys: Vec<String>,
    /// A session on a terminal: resize it (the program gets SIGWINCH), after the keys.
    #[serde(default)]
    pub resize: Option<PtySize>,
    /// Close stdin after writing (end of input; on a terminal send the key Ctrl-D instead).
    #[serde(default)]
    pub close_stdin: bool,
}

/// Arguments of `stop_process`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HandleArgs {
    /// The handle start_process returned.
    pub handle: String,
}

/// Arguments of a tool that takes none (`list_processes`).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoArgs {}

/// Arguments of `run_command`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunArgs {
    /// The command: a string such as `git log --oneline | head -5`, or an argv array.
    pub command: CommandArg,
    /// Working directory, relative to the jail root or absolute inside it.
    #[serde(default)]
    pub cwd: Option<String>,
    /// Text fed to the first command's stdin (otherwise /dev/null).
    #[serde(default)]
    pub stdin: Option<String>,
    /// Lowers the policy's timeout for this call; it can never raise it.
    #[serde(default, deserialize_with = "integral")]
    pub timeout_seconds: Option<u64>,
    /// The ticket a refusal gave (detail.approval.ticket), once the person approved it:
    /// repeat the same call with it, and it runs once.
    #[serde(default)]
    pub approval_ticket: Option<String>,
}

/// Arguments of `explain_command`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExplainArgs {
    /// The command, as for run_command.
    pub command: CommandArg,
    /// Working directory, as for run_command.
    #[serde(default)]
    pub cwd: Option<String>,
}

/// `describe_policy`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DescribeArgs {
    /// Every detail of the policy and the confinement instead of the short form.
    #[serde(default)]
    pub verbose: bool,
}
