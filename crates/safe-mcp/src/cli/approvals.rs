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
    // The scope a person chose with the yes, read before anything is decided: a choice
    // that cannot be made approves nothing.
    let scoped = match scope_of(service, request, ticket) {
        Ok(s) => s,
        Err(e) => return json!({"ok": false, "error": e}),
    };
    let decided = |approve: bool| match tickets.decide(ticket, approve, uid) {
        Ok(view) => {
            let record = json!({
                "event": if approve { "ticket-approved" } else { "ticket-denied" },
                "ticket": view.ticket, "tool": view.tool, "argv": view.stages, "cwd": view.cwd,
                "approver_uid": uid, "caller": view.caller,
            });
            // The decision is in the trail before the model can use it.
            if let Err(e) = service.gate().append("approval", &record, true) {
                return json!({"ok": false, "error": format!("the decision could not be recorded: {e}")});
            }
            match scoped.as_ref().filter(|_| approve) {
                Some((call, choice, caller, session)) => {
                    let grant = safe_mcp_core::scopes::Grant {
                        kind: choice.kind,
                        free: &choice.free,
                        caller,
                        session,
                        via: "ticket-cli",
                        approver_uid: Some(uid),
                    };
                    match service.grant_scope(call, &grant, ticket) {
                        Ok(scope) => json!({"ok": true, "tickets": [view], "scopes": [scope]}),
                        Err(e) => json!({"ok": true, "tickets": [view], "scope_error": e}),
                    }
                }
                None => json!({"ok": true, "tickets": [view]}),
            }
        }
        Err(e) => json!({"ok": false, "error": e.to_string()}),
    };
    match request["op"].as_str() {
        Some("list") => {
            json!({"ok": true, "tickets": tickets.list(), "scopes": service.scopes().list()})
        }
        Some("revoke") => revoke(service, ticket, uid),
        Some("show") => match tickets.show(ticket) {
            Ok(view) => json!({"ok": true, "tickets": [view]}),
            Err(e) => json!({"ok": false, "error": e.to_string()}),
        },
        Some("approve") => decided(true),
        Some("deny") => decided(false),
        _ => json!({"ok": false, "error": "op must be list, show, approve, deny or revoke"}),
    }
}

/// The call, choice, caller and session a scope granted with `ticket` is made from, when
/// the person chose one (`Ok(None)` for once).
type Scoped = (
    safe_mcp_core::scopes::OwnedCall,
    safe_mcp_core::approval::Choice,
    String,
    String,
);

fn scope_of(
    service: &TerminalService,
    request: &Value,
    ticket: &str,
) -> Result<Option<Scoped>, String> {
    if request["op"] != "approve" {
        return Ok(None);
    }
    let choice = safe_mcp_core::approval::Choice::from_answer(
        request["chosen"].get("scope"),
        request["chosen"].get("free"),
    )?;
    if choice.kind == safe_mcp_core::scopes::ScopeKind::Once {
        return Ok(None);
    }
    let (call, caller, session) = service
        .tickets()
        .scoped(ticket)
        .ok_or_else(|| format!("ticket {ticket} is not waiting, or its call can take no scope (one program, or one write): approve it without --scope"))?;
    // A shape the call cannot take refuses before anything is decided.
    safe_mcp_core::scopes::Shape::of(&call.as_call(), &choice.free).map_err(|e| e.to_string())?;
    Ok(Some((call, choice, caller, session)))
}

/// Ends a scope, recorded (durable) with the person's uid.
fn revoke(service: &TerminalService, id: &str, uid: u32) -> Value {
    match service.scopes().revoke(id) {
        Ok(scope) => {
            let record = json!({
                "event": "scope-revoked", "scope": scope.id, "scope_kind": scope.kind,
                "covers": scope.described, "uses": scope.uses, "approver_uid": uid,
            });
            match service.gate().append("approval", &record, true) {
                Ok(()) => json!({"ok": true, "scopes": [scope]}),
                Err(e) => json!({"ok": false, "error": format!("revoked, but not recorded: {e}")}),
            }
        }
        Err(e) => json!({"ok": false, "error": e.to_string()}),
    }
}

/// `safe-mcp approvals OP [TICKET|SCOPE]`, with the scope chosen for `approve`: exit 0
/// done, 1 refused, 2 no server to ask.
pub(crate) fn run(
    config: Option<&Path>,
    op: &str,
    ticket: Option<&str>,
    chosen: Option<Value>,
) -> ExitCode {
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
            let request = json!({"key": key.trim(), "op": op, "ticket": ticket, "chosen": chosen});
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
    if tickets.is_empty() && op != "revoke" {
        println!("no tickets waiting");
    }
    for t in tickets {
        // The command, its path and its reasons are the model's: no control sequence of
        // theirs reaches the operator's terminal (an OSC title, a concealed rest of line).
        println!("{}", describe(&safe_mcp_core::audit::sanitize(t), op));
    }
    let scopes = answer["scopes"].as_array().cloned().unwrap_or_default();
    if op == "list" && scopes.is_empty() {
        println!("no scopes live");
    }
    for s in scopes {
        println!("{}", describe_scope(&safe_mcp_core::audit::sanitize(s), op));
    }
    if let Some(why) = answer["scope_error"].as_str() {
        eprintln!("safe-mcp approvals: approved once, but no scope was made: {why}");
        return ExitCode::from(1);
    }
    ExitCode::SUCCESS
}

/// A scope as a person reads it: its id, what it covers, for whom, how often it was used,
/// until when.
fn describe_scope(s: &Value, op: &str) -> String {
    let verb = match op {
        "approve" => "granted: ",
        "revoke" => "revoked: ",
        _ => "",
    };
    let caller = s["caller"]
        .as_str()
        .filter(|c| !c.is_empty())
        .unwrap_or("any caller without authentication");
    format!(
        "{verb}scope {} ({}, via {}): {}\n  for {caller}; used {} times; expires at {}",
        s["id"].as_str().unwrap_or(""),
        s["kind"].as_str().unwrap_or(""),
        s["via"].as_str().unwrap_or(""),
        s["described"].as_str().unwrap_or(""),
        s["uses"].as_u64().unwrap_or(0),
        s["expires_at"].as_u64().unwrap_or(0),
    )
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
    let preview = match (op, t["preview"].as_str()) {
        ("show", Some(p)) => format!(
            "\n{}  approve with a scope: safe-mcp approvals approve TICKET --scope session|rule [--free PLACE]",
            p.replace("\\u{a}", "\n")
        ),
        _ => String::new(),
    };
    format!(
        "{verb}ticket {} ({}, {}): {}\n{}\n  in {}\n  why: {}{preview}",
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
