//! The text block a model reads (issue 32): the envelope written for a reader, not as JSON.
//!
//! Most clients hand the model a tool result's text block and nothing else, so the text is
//! what the model pays for and works from. It is, in order:
//! 1. the verdict in one line: `exit 0 · 12 ms` for a command that ran (its output cut or
//!    not: a cut is a fact below), else `CODE: reason` (`POLICY_DENIED: …`, `TIMEOUT: …`,
//!    `OK: 2 session(s)`); for a command that ran, what its reason says beyond that it ran
//!    (a limit that stopped it, a program the exec allowlist refused, a refused socket) on a
//!    `note:` line after it;
//! 2. stdout as it was printed, then `--- stderr ---` and stderr when there is any;
//! 3. one line per notable fact (`truncated: …`, `network refused: …`, a pipeline's stages)
//!    for a command; for any other tool, each field of the detail, a multi-line text under
//!    a `--- name ---` line of its own, and a terminal's screen a row a line.
//!
//! `structuredContent` keeps the typed envelope, unchanged: this is a view of it, made from
//! it alone, so the two cannot disagree.

use serde_json::{Map, Value};

use crate::envelope::{OperationResult, ResultCode};

/// Detail fields of a command's result that the text leaves to `structuredContent`: said
/// by the verdict or the facts, or of no use for the next step.
const RUN_QUIET: &[&str] = &[
    "exit_code",
    "stdout",
    "stderr",
    "cwd",
    "timeout_seconds",
    "confinement",
    "stdout_bytes",
    "stderr_bytes",
    "stdout_truncated",
    "stderr_truncated",
    "stdout_cut_errors",
    "stderr_cut_errors",
    "stages",
    "network_refused",
];

/// Detail fields that are rows of text a person would read (a session's terminal: its
/// screen, and what scrolled off it): a block, a row a line, not a line of JSON.
const TEXT_ROWS: &[&str] = &["screen", "scrollback"];

/// The text block of `result`.
pub fn text(result: &OperationResult) -> String {
    let detail = &result.detail;
    let ran = result.action == "run_command" && detail.contains_key("exit_code");
    let cut = result.code == ResultCode::OutputTruncated;
    let mut out = if ran && (result.code == ResultCode::Ok || cut) {
        exit_line(detail, result.duration_ms)
    } else {
        format!("{}: {}", result.code, result.reason)
    };
    out.push('\n');
    // "the command ran (exit code 1); <why>": the why is news the exit line does not carry
    // (a cut output has its own fact below).
    if ran
        && result.code == ResultCode::Ok
        && let Some((_, note)) = result.reason.split_once("; ")
    {
        out.push_str("note: ");
        out.push_str(note);
        out.push('\n');
    }
    for (key, marker) in [("stdout", None), ("stderr", Some("--- stderr ---"))] {
        if let Some(text) = detail.get(key).and_then(Value::as_str)
            && !text.is_empty()
        {
            if let Some(marker) = marker {
                out.push_str(marker);
                out.push('\n');
            }
            push_block(&mut out, text);
        }
    }
    if ran {
        facts(&mut out, detail);
    } else {
        fields(&mut out, detail);
    }
    out
}

/// `exit 0 · 12 ms`, or `killed (no exit code) · 3.2 s`.
fn exit_line(detail: &Map<String, Value>, duration_ms: u64) -> String {
    let took = duration(duration_ms);
    match detail.get("exit_code").and_then(Value::as_i64) {
        Some(code) => format!("exit {code} · {took}"),
        None => format!("killed (no exit code) · {took}"),
    }
}

/// `12 ms`, `3.2 s`, `2 min 5 s`.
fn duration(ms: u64) -> String {
    match ms {
        0..1000 => format!("{ms} ms"),
        1000..60_000 => format!("{:.1} s", ms as f64 / 1000.0),
        _ => format!("{} min {} s", ms / 60_000, (ms % 60_000) / 1000),
    }
}

