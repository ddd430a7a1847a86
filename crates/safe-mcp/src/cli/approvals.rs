//! The approval desk (issue 34, item 2): where a person approves a ticket, and
//! `safe-mcp approvals list|show|approve|deny`, which talks to it.
//!
//! A terminal server opens an owner-only unix socket beside its audit trail
//! (`<audit_log>.approvals.sock`, mode 0600) and writes a fresh key beside it
//! (`<audit_log>.approvals.key`, 0600, new at every start). A request is one JSON line with
//! the key and the operation; the answer is one JSON line. A request is taken only from the
//! server's own user or root (`SO_PEERCRED`) and only with the key. Neither file exists in
//! the private view (the audit trail's directory is never in it), and without a view
//! Landlock gives commands no read of the audit directory, so no command can present the
//! key even where it could reach the socket: a ticket is approved with something the model
//! has never seen. The approver's uid goes into the trail.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use safe_mcp_core::config::Section;
use safe_mcp_core::terminal::TerminalService;
use safe_mcp_core::tickets::Tickets;
use serde_json::{Value, json};

/// The socket and key of the desk beside the trail at `audit`.
fn paths(audit: &Path) -> (PathBuf, PathBuf) {
    let with = |suffix: &str| {
        let mut name = audit.as_os_str().to_owned();
        name.push(suffix);
        PathBuf::from(name)
    };
    (with(".approvals.sock"), with(".approvals.key"))
}

/// An open desk; its socket and key go when it is dropped (the server exits).
pub(crate) struct Desk {
    socket: PathBuf,
    key: PathBuf,
}

impl Drop for Desk {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.socket);
        let _ = std::fs::remove_file(&self.key);
    }
}

/// Opens the desk of `service` beside its trail, or says on stderr why there is none
/// (tickets are then refused, and say so).
pub(crate) fn open(service: &Arc<TerminalService>) -> Option<Desk> {
    let (socket, key_path) = paths(service.gate().log().path());
    match open_at(service, &socket, &key_path) {
        Ok(desk) => {
            service.tickets().open_desk();
            Some(desk)
        }
        Err(why) => {
            eprintln!(
                "safe-mcp: warning: no approval desk at {}: {why}; commands that need approval from a client that cannot ask are refused",
                socket.display()
            );
            None
        }
    }
}

fn open_at(service: &Arc<TerminalService>, socket: &Path, key_path: &Path) -> Result<Desk, String> {
    if socket.exists() {
        if UnixStream::connect(socket).is_ok() {
            return Err("another server answers there (one desk per audit trail)".into());
        }
        std::fs::remove_file(socket).map_err(|e| format!("a stale socket: {e}"))?;
    }
    let key = safe_mcp_core::random::hex(32).map_err(|e| e.to_string())?;
    let _ = std::fs::remove_file(key_path);
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(key_path)
        .and_then(|mut f| f.write_all(key.as_bytes()))
        .map_err(|e| format!("the key file {}: {e}", key_path.display()))?;
    let listener = UnixListener::bind(socket).map_err(|e| e.to_string())?;
    std::fs::set_permissions(socket, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| e.to_string())?;
    let desk = Desk {
        socket: socket.to_path_buf(),
        key: key_path.to_path_buf(),
    };
    // The thread is never joined: it holds the service weakly, so that the service (and
    // with it the commands' HOME, removed when it drops) ends with the server.
    let service = Arc::downgrade(service);
    std::thread::Builder::new()
        .name("approval-desk".into())
        .spawn(move || {
            for stream in listener.incoming().flatten() {
                let Some(service) = service.upgrade() else {
                    return;
                };
                let _ = serve_one(&service, stream, &key);
            }
        })
        .map_err(|e| e.to_string())?;
    Ok(desk)
}

/// One request: who asks, with what key, for what.
fn serve_one(service: &TerminalService, stream: UnixStream, key: &str) -> std::io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    let uid = rustix::net::sockopt::socket_peercred(&stream)
        .map(|c| c.uid.as_raw())
        .unwrap_or(u32::MAX);
    let mut line = String::new();
    BufReader::new(std::io::Read::take(&stream, 64 << 10)).read_line(&mut line)?;
    let answer = match serde_json::from_str::<Value>(&line) {
        _ if uid != rustix::process::geteuid().as_raw() && uid != 0 => {
            json!({"ok": false, "error": "only the server's own user or root may approve"})
        }
        Ok(request) if equal(request["key"].as_str().unwrap_or(""), key) => {
            answer(service, &request, uid)
        }
        Ok(_) => {
            json!({"ok": false, "error": "the key does not match this server's (it is new at every start)"})
        }
        Err(_) => json!({"ok": false, "error": "not a request"}),
    };
    let mut stream = stream;
    writeln!(stream, "{answer}")
}

