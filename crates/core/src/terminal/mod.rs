//! The terminal request flow (DESIGN §1): parse → evaluate → contain → audit attempt →
//! execute → redact → cap → audit outcome → envelope.
//!
//! Owns the order of those steps, which is itself a safety property: nothing reaches the
//! [`Executor`] before its attempt record is durable (or fail-open says otherwise), and no
//! output leaves before redaction. `explain` and `describe` are given no executor at all, so
//! they cannot run anything. The executor (the `safe-mcp-exec` crate) only runs an
//! [`ExecPlan`] this module approved.
//!
//! Split by step: `service` builds the service; `prepare` parses, judges and plans a call
//! (shared by `run_command` and [`process`]); `approval` asks a person; `flow` runs an
//! admitted call; `result` turns an outcome into the envelope; `describe` answers
//! `explain_command` and `describe_policy` without an executor.

mod approval;
mod describe;
mod executables;
mod flow;
mod limits;
mod nested_calls;
mod prepare;
pub mod process;
mod result;
mod service;

pub(crate) use approval::Question;
pub use nested_calls::NestedAsk;
pub use safe_mcp_contract::{
    Cancel, ConfinementReport, ConfinementSpec, ConfinementSummary, Durable, Egress, EgressGate,
    ExecFailure, ExecFuture, ExecOutcome, ExecPlan, ExecStage, Executor, GivenStdio, Observer,
    OutputObserver, OutputStream, ProcessLimits, StageOutcome,
};
pub use service::{
    CommandInput, EgressProvider, MAX_STDIN_BYTES, NestedParent, REDACTION_SLACK_BYTES, RunRequest,
    ServiceError, TerminalService, confinement_spec,
};
