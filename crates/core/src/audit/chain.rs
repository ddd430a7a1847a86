//! The chain itself: how a record is sealed and checked ([`Chain`], [`GENESIS`]), how every
//! string in a record is neutralised ([`sanitize`], [`clean_text`], [`MAX_FIELD_CHARS`]), and
//! the clock records are stamped with ([`rfc3339_now`]).
//!
//! Owns these primitives only; the writer and the verifier import them from here and the
//! audit module re-exports them. It must never import the audit module or any of its other
//! files (they import it), and it must never open, write or read a trail: that is the
//! writer's and the verifier's job.

use hmac::{Hmac, KeyInit, Mac};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

/// The `prev` of the very first record of a trail.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";
/// Longest string field kept in a record (characters).
pub const MAX_FIELD_CHARS: usize = 4096;

/// How digests are made: plain SHA-256, or HMAC-SHA256 with the operator's key.
#[derive(Clone)]
pub struct Chain {
    key: Option<Vec<u8>>,
}

impl std::fmt::Debug for Chain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Chain").field("alg", &self.alg()).finish()
    }
}

impl Chain {
    /// A chain keyed by `key` (HMAC) or not (SHA-256).
    pub fn new(key: Option<Vec<u8>>) -> Self {
        Chain { key }
    }

    /// `sha256` or `hmac-sha256`.
    pub fn alg(&self) -> &'static str {
        if self.key.is_some() {
            "hmac-sha256"
        } else {
            "sha256"
        }
    }

    /// Hex digest of `bytes`.
    pub fn digest(&self, bytes: &[u8]) -> String {
        match &self.key {
            Some(key) => match <Hmac<Sha256> as KeyInit>::new_from_slice(key) {
                Ok(mut mac) => {
                    mac.update(bytes);
                    hex::encode(mac.finalize().into_bytes())
                }
                // HMAC accepts keys of any length; keep a defined result regardless.
                Err(_) => hex::encode(Sha256::digest(bytes)),
            },
            None => hex::encode(Sha256::digest(bytes)),
        }
    }

    /// Adds `prev`, `alg` and `hash` to `record` and returns the line (without newline).
    pub fn seal(
        &self,
        mut record: Map<String, Value>,
        prev: &str,
    ) -> Result<String, serde_json::Error> {
        record.insert("prev".into(), Value::String(prev.to_owned()));
        record.insert("alg".into(), Value::String(self.alg().to_owned()));
        record.remove("hash");
        let body = serde_json::to_string(&record)?;
        record.insert("hash".into(), Value::String(self.digest(body.as_bytes())));
        serde_json::to_string(&record)
    }

    /// Whether a parsed record's own `hash` matches its contents.
    pub fn hash_matches(&self, record: &Map<String, Value>) -> bool {
        let mut body = record.clone();
        let Some(Value::String(hash)) = body.remove("hash") else {
            return false;
        };
        serde_json::to_string(&Value::Object(body)).is_ok_and(|b| self.digest(b.as_bytes()) == hash)
    }
}

/// Caps string lengths and neutralises control characters (ANSI/OSC escapes, bidi overrides)
/// so a record is safe to print in a terminal.
pub fn sanitize(value: Value) -> Value {
    match value {
        Value::String(s) => Value::String(clean_text(&s)),
        Value::Array(items) => Value::Array(items.into_iter().map(sanitize).collect()),
        Value::Object(map) => {
            Value::Object(map.into_iter().map(|(k, v)| (k, sanitize(v))).collect())
        }
        other => other,
    }
}

/// Whether `c` changes how text around it reads without showing itself: bidi overrides,
/// embeddings, isolates and marks (`U+202E` makes `push` read backwards), zero-width
/// characters, the soft hyphen, word joiners and tag characters. One list for the trail, the
/// approval prompt and the approval page.
pub fn is_hidden(c: char) -> bool {
    matches!(c,
        '\u{202A}'..='\u{202E}'
        | '\u{2066}'..='\u{2069}'
        | '\u{200B}'..='\u{200F}'
        | '\u{061C}'
        | '\u{00AD}'
        | '\u{2060}'..='\u{2064}'
        | '\u{FEFF}'
        | '\u{E0000}'..='\u{E007F}')
}

/// One string, made safe to print: control and hidden characters ([`is_hidden`]) become
/// `\u{..}`, capped.
pub fn clean_text(s: &str) -> String {
    let mut out = String::with_capacity(s.len().min(MAX_FIELD_CHARS));
    for (n, c) in s.chars().enumerate() {
        if n >= MAX_FIELD_CHARS {
            out.push_str("…[cut]");
            break;
        }
        if (c.is_control() && c != '\t') || is_hidden(c) {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

/// UTC now as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
pub fn rfc3339_now() -> String {
    use std::time::{SystemTime, UNIX_EPOCH};
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let secs = now.as_secs() as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Howard Hinnant's civil-from-days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        now.subsec_millis()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn seal_and_check() {
        for chain in [
            Chain::new(None),
            Chain::new(Some(b"0123456789abcdef".to_vec())),
        ] {
            let Value::Object(rec) = json!({"seq": 1, "tool": "run_command"}) else {
                unreachable!()
            };
            let line = chain.seal(rec, GENESIS).unwrap();
            let Value::Object(parsed) = serde_json::from_str::<Value>(&line).unwrap() else {
                unreachable!()
            };
            assert!(chain.hash_matches(&parsed));
            let edited = line.replace("run_command", "run_kommand");
            let Value::Object(parsed) = serde_json::from_str::<Value>(&edited).unwrap() else {
                unreachable!()
            };
            assert!(!chain.hash_matches(&parsed));
        }
        let keyed = Chain::new(Some(b"k".repeat(32)));
        assert_ne!(keyed.digest(b"x"), Chain::new(None).digest(b"x"));
    }

    #[test]
    fn fields_are_neutralised_and_capped() {
        let v = sanitize(
            json!({"c": "a\u{1b}[31mred\u{202E}x\nb", "long": "y".repeat(MAX_FIELD_CHARS + 10)}),
        );
        let c = v["c"].as_str().unwrap();
        assert!(!c.contains('\u{1b}') && !c.contains('\u{202E}') && !c.contains('\n'));
        assert!(v["long"].as_str().unwrap().chars().count() < MAX_FIELD_CHARS + 10);
    }

    #[test]
    fn time_format() {
        let t = rfc3339_now();
        assert_eq!(t.len(), 24, "{t}");
        assert!(t.starts_with("20") && t.ends_with('Z'));
    }
}
