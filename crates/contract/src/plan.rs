//! A plan the core approved, how it ended, and the executor trait that turns one into the
//! other. Every program here is already resolved and every path already contained: an
//! executor must run the plan as it is and never decide anything itself.

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::time::Duration;

use crate::confinement::{ConfinementReport, ConfinementSummary};

/// How one pipeline is joined to the one before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sequence {
    /// `;` or a newline: always run.
    Then,
    /// `&&`: run if the previous pipeline exited 0.
    And,
    /// `||`: run if the previous pipeline exited non-zero.
    Or,
}

impl Sequence {
    /// The operator as written.
    pub fn as_str(self) -> &'static str {
        match self {
            Sequence::Then => ";",
            Sequence::And => "&&",
            Sequence::Or => "||",
        }
    }
}

/// One approved program.
#[derive(Debug, Clone)]
pub struct ExecStage {
    /// Absolute path, resolved through the scrubbed PATH.
    pub program: PathBuf,
    /// argv, `argv[0]` as the user typed it, hardening arguments included.
    pub argv: Vec<String>,
    /// Environment added for this program (hardening), over the plan's.
    pub env: Vec<(String, String)>,
}

/// Everything the executor needs, and nothing it may decide for itself.
#[derive(Debug, Clone)]
pub struct ExecPlan {
    /// Pipelines of stages; none is empty.
    pub pipelines: Vec<Vec<ExecStage>>,
    /// `joins[i]` joins pipeline i to i + 1.
    pub joins: Vec<Sequence>,
    /// Canonical cwd inside the jail.
    pub cwd: PathBuf,
    /// The complete environment.
    pub env: Vec<(String, String)>,
    /// Bytes for the first stage's stdin (else /dev/null).
    pub stdin: Option<Vec<u8>>,
    /// Wall-clock limit for the whole list.
    pub timeout: Duration,
    /// Raw bytes kept per stream: the first quarter from the start, the rest as a ring of the
    /// last bytes. A command that prints more runs on (to its end or its deadline); what
    /// lies between is counted, not kept.
    pub capture_limit: usize,
    /// Output read in all (stdout and stderr together) past which the tree is stopped as a
    /// flood: what was kept stays, nothing more is read. 0: no bound.
    pub output_total_limit: u64,
    /// Told of every chunk of output as it is read, for progress; `None` when nobody asked.
    pub observer: Option<Observer>,
    /// A process session: the first stage's stdin is a pipe handed to this once the stages
    /// started, output goes only to the observer (none is kept, so none floods), and
    /// `stdin` is ignored.
    pub interactive: Option<Interactive>,
    /// Egress: the proxy that serves this call's connections. `None` under egress means
    /// the call has no way out at all.
    pub egress: Option<Egress>,
    /// A nested call's standard input, output and error: the descriptors of the command that
    /// asked for it (through the server's shim), which the stages use instead of the
    /// server's pipes. Nothing is captured then, and `stdin` is ignored.
    pub stdio: Option<GivenStdio>,
}

/// Three descriptors a plan's stages read and write in place of the server's pipes.
#[derive(Clone)]
pub struct GivenStdio(pub std::sync::Arc<[std::os::fd::OwnedFd; 3]>);

impl std::fmt::Debug for GivenStdio {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("GivenStdio")
    }
}

/// The server's proxy, as the executor sees it: it hands over listening sockets that only
/// this call's commands can reach, and the proxy accepts on them.
pub trait EgressGate: Send + Sync {
    /// Accepts and serves the connections made to `listener` (one stage's, in the stage's
    /// own network namespace, or the call's, on loopback) until the returned guard drops,
    /// which the executor does once every process of the call is gone.
    fn serve(&self, listener: std::net::TcpListener) -> Box<dyn Send>;

    /// Once every guard is dropped: waits until each of the call's connections has written
    /// its last record (a relay still open when the call's processes were gone ends then),
    /// so that the call's outcome record follows its network records; then returns what
    /// the proxy refused for the call, a line each (for the call's result: a tool's own
    /// error, such as curl's "CONNECT tunnel failed, response 403", does not say why).
    fn finish(&self) -> std::pin::Pin<Box<dyn Future<Output = Vec<String>> + Send + '_>>;
}

/// An [`EgressGate`] a plan can carry.
#[derive(Clone)]
pub struct Egress(pub std::sync::Arc<dyn EgressGate>);

impl std::fmt::Debug for Egress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Egress")
    }
}