/// A command's notable facts: what was cut, what the network refused, and a pipeline's
/// stages when there is more than one (or one ended without an exit code).
fn facts(out: &mut String, detail: &Map<String, Value>) {
    for stream in ["stdout", "stderr"] {
        if detail.get(&format!("{stream}_truncated")) == Some(&Value::Bool(true)) {
            let bytes = detail
                .get(&format!("{stream}_bytes"))
                .and_then(Value::as_u64)
                .unwrap_or_default();
            out.push_str(&format!(
                "truncated: {stream}, {bytes} bytes printed; its start and end are above\n"
            ));
        }
        if let Some(Value::Array(lines)) = detail.get(&format!("{stream}_cut_errors")) {
            out.push_str(&format!(
                "cut from {stream}, lines that look like errors (line: text):\n"
            ));
            for line in lines.iter().filter_map(Value::as_str) {
                out.push_str("  ");
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    if let Some(Value::Array(refused)) = detail.get("network_refused") {
        for line in refused.iter().filter_map(Value::as_str) {
            out.push_str(&format!("network refused: {line}\n"));
        }
    }
    if let Some(Value::Array(stages)) = detail.get("stages") {
        let each: Vec<String> = stages.iter().map(stage).collect();
        out.push_str(&format!("stages: {}\n", each.join(" | ")));
    }
    for (key, value) in detail
        .iter()
        .filter(|(k, _)| !RUN_QUIET.contains(&k.as_str()))
    {
        field(out, key, value);
    }
}

/// One stage as `git → exit 0`, `sleep → signal 9`, `head → not run`.
fn stage(stage: &Value) -> String {
    let name = stage["argv"][0].as_str().unwrap_or("?");
    let how = if stage["ran"] == Value::Bool(false) {
        "not run".to_owned()
    } else if let Some(code) = stage["exit_code"].as_i64() {
        format!("exit {code}")
    } else if let Some(signal) = stage["signal"].as_i64() {
        format!("signal {signal}")
    } else {
        "no status".to_owned()
    };
    format!("{name} → {how}")
}

/// One judged stage (explain, a refusal): `stage 1: git status → OK (allowlist)`, then what
/// runs in its place and the environment it adds, when the policy hardens it.
fn judged_stage(out: &mut String, n: usize, stage: &Value) {
    let words = |v: &Value| -> String {
        v.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .unwrap_or_default()
    };
    let (code, rule) = (
        stage["code"].as_str().unwrap_or("?"),
        stage["rule"].as_str().unwrap_or("?"),
    );
    out.push_str(&format!(
        "stage {n}: {} → {code} ({rule})\n",
        words(&stage["argv"])
    ));
    if stage.get("run_argv").is_some() && stage["run_argv"] != stage["argv"] {
        out.push_str(&format!("  runs: {}\n", words(&stage["run_argv"])));
    }
    if let Some(Value::Array(env)) = stage.get("env")
        && !env.is_empty()
    {
        let pairs: Vec<String> = env
            .iter()
            .filter_map(|p| Some(format!("{}={}", p[0].as_str()?, p[1].as_str()?)))
            .collect();
        out.push_str(&format!("  env: {}\n", pairs.join(" ")));
    }
}

/// Every field of a detail but the output, in the detail's order.
fn fields(out: &mut String, detail: &Map<String, Value>) {
    for (key, value) in detail
        .iter()
        .filter(|(k, _)| !matches!(k.as_str(), "stdout" | "stderr"))
    {
        field(out, key, value);
    }
}

/// `key: value` (a string as it is, anything else as compact JSON); a multi-line string
/// under a `--- key ---` line of its own; a verdict's stages a line each.
fn field(out: &mut String, key: &str, value: &Value) {
    match value {
        Value::Array(stages)
            if key == "stages" && stages.iter().all(|s| s.get("code").is_some()) =>
        {
            for (i, s) in stages.iter().enumerate() {
                judged_stage(out, i + 1, s);
            }
        }
        Value::Array(rows) if TEXT_ROWS.contains(&key) && rows.iter().all(Value::is_string) => {
            if rows.is_empty() {
                out.push_str(&format!("{key}: (none)\n"));
                return;
            }
            out.push_str(&format!("--- {key} ({} rows) ---\n", rows.len()));
            for row in rows.iter().filter_map(Value::as_str) {
                out.push_str(row);
                out.push('\n');
            }
        }
        Value::String(s) if s.contains('\n') => {
            out.push_str(&format!("--- {key} ---\n"));
            push_block(out, s);
        }
        Value::String(s) => out.push_str(&format!("{key}: {s}\n")),
        Value::Array(items) if !items.is_empty() && items.iter().all(Value::is_object) => {
            out.push_str(&format!("--- {key} ({}) ---\n", items.len()));
            for item in items.iter().filter_map(Value::as_object) {
                out.push_str(&row(item));
                out.push('\n');
            }
        }
        other => out.push_str(&format!("{key}: {other}\n")),
    }
}

/// One element of a list (a folder's entries, a plan's moves and skips) as a line: what it
/// is about first (`src → dst`, a path or a name), then its other fields as `key=value`,
/// a verdict as `CODE (rule): reason`; empty and false fields left out. 19 entries as one
/// line of JSON were 4,147 characters a model had to parse.
fn row(item: &Map<String, Value>) -> String {
    let text = |key: &str| item.get(key).and_then(Value::as_str);
    let (mut line, mut shown) = match (text("src"), text("dst")) {
        (Some(src), Some(dst)) => (format!("{src} → {dst}"), vec!["src", "dst"]),
        _ => match text("path").filter(|p| !p.is_empty()).or(text("name")) {
            Some(head) => (head.to_owned(), vec!["path", "name"]),
            None => (String::new(), Vec::new()),
        },
    };
    if let Some(verdict) = verdict(item) {
        line.push_str(&format!(": {verdict}"));
        shown.extend(["code", "rule", "reason", "layer"]);
    }
    // Where it would go reads last, as `src → dst` does.
    let destination = text("destination").map(|d| format!("→ {d}"));
    shown.push("destination");
    let fields = item.iter().filter(|(k, _)| !shown.contains(&k.as_str()));
    for (key, value) in fields {
        let part = match value {
            Value::Null | Value::Bool(false) => continue,
            Value::Bool(true) => key.clone(),
            Value::String(s) => format!("{key}={s}"),
            Value::Object(o) => match verdict(o) {
                Some(v) => format!("{key}: {v}"),
                None => format!("{key}={value}"),
            },
            other => format!("{key}={other}"),
        };
        if !line.is_empty() {
            line.push_str("  ");
        }
        line.push_str(&part);
    }
    if let Some(destination) = destination {
        line.push_str("  ");
        line.push_str(&destination);
    }
    line
}

/// `CODE (rule): reason` of an object that carries a verdict.
fn verdict(o: &Map<String, Value>) -> Option<String> {
    let code = o.get("code")?.as_str()?;
    let reason = o.get("reason")?.as_str()?;
    Some(match o.get("rule").and_then(Value::as_str) {
        Some(rule) => format!("{code} ({rule}): {reason}"),
        None => format!("{code}: {reason}"),
    })
}

/// `text`, ending with exactly the newline it had, or one.
fn push_block(out: &mut String, text: &str) {
    out.push_str(text);
    if !text.ends_with('\n') {
        out.push('\n');
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::text;
    use crate::envelope::{OperationResult, ResultCode};

    fn run(code: ResultCode, reason: &str, detail: serde_json::Value) -> OperationResult {
        OperationResult::new("run_command", code, reason).with_detail(detail)
    }

    #[test]
    fn a_list_of_objects_is_a_line_each() {
        let r = OperationResult::new("plan_organize", ResultCode::Ok, "1 moves planned")
            .with_detail(json!({
                "plan_id": "p1",
                "moves": [{"src": "a.pdf", "dst": "Documents/a.pdf"}],
                "skips": [{"path": "b", "code": "NEEDS_EXPLICIT_REQUEST", "layer": "restraint",
                           "rule": "recent", "reason": "changed in the last two minutes"}],
                "entries": [{"name": "a.pdf", "path": "a.pdf", "kind": "file", "size": 12,
                             "category": "documents", "would_move": true,
                             "destination": "Documents/a.pdf", "skip": null}],
            }));
        assert_eq!(
            text(&r),
            "OK: 1 moves planned\n--- entries (1) ---\n\
             a.pdf  category=documents  kind=file  size=12  would_move  → Documents/a.pdf\n\
             --- moves (1) ---\na.pdf → Documents/a.pdf\nplan_id: p1\n--- skips (1) ---\n\
             b: NEEDS_EXPLICIT_REQUEST (recent): changed in the last two minutes\n"
        );
    }

    #[test]
    fn echo_hi_is_its_verdict_and_its_output() {
        let r = run(
            ResultCode::Ok,
            "the command ran (exit code 0)",
            json!({"exit_code": 0, "stdout": "hi\n", "stderr": "", "cwd": "/j", "timeout_seconds": 30}),
        )
        .with_duration(std::time::Duration::from_millis(12));
        assert_eq!(text(&r), "exit 0 · 12 ms\nhi\n");
    }

    #[test]
    fn what_the_reason_adds_to_a_run_is_a_note_under_the_exit_line() {
        let r = run(
            ResultCode::Ok,
            "the command ran (exit code 1); it looks like `rm` could not be executed",
            json!({"exit_code": 1, "stdout": "", "stderr": "denied\n", "not_executable": ["rm"]}),
        )
        .with_duration(std::time::Duration::from_millis(5));
        assert_eq!(
            text(&r),
            "exit 1 · 5 ms\nnote: it looks like `rm` could not be executed\n--- stderr ---\ndenied\nnot_executable: [\"rm\"]\n"
        );
    }

    #[test]
    fn a_failing_command_shows_stderr_under_its_marker_and_quotes_stay_plain() {
        let r = run(
            ResultCode::Ok,
            "the command ran (exit code 101)",
            json!({"exit_code": 101, "stdout": "running 2 tests\n", "stderr": "thread 'x' panicked: \"boom\"", "cwd": "/j"}),
        )
        .with_duration(std::time::Duration::from_millis(3200));
        assert_eq!(
            text(&r),
            "exit 101 · 3.2 s\nrunning 2 tests\n--- stderr ---\nthread 'x' panicked: \"boom\"\n"
        );
    }

    #[test]
    fn a_refusal_is_its_code_and_reason_then_its_detail() {
        let r = OperationResult::new(
            "run_command",
            ResultCode::PolicyDenied,
            "`rm` is not allowlisted",
        )
        .with_detail(json!({"rule": "default-deny", "would_run": false}));
        assert_eq!(
            text(&r),
            "POLICY_DENIED: `rm` is not allowlisted\nrule: default-deny\nwould_run: false\n"
        );
    }

    #[test]
    fn a_cut_run_and_its_refused_connections_are_facts() {
        let r = run(
            ResultCode::OutputTruncated,
            "the command ran; output was cut at 4096 bytes",
            json!({"exit_code": 0, "stdout": "aaaa\n[… 3 lines (9990 bytes) left out of 10000 bytes: the start and the end are shown …]\nbb\n",
                   "stderr": "", "stdout_bytes": 10000, "stdout_truncated": true,
                   "network_refused": ["CONNECT evil.test:443: not allowed"],
                   "stages": [{"argv": ["cat"], "ran": true, "exit_code": 0}, {"argv": ["head"], "ran": true, "exit_code": null, "signal": 13}]}),
        );
        let t = text(&r);
        assert!(t.starts_with("exit 0 · 0 ms\naaaa\n"), "{t}");
        assert!(
            t.contains("\ntruncated: stdout, 10000 bytes printed; its start and end are above\n"),
            "{t}"
        );
        assert!(
            t.contains("\nnetwork refused: CONNECT evil.test:443: not allowed\n"),
            "{t}"
        );
        assert!(
            t.ends_with("stages: cat → exit 0 | head → signal 13\n"),
            "{t}"
        );
    }

    #[test]
    fn a_judged_stage_is_one_line_with_what_runs_in_its_place() {
        let r = OperationResult::new("explain_command", ResultCode::Ok, "`git` is allowlisted")
            .with_detail(
                json!({"stages": [{"argv": ["git", "status"], "code": "OK", "rule": "allowlist",
                "run_argv": ["git", "--no-pager", "status"], "env": [["GIT_PAGER", "cat"]]}]}),
            );
        assert_eq!(
            text(&r),
            "OK: `git` is allowlisted\nstage 1: git status → OK (allowlist)\n  runs: git --no-pager status\n  env: GIT_PAGER=cat\n"
        );
    }

    #[test]
    fn another_tools_fields_are_lines_and_a_multi_line_one_gets_a_block() {
        let r = OperationResult::new("edit_file", ResultCode::Ok, "1 edit applied")
            .with_detail(json!({"path": "src/a.rs", "diff": "-a\n+b\n", "lines": 3}));
        assert_eq!(
            text(&r),
            "OK: 1 edit applied\n--- diff ---\n-a\n+b\nlines: 3\npath: src/a.rs\n"
        );
        let bare = OperationResult::new("stop_process", ResultCode::Ok, "stopped");
        assert_eq!(text(&bare), "OK: stopped\n");
    }

    /// A session on a terminal reads as a person would see it: its screen a row a line
    /// under a marker, not a line of JSON; an empty scrollback says so.
    #[test]
    fn a_terminals_screen_is_a_row_a_line() {
        let t = text(&run(
            ResultCode::Ok,
            "running",
            json!({"cursor": {"row": 2, "col": 4}, "screen": [">>> 6*7", "42", ">>> "], "scrollback": []}),
        ));
        assert!(
            t.contains("--- screen (3 rows) ---\n>>> 6*7\n42\n>>> \n"),
            "{t}"
        );
        assert!(t.contains("scrollback: (none)\n"), "{t}");
        assert!(
            t.contains("cursor: {\"col\":4,\"row\":2}\n")
                || t.contains("cursor: {\"row\":2,\"col\":4}\n"),
            "{t}"
        );
    }
}
