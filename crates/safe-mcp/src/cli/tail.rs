//! `safe-mcp audit tail`: the trail as a person reads it, one line per call (its outcome
//! joined with its attempt) and per network, approval or recovery record: time, caller,
//! tool, code, command. The code is coloured where standard output is a terminal (and
//! `NO_COLOR` is unset), plain when piped; `--json` prints the records themselves.
//! `--follow` keeps reading as the trail grows, across rotation.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, IsTerminal, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use serde_json::Value;

use crate::exit::{fatal, say};

/// How the lines are printed.
#[derive(Debug, Clone, Copy)]
pub struct Style {
    /// The records as they are (JSON Lines).
    pub json: bool,
    /// ANSI colours on the code.
    pub colour: bool,
}

impl Style {
    /// Colour where standard output is a terminal and `NO_COLOR` is unset.
    pub fn for_stdout(json: bool) -> Style {
        let colour =
            !json && std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none();
        Style { json, colour }
    }
}

/// Prints the trail at `path`; with `follow`, keeps reading as it grows.
pub fn tail_cmd(path: &Path, follow: bool, style: Style) -> ExitCode {
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
                if style.json {
                    say!("{}", line.trim_end());
                } else if let Some(text) = render(&record, &mut attempts, style) {
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

/// A record's string field, or "" (shared with the report).
pub(crate) fn s<'a>(v: &'a Value, k: &str) -> &'a str {
    v.get(k).and_then(Value::as_str).unwrap_or("")
}

/// Who asked: the token's subject over HTTP, `-` over stdio (shared with the report).
pub(crate) fn caller(v: &Value) -> &str {
    match s(v, "sub") {
        "" => "-",
        sub => sub,
    }
}

/// `code` in the colour of what it means: green ran, red refused, yellow the rest.
fn coloured(code: &str, width: usize, style: Style) -> String {
    let padded = format!("{code:<width$}");
    if !style.colour {
        return padded;
    }
    let colour = match code {
        "OK" | "open" | "close" | "approved" | "ticket-approved" | "scope-granted" | "expose"
        | "ingress" => "32",
        "POLICY_DENIED"
        | "PATH_ESCAPE"
        | "NEEDS_EXPLICIT_REQUEST"
        | "refused"
        | "denied"
        | "ticket-denied" => "31",
        _ => "33",
    };
    format!("\x1b[{colour}m{padded}\x1b[0m")
}

/// A call is printed when its outcome arrives, joined with its attempt; the proxy's,
/// the approvals' and recovery records as they come.
fn render(record: &Value, attempts: &mut HashMap<String, Value>, style: Style) -> Option<String> {
    // The file may not be this server's own trail: every string is made safe to print
    // (control sequences, bidi overrides) the way the trail writes them, before any is shown.
    let record = &safe_mcp_core::audit::sanitize(record.clone());
    let call = s(record, "call").to_owned();
    let time = s(record, "time");
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
            let nested = match s(&attempt, "parent") {
                "" => String::new(),
                parent => format!(" (started by {parent})"),
            };
            // A gateway call names its server beside the tool.
            let tool = match attempt.get("gateway").map(|g| s(g, "server")) {
                Some(server) if !server.is_empty() => format!("{}:{server}", s(record, "tool")),
                _ => s(record, "tool").to_owned(),
            };
            Some(format!(
                "{time} {:<10} {:<12} {:<16} {}{exit} {}ms  {}{rule}{nested}",
                call,
                caller(&attempt),
                tool,
                coloured(s(record, "code"), 18, style),
                record
                    .get("duration_ms")
                    .and_then(Value::as_u64)
                    .unwrap_or(0),
                s(&attempt, "command"),
            ))
        }
        "network" => {
            let reason = match s(record, "reason") {
                "" => String::new(),
                why => format!(": {why}"),
            };
            Some(format!(
                "{time} {:<10} {:<12} {:<16} {} {} {}:{}{reason}",
                call,
                "-",
                "network",
                coloured(s(record, "event"), 18, style),
                s(record, "method"),
                s(record, "host"),
                record.get("port").and_then(Value::as_u64).unwrap_or(0),
            ))
        }
        "approval" => {
            let argv: Vec<String> = record
                .get("argv")
                .and_then(Value::as_array)
                .map(|stages| {
                    stages
                        .iter()
                        .filter_map(Value::as_array)
                        .map(|a| {
                            a.iter()
                                .filter_map(Value::as_str)
                                .collect::<Vec<_>>()
                                .join(" ")
                        })
                        .collect()
                })
                .unwrap_or_default();
            Some(format!(
                "{time} {:<10} {:<12} {:<16} {} {}",
                call,
                caller(record),
                "approval",
                coloured(s(record, "event"), 18, style),
                argv.join(" | "),
            ))
        }
        "recovered" => Some(format!(
            "{time} (trail recovered after a crash: {})",
            s(record, "reason")
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn network_and_approval_records_get_a_line_of_their_own() {
        let plain = Style {
            json: false,
            colour: false,
        };
        let mut attempts = HashMap::new();
        let refused = json!({"kind": "network", "time": "t", "call": "c-1", "event": "refused",
            "method": "CONNECT", "host": "evil.example", "port": 443, "reason": "not allowed"});
        let line = render(&refused, &mut attempts, plain).unwrap();
        assert!(
            line.contains("network") && line.contains("refused"),
            "{line}"
        );
        assert!(
            line.contains("CONNECT evil.example:443: not allowed"),
            "{line}"
        );
        let asked = json!({"kind": "approval", "time": "t", "call": "c-2", "event": "asked",
            "argv": [["git", "push"]], "sub": "alice"});
        let line = render(&asked, &mut attempts, plain).unwrap();
        assert!(
            line.contains("alice") && line.contains("git push"),
            "{line}"
        );
        let red = Style {
            json: false,
            colour: true,
        };
        assert!(
            render(&refused, &mut attempts, red)
                .unwrap()
                .contains("\x1b[31mrefused")
        );
    }
}