/// The other end of a process session.
pub trait InteractiveIo: Send + Sync {
    /// The first pipeline started: `stdin` is the write end of its first stage's stdin,
    /// `pid` that stage's pid.
    fn started(&self, stdin: std::os::fd::OwnedFd, pid: u32);

    /// When the session counts as idle if nobody reads or writes it before then: the
    /// executor stops it there ([`ExecOutcome::idle`]); `None`, never.
    fn idle_at(&self) -> Option<std::time::Instant>;

    /// A pseudo-terminal of this size for the session's one program, made in the
    /// program's own view: its standard input, output and error, and its controlling
    /// terminal. `stdin` in [`InteractiveIo::started`] is then the terminal's master (write
    /// keys to it, resize through it), and what the program prints reaches the observer as
    /// standard output. `None`: pipes.
    fn terminal(&self) -> Option<TerminalSize> {
        None
    }
}

/// A terminal's size in character cells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TerminalSize {
    /// Lines.
    pub rows: u16,
    /// Columns.
    pub cols: u16,
}

/// An [`InteractiveIo`] a plan can carry.
#[derive(Clone)]
pub struct Interactive(pub std::sync::Arc<dyn InteractiveIo>);

impl std::fmt::Debug for Interactive {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Interactive")
    }
}

/// Which output stream a chunk came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputStream {
    /// Standard output (of the last stage).
    Stdout,
    /// Standard error (of every stage).
    Stderr,
}

/// Receives output while a plan runs. Called on the executor's own thread for every chunk
/// it reads, raw (before redaction): it must be quick and must never block.
pub trait OutputObserver: Send + Sync {
    /// `bytes` were read from `stream` (at most the capture limit in all).
    fn output(&self, stream: OutputStream, bytes: &[u8]);
    /// `stream` reached its end: every process that held it has closed it (the session is
    /// ending). Nothing to do by default.
    fn closed(&self, _stream: OutputStream) {}
}

/// An [`OutputObserver`] a plan can carry.
#[derive(Clone)]
pub struct Observer(pub std::sync::Arc<dyn OutputObserver>);

impl std::fmt::Debug for Observer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Observer")
    }
}

/// How one stage ended.
#[derive(Debug, Clone, Default)]
pub struct StageOutcome {
    /// Whether it was started (a `&&` may skip it).
    pub ran: bool,
    /// Its exit status, when it exited.
    pub exit_code: Option<i32>,
    /// The signal that ended it, when one did.
    pub signal: Option<i32>,
}

/// What the executor observed.
#[derive(Debug, Clone, Default)]
pub struct ExecOutcome {
    /// Per stage, pipelines flattened in order.
    pub stages: Vec<StageOutcome>,
    /// The list's status: the last pipeline run's last stage.
    pub exit_code: Option<i32>,
    /// Captured stdout: all of it, or, past `capture_limit`, its first bytes (see
    /// `stdout_tail`).
    pub stdout: Vec<u8>,
    /// Captured stderr, as `stdout`.
    pub stderr: Vec<u8>,
    /// The last bytes of stdout, when some before them were not kept; else empty.
    pub stdout_tail: Vec<u8>,
    /// The last bytes of stderr, as `stdout_tail`.
    pub stderr_tail: Vec<u8>,
    /// stdout bytes read in all.
    pub stdout_bytes: u64,
    /// stderr bytes read in all.
    pub stderr_bytes: u64,
    /// Newlines in all of stdout, kept or not.
    pub stdout_lines: u64,
    /// Newlines in all of stderr, kept or not.
    pub stderr_lines: u64,
    /// Lines of stdout between the kept head and tail that look like errors
    /// ([`looks_like_an_error`]): the first [`NOTABLE_LINES`], each with its line number.
    pub stdout_notable: Vec<(u64, Vec<u8>)>,
    /// The same of stderr.
    pub stderr_notable: Vec<(u64, Vec<u8>)>,
    /// The wall-clock limit was hit and the tree was killed.
    pub timed_out: bool,
    /// The client cancelled and the tree was killed.
    pub cancelled: bool,
    /// The output passed the plan's `output_total_limit` and the tree was stopped.
    pub flooded: bool,
    /// A session nobody read or wrote for its idle time was stopped.
    pub idle: bool,
    /// The command's memory cgroup hit its limit and the kernel killed a process of it.
    pub memory_limit_hit: bool,
    /// With the exec log on: every program the tree executed, in order per stage, at most
    /// a bound's worth.
    pub executed: Vec<ExecutedProgram>,
    /// Programs executed past that bound, counted only.
    pub executed_dropped: u64,
}

