//! `safe-mcp audit verify` and `safe-mcp audit tail`: reading the trail as a reviewer would.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use safe_mcp_core::audit::Chain;
use safe_mcp_core::audit::verify::{verify, with_rotations};
use safe_mcp_core::config::{ProcessEnv, Section};
use safe_mcp_core::load::load_policy;
use serde_json::Value;

use crate::exit::{fatal, say};

/// Verifies the lines a receiver stored (a file, or stdin): each record's hash, the links
/// between consecutive seqs, and the gaps. Exit 0 intact without gaps, 1 broken or gapped.
pub fn verify_received_cmd(
    config: Option<&Path>,
    key_file: Option<&Path>,
    files: &[PathBuf],
) -> ExitCode {
    let key = match read_key(config, key_file) {
        Ok(k) => k,
        Err(code) => return code,
    };
    let text = match files {
        [] => read_stdin(),
        [one] if one.as_os_str() == "-" => read_stdin(),
        many => many
            .iter()
            .map(|f| {
                std::fs::read_to_string(f).map_err(|e| format!("cannot read {}: {e}", f.display()))
            })
            .collect::<Result<Vec<_>, _>>()
            .map(|t| t.join("\n")),
    };
    let text = match text {
        Ok(t) => t,
        Err(e) => return fatal(e),
    };
    match safe_mcp_core::audit::received::verify_received(&text, &Chain::new(key)) {
        Ok(r) if r.gaps.is_empty() => {
            say!(
                "OK: {} records, seq {}..{}, chain intact, no gaps ({} duplicates, {} checkpoints matched)",
                r.records,
                r.first,
                r.last,
                r.duplicates,
                r.checkpoints
            );
            ExitCode::SUCCESS
        }
        Ok(r) => {
            let gaps: Vec<String> = r
                .gaps
                .iter()
                .map(|(a, b)| {
                    if a == b {
                        format!("{a}")
                    } else {
                        format!("{a}..{b}")
                    }
                })
                .collect();
            say!(
                "GAPS: {} records, seq {}..{}; missing seq {} (each record present verifies)",
                r.records,
                r.first,
                r.last,
                gaps.join(", ")
            );
            ExitCode::from(1)
        }
        Err(why) => {
            say!("BROKEN: {why}");
            ExitCode::from(1)
        }
    }
}

fn read_stdin() -> Result<String, String> {
    let mut text = String::new();
    std::io::Read::read_to_string(&mut std::io::stdin(), &mut text)
        .map_err(|e| format!("cannot read stdin: {e}"))?;
    Ok(text)
}

/// The HMAC key from `--key-file` or the policy's `audit_hmac_key_file`.
fn read_key(config: Option<&Path>, key_file: Option<&Path>) -> Result<Option<Vec<u8>>, ExitCode> {
    match (config, key_file) {
        (_, Some(k)) => std::fs::read(k)
            .map(Some)
            .map_err(|e| fatal(format!("cannot read the key file {}: {e}", k.display()))),
        (Some(c), None) => load_policy(Some(c), &ProcessEnv, Section::Any)
            .map(|p| p.audit.hmac_key)
            .map_err(fatal),
        (None, None) => Ok(None),
    }
}

/// Verifies the given files (a single live file brings its rotated siblings along).
pub fn verify_cmd(config: Option<&Path>, key_file: Option<&Path>, files: &[PathBuf]) -> ExitCode {
    let key = match read_key(config, key_file) {
        Ok(k) => k,
        Err(code) => return code,
    };
    // A file that cannot be read is an error (exit 2), never a tamper alarm (exit 1).
    for f in files {
        if let Err(e) = std::fs::File::open(f) {
            return fatal(format!("cannot read {}: {e}", f.display()));
        }
    }
    let files: Vec<PathBuf> = match files {
        [one] => with_rotations(one),
        many => many.to_vec(),
    };
    match verify(&files, &Chain::new(key)) {
        Ok(report) => {
            for note in &report.notes {
                say!("note: {note}");
            }
            say!(
                "OK: {} records in {} file(s), chain intact",
                report.records,
                report.files
            );
            ExitCode::SUCCESS
        }
        Err(b) => {
            say!("BROKEN: {b}");
            ExitCode::from(1)
        }
    }
}

/// Prints one readable line per call; with `follow`, keeps reading as the trail grows.
pub fn tail_cmd(path: &Path, follow: bool) -> ExitCode {
    let mut attempts: HashMap<String, Value> = HashMap::new();
    let mut file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) => return fatal(format!("cannot open {}: {e}", path.display())),
    };
    let mut offset = 0u64;
    let mut records = 0u64;
    loop {
        if file.seek(SeekFrom::Start(offset)).is_err() {
            return fatal("cannot seek");
        }
        let mut reader = BufReader::new(&file);
        let mut line = String::new();
        while let Ok(n) = reader.read_line(&mut line) {
            if n == 0 || !line.ends_with('\n') {
                break; // a line still being written is read next round
            }
            offset += n as u64;
            if let Ok(record) = serde_json::from_str::<Value>(&line)
                && record.get("seq").is_some()
                && record.get("kind").is_some()
            {
                records += 1;
                if let Some(text) = render(&record, &mut attempts) {
                    say!("{text}");
                }
            }
            line.clear();
        }
        if !follow {
            // Something that is not a trail says so, rather than printing nothing.
            if records == 0 && offset > 0 {
                return fatal(format!(
                    "{} is not an audit trail: no line is a record with seq and kind",
                    path.display()
                ));
            }
            return ExitCode::SUCCESS;
        }
        std::thread::sleep(Duration::from_millis(250));
        // Rotation: the path now names a new file; start it from the top.
        let rotated = match (file.metadata(), std::fs::metadata(path)) {
            (Ok(a), Ok(b)) => a.ino() != b.ino(),
            _ => false,
        };
        if rotated && let Ok(f) = std::fs::File::open(path) {
            file = f;
            offset = 0;
        }
    }
}

fn s<'a>(v: &'a Value, k: &str) -> &'a str {
    v.get(k).and_then(Value::as_str).unwrap_or("")
}

/// A call is printed when its outcome arrives, joined with its attempt.
fn render(record: &Value, attempts: &mut HashMap<String, Value>) -> Option<String> {
    let call = s(record, "call").to_owned();
    match s(record, "kind") {
        "attempt" => {
            attempts.insert(call, record.clone());
            None
        }
        "outcome" => {
            let attempt = attempts.remove(&call).unwrap_or(Value::Null);
            let exit = record
                .get("exit_code")
                .and_then(Value::as_i64)
                .map(|c| format!(" exit={c}"))
                .unwrap_or_default();
            let rule = match s(&attempt, "rule") {
                "" | "allowlist" => String::new(),
                r => format!(" [{r}]"),
            };
            Some(format!(
                "{} {:<10} {:<16} {:<18}{exit} {}ms  {}{rule}",
                s(record, "time"),
                call,
                s(record, "tool"),
                s(record, "code"),
                record
                    .get("duration_ms")
                    .and_then(Value::as_u64)
                    .unwrap_or(0),
                s(&attempt, "command"),
            ))
        }
        "recovered" => Some(format!(
            "{} (trail recovered after a crash: {})",
            s(record, "time"),
            s(record, "reason")
        )),
        _ => None,
    }
}
