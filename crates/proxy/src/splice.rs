//! Relaying a tunnel's bytes in the kernel: `splice(2)` from one socket into a pipe and
//! from the pipe into the other, so that a download through the proxy costs no copy
//! through this process's memory (a userspace copy loop measured 17 % of direct loopback
//! throughput on this machine kind; see docs/PERFORMANCE.md).
//!
//! A direction's pipe lives outside the future that moves the bytes ([`Pipe`]): a relay
//! stopped half way (the call is over) leaves what it had taken in there, and a later
//! [`one_way`] on the same pipe delivers it first, so no byte the command sent is lost or
//! left out of the count.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use rustix::pipe::{PipeFlags, SpliceFlags};
use tokio::io::Interest;
use tokio::net::TcpStream;

/// The most moved per splice, and the pipe's capacity.
const CHUNK: usize = 1 << 20;

/// One direction's pipe, and how many bytes in it have not reached the far side yet.
pub(crate) struct Pipe {
    read: OwnedFd,
    write: OwnedFd,
    held: AtomicUsize,
}

impl Pipe {
    pub(crate) fn new() -> io::Result<Pipe> {
        let (read, write) = rustix::pipe::pipe_with(PipeFlags::CLOEXEC | PipeFlags::NONBLOCK)?;
        // A larger pipe means fewer wakeups; the default (64 KiB) still works.
        let _ = rustix::pipe::fcntl_setpipe_size(&write, CHUNK);
        Ok(Pipe {
            read,
            write,
            held: AtomicUsize::new(0),
        })
    }

    /// A pipe for each direction of a connection.
    pub(crate) fn pair() -> io::Result<(Pipe, Pipe)> {
        Ok((Pipe::new()?, Pipe::new()?))
    }
}

/// Moves bytes from `from` to `to` through `pipe` until `from` ends, then shuts `to`'s
/// write side. What `pipe` already holds goes first. Each byte delivered is counted in
/// `moved` as it goes (so the count stands if the relay is stopped or fails half way).
pub(crate) async fn one_way(
    from: &TcpStream,
    to: &TcpStream,
    pipe: &Pipe,
    moved: &AtomicU64,
) -> io::Result<()> {
    let flags = SpliceFlags::NONBLOCK | SpliceFlags::MOVE;
    loop {
        if pipe.held.load(Ordering::Acquire) == 0 {
            let filled = loop {
                from.readable().await?;
                match from.try_io(Interest::READABLE, || {
                    rustix::pipe::splice(from.as_fd(), None, &pipe.write, None, CHUNK, flags)
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
            pipe.held.store(filled, Ordering::Release);
        }
        while pipe.held.load(Ordering::Acquire) > 0 {
            let left = pipe.held.load(Ordering::Acquire);
            to.writable().await?;
            match to.try_io(Interest::WRITABLE, || {
                rustix::pipe::splice(&pipe.read, None, to.as_fd(), None, left, flags)
                    .map_err(io::Error::from)
            }) {
                Ok(n) => {
                    pipe.held.fetch_sub(n, Ordering::AcqRel);
                    moved.fetch_add(n as u64, Ordering::Relaxed);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Err(e),
            }
        }
    }
}

/// Both directions at once, through `up` (`a`→`b`) and `down` (`b`→`a`), until both have
/// ended, counting in `moved_up` and `moved_down`.
pub(crate) async fn both_ways(
    (a, b): (&TcpStream, &TcpStream),
    (up, down): (&Pipe, &Pipe),
    moved_up: &AtomicU64,
    moved_down: &AtomicU64,
) {
    let _ = tokio::join!(one_way(a, b, up, moved_up), one_way(b, a, down, moved_down));
}
