//! Verifying a trail: recompute the chain and name the first broken record.
//!
//! Owns the diagnosis a reviewer reads: which file and line, and whether a record was edited,
//! inserted, deleted, reordered, or is a torn last line. Files are given oldest first (rotated
//! `.N` … `.1`, then the live file). A torn line sealed by a `recovered` record is reported as
//! a note, never silently accepted.

use std::fmt;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::chain::{Chain, GENESIS};

/// What is wrong at the first broken record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BreakKind {
    /// The record's contents no longer match its own hash (or it is not a record).
    Edited,
    /// A record that is not part of the chain was added.
    Inserted,
    /// Records are missing before this one.
    Deleted,
    /// Records are out of order.
    Reordered,
    /// The last line is incomplete (a crash mid-write, not yet sealed by a restart).
    TornLastLine,
    /// The chain was written with another digest (e.g. HMAC) than the one verifying it.
    WrongKey,
}

impl BreakKind {
    /// Lower-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            BreakKind::Edited => "edited",
            BreakKind::Inserted => "inserted",
            BreakKind::Deleted => "deleted",
            BreakKind::Reordered => "reordered",
            BreakKind::TornLastLine => "torn last line",
            BreakKind::WrongKey => "wrong key or algorithm",
        }
    }
}

/// The first broken record.
#[derive(Debug, Clone)]
pub struct Break {
    /// The file.
    pub file: PathBuf,
    /// 1-based line number.
    pub line: usize,
    /// What is wrong.
    pub kind: BreakKind,
    /// A sentence for a person.
    pub detail: String,
}

impl fmt::Display for Break {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}: {}: {}",
            self.file.display(),
            self.line,
            self.kind.as_str(),
            self.detail
        )
    }
}

/// A verified trail.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Records checked.
    pub records: u64,
    /// Files read.
    pub files: usize,
    /// Things a reviewer should know that do not break the chain (sealed torn lines, a chain
    /// that starts after rotated files were dropped).
    pub notes: Vec<String>,
}

struct Line {
    file: usize,
    number: usize,
    bytes: Vec<u8>,
    /// Parsed record, when the line is a JSON object.
    record: Option<Map<String, Value>>,
    complete: bool,
}

fn read_lines(files: &[PathBuf]) -> std::io::Result<Vec<Line>> {
    let mut out = Vec::new();
    for (f, path) in files.iter().enumerate() {
        let data = std::fs::read(path)?;
        let mut parts: Vec<&[u8]> = data.split(|&b| b == b'\n').collect();
        let ends_with_newline = parts.last().is_some_and(|p| p.is_empty());
        if ends_with_newline {
            parts.pop();
        }
        let count = parts.len();
        for (i, part) in parts.into_iter().enumerate() {
            let record = match serde_json::from_slice::<Value>(part) {
                Ok(Value::Object(map)) => Some(map),
                _ => None,
            };
            let complete = i + 1 < count || ends_with_newline;
            out.push(Line {
                file: f,
                number: i + 1,
                bytes: part.to_vec(),
                record,
                complete,
            });
        }
    }
    Ok(out)
}

fn seq(record: &Map<String, Value>) -> u64 {
    record.get("seq").and_then(Value::as_u64).unwrap_or(0)
}

fn field<'a>(record: &'a Map<String, Value>, key: &str) -> &'a str {
    record.get(key).and_then(Value::as_str).unwrap_or("")
}

