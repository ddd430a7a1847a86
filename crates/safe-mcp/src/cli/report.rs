//! `safe-mcp audit report`: the trail as one self-contained HTML page a person opens in a
//! browser (issue 37, item 3). No script, no font or style from elsewhere: the page is the
//! file. Every string from the trail is HTML-escaped; the trail is redacted already, and the
//! page shows nothing the trail does not hold.
//!
//! What it shows: whether the chain verifies (or where it breaks), calls over time, calls
//! per tool, code and caller, every refusal with its rule, network opens and refusals by
//! host, approvals (who was asked, how it was answered), process sessions (start, end, how
//! they ended) and the slowest calls. It reads the policy's trail, or with `--received` what
//! a receiver stored of a fleet's trails: each server's chain verified on its own, the calls
//! per server, a call named `call@server`.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use safe_mcp_core::audit::Chain;
use safe_mcp_core::audit::received::{received_records, verify_received};
use safe_mcp_core::audit::verify::{verify, with_rotations};
use safe_mcp_core::config::{ProcessEnv, Section};
use safe_mcp_core::load::load_policy;
use serde_json::Value;

use super::tail::{caller, s};
use crate::exit::{fatal, say};

/// How many of the slowest calls are listed.
const SLOWEST: usize = 10;

/// Where a report's records come from.
pub enum Source<'a> {
    /// The policy's own trail (and its rotated files).
    Policy(Option<&'a Path>),
    /// What a receiver stored of one server's or a fleet's trails (`--received`): every
    /// server's chain is verified on its own, as `audit verify --received` does.
    Received {
        /// The policy whose HMAC key verifies the records, if any.
        config: Option<&'a Path>,
        /// The HMAC key file itself (wins over the policy's).
        key_file: Option<&'a Path>,
        /// The stored lines; stdin for none or `-`.
        files: &'a [PathBuf],
    },
}

/// Writes the report of `source` (records at or after `since`, an RFC 3339 time or its
/// prefix) to `out`, or prints it.
pub fn report_cmd(source: Source<'_>, since: Option<&str>, out: Option<&Path>) -> ExitCode {
    let read = match source {
        Source::Policy(config) => policy_trail(config),
        Source::Received {
            config,
            key_file,
            files,
        } => received(config, key_file, files),
    };
    let (title, chain, records) = match read {
        Ok(read) => read,
        Err(code) => return code,
    };
    let records: Vec<Value> = records
        .into_iter()
        .filter(|r| since.is_none_or(|t| s(r, "time") >= t))
        .collect();
    let page = render(&title, &chain, &records);
    match out {
        Some(path) => match std::fs::write(path, page) {
            Ok(()) => {
                say!("wrote {}", path.display());
                ExitCode::SUCCESS
            }
            Err(e) => fatal(format!("cannot write {}: {e}", path.display())),
        },
        None => {
            say!("{page}");
            ExitCode::SUCCESS
        }
    }
}

/// What a report shows: its source, the chain's verdict (intact, or why not) and the
/// records.
type Read = (String, Result<String, String>, Vec<Value>);

fn policy_trail(config: Option<&Path>) -> Result<Read, ExitCode> {
    let policy = load_policy(config, &ProcessEnv, Section::Any).map_err(fatal)?;
    let Some(log) = policy.audit.log.clone() else {
        return Err(fatal("the policy names no audit_log"));
    };
    let files = with_rotations(&log);
    let chain = match verify(&files, &Chain::new(policy.audit.hmac_key.clone())) {
        Ok(report) => Ok(format!(
            "intact: {} records in {} file(s), every hash and link checked{}",
            report.records,
            report.files,
            if report.notes.is_empty() {
                String::new()
            } else {
                format!(" ({})", report.notes.join("; "))
            }
        )),
        Err(broken) => Err(broken.to_string()),
    };
    let mut records = Vec::new();
    for file in &files {
        let Ok(text) = std::fs::read_to_string(file) else {
            return Err(fatal(format!("cannot read {}", file.display())));
        };
        records.extend(
            text.lines()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok()),
        );
    }
    Ok((log.display().to_string(), chain, records))
}

