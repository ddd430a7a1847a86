//! The audit trail: JSON Lines, append-only, hash-chained.
//!
//! Owns writing one record per line to the file named by `audit_log`. An `attempt` record is
//! written *and fsynced* before anything runs; an `outcome` record follows. Each record
//! carries `prev`, the SHA-256 of the previous line's bytes, so an edit, insertion or deletion
//! is visible. Records never hold command output. Under fail-closed an unwritable trail is an
//! error the caller turns into AUDIT_UNAVAILABLE; this module never decides to run anyway.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use crate::config::AuditFailMode;

/// The `prev` of the very first record of a trail.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";
/// Longest string field kept in a record (characters).
pub const MAX_FIELD_CHARS: usize = 4096;

/// Why a record could not be made durable.
#[derive(Debug, thiserror::Error)]
#[error("audit log {path}: {message}")]
pub struct AuditError {
    /// The trail's path.
    pub path: PathBuf,
    /// What failed.
    pub message: String,
}

struct Writer {
    file: Option<File>,
    prev: String,
    seq: u64,
}

/// The append-only trail.
pub struct AuditLog {
    path: PathBuf,
    fail_mode: AuditFailMode,
    writer: Mutex<Writer>,
}

impl std::fmt::Debug for AuditLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuditLog")
            .field("path", &self.path)
            .field("fail_mode", &self.fail_mode)
            .finish()
    }
}

impl AuditLog {
    /// Names the trail. Nothing is opened yet: the first append (or [`AuditLog::check`])
    /// opens or creates it (mode 0600, never through a symlink) and finds the chain's last link.
    /// Each append re-checks, so a trail that breaks later is noticed at that call.
    pub fn open(path: &Path, fail_mode: AuditFailMode) -> Self {
        AuditLog {
            path: path.to_path_buf(),
            fail_mode,
            writer: Mutex::new(Writer {
                file: None,
                prev: GENESIS.to_owned(),
                seq: 0,
            }),
        }
    }

    /// Opens the trail now, to report a problem at startup rather than at the first call.
    pub fn check(&self) -> Result<(), AuditError> {
        let mut w = self
            .writer
            .lock()
            .map_err(|_| self.err("writer lock poisoned"))?;
        self.ensure_open(&mut w)
    }

    /// Closed or open.
    pub fn fail_mode(&self) -> AuditFailMode {
        self.fail_mode
    }

    /// The trail's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends an attempt record and fsyncs it. Only after `Ok` may the command run.
    pub fn append_attempt(&self, fields: Map<String, Value>) -> Result<u64, AuditError> {
        self.append("attempt", fields, true)
    }

    /// Appends an outcome record (made durable by the next fsync, or at once when `sync`).
    pub fn append_outcome(&self, fields: Map<String, Value>) -> Result<u64, AuditError> {
        self.append("outcome", fields, false)
    }

    fn err(&self, message: impl Into<String>) -> AuditError {
        AuditError {
            path: self.path.clone(),
            message: message.into(),
        }
    }

