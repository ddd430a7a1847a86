//! A downstream server's tool result made fit for the client: every text redacted, the whole
//! held to `max_result_bytes`.
//!
//! Redaction walks every string of the result (the content blocks' text, an embedded
//! resource's text and URI, the structured content at any depth, `_meta`), except base64
//! payloads (`data`, `blob`), which are bytes, not text, and are only counted. The cap keeps
//! the content blocks in order: a text block that does not fit is cut at a character
//! boundary, a binary block that does not fit is left out, and a note says what was cut.
//! Structured content that does not fit cannot be cut without breaking the tool's output
//! schema, so the result becomes an error that says so.

use serde_json::{Map, Value, json};

use crate::redact::Redactor;

/// A result, redacted and capped.
#[derive(Debug, Clone)]
pub struct Shaped {
    /// The result as the client gets it.
    pub value: Value,
    /// Its size as the server sent it (serialized bytes).
    pub bytes: usize,
    /// Bytes left out by the cap.
    pub cut: usize,
    /// Whether the server (or the cap) marked it an error.
    pub is_error: bool,
}

/// Keys whose strings are base64 payloads, not text.
const BINARY: [&str; 2] = ["data", "blob"];

/// Redacts every string of `value` but base64 payloads.
pub fn redact_value(value: &mut Value, redactor: &Redactor) {
    match value {
        Value::String(s) => {
            let clean = redactor.redact(s);
            if clean != *s {
                *s = clean;
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| redact_value(v, redactor)),
        Value::Object(map) => {
            for (key, v) in map.iter_mut() {
                if !(BINARY.contains(&key.as_str()) && v.is_string()) {
                    redact_value(v, redactor);
                }
            }
        }
        _ => {}
    }
}

/// `result` (a `CallToolResult` as JSON) redacted and held to `max_bytes`.
pub fn shape(mut result: Value, redactor: &Redactor, max_bytes: usize) -> Shaped {
    let bytes = result.to_string().len();
    redact_value(&mut result, redactor);
    let Value::Object(map) = &mut result else {
        return Shaped {
            value: error_result("the server's result is not an object"),
            bytes,
            cut: bytes,
            is_error: true,
        };
    };
    let is_error = map.get("isError").and_then(Value::as_bool).unwrap_or(false);
    let structured = map
        .get("structuredContent")
        .map_or(0, |v| v.to_string().len());
    if structured > max_bytes {
        let note = format!(
            "the tool's structured result is {structured} bytes, over this server's max_result_bytes ({max_bytes}); ask for less (a narrower query, a page), or the operator can raise the limit"
        );
        return Shaped {
            value: error_result(&note),
            bytes,
            cut: bytes,
            is_error: true,
        };
    }
    let mut budget = max_bytes - structured;
    let mut cut = 0;
    if let Some(Value::Array(blocks)) = map.get_mut("content") {
        let mut kept = Vec::with_capacity(blocks.len());
        for mut block in blocks.drain(..) {
            let size = block.to_string().len();
            if size <= budget {
                budget -= size;
                kept.push(block);
                continue;
            }
            match text_of(&mut block) {
                Some(text) if budget > 0 => {
                    let mut at = budget.min(text.len());
                    while !text.is_char_boundary(at) {
                        at -= 1;
                    }
                    cut += text.len() - at;
                    text.truncate(at);
                    budget = 0;
                    kept.push(block);
                }
                _ => cut += size,
            }
        }
        if cut > 0 {
            kept.push(json!({
                "type": "text",
                "text": format!("[safe-mcp gateway: {cut} bytes of this result were cut at max_result_bytes = {max_bytes}; ask for less, such as a range or a page]"),
            }));
        }
        *blocks = kept;
    }
    Shaped {
        value: result,
        bytes,
        cut,
        is_error,
    }
}

/// The text of a text block, to be cut in place.
fn text_of(block: &mut Value) -> Option<&mut String> {
    let map: &mut Map<String, Value> = block.as_object_mut()?;
    if map.get("type").and_then(Value::as_str) != Some("text") {
        return None;
    }
    match map.get_mut("text") {
        Some(Value::String(s)) => Some(s),
        _ => None,
    }
}

/// An error result saying `why`.
pub fn error_result(why: &str) -> Value {
    json!({"content": [{"type": "text", "text": why}], "isError": true})
}