fn received(
    config: Option<&Path>,
    key_file: Option<&Path>,
    files: &[PathBuf],
) -> Result<Read, ExitCode> {
    let key = super::audit::read_key(config, key_file)?;
    let text = super::audit::received_text(files).map_err(fatal)?;
    let chain = match verify_received(&text, &Chain::new(key)) {
        Ok(reports) => {
            let lines: Vec<String> = reports
                .iter()
                .map(|r| super::audit::chain_line(r, false))
                .collect();
            let verdict = format!(
                "of {} server(s), each verified on its own: {}",
                reports.len(),
                lines.join("; ")
            );
            if reports.iter().all(|r| r.gaps.is_empty()) {
                Ok(format!("intact: every record {verdict}"))
            } else {
                Err(format!("records are missing (gaps): {verdict}"))
            }
        }
        Err(why) => Err(why),
    };
    let names: Vec<String> = match files {
        [] => vec!["stdin".to_owned()],
        many => many.iter().map(|f| f.display().to_string()).collect(),
    };
    let title = format!("received: {}", names.join(", "));
    Ok((title, chain, received_records(&text)))
}

/// `text` safe inside HTML text and attribute values.
fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if c.is_control() && c != '\n' => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    out
}

/// One call: its attempt and its outcome.
struct Call<'a> {
    attempt: Option<&'a Value>,
    outcome: Option<&'a Value>,
}