/// Compares in time that does not depend on where they differ.
fn equal(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

fn answer(service: &TerminalService, request: &Value, uid: u32) -> Value {
    let tickets: &Tickets = service.tickets();
    let ticket = request["ticket"].as_str().unwrap_or("");
    let decided = |approve: bool| match tickets.decide(ticket, approve, uid) {
        Ok(view) => {
            let record = json!({
                "event": if approve { "ticket-approved" } else { "ticket-denied" },
                "ticket": view.ticket, "tool": view.tool, "argv": view.stages, "cwd": view.cwd,
                "approver_uid": uid, "caller": view.caller,
            });
            // The decision is in the trail before the model can use it.
            match service.gate().append("approval", &record, true) {
                Ok(()) => json!({"ok": true, "tickets": [view]}),
                Err(e) => {
                    json!({"ok": false, "error": format!("the decision could not be recorded: {e}")})
                }
            }
        }
        Err(e) => json!({"ok": false, "error": e.to_string()}),
    };
    match request["op"].as_str() {
        Some("list") => json!({"ok": true, "tickets": tickets.list()}),
        Some("show") => match tickets.show(ticket) {
            Ok(view) => json!({"ok": true, "tickets": [view]}),
            Err(e) => json!({"ok": false, "error": e.to_string()}),
        },
        Some("approve") => decided(true),
        Some("deny") => decided(false),
        _ => json!({"ok": false, "error": "op must be list, show, approve or deny"}),
    }
}

/// `safe-mcp approvals OP [TICKET]`: exit 0 done, 1 refused, 2 no server to ask.
pub(crate) fn run(config: Option<&Path>, op: &str, ticket: Option<&str>) -> ExitCode {
    let policy = match super::load(config, Section::Terminal) {
        Ok(p) => p,
        Err(e) => return crate::exit::fatal(e),
    };
    let Some(audit) = policy.audit.log.as_deref() else {
        return crate::exit::fatal("the policy names no audit_log, so no server has a desk");
    };
    let (socket, key_path) = paths(audit);
    let asked = std::fs::read_to_string(&key_path)
        .map_err(|e| {
            format!(
                "{}: {e} (is the terminal server running?)",
                key_path.display()
            )
        })
        .and_then(|key| {
            let mut stream = UnixStream::connect(&socket).map_err(|e| {
                format!(
                    "{}: {e} (is the terminal server running?)",
                    socket.display()
                )
            })?;
            let request = json!({"key": key.trim(), "op": op, "ticket": ticket});
            writeln!(stream, "{request}").map_err(|e| e.to_string())?;
            let mut line = String::new();
            BufReader::new(stream)
                .read_line(&mut line)
                .map_err(|e| e.to_string())?;
            serde_json::from_str::<Value>(&line)
                .map_err(|_| "the server's answer was not JSON".to_owned())
        });
    let answer = match asked {
        Ok(a) => a,
        Err(e) => {
            eprintln!("safe-mcp approvals: {e}");
            return ExitCode::from(2);
        }
    };
    if answer["ok"] != true {
        eprintln!(
            "safe-mcp approvals: {}",
            answer["error"].as_str().unwrap_or("refused")
        );
        return ExitCode::from(1);
    }
    let tickets = answer["tickets"].as_array().cloned().unwrap_or_default();
    if tickets.is_empty() {
        println!("no tickets waiting");
    }
    for t in tickets {
        // The command, its path and its reasons are the model's: no control sequence of
        // theirs reaches the operator's terminal (an OSC title, a concealed rest of line).
        println!("{}", describe(&safe_mcp_core::audit::sanitize(t), op));
    }
    ExitCode::SUCCESS
}

/// A ticket as a person reads it: what would run, where, why, and where it stands.
fn describe(t: &Value, op: &str) -> String {
    let stages: Vec<String> = t["stages"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|argv| {
            let argv: Vec<String> = argv
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|a| a.as_str().map(str::to_owned))
                .collect();
            format!("  {}", safe_mcp_core::approval::render_argv(&argv))
        })
        .collect();
    let verb = match op {
        "approve" => "approved: ",
        "deny" => "denied: ",
        _ => "",
    };
    format!(
        "{verb}ticket {} ({}, {}): {}\n{}\n  in {}\n  why: {}",
        t["ticket"].as_str().unwrap_or(""),
        t["tool"].as_str().unwrap_or(""),
        t["state"].as_str().unwrap_or(""),
        t["command"].as_str().unwrap_or(""),
        stages.join("\n"),
        safe_mcp_core::approval::render_text(t["cwd"].as_str().unwrap_or("")),
        t["reasons"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join("; ")
    )
}
