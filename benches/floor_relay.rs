//! The floor under a gateway call, for `benches/gateway_call.py`: one process between a
//! client and a server doing only what any gateway that keeps the promise must do,
//! and no MCP: for each request (a line with an `"id"`), append a record-sized line to a
//! trail and fdatasync it before the request is passed on, pass it, read the answer, append
//! a second line (not synced, as the outcome record is not), pass the answer back. Lines
//! without an `"id"` (notifications) pass straight through.
//!
//! Usage: floor_relay TRAIL PROGRAM [ARG...]. std only, so that the bench builds it with
//! `rustc -O` alone; it is a measuring stick, not part of the product.

use std::fs::OpenOptions;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, ExitCode, Stdio};

/// As long as a gateway call's attempt record (420 to 440 bytes with its newline).
const RECORD: usize = 430;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [trail, program, rest @ ..] = args.as_slice() else {
        eprintln!("usage: floor_relay TRAIL PROGRAM [ARG...]");
        return ExitCode::from(2);
    };
    match relay(trail, program, rest) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("floor_relay: {e}");
            ExitCode::FAILURE
        }
    }
}

fn relay(trail: &str, program: &str, args: &[String]) -> std::io::Result<()> {
    let mut trail = OpenOptions::new().create(true).append(true).open(trail)?;
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()?;
    let (Some(mut to), Some(from)) = (child.stdin.take(), child.stdout.take()) else {
        return Err(std::io::Error::other("the child's pipes are missing"));
    };
    let mut from = BufReader::new(from);
    let mut record = vec![b'x'; RECORD - 1];
    record.push(b'\n');
    let stdin = std::io::stdin();
    let mut stdout = std::io::stdout().lock();
    let (mut line, mut answer) = (String::new(), String::new());
    while stdin.lock().read_line(&mut line)? > 0 {
        if line.contains("\"id\"") {
            trail.write_all(&record)?;
            trail.sync_data()?;
            to.write_all(line.as_bytes())?;
            to.flush()?;
            answer.clear();
            if from.read_line(&mut answer)? == 0 {
                break;
            }
            trail.write_all(&record)?;
            stdout.write_all(answer.as_bytes())?;
            stdout.flush()?;
        } else {
            to.write_all(line.as_bytes())?;
            to.flush()?;
        }
        line.clear();
    }
    drop(to);
    child.wait()?;
    Ok(())
}
