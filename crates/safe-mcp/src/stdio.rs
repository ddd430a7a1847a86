//! The MCP session's stdin and stdout, as non-blocking pipes when they are pipes.
//!
//! `rmcp::transport::stdio()` uses tokio's stdin and stdout, which hand every read and every
//! write to a blocking thread: two extra thread wake-ups per request, about as long as the
//! rest of an `explain_command` on this machine kind. When both ends are pipes (how most MCP
//! clients start a server), we read and write them through the runtime's epoll instead.
//! Each end is re-opened through `/proc/self/fd`, which gives us our own open file
//! description, so `O_NONBLOCK` is never set on one the client might share. Anything else
//! (a terminal, a socket pair, a file) keeps tokio's stdio.

use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};

use tokio::net::unix::pipe::{Receiver, Sender};

/// Both ends as epoll-driven pipes, or `None` when either is not a pipe.
pub fn pipes() -> Option<(Receiver, Sender)> {
    let is_fifo = |fd: &str| {
        std::fs::metadata(format!("/proc/self/fd/{fd}")).is_ok_and(|m| m.file_type().is_fifo())
    };
    if !is_fifo("0") || !is_fifo("1") {
        return None;
    }
    let nonblocking = rustix::fs::OFlags::NONBLOCK.bits() as i32;
    let input = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nonblocking)
        .open("/proc/self/fd/0")
        .ok()?;
    let output = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(nonblocking)
        .open("/proc/self/fd/1")
        .ok()?;
    Some((
        Receiver::from_file(input).ok()?,
        Sender::from_file(output).ok()?,
    ))
}
