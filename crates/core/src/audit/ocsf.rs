//! The trail's records as OCSF events (`[audit.ship] format = "ocsf"`, issue 37 item 5),
//! for a SIEM that reads the Open Cybersecurity Schema Framework, version [`VERSION`].
//!
//! A run (`run_command`, `start_process`) is Process Activity (1007): its attempt a Launch,
//! its outcome a Terminate with the exit code. Another tool's call is API Activity (6003)
//! with the tool as the operation. A proxy or exposed-port connection is Network Activity
//! (4001): Open, Close, or Refuse. Everything else (approvals, checkpoints, recovery) is a
//! Base Event (0). Each event keeps the record's line, unchanged, as `unmapped.original`:
//! the chain fields are in it, so `audit verify --received` verifies what a SIEM stored,
//! whatever it made of the rest.

use serde_json::{Map, Value, json};

/// The OCSF schema version the events follow.
pub const VERSION: &str = "1.5.0";

/// What a tool does, for API Activity: the read-only ones read.
const READ_ONLY: &[&str] = &[
    "explain_command",
    "describe_policy",
    "read_file",
    "list_files",
    "plan_organize",
    "list_processes",
    "read_process_output",
];

/// `line` (one trail record) as an OCSF event of `server` (`terminal`, `files`). A line that
/// is not a record becomes a Base Event holding it.
pub fn event(line: &str, server: &str) -> Value {
    let record: Map<String, Value> = serde_json::from_str(line).unwrap_or_default();
    let s = |k: &str| record.get(k).and_then(Value::as_str).unwrap_or("");
    let kind = s("kind");
    let tool = s("tool");
    let refused = match kind {
        "attempt" => s("verdict") != "OK",
        "outcome" => s("code") != "OK",
        "network" => s("event") == "refused",
        _ => false,
    };
    let (class_uid, category_uid, activity_id): (u32, u32, u32) = match kind {
        "attempt" | "outcome" if matches!(tool, "run_command" | "start_process") => {
            (1007, 1, if kind == "attempt" { 1 } else { 2 })
        }
        "attempt" | "outcome" => (6003, 6, if READ_ONLY.contains(&tool) { 2 } else { 99 }),
        "network" => (
            4001,
            4,
            match s("event") {
                "close" => 2,
                "refused" => 5,
                _ => 1,
            },
        ),
        _ => (0, 0, 99),
    };
    let mut metadata = json!({
        "version": VERSION,
        "product": {
            "name": "safe-mcp",
            "vendor_name": "safe-mcp",
            "version": env!("CARGO_PKG_VERSION"),
        },
        "log_name": server,
    });
    if let Some(seq) = record.get("seq").and_then(Value::as_u64) {
        metadata["uid"] = json!(seq.to_string());
    }
    if !s("call").is_empty() {
        metadata["correlation_uid"] = json!(s("call"));
    }
    let message = [s("reason"), s("command"), s("event"), kind]
        .into_iter()
        .find(|m| !m.is_empty())
        .unwrap_or("record");
    let mut event = json!({
        "class_uid": class_uid,
        "category_uid": category_uid,
        "activity_id": activity_id,
        "type_uid": u64::from(class_uid) * 100 + u64::from(activity_id),
        "time": epoch_ms(s("time")).unwrap_or(0),
        "severity_id": if refused { 3 } else { 1 },
        "status_id": if refused { 2 } else { 1 },
        "message": message,
        "metadata": metadata,
        "unmapped": {"original": line.trim_end()},
    });
    if activity_id == 99 {
        event["activity_name"] = json!(if kind.is_empty() { "record" } else { kind });
    }
    let actor = match s("sub") {
        "" => json!({"app_name": "mcp client"}),
        sub => json!({"user": {"uid": sub}}),
    };
    match class_uid {
        1007 => {
            event["actor"] = actor;
            event["device"] = json!({"type_id": 0, "hostname": hostname()});
            // The call names the process tree (the record holds no pid).
            let mut process = json!({"uid": s("call")});
            if !s("command").is_empty() {
                process["cmd_line"] = json!(s("command"));
            }
            if !s("cwd").is_empty() {
                process["working_directory"] = json!(s("cwd"));
            }
            event["process"] = process;
            if let Some(code) = record.get("exit_code").and_then(Value::as_i64) {
                event["exit_code"] = json!(code);
            }
        }
        6003 => {
            event["actor"] = actor;
            event["api"] = json!({"operation": tool});
            event["src_endpoint"] = json!({"name": "mcp client"});
        }
        4001 => {
            let mut endpoint = json!({"hostname": s("host")});
            if let Some(port) = record.get("port").and_then(Value::as_u64) {
                endpoint["port"] = json!(port);
            }
            event["dst_endpoint"] = endpoint;
        }
        _ => {}
    }
    event
}

/// The trail's own line inside an OCSF event (`unmapped.original`), for verifying what a
/// receiver stored.
pub fn original(event: &Map<String, Value>) -> Option<&str> {
    event.get("class_uid")?;
    event.get("unmapped")?.get("original")?.as_str()
}

/// Milliseconds since the epoch of a record's `time` (`2026-12-02T06:36:24.861Z`).
fn epoch_ms(time: &str) -> Option<i64> {
    let num = |a: usize, b: usize| time.get(a..b)?.parse::<i64>().ok();
    let (y, mo, d) = (num(0, 4)?, num(5, 7)?, num(8, 10)?);
    let (h, mi, sec) = (num(11, 13)?, num(14, 16)?, num(17, 19)?);
    let ms = num(20, 23).unwrap_or(0);
    // Days from the civil date (proleptic Gregorian), after Howard Hinnant's algorithm.
    let y = if mo <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (mo + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(((days * 24 + h) * 60 + mi) * 60_000 + sec * 1000 + ms)
}

/// This machine's name, for the device of a Process Activity.
fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_of_record_gets_its_class_and_keeps_its_line() {
        let attempt = r#"{"kind":"attempt","seq":3,"call":"1-2","tool":"run_command","command":"echo hi","verdict":"OK","time":"2026-12-02T06:36:24.861Z"}"#;
        let e = event(attempt, "terminal");
        assert_eq!(e["class_uid"], 1007);
        assert_eq!(e["type_uid"], 100_701);
        assert_eq!(e["time"], 1_796_193_384_861i64);
        assert_eq!(e["process"]["cmd_line"], "echo hi");
        assert_eq!(e["metadata"]["uid"], "3");
        let map = e.as_object().unwrap();
        assert_eq!(original(map), Some(attempt));
        let refused = r#"{"kind":"network","event":"refused","host":"x.example","port":443}"#;
        let n = event(refused, "terminal");
        assert_eq!(
            (n["class_uid"].as_u64(), n["activity_id"].as_u64()),
            (Some(4001), Some(5))
        );
        assert_eq!(n["status_id"], 2);
        let edit = r#"{"kind":"attempt","tool":"edit_file","verdict":"OK"}"#;
        assert_eq!(event(edit, "terminal")["api"]["operation"], "edit_file");
        assert_eq!(event("not json", "terminal")["class_uid"], 0);
    }
}
