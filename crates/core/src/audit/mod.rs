//! The audit trail: JSON Lines, append-only, hash-chained, rotated, verifiable.
//!
//! Owns the record format (the digests and field rules of `chain.rs`, the typed records of
//! [`record`]), the admission gate ([`gate`]: call ids, the fail-closed decision), the writer
//! ([`writer`]: fsync before anything runs, group commit, rotation) and the verifier
//! ([`verify`]: finds the first edited, inserted, deleted, reordered or torn record). Each
//! record is a JSON object with sorted keys and:
//! - `seq`: 1, 2, 3, … across rotated files;
//! - `prev`: the digest of the previous line's bytes (all zeros for the very first record),
//!   so deleting, inserting or reordering lines breaks the chain;
//! - `hash`: the digest of the record itself serialized without `hash`, so an edit is found
//!   at its own line, the last one included;
//! - `alg`: `sha256`, or `hmac-sha256` when `audit_hmac_key_file` is set, in which case
//!   whoever can edit the file cannot recompute the chain without the key.
//!
//! Records never hold command output. Every string is neutralised ([`sanitize`]).

mod chain;
pub mod gate;
pub mod ocsf;
mod private;
pub mod received;
pub mod record;
pub mod ship;
pub mod verify;
pub mod writer;

pub use chain::{Chain, GENESIS, MAX_FIELD_CHARS, clean_text, is_hidden, rfc3339_now, sanitize};
pub use gate::{Gate, NotAdmitted, Server};
pub use record::{
    ApprovalAsked, ApprovalEvent, Attempt, CallId, Caller, EndedBy, HttpRefusal, HttpRefused,
    NetworkEvent, NetworkRecord, Outcome, OutputCounts, ProtectedEvent, ProtectedRecord,
};
pub use writer::{AuditError, AuditLog, AuditOptions};
