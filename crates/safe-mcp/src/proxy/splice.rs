//! Relaying a tunnel's bytes in the kernel: `splice(2)` from one socket into a pipe and
//! from the pipe into the other, so that a download through the proxy costs no copy
//! through this process's memory (a userspace copy loop measured 17 % of direct loopback
//! throughput on this machine kind; see docs/PERFORMANCE.md).

use std::io;
use std::os::fd::AsFd;

use rustix::pipe::{PipeFlags, SpliceFlags};
use tokio::io::Interest;
use tokio::net::TcpStream;

/// The most moved per splice, and the pipe's capacity.
const CHUNK: usize = 1 << 20;

/// Moves bytes from `from` to `to` until `from` ends, then shuts `to`'s write side;
/// returns how many.
pub(crate) async fn one_way(from: &TcpStream, to: &TcpStream) -> io::Result<u64> {
    let (pipe_r, pipe_w) = rustix::pipe::pipe_with(PipeFlags::CLOEXEC | PipeFlags::NONBLOCK)?;
    // A larger pipe means fewer wakeups; the default (64 KiB) still works.
    let _ = rustix::pipe::fcntl_setpipe_size(&pipe_w, CHUNK);
    let flags = SpliceFlags::NONBLOCK | SpliceFlags::MOVE;
    let mut total = 0u64;
    loop {
        let filled = loop {
            from.readable().await?;
            match from.try_io(Interest::READABLE, || {
                rustix::pipe::splice(from.as_fd(), None, &pipe_w, None, CHUNK, flags)
                    .map_err(io::Error::from)
            }) {
                Ok(n) => break n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Err(e),
            }
        };
        if filled == 0 {
            let _ = rustix::net::shutdown(to.as_fd(), rustix::net::Shutdown::Write);
            return Ok(total);
        }
        let mut left = filled;
        while left > 0 {
            to.writable().await?;
            match to.try_io(Interest::WRITABLE, || {
                rustix::pipe::splice(&pipe_r, None, to.as_fd(), None, left, flags)
                    .map_err(io::Error::from)
            }) {
                Ok(n) => left -= n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Err(e),
            }
        }
        total += filled as u64;
    }
}

/// Both directions at once, until both have ended: (bytes `a`→`b`, bytes `b`→`a`).
pub(crate) async fn both_ways(a: &TcpStream, b: &TcpStream) -> (u64, u64) {
    let (up, down) = tokio::join!(one_way(a, b), one_way(b, a));
    (up.unwrap_or(0), down.unwrap_or(0))
}