    /// Re-opens when the file was removed or replaced under us, so a deleted trail is noticed
    /// instead of written into an unlinked inode.
    fn ensure_open(&self, w: &mut Writer) -> Result<(), AuditError> {
        if let Some(file) = &w.file {
            let same = match (file.metadata(), std::fs::symlink_metadata(&self.path)) {
                (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
                _ => false,
            };
            if same {
                return Ok(());
            }
            w.file = None;
        }
        let mut file = OpenOptions::new()
            .append(true)
            .read(true)
            .create(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&self.path)
            .map_err(|e| self.err(format!("cannot open: {e}")))?;
        let (prev, seq) = last_link(&mut file)
            .map_err(|e| self.err(format!("cannot read the chain's tail: {e}")))?;
        w.prev = prev;
        w.seq = seq;
        w.file = Some(file);
        Ok(())
    }

    fn append(
        &self,
        kind: &str,
        mut fields: Map<String, Value>,
        sync: bool,
    ) -> Result<u64, AuditError> {
        let mut w = self
            .writer
            .lock()
            .map_err(|_| self.err("writer lock poisoned"))?;
        self.ensure_open(&mut w)?;
        let seq = w.seq + 1;
        let mut record = Map::new();
        record.insert("time".into(), json!(rfc3339_now()));
        record.insert("seq".into(), json!(seq));
        record.insert("kind".into(), json!(kind));
        record.append(&mut fields);
        record.insert("prev".into(), json!(w.prev));
        let mut line = serde_json::to_string(&sanitize(Value::Object(record)))
            .map_err(|e| self.err(format!("cannot encode a record: {e}")))?;
        line.push('\n');
        let result = (|| {
            let file = w
                .file
                .as_mut()
                .ok_or_else(|| std::io::Error::other("not open"))?;
            file.write_all(line.as_bytes())?;
            if sync {
                file.sync_data()?;
            }
            Ok::<_, std::io::Error>(())
        })();
        if let Err(e) = result {
            // Drop the handle so the next call re-opens and re-reads the chain's tail.
            w.file = None;
            return Err(self.err(format!("cannot write: {e}")));
        }
        w.prev = hex::encode(Sha256::digest(line.trim_end_matches('\n').as_bytes()));
        w.seq = seq;
        Ok(seq)
    }
}

/// Reads the last line of an existing trail: its hash is the next `prev`, its `seq` continues.
fn last_link(file: &mut File) -> std::io::Result<(String, u64)> {
    let len = file.seek(SeekFrom::End(0))?;
    if len == 0 {
        return Ok((GENESIS.to_owned(), 0));
    }
    let window = len.min(256 * 1024);
    file.seek(SeekFrom::Start(len - window))?;
    let mut tail = Vec::with_capacity(window as usize);
    file.read_to_end(&mut tail)?;
    let body = tail.strip_suffix(b"\n").unwrap_or(&tail);
    let start = body.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    let last = &body[start..];
    let seq = serde_json::from_slice::<Value>(last)
        .ok()
        .and_then(|v| v.get("seq").and_then(Value::as_u64))
        .unwrap_or(0);
    Ok((hex::encode(Sha256::digest(last)), seq))
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

fn clean_text(s: &str) -> String {
    let mut out = String::with_capacity(s.len().min(MAX_FIELD_CHARS));
    for (n, c) in s.chars().enumerate() {
        if n >= MAX_FIELD_CHARS {
            out.push_str("…[cut]");
            break;
        }
        let bidi = matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{200E}' | '\u{200F}');
        if (c.is_control() && c != '\t') || bidi {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

/// UTC now as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
pub fn rfc3339_now() -> String {
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

    fn lines(path: &Path) -> Vec<Value> {
        std::fs::read_to_string(path)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    #[test]
    fn records_chain_and_continue_after_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let log = AuditLog::open(&path, AuditFailMode::Closed);
        log.append_attempt(Map::from_iter([("tool".into(), json!("run_command"))]))
            .unwrap();
        log.append_outcome(Map::new()).unwrap();
        drop(log);
        let log = AuditLog::open(&path, AuditFailMode::Closed);
        log.append_attempt(Map::new()).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let raw: Vec<&str> = text.lines().collect();
        let recs = lines(&path);
        assert_eq!(recs.len(), 3);
        assert_eq!(recs[0]["prev"], GENESIS);
        for i in 1..3 {
            assert_eq!(
                recs[i]["prev"],
                hex::encode(Sha256::digest(raw[i - 1].as_bytes()))
            );
            assert_eq!(recs[i]["seq"], json!(i as u64 + 1));
        }
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }

    #[test]
    fn deleted_directory_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let sub = dir.path().join("logs");
        std::fs::create_dir(&sub).unwrap();
        let log = AuditLog::open(&sub.join("a.jsonl"), AuditFailMode::Closed);
        log.append_attempt(Map::new()).unwrap();
        std::fs::remove_dir_all(&sub).unwrap();
        assert!(log.append_attempt(Map::new()).is_err());
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
