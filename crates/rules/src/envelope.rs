//! The one result shape every tool returns (DESIGN §2).
//!
//! Owns `OperationResult` and `ResultCode`. Every outcome, success or refusal, is data of this
//! shape; nothing else may reach a client. It must never carry internal paths or panic text:
//! `INTERNAL_ERROR` gets a generic sentence, the details go to the server's stderr.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The typed outcome of a call. Each code means exactly one condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
#[non_exhaustive]
pub enum ResultCode {
    /// Ran (or, for explain/plan, would be allowed).
    Ok,
    /// The policy refuses: not allowlisted, denylisted, an argument rule, a forbidden syntax.
    PolicyDenied,
    /// The request cannot be understood: unparsable command, bad argument types.
    InvalidRequest,
    /// A cwd or path argument resolves outside the root.
    PathEscape,
    /// The wall-clock limit was hit; the whole process tree was killed.
    Timeout,
    /// Ran, but output hit the byte cap (after redaction).
    OutputTruncated,
    /// Allowed, but could not run or complete (binary not found, permission, I/O error).
    OperationFailed,
    /// The filesystem no longer matches the request.
    Conflict,
    /// Files only: safe, but an automatic organizer should not guess.
    NeedsExplicitRequest,
    /// Kernel confinement required by policy could not be applied; nothing ran.
    SandboxUnavailable,
    /// The attempt record could not be written under fail-closed; nothing ran.
    AuditUnavailable,
    /// A bug; generic message, details only in the server's stderr log.
    InternalError,
}

impl ResultCode {
    /// Every code, in the order of the table in DESIGN §2.
    pub const ALL: [ResultCode; 12] = [
        ResultCode::Ok,
        ResultCode::PolicyDenied,
        ResultCode::InvalidRequest,
        ResultCode::PathEscape,
        ResultCode::Timeout,
        ResultCode::OutputTruncated,
        ResultCode::OperationFailed,
        ResultCode::Conflict,
        ResultCode::NeedsExplicitRequest,
        ResultCode::SandboxUnavailable,
        ResultCode::AuditUnavailable,
        ResultCode::InternalError,
    ];

    /// `ok` is true only for these two codes.
    pub fn is_ok(self) -> bool {
        matches!(self, ResultCode::Ok | ResultCode::OutputTruncated)
    }

    /// The wire spelling, e.g. `POLICY_DENIED`.
    pub fn as_str(self) -> &'static str {
        match self {
            ResultCode::Ok => "OK",
            ResultCode::PolicyDenied => "POLICY_DENIED",
            ResultCode::InvalidRequest => "INVALID_REQUEST",
            ResultCode::PathEscape => "PATH_ESCAPE",
            ResultCode::Timeout => "TIMEOUT",
            ResultCode::OutputTruncated => "OUTPUT_TRUNCATED",
            ResultCode::OperationFailed => "OPERATION_FAILED",
            ResultCode::Conflict => "CONFLICT",
            ResultCode::NeedsExplicitRequest => "NEEDS_EXPLICIT_REQUEST",
            ResultCode::SandboxUnavailable => "SANDBOX_UNAVAILABLE",
            ResultCode::AuditUnavailable => "AUDIT_UNAVAILABLE",
            ResultCode::InternalError => "INTERNAL_ERROR",
        }
    }
}

impl std::fmt::Display for ResultCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The envelope (DESIGN §2). `ok` is derived from `code` by the constructor, never set apart.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OperationResult {
    /// True only for OK and OUTPUT_TRUNCATED.
    pub ok: bool,
    /// The typed result code.
    pub code: ResultCode,
    /// The tool that was called, e.g. `run_command`.
    pub action: String,
    /// One human sentence: why it was allowed, denied or failed.
    pub reason: String,
    /// Tool-specific detail; `{}` when nothing ran.
    pub detail: Map<String, Value>,
    /// Wall-clock time the server spent on the call.
    pub duration_ms: u64,
}

impl OperationResult {
    /// Builds an envelope; `ok` follows from `code`.
    pub fn new(action: &str, code: ResultCode, reason: impl Into<String>) -> Self {
        OperationResult {
            ok: code.is_ok(),
            code,
            action: action.to_owned(),
            reason: reason.into(),
            detail: Map::new(),
            duration_ms: 0,
        }
    }

    /// Replaces the detail object. A non-object value is wrapped as `{"value": ...}` so the
    /// envelope always matches its schema.
    pub fn with_detail(mut self, detail: Value) -> Self {
        self.detail = match detail {
            Value::Object(map) => map,
            other => {
                let mut map = Map::new();
                map.insert("value".to_owned(), other);
                map
            }
        };
        self
    }

    /// Sets the measured duration.
    pub fn with_duration(mut self, elapsed: std::time::Duration) -> Self {
        self.duration_ms = u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX);
        self
    }

    /// The generic envelope for a bug: no internals leak to the client.
    pub fn internal(action: &str) -> Self {
        OperationResult::new(
            action,
            ResultCode::InternalError,
            "internal error; the server's stderr log has the details",
        )
    }

    /// The envelope as a JSON value (for `structuredContent`).
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or_else(|_| {
            // Serializing plain strings and maps cannot fail; keep a typed fallback anyway.
            serde_json::json!({
                "ok": false, "code": "INTERNAL_ERROR", "action": self.action,
                "reason": "internal error", "detail": {}, "duration_ms": self.duration_ms
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ok_follows_code() {
        assert!(OperationResult::new("x", ResultCode::Ok, "r").ok);
        assert!(OperationResult::new("x", ResultCode::OutputTruncated, "r").ok);
        assert!(!OperationResult::new("x", ResultCode::Timeout, "r").ok);
        assert!(!OperationResult::new("x", ResultCode::PolicyDenied, "r").ok);
    }

    #[test]
    fn wire_spelling_matches_serde() {
        for code in [
            ResultCode::PathEscape,
            ResultCode::NeedsExplicitRequest,
            ResultCode::Ok,
        ] {
            let v = serde_json::to_value(code).unwrap();
            assert_eq!(v.as_str().unwrap(), code.as_str());
        }
    }

    #[test]
    fn non_object_detail_is_wrapped() {
        let r = OperationResult::new("x", ResultCode::Ok, "r").with_detail(serde_json::json!(3));
        assert_eq!(r.detail.get("value"), Some(&serde_json::json!(3)));
    }
}