/// Verifies `files` (oldest first) with `chain`.
pub fn verify(files: &[PathBuf], chain: &Chain) -> Result<Report, Break> {
    let lines = read_lines(files).map_err(|e| Break {
        file: files.first().cloned().unwrap_or_default(),
        line: 0,
        kind: BreakKind::Edited,
        detail: format!("cannot read: {e}"),
    })?;
    let at = |l: &Line, kind: BreakKind, detail: String| Break {
        file: files[l.file].clone(),
        line: l.number,
        kind,
        detail,
    };
    let mut report = Report {
        files: files.len(),
        ..Report::default()
    };
    // Digests of the last two chained lines, and the last seq.
    let mut prev: Option<String> = None;
    let mut before_prev: Option<String> = None;
    let mut last_seq: u64 = 0;

    for (i, line) in lines.iter().enumerate() {
        let Some(record) = &line.record else {
            if !line.complete {
                return Err(at(line, BreakKind::TornLastLine, "the last line is incomplete: the server was killed mid-write (restart it to seal the trail)".into()));
            }
            if sealed(&lines, i, chain) {
                report.notes.push(format!(
                    "{}:{}: a line torn by a crash, sealed by the record after it",
                    files[line.file].display(),
                    line.number
                ));
                continue;
            }
            return Err(at(line, BreakKind::Edited, "not a JSON record".into()));
        };
        if field(record, "alg") != chain.alg() {
            return Err(at(
                line,
                BreakKind::WrongKey,
                format!(
                    "written with {:?}, verified with {:?}",
                    field(record, "alg"),
                    chain.alg()
                ),
            ));
        }
        if !chain.hash_matches(record) {
            return Err(at(
                line,
                BreakKind::Edited,
                "the record does not match its own hash".into(),
            ));
        }
        let this_seq = seq(record);
        let linked = field(record, "prev");
        match &prev {
            None => {
                if field(record, "kind") == "discontinuity" {
                    return Err(at(
                        line,
                        BreakKind::Deleted,
                        "the trail was removed or replaced while the server ran: the records before this one are missing (give the old file too, oldest first)".into(),
                    ));
                }
                if linked != GENESIS || this_seq != 1 {
                    report.notes.push(format!(
                        "{}:{}: the chain starts at seq {this_seq}: {} older records were rotated away (audit_keep, audit_max_bytes); with [audit.ship] the receiver's copy still holds them (audit verify --received)",
                        files[line.file].display(),
                        line.number,
                        this_seq.saturating_sub(1)
                    ));
                }
            }
            Some(expected) if linked == expected.as_str() => {
                if this_seq != last_seq + 1 {
                    return Err(at(
                        line,
                        BreakKind::Inserted,
                        format!("seq {this_seq} follows {last_seq}"),
                    ));
                }
            }
            Some(_) => {
                let (blamed, kind, detail) =
                    broken_link(&lines, i, linked, before_prev.as_deref(), last_seq);
                return Err(at(&lines[blamed], kind, detail));
            }
        }
        before_prev = prev.take();
        prev = Some(chain.digest(&line.bytes));
        last_seq = this_seq;
        report.records += 1;
    }
    Ok(report)
}

/// Whether the torn line `i` was sealed by the next start: the record after it is a
/// `recovered` record naming it, by line number and digest.
fn sealed(lines: &[Line], i: usize, chain: &Chain) -> bool {
    let line = &lines[i];
    matches!(lines.get(i + 1), Some(Line { record: Some(next), .. })
        if field(next, "kind") == "recovered"
            && next.get("torn_line").and_then(Value::as_u64) == Some(line.number as u64)
            && field(next, "torn_digest") == chain.digest(&line.bytes))
}

/// Why the record at `i`, whose `prev` is `linked`, does not follow the chain: the line to
/// blame, the kind of break and what it says. `before_prev` is the digest of the chained
/// record before the last one.
fn broken_link(
    lines: &[Line],
    i: usize,
    linked: &str,
    before_prev: Option<&str>,
    last_seq: u64,
) -> (usize, BreakKind, String) {
    let this_seq = lines[i].record.as_ref().map_or(0, seq);
    let want = last_seq + 1;
    // The last record before this one that parsed (the one `prev` should name).
    let previous = lines[..i]
        .iter()
        .rposition(|l| l.record.is_some())
        .unwrap_or(i);
    if before_prev == Some(linked) {
        let why = "this record is not in the chain: the next one links past it";
        return (previous, BreakKind::Inserted, why.into());
    }
    let duplicate = lines
        .iter()
        .enumerate()
        .any(|(j, l)| j != i && l.record.as_ref().is_some_and(|r| seq(r) == this_seq));
    if duplicate {
        let why = format!("seq {this_seq} appears twice: a replayed or added record");
        return (i, BreakKind::Inserted, why);
    }
    let later = lines[i + 1..]
        .iter()
        .any(|l| l.record.as_ref().is_some_and(|r| seq(r) == want));
    if later {
        let why = format!("seq {this_seq} stands where seq {want} belongs");
        return (i, BreakKind::Reordered, why);
    }
    if this_seq > want {
        let why = format!(
            "records with seq {want}..{} are missing before this one",
            this_seq - 1
        );
        return (i, BreakKind::Deleted, why);
    }
    if this_seq == want {
        let why = "the next record's prev does not match this line";
        return (previous, BreakKind::Edited, why.into());
    }
    let why = format!("seq {this_seq} repeats or precedes seq {last_seq}");
    (i, BreakKind::Inserted, why)
}