fn render(source: &str, chain: &Result<String, String>, records: &[Value]) -> String {
    let mut calls: Vec<(String, Call<'_>)> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    // A fleet's call ids are each server's own: there a call is named `call@server`.
    let fleet = records
        .iter()
        .any(|r| s(r, "server") != records.first().map_or("", |f| s(f, "server")));
    for r in records {
        let kind = s(r, "kind");
        if kind != "attempt" && kind != "outcome" {
            continue;
        }
        let call = if fleet {
            safe_mcp_core::fleet::owned(s(r, "call"), s(r, "server"))
        } else {
            s(r, "call").to_owned()
        };
        let at = *index.entry(call.clone()).or_insert_with(|| {
            calls.push((
                call,
                Call {
                    attempt: None,
                    outcome: None,
                },
            ));
            calls.len() - 1
        });
        if kind == "attempt" {
            calls[at].1.attempt = Some(r);
        } else {
            calls[at].1.outcome = Some(r);
        }
    }
    let mut page = String::new();
    let first = records.first().map_or("", |r| s(r, "time"));
    let last = records.last().map_or("", |r| s(r, "time"));
    let _ = writeln!(
        page,
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>safe-mcp audit report</title>\n<style>{STYLE}</style></head><body>\n<h1>safe-mcp audit report</h1>\n<p class=\"meta\">{} · {} records · {} to {}</p>",
        esc(source),
        records.len(),
        esc(first),
        esc(last)
    );
    match chain {
        Ok(text) => {
            let _ = writeln!(page, "<p class=\"chain ok\">Chain {}</p>", esc(text));
        }
        Err(text) => {
            let _ = writeln!(
                page,
                "<p class=\"chain broken\">Chain BROKEN: {}</p>",
                esc(text)
            );
        }
    }
    over_time(&mut page, &calls);
    if fleet {
        servers(&mut page, &calls);
    }
    counts(&mut page, &calls);
    refusals(&mut page, &calls);
    network(&mut page, records);
    approvals(&mut page, records, &calls);
    scopes(&mut page, records, &calls);
    gateway(&mut page, &calls);
    sessions(&mut page, &calls);
    slowest(&mut page, &calls);
    page.push_str("</body></html>\n");
    page
}

/// `<table>` with `head` and `rows`, or a line saying there is nothing.
fn table(page: &mut String, title: &str, head: &[&str], rows: &[Vec<String>]) {
    let _ = writeln!(page, "<h2>{}</h2>", esc(title));
    if rows.is_empty() {
        page.push_str("<p class=\"none\">none</p>\n");
        return;
    }
    page.push_str("<table><tr>");
    for h in head {
        let _ = write!(page, "<th>{}</th>", esc(h));
    }
    page.push_str("</tr>\n");
    for row in rows {
        page.push_str("<tr>");
        for cell in row {
            let _ = write!(page, "<td>{}</td>", esc(cell));
        }
        page.push_str("</tr>\n");
    }
    page.push_str("</table>\n");
}

/// Calls per minute (or per hour over a long trail), as bars.
fn over_time(page: &mut String, calls: &[(String, Call<'_>)]) {
    let times: Vec<&str> = calls
        .iter()
        .filter_map(|(_, c)| c.attempt.or(c.outcome))
        .map(|r| s(r, "time"))
        .filter(|t| t.len() >= 16)
        .collect();
    let hours = times
        .first()
        .zip(times.last())
        .is_some_and(|(a, b)| a[..13] != b[..13]);
    let cut = if hours { 13 } else { 16 };
    let mut buckets: BTreeMap<&str, usize> = BTreeMap::new();
    for t in &times {
        *buckets.entry(&t[..cut]).or_default() += 1;
    }
    let _ = writeln!(
        page,
        "<h2>Calls over time</h2>\n<p class=\"meta\">per {}</p>",
        if hours { "hour" } else { "minute" }
    );
    if buckets.is_empty() {
        page.push_str("<p class=\"none\">none</p>\n");
        return;
    }
    let most = buckets.values().copied().max().unwrap_or(1).max(1);
    let width = 24 * buckets.len() + 8;
    let _ = write!(
        page,
        "<svg width=\"{width}\" height=\"140\" role=\"img\" aria-label=\"calls over time\">"
    );
    for (i, (bucket, n)) in buckets.iter().enumerate() {
        let h = 100 * n / most;
        let x = 8 + 24 * i;
        let _ = write!(
            page,
            "<rect x=\"{x}\" y=\"{}\" width=\"18\" height=\"{h}\" class=\"bar\"><title>{}: {n}</title></rect><text x=\"{}\" y=\"135\" class=\"tick\">{n}</text>",
            110 - h,
            esc(bucket),
            x + 4
        );
    }
    page.push_str("</svg>\n");
}

/// Calls per tool, per code, per caller.
fn counts(page: &mut String, calls: &[(String, Call<'_>)]) {
    let mut by: BTreeMap<(String, String, String), usize> = BTreeMap::new();
    for (_, c) in calls {
        let Some(outcome) = c.outcome else { continue };
        let who = c.attempt.map_or("-", caller);
        *by.entry((
            s(outcome, "tool").to_owned(),
            s(outcome, "code").to_owned(),
            who.to_owned(),
        ))
        .or_default() += 1;
    }
    let rows: Vec<Vec<String>> = by
        .into_iter()
        .map(|((tool, code, caller), n)| vec![tool, code, caller, n.to_string()])
        .collect();
    table(
        page,
        "Calls by tool, code and caller",
        &["tool", "code", "caller", "calls"],
        &rows,
    );
}

/// Calls and refusals per server, for a fleet's merged stream.
fn servers(page: &mut String, calls: &[(String, Call<'_>)]) {
    let mut by: BTreeMap<String, (usize, usize, BTreeSet<String>)> = BTreeMap::new();
    for (_, c) in calls {
        let Some(record) = c.attempt.or(c.outcome) else {
            continue;
        };
        let entry = by.entry(s(record, "server").to_owned()).or_default();
        entry.0 += 1;
        if c.outcome.is_some_and(|o| s(o, "code") != "OK") {
            entry.1 += 1;
        }
        entry.2.insert(c.attempt.map_or("-", caller).to_owned());
    }
    let rows: Vec<Vec<String>> = by
        .into_iter()
        .map(|(server, (n, refused, callers))| {
            let callers: Vec<String> = callers.into_iter().collect();
            vec![
                server,
                n.to_string(),
                refused.to_string(),
                callers.join(", "),
            ]
        })
        .collect();
    table(
        page,
        "Calls by server",
        &["server", "calls", "not OK", "callers"],
        &rows,
    );
}

/// Every refusal, with the rule that decided it.
fn refusals(page: &mut String, calls: &[(String, Call<'_>)]) {
    let rows: Vec<Vec<String>> = calls
        .iter()
        .filter_map(|(call, c)| {
            let a = c.attempt?;
            (s(a, "verdict") != "OK" && !s(a, "verdict").is_empty()).then(|| {
                vec![
                    s(a, "time").to_owned(),
                    call.clone(),
                    s(a, "tool").to_owned(),
                    s(a, "command").to_owned(),
                    s(a, "verdict").to_owned(),
                    s(a, "rule").to_owned(),
                    s(a, "reason").to_owned(),
                ]
            })
        })
        .collect();
    table(
        page,
        "Refusals",
        &["time", "call", "tool", "command", "code", "rule", "reason"],
        &rows,
    );
}

/// Network connections by host: opened, refused, and why.
fn network(page: &mut String, records: &[Value]) {
    let mut by: BTreeMap<(String, String), (usize, usize, Vec<String>)> = BTreeMap::new();
    for r in records.iter().filter(|r| s(r, "kind") == "network") {
        let host = format!(
            "{}:{}",
            s(r, "host"),
            r.get("port").and_then(Value::as_u64).unwrap_or(0)
        );
        let entry = by.entry((host, s(r, "method").to_owned())).or_default();
        match s(r, "event") {
            "open" | "ingress" | "expose" => entry.0 += 1,
            "refused" => {
                entry.1 += 1;
                let why = s(r, "reason").to_owned();
                if !why.is_empty() && !entry.2.contains(&why) {
                    entry.2.push(why);
                }
            }
            _ => {}
        }
    }
    let rows: Vec<Vec<String>> = by
        .into_iter()
        .filter(|(_, (open, refused, _))| open + refused > 0)
        .map(|((host, method), (open, refused, why))| {
            vec![
                host,
                method,
                open.to_string(),
                refused.to_string(),
                why.join("; "),
            ]
        })
        .collect();
    table(
        page,
        "Network by host",
        &["host", "method", "opened", "refused", "why refused"],
        &rows,
    );
}

/// Who was asked about which call, and how it was answered.
fn approvals(page: &mut String, records: &[Value], calls: &[(String, Call<'_>)]) {
    let mut rows: Vec<Vec<String>> = Vec::new();
    for (call, c) in calls {
        let Some(a) = c.attempt else { continue };
        let Some(approval) = a.get("approval") else {
            continue;
        };
        rows.push(vec![
            s(a, "time").to_owned(),
            call.clone(),
            s(a, "command").to_owned(),
            s(approval, "decision").to_owned(),
            s(approval, "via").to_owned(),
            caller(a).to_owned(),
        ]);
    }
    for r in records.iter().filter(|r| s(r, "kind") == "approval") {
        if s(r, "event").starts_with("ticket-") {
            rows.push(vec![
                s(r, "time").to_owned(),
                s(r, "call").to_owned(),
                s(r, "ticket").to_owned(),
                s(r, "event").to_owned(),
                "ticket-cli".to_owned(),
                r.get("approver_uid")
                    .map_or_else(|| "-".to_owned(), |u| format!("uid {u}")),
            ]);
        }
    }
    table(
        page,
        "Approvals",
        &["time", "call", "command", "decision", "how", "who"],
        &rows,
    );
}

/// The scopes persons granted (issue 53): each with what it covers, how it was granted, how
/// often a call used it (the attempts approved `via: "scope"` with its id), and its end.
fn scopes(page: &mut String, records: &[Value], calls: &[(String, Call<'_>)]) {
    let uses = |id: &str| {
        calls
            .iter()
            .filter_map(|(_, c)| c.attempt?.get("approval"))
            .filter(|a| s(a, "via") == "scope" && s(a, "scope") == id)
            .count()
    };
    let revoked = |id: &str| {
        records
            .iter()
            .find(|r| s(r, "event") == "scope-revoked" && s(r, "scope") == id)
            .map_or_else(|| "-".to_owned(), |r| s(r, "time").to_owned())
    };
    let rows: Vec<Vec<String>> = records
        .iter()
        .filter(|r| s(r, "kind") == "approval" && s(r, "event") == "scope-granted")
        .map(|r| {
            let id = s(r, "scope");
            vec![
                s(r, "time").to_owned(),
                id.to_owned(),
                s(r, "scope_kind").to_owned(),
                s(r, "covers").to_owned(),
                s(r, "via").to_owned(),
                uses(id).to_string(),
                revoked(id),
            ]
        })
        .collect();
    table(
        page,
        "Approval scopes",
        &[
            "granted", "scope", "kind", "covers", "how", "uses", "revoked",
        ],
        &rows,
    );
}

/// The gateway's downstream servers: per server, its calls (tools, resources, prompts, and
/// what it asked of clients), how many were forwarded, refused or failed, and the bytes of
/// what came back. An `explain_command` of a server's tool names the server too, but it is
/// not a call of it.
fn gateway(page: &mut String, calls: &[(String, Call<'_>)]) {
    let mut by: std::collections::BTreeMap<String, [u64; 5]> = Default::default();
    for (_, c) in calls {
        let Some(attempt) = c.attempt.filter(|a| s(a, "tool") == "gateway") else {
            continue;
        };
        let Some(server) = attempt.get("gateway").map(|g| s(g, "server")) else {
            continue;
        };
        let row = by.entry(server.to_owned()).or_default();
        row[0] += 1;
        let code = c.outcome.map_or("", |o| s(o, "code"));
        match (s(attempt, "verdict"), code) {
            ("OK", "OK" | "OUTPUT_TRUNCATED") => row[1] += 1,
            ("OK", _) => row[3] += 1,
            _ => row[2] += 1,
        }
        row[4] += c
            .outcome
            .and_then(|o| o.get("gateway")?.get("result_bytes")?.as_u64())
            .unwrap_or(0);
    }
    let rows: Vec<Vec<String>> = by
        .iter()
        .map(|(server, n)| {
            let mut row = vec![server.clone()];
            row.extend(n.iter().map(u64::to_string));
            row
        })
        .collect();
    table(
        page,
        "Gateway servers",
        &[
            "server",
            "calls",
            "forwarded",
            "refused",
            "failed",
            "result bytes",
        ],
        &rows,
    );
}

/// Process sessions: started, ended, how. A `start_process` that was refused started no
/// session (its outcome has no end): it is among the calls, not here.
fn sessions(page: &mut String, calls: &[(String, Call<'_>)]) {
    let rows: Vec<Vec<String>> = calls
        .iter()
        .filter(|(_, c)| {
            c.outcome.is_some_and(|o| {
                s(o, "tool") == "start_process"
                    && o.get("session_end").is_some_and(|e| !e.is_null())
            })
        })
        .filter_map(|(call, c)| {
            let o = c.outcome?;
            Some(vec![
                c.attempt.map_or("", |a| s(a, "time")).to_owned(),
                s(o, "time").to_owned(),
                call.clone(),
                c.attempt.map_or("", |a| s(a, "command")).to_owned(),
                s(o, "session_end").to_owned(),
                s(o, "reason").to_owned(),
            ])
        })
        .collect();
    table(
        page,
        "Process sessions",
        &[
            "started",
            "ended",
            "call",
            "command",
            "how it ended",
            "reason",
        ],
        &rows,
    );
}

/// The calls that took longest.
fn slowest(page: &mut String, calls: &[(String, Call<'_>)]) {
    let mut timed: Vec<(u64, Vec<String>)> = calls
        .iter()
        .filter_map(|(call, c)| {
            let o = c.outcome?;
            let ms = o.get("duration_ms").and_then(Value::as_u64)?;
            Some((
                ms,
                vec![
                    ms.to_string(),
                    call.clone(),
                    s(o, "tool").to_owned(),
                    c.attempt.map_or("", |a| s(a, "command")).to_owned(),
                    s(o, "code").to_owned(),
                ],
            ))
        })
        .collect();
    timed.sort_by_key(|t| std::cmp::Reverse(t.0));
    let rows: Vec<Vec<String>> = timed.into_iter().take(SLOWEST).map(|(_, r)| r).collect();
    table(
        page,
        "Slowest calls",
        &["ms", "call", "tool", "command", "code"],
        &rows,
    );
}

const STYLE: &str = "body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#1b1f24;background:#fff}\
h1{font-size:22px;margin:0 0 4px}h2{font-size:16px;margin:22px 0 6px}\
.meta{color:#57606a;margin:2px 0}.none{color:#57606a;font-style:italic}\
.chain{padding:8px 12px;border-radius:6px;font-weight:600}\
.ok{background:#dafbe1;color:#116329}.broken{background:#ffebe9;color:#a40e26}\
table{border-collapse:collapse;margin:4px 0}th,td{border:1px solid #d0d7de;padding:3px 8px;text-align:left;vertical-align:top;max-width:520px;overflow-wrap:break-word}\
th{background:#f6f8fa;white-space:nowrap}.bar{fill:#0969da}.tick{font-size:10px;fill:#57606a}";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_the_trail_holds_is_escaped() {
        assert_eq!(
            esc("<script>alert('x')</script> & \"q\""),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;q&quot;"
        );
        let records = vec![serde_json::json!({
            "kind": "attempt", "call": "c-1", "time": "2026-12-02T06:00:00.000Z",
            "tool": "run_command", "command": "<img src=x onerror=alert(1)>",
            "verdict": "POLICY_DENIED", "rule": "not-allowlisted", "reason": "no"
        })];
        let page = render("/t/audit.jsonl", &Ok("intact".into()), &records);
        assert!(!page.contains("<img"), "{page}");
        assert!(page.contains("&lt;img src=x"), "{page}");
        assert!(!page.contains("<script"), "no script: {page}");
    }
}
