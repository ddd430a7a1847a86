//! A downstream server's tool result made fit for the client: every text redacted, the whole
//! held to `max_result_bytes`.
//!
//! Redaction walks every string of the result, object keys included (the content blocks'
//! text, an embedded resource's text and URI, the structured content at any depth, `_meta`),
//! except the protocol's base64 payloads (an image's or audio's `data`, a resource's `blob`),
//! which are bytes, not text, and are only counted. The cap counts the serialized result,
//! every field: the content blocks are kept in order, a text block that does not fit is cut
//! at a character boundary, a binary block that does not fit is left out, and a note says
//! what was cut. What is not content (structured content, `_meta`) cannot be cut without
//! breaking the tool's output schema, so when it does not fit the result becomes an error
//! that says so.

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

/// Redacts every string of `value`, object keys included, but the base64 payloads of the
/// protocol's binary content: `data` of an image or audio block, `blob` of a resource's
/// contents (an object with a `uri`). The same names anywhere else are text like any other.
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
            let kind = map.get("type").and_then(Value::as_str);
            let binary = match kind {
                Some("image" | "audio") => Some("data"),
                _ if map.contains_key("uri") => Some("blob"),
                _ => None,
            };
            let old = std::mem::take(map);
            for (key, mut v) in old {
                let payload = binary == Some(key.as_str()) && v.is_string();
                if !payload {
                    redact_value(&mut v, redactor);
                }
                map.insert(redactor.redact(&key), v);
            }
        }
        _ => {}
    }
}

/// Room kept for the note that says what was cut.
const NOTE_BYTES: usize = 200;

/// `result` (a `CallToolResult` as JSON) redacted and held to `max_bytes` of its serialized
/// form, every field counted.
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
    let blocks = match map.remove("content") {
        Some(Value::Array(blocks)) => blocks,
        Some(other) => vec![other],
        None => Vec::new(),
    };
    // What is not content (structured content, _meta, isError) cannot be cut without
    // breaking the tool's output schema: it must fit whole, with room for the note.
    let rest = Value::Object(map.clone()).to_string().len() + "\"content\":[],".len();
    if rest + NOTE_BYTES > max_bytes {
        let note = format!(
            "the tool's result without its content is {rest} bytes, over this server's max_result_bytes ({max_bytes}); ask for less (a narrower query, a page), or the operator can raise the limit"
        );
        return Shaped {
            value: error_result(&note),
            bytes,
            cut: bytes,
            is_error: true,
        };
    }
    let whole = rest
        + blocks
            .iter()
            .map(|b| b.to_string().len() + 1)
            .sum::<usize>();
    let mut budget = if whole > max_bytes {
        max_bytes - rest - NOTE_BYTES
    } else {
        max_bytes - rest
    };
    let (mut kept, mut cut) = (Vec::with_capacity(blocks.len()), 0);
    for mut block in blocks {
        let size = block.to_string().len() + 1;
        if size <= budget {
            budget -= size;
            kept.push(block);
            continue;
        }
        if budget > 0 && cut_text(&mut block, budget) {
            let now = block.to_string().len() + 1;
            cut += size - now;
            budget = budget.saturating_sub(now);
            kept.push(block);
        } else {
            cut += size;
        }
    }
    if cut > 0 {
        kept.push(json!({
            "type": "text",
            "text": format!("[safe-mcp gateway: {cut} bytes of this result were cut at max_result_bytes = {max_bytes}; ask for less, such as a range or a page]"),
        }));
    }
    map.insert("content".into(), Value::Array(kept));
    Shaped {
        value: result,
        bytes,
        cut,
        is_error,
    }
}

/// Cuts a text block's text (at a character boundary) until the block, serialized, takes at
/// most `budget` bytes; `false` when it is not a text block or nothing of it fits.
fn cut_text(block: &mut Value, budget: usize) -> bool {
    loop {
        let size = block.to_string().len() + 1;
        if size <= budget {
            return true;
        }
        let Some(text) = text_of(block) else {
            return false;
        };
        if text.is_empty() {
            return false;
        }
        // Escaping makes a byte take up to six: cut at least the excess, and at least one
        // character, each round.
        let mut at = text.len().saturating_sub((size - budget).max(1));
        while !text.is_char_boundary(at) {
            at -= 1;
        }
        text.truncate(at);
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
