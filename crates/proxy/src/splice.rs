//! Relaying a tunnel's bytes in the kernel: `splice(2)` from one socket into a pipe and
//! from the pipe into the other, so that a download through the proxy costs no copy
//! through this process's memory (a userspace copy loop measured 17 % of direct loopback
//! throughput on this machine kind; see docs/PERFORMANCE.md).

use std::io;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicU64, Ordering};

use rustix::pipe::{PipeFlags, SpliceFlags};
use tokio::io::Interest;
use tokio::net::TcpStream;

/// The most moved per splice, and the pipe's capacity.
const CHUNK: usize = 1 << 20;

/// Moves bytes from `from` to `to` until `from` ends, then shuts `to`'s write side; each
/// byte delivered is counted in `moved` as it goes (so the count stands if the relay is
/// stopped or fails half way).
pub(crate) async fn one_way(from: &TcpStream, to: &TcpStream, moved: &AtomicU64) -> io::Result<()> {
    let (pipe_r, pipe_w) = rustix::pipe::pipe_with(PipeFlags::CLOEXEC | PipeFlags::NONBLOCK)?;
    // A larger pipe means fewer wakeups; the default (64 KiB) still works.
    let _ = rustix::pipe::fcntl_setpipe_size(&pipe_w, CHUNK);
    let flags = SpliceFlags::NONBLOCK | SpliceFlags::MOVE;
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
            return Ok(());
        }
        let mut left = filled;
        while left > 0 {
            to.writable().await?;
            match to.try_io(Interest::WRITABLE, || {
                rustix::pipe::splice(&pipe_r, None, to.as_fd(), None, left, flags)
                    .map_err(io::Error::from)
            }) {
                Ok(n) => {
                    left -= n;
                    moved.fetch_add(n as u64, Ordering::Relaxed);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Err(e),
            }
        }
    }
}

/// Both directions at once, until both have ended, counting `a`→`b` in `up` and `b`→`a` in
/// `down`.
pub(crate) async fn both_ways(a: &TcpStream, b: &TcpStream, up: &AtomicU64, down: &AtomicU64) {
    let _ = tokio::join!(one_way(a, b, up), one_way(b, a, down));
}
