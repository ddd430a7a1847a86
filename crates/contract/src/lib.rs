//! The contract between the safety core and the executor of safe-mcp.
//!
//! The core decides *whether* something may run and describes it as an [`ExecPlan`]; the
//! executor (`safe-mcp-exec`, the only crate with `unsafe`) runs exactly that plan, confined
//! as a [`ConfinementSpec`] says, and answers with an [`ExecOutcome`] or an [`ExecFailure`].
//! Both depend on this crate; neither depends on the other, so the privileged crate stands
//! on this small one and not on the policy parser, regexes and HMAC of the core (as
//! Firecracker's jailer and Codex's linux-sandbox keep theirs).
//!
//! This crate holds data and the traits across that boundary ([`Executor`], and the
//! callbacks a plan carries: [`EgressGate`], [`InteractiveIo`], [`OutputObserver`]), no
//! decisions.
//!
//! ```
//! use safe_mcp_contract::{ExecStage, Sequence};
//! let stage = ExecStage {
//!     program: "/usr/bin/echo".into(),
//!     argv: vec!["echo".into(), "hi".into()],
//!     env: vec![],
//! };
//! assert_eq!(Sequence::And.as_str(), "&&");
//! assert!(stage.program.is_absolute());
//! ```

#![forbid(unsafe_code)]

mod confinement;
mod plan;
mod script;

pub use confinement::{
    CALL_TMP_VARIABLES, Capabilities, ConfinementReport, ConfinementSpec, ConfinementSummary,
    EGRESS_PORT, EgressReport, EgressTier, Executables, ExecuteReport, HARMLESS_DEVICES,
    KernelReport, LandlockReport, LandlockState, NO_PROXY_VARIABLES, NamespaceMode,
    PROXY_VARIABLES, ProcessLimits, RlimitReport, SandboxMode, SeccompReport, TcpReach, ViewKind,
    ViewReport,
};
pub use plan::{
    Cancel, Durable, Egress, EgressGate, ExecFailure, ExecFuture, ExecOutcome, ExecPlan, ExecStage,
    ExecutedProgram, Executor, GivenStdio, Interactive, InteractiveIo, NOTABLE_LINE_BYTES,
    NOTABLE_LINES, Observer, OutputObserver, OutputStream, Sequence, StageOutcome, TerminalSize,
    looks_like_an_error,
};
pub use script::shebang;
