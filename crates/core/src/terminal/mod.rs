//! The terminal request flow (DESIGN §1): parse → evaluate → contain → audit attempt →
//! execute → redact → cap → audit outcome → envelope.
//!
//! Owns the order of those steps, which is itself a safety property: nothing reaches the
//! [`Executor`] before its attempt record is durable (or fail-open says otherwise), and no
//! output leaves before redaction. `explain` and `describe` are given no executor at all, so
//! they cannot run anything. The executor (the `safe-mcp-exec` crate) only runs an
//! [`ExecPlan`] this module approved.
//!
//! Split by step: `service` builds the service; `call` is a command call's path, each step
//! a type (begun, judged, approved, run, finished; refused at any step), shared by
//! `run_command` and [`process`]; `approval` is the ladder a person's yes is sought on (for
//! commands and file writes); `result` turns an outcome into the envelope; `describe`
//! answers `explain_command` and `describe_policy` without an executor.

mod approval;
mod call;
mod describe;
pub mod downstream;
mod ended;
mod executables;
pub mod gateway;
mod limits;
mod nested_calls;
mod pre_approved;
pub mod process;
mod request;
mod result;
mod screen;
mod service;
mod state;

pub(crate) use approval::Question;
pub use describe::Describe;
pub use nested_calls::NestedAsk;
pub use request::{CommandInput, MAX_STDIN_BYTES, NestedParent, REDACTION_SLACK_BYTES, RunRequest};
pub use safe_mcp_contract::{
    Cancel, ConfinementReport, ConfinementSpec, ConfinementSummary, Durable, Egress, EgressGate,
    ExecFailure, ExecFuture, ExecOutcome, ExecPlan, ExecStage, Executor, GivenStdio, Observer,
    OutputObserver, OutputStream, ProcessLimits, StageOutcome,
};
pub use service::{ServiceError, confinement_spec};
pub use state::{EgressProvider, TerminalService};