/// The rotated siblings of `path`, oldest first, then `path` itself.
pub fn with_rotations(path: &Path) -> Vec<PathBuf> {
    // Every `.N` that exists, gaps included: a missing file in the middle then shows as a
    // break in the chain instead of silently hiding everything older.
    let mut older = Vec::new();
    for n in 1..=1000 {
        let mut name = path.as_os_str().to_owned();
        name.push(format!(".{n}"));
        let p = PathBuf::from(name);
        if p.exists() {
            older.push(p);
        }
    }
    older.reverse();
    older.push(path.to_path_buf());
    older
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::{AuditLog, AuditOptions};
    use serde_json::json;

    fn trail(n: u64, key: Option<Vec<u8>>) -> (tempfile::TempDir, PathBuf, Vec<String>) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let log = AuditLog::open(
            &path,
            AuditOptions {
                key,
                ..AuditOptions::closed()
            },
        );
        for i in 0..n {
            log.append_attempt(Map::from_iter([(
                "command".to_owned(),
                json!(format!("echo {i}")),
            )]))
            .unwrap();
        }
        let lines = std::fs::read_to_string(&path)
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect();
        (dir, path, lines)
    }

    fn write(path: &Path, lines: &[String]) {
        std::fs::write(path, lines.join("\n") + "\n").unwrap();
    }

    fn broken(path: &Path) -> Break {
        verify(&[path.to_path_buf()], &Chain::new(None)).unwrap_err()
    }

    #[test]
    fn an_intact_trail_verifies() {
        let (_d, path, _) = trail(5, None);
        assert_eq!(verify(&[path], &Chain::new(None)).unwrap().records, 5);
    }

    #[test]
    fn each_kind_of_tampering_is_found_at_its_line() {
        let (_d, path, lines) = trail(6, None);

        let mut edited = lines.clone();
        edited[2] = edited[2].replace("echo 2", "echo X");
        write(&path, &edited);
        let b = broken(&path);
        assert_eq!((b.kind, b.line), (BreakKind::Edited, 3), "{b}");

        let mut last_edited = lines.clone();
        last_edited[5] = last_edited[5].replace("echo 5", "echo Y");
        write(&path, &last_edited);
        assert_eq!(
            (broken(&path).kind, broken(&path).line),
            (BreakKind::Edited, 6)
        );

        let mut deleted = lines.clone();
        deleted.remove(3);
        write(&path, &deleted);
        let b = broken(&path);
        assert_eq!((b.kind, b.line), (BreakKind::Deleted, 4), "{b}");

        let mut inserted = lines.clone();
        inserted.insert(2, lines[4].clone());
        write(&path, &inserted);
        let b = broken(&path);
        assert_eq!(b.kind, BreakKind::Inserted, "{b}");
        assert_eq!(b.line, 3, "{b}");

        let mut reordered = lines.clone();
        reordered.swap(1, 2);
        write(&path, &reordered);
        let b = broken(&path);
        assert_eq!((b.kind, b.line), (BreakKind::Reordered, 2), "{b}");

        let mut torn = lines.join("\n") + "\n";
        torn.push_str(&lines[0][..20]);
        std::fs::write(&path, torn).unwrap();
        let b = broken(&path);
        assert_eq!((b.kind, b.line), (BreakKind::TornLastLine, 7), "{b}");
    }

    #[test]
    fn a_recomputed_forgery_is_caught_with_a_key() {
        let key = b"k".repeat(32);
        let (_d, path, lines) = trail(4, Some(key.clone()));
        // Without the key, a forger can only recompute plain SHA-256 digests.
        let plain = Chain::new(None);
        let Value::Object(mut rec) = serde_json::from_str::<Value>(&lines[3]).unwrap() else {
            unreachable!()
        };
        rec.insert("command".into(), json!("echo forged"));
        rec.insert("alg".into(), json!("hmac-sha256"));
        let prev = rec["prev"].as_str().unwrap().to_owned();
        let forged = plain
            .seal(rec, &prev)
            .unwrap()
            .replace("\"alg\":\"sha256\"", "\"alg\":\"hmac-sha256\"");
        let mut tampered = lines.clone();
        tampered[3] = forged;
        write(&path, &tampered);
        let b = verify(std::slice::from_ref(&path), &Chain::new(Some(key.clone()))).unwrap_err();
        assert_eq!((b.kind, b.line), (BreakKind::Edited, 4), "{b}");
        write(&path, &lines);
        assert!(verify(std::slice::from_ref(&path), &Chain::new(Some(key))).is_ok());
        assert_eq!(
            verify(&[path], &Chain::new(None)).unwrap_err().kind,
            BreakKind::WrongKey
        );
    }
}
