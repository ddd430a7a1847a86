//! The shim (issue 35, item 2): this binary, started inside a command's tree under the
//! name of a program that has argument rules (`git`, through a link in the server's shim
//! directory, first on the command's PATH).
//!
//! It decides nothing. It hands its argv (`argv[0]` the bare name), its cwd and its three
//! standard descriptors to the server named by `SAFE_MCP_NESTED` (`<token>@<socket>`),
//! waits, and exits as the nested call did: its exit status, or 126 with the server's
//! reason on stderr when the call was refused or the server could not be reached. The
//! server judges the call as a top-level one and runs it confined, writing where this
//! process writes. Killed, it closes the connection, and the server stops the call.

use std::io::{BufRead, BufReader, Write};
use std::mem::MaybeUninit;
use std::os::unix::net::UnixStream;
use std::process::ExitCode;

use rustix::net::{SendAncillaryBuffer, SendAncillaryMessage, SendFlags};
use safe_mcp_core::nested::NESTED_VARIABLE;
use serde_json::{Value, json};

/// What a shell says for a program that could not be run.
const NOT_RUN: u8 = 126;

/// Runs as the shim when started by another name than `safe-mcp` with `SAFE_MCP_NESTED`
/// set; `None` otherwise (the binary's own commands).
pub(crate) fn run_if_shim() -> Option<ExitCode> {
    let mut args = std::env::args_os();
    let first = args.next()?;
    let name = std::path::Path::new(&first)
        .file_name()?
        .to_string_lossy()
        .into_owned();
    if name == "safe-mcp" || name.starts_with("safe-mcp-") {
        return None;
    }
    let route = std::env::var(NESTED_VARIABLE).ok()?;
    let mut argv = vec![name.clone()];
    argv.extend(args.map(|a| a.to_string_lossy().into_owned()));
    Some(match ask(&route, &argv) {
        Ok(answer) => finish(&name, &answer),
        Err(why) => {
            eprintln!(
                "safe-mcp: `{name}` is reached through the server here, which could not be asked: {why}"
            );
            ExitCode::from(NOT_RUN)
        }
    })
}

/// Sends the call and waits for the server's answer.
fn ask(route: &str, argv: &[String]) -> Result<Value, String> {
    let (token, socket) = route
        .split_once('@')
        .ok_or_else(|| format!("{NESTED_VARIABLE} is malformed"))?;
    let cwd = std::env::current_dir().map_err(|e| format!("the working directory: {e}"))?;
    let mut stream = UnixStream::connect(socket).map_err(|e| format!("{socket}: {e}"))?;
    let mut line = json!({"token": token, "argv": argv, "cwd": cwd}).to_string();
    line.push('\n');
    // A closed one fails the send: the call is not made.
    let stdio = [
        rustix::stdio::stdin(),
        rustix::stdio::stdout(),
        rustix::stdio::stderr(),
    ];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(3))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if !control.push(SendAncillaryMessage::ScmRights(&stdio)) {
        return Err("cannot attach the standard descriptors".into());
    }
    let iov = [std::io::IoSlice::new(line.as_bytes())];
    let sent = rustix::net::sendmsg(&stream, &iov, &mut control, SendFlags::NOSIGNAL)
        .map_err(|e| format!("sending the call: {e}"))?;
    if sent < line.len() {
        stream
            .write_all(&line.as_bytes()[sent..])
            .map_err(|e| format!("sending the call: {e}"))?;
    }
    let mut answer = String::new();
    BufReader::new(&stream)
        .read_line(&mut answer)
        .map_err(|e| format!("the answer: {e}"))?;
    serde_json::from_str(&answer).map_err(|_| "the server closed the connection".to_owned())
}

/// Exits as the nested call did.
fn finish(name: &str, answer: &Value) -> ExitCode {
    if let Some(code) = answer["exit_code"].as_i64() {
        return ExitCode::from(u8::try_from(code).unwrap_or(NOT_RUN));
    }
    let code = answer["code"].as_str().unwrap_or("REFUSED");
    let reason = answer["reason"].as_str().unwrap_or("no reason given");
    eprintln!("safe-mcp: `{name}` was not run ({code}): {reason}");
    ExitCode::from(NOT_RUN)
}