/// How many lines cut from the middle of a stream are kept for looking like errors, and how
/// long one may be (a longer one is not kept: a part of a line could hold a part of a secret
/// the redactor would not recognise): 20 × 240 bytes, under 2k tokens at worst.
pub const NOTABLE_LINES: usize = 20;
/// See [`NOTABLE_LINES`].
pub const NOTABLE_LINE_BYTES: usize = 240;

/// Whether a line of output looks like an error a reader of a cut output needs: a build
/// log's `error[E0308]`, a test's `FAILED` or `panicked at`, a `Traceback`, a `fatal:`. A
/// presentation choice, not a decision: nothing is refused or run by it.
pub fn looks_like_an_error(line: &[u8]) -> bool {
    const NEEDLES: &[&[u8]] = &[
        b"error",
        b"fail",
        b"panic",
        b"traceback",
        b"fatal",
        b"exception",
    ];
    let lower = line.to_ascii_lowercase();
    NEEDLES
        .iter()
        .any(|n| lower.windows(n.len()).any(|w| w == *n))
}

/// One `execve` (or `execveat`) of a command's tree, as the exec log saw it: a log, not a
/// decision (the path was read from the process's memory as the call began).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct ExecutedProgram {
    /// The process's pid in its own pid namespace.
    pub pid: i64,
    /// The path it asked to execute, as given (a relative one stays relative).
    pub path: String,
    /// Its `argv[0]`.
    pub argv0: String,
}

/// Why the executor could not run the plan. Exhaustive on purpose: the core maps each
/// variant to one result code, and a new one must be mapped, not fall through.
#[derive(Debug, Clone)]
pub enum ExecFailure {
    /// A program could not be started (OPERATION_FAILED).
    Spawn {
        /// The program as resolved.
        program: String,
        /// What failed, naming the step.
        message: String,
    },
    /// Confinement required by policy could not be applied (SANDBOX_UNAVAILABLE).
    Sandbox(String),
    /// The attempt record could not be made durable under fail-closed (AUDIT_UNAVAILABLE).
    NotDurable,
    /// Anything else (INTERNAL_ERROR).
    Internal(String),
}

/// A future that completes when the client cancels.
pub type Cancel = Pin<Box<dyn Future<Output = ()> + Send>>;
/// A future that makes the attempt record durable: `true` lets the command run (the record
/// is on disk, or fail-open allows running without it), `false` means nothing may run.
pub type Durable<'a> = Pin<Box<dyn Future<Output = bool> + Send + 'a>>;
/// The executor's boxed future.
pub type ExecFuture<'a> =
    Pin<Box<dyn Future<Output = Result<ExecOutcome, ExecFailure>> + Send + 'a>>;

/// Runs approved plans. Implemented by `safe-mcp-exec`.
pub trait Executor: Send + Sync {
    /// What confinement applies to every command, in full, for explain and describe.
    fn confinement(&self) -> &ConfinementReport;
    /// A compact form of the same, for every run result and attempt record.
    fn confinement_summary(&self) -> &ConfinementSummary;
    /// Runs `plan`, killing the whole tree on timeout or `cancel`.
    ///
    /// The executor may fork and confine the children while `durable` runs, but no child may
    /// exec its program before `durable` has resolved to `true`; on `false` nothing runs and
    /// the result is [`ExecFailure::NotDurable`].
    fn execute<'a>(
        &'a self,
        plan: ExecPlan,
        cancel: Cancel,
        durable: Durable<'a>,
    ) -> ExecFuture<'a>;
    /// An unconnected TCP socket (IPv6 when `v6`) on the network commands share, so that the
    /// server can relay a connection from the host to a server a command started; or why
    /// there is none.
    fn inner_socket(&self, v6: bool) -> Result<std::os::fd::OwnedFd, String>;
    /// Removes what the executor made on the host for its commands (a root server's
    /// cgroups), once every call has ended: at the server's end, which cannot wait for the
    /// last clone of the executor to be dropped (a listener thread keeps one to the exit).
    fn close(&self) {}
    /// Where the calls' and sessions' private TMPDIRs are made, which commands write as
    /// freely as the jail (`jail_bytes` counts it), if the executor makes them.
    fn scratch_root(&self) -> Option<&std::path::Path> {
        None
    }
}
