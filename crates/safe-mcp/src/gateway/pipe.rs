//! The transport's ends of one run of a downstream server: its stdout as the pipe itself,
//! which the MCP client reads with no thread between (the run is given the pipe's write end,
//! as a nested call is given its caller's descriptors); its stderr read into a short tail
//! for the operator; its stdin handed over once it started.
//!
//! A pipe bounds what waits unread (the server blocks once it is full), so the only flood
//! left is a line longer than any message ([`MAX_LINE`]): the client would drop it and read
//! on, forever. Such a server is stopped (and restarted) instead.

use std::collections::VecDeque;
use std::os::fd::OwnedFd;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use safe_mcp_contract::{GivenStdio, InteractiveIo};
use safe_mcp_core::terminal::downstream::Stopped;
use tokio::io::{AsyncRead, AsyncReadExt, ReadBuf};
use tokio::net::unix::pipe::Receiver;
use tokio_util::sync::CancellationToken;

/// The longest line a message may be (rmcp's own bound): a server printing more without a
/// newline is not speaking MCP, and is flooding.
pub const MAX_LINE: usize = 16 * 1024 * 1024;
/// How much of the server's stderr is kept (its last bytes).
const STDERR_TAIL: usize = 8 * 1024;

/// One run's ends.
pub struct Pipes {
    stderr: Mutex<VecDeque<u8>>,
    started: Mutex<Option<tokio::sync::oneshot::Sender<(OwnedFd, u32)>>>,
    /// Why the gateway stopped the run, once it did.
    why: Mutex<Option<Stopped>>,
    stop: CancellationToken,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// What a run is given and what the client reads: the run's stdout and stderr (its
/// descriptor 0 is unused: a session's stdin is its own pipe), and their read ends.
pub struct Ends {
    /// For the plan.
    pub given: GivenStdio,
    /// Its stdout, for the client.
    pub stdout: Reader,
    /// Its stderr, for [`Pipes::keep_stderr`].
    pub stderr: Receiver,
}

impl Pipes {
    /// New ends for one run, and where its stdin and pid arrive once it started. `stop`
    /// ends the run (a flood fires it).
    pub fn new(
        stop: CancellationToken,
    ) -> (Arc<Pipes>, tokio::sync::oneshot::Receiver<(OwnedFd, u32)>) {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let pipes = Pipes {
            stderr: Mutex::default(),
            started: Mutex::new(Some(tx)),
            why: Mutex::default(),
            stop,
        };
        (Arc::new(pipes), rx)
    }

    /// The pipes of a run: the write ends for it, the read ends (non-blocking, on the
    /// runtime) for the client and the stderr tail.
    pub fn ends(self: &Arc<Self>) -> std::io::Result<Ends> {
        let pipe = || {
            rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).map_err(std::io::Error::from)
        };
        let (out_r, out_w) = pipe()?;
        let (err_r, err_w) = pipe()?;
        let unused = std::fs::File::open("/dev/null")?;
        Ok(Ends {
            given: GivenStdio(Arc::new([OwnedFd::from(unused), out_w, err_w])),
            stdout: Reader {
                pipe: Receiver::from_owned_fd(out_r)?,
                line: 0,
                pipes: Arc::clone(self),
            },
            stderr: Receiver::from_owned_fd(err_r)?,
        })
    }

    /// Reads the server's stderr into the tail until it ends.
    pub async fn keep_stderr(self: Arc<Self>, mut stderr: Receiver) {
        let mut buf = vec![0u8; 4096];
        while let Ok(n) = stderr.read(&mut buf).await {
            if n == 0 {
                break;
            }
            let mut tail = lock(&self.stderr);
            tail.extend(&buf[..n]);
            let over = tail.len().saturating_sub(STDERR_TAIL);
            tail.drain(..over);
        }
    }

    /// Stops the run for a cause of the gateway's own (a flood, a hang, its own stop), said
    /// however the run then ends (the first reason stays).
    pub fn stop_for(&self, why: &str) {
        self.stop_with(Stopped::For(why.to_owned()));
    }

    /// Stops the run once its MCP connection ended: said only if a kill is what ends it (a
    /// server that exited on its own ended its connection by exiting).
    pub fn stop_after(&self, why: &str) {
        self.stop_with(Stopped::After(why.to_owned()));
    }

    fn stop_with(&self, why: Stopped) {
        lock(&self.why).get_or_insert(why);
        self.stop.cancel();
    }

    /// Why the gateway stopped the run, if it did.
    pub fn stopped_because(&self) -> Option<Stopped> {
        lock(&self.why).clone()
    }

    /// The last of what it wrote to stderr, as text (not yet redacted), from a line's start:
    /// a line cut at the tail's front could show part of a secret redaction cannot see.
    pub fn stderr_tail(&self) -> String {
        let tail = lock(&self.stderr);
        let bytes: Vec<u8> = tail.iter().copied().collect();
        let from = if bytes.len() >= STDERR_TAIL {
            bytes
                .iter()
                .position(|b| *b == b'\n')
                .map_or(bytes.len(), |i| i + 1)
        } else {
            0
        };
        String::from_utf8_lossy(&bytes[from..]).into_owned()
    }
}

impl InteractiveIo for Pipes {
    fn started(&self, stdin: OwnedFd, pid: u32) {
        if let Some(tx) = lock(&self.started).take() {
            let _ = tx.send((stdin, pid));
        }
    }

    fn idle_at(&self) -> Option<std::time::Instant> {
        None
    }
}

/// The server's stdout as the MCP client reads it: the pipe, with the length of the current
/// line counted.
pub struct Reader {
    pipe: Receiver,
    line: usize,
    pipes: Arc<Pipes>,
}

impl AsyncRead for Reader {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let me = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(&mut me.pipe).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = &polled {
            let new = &buf.filled()[before..];
            me.line = match new.iter().rposition(|b| *b == b'\n') {
                Some(i) => new.len() - i - 1,
                None => me.line + new.len(),
            };
            if me.line > MAX_LINE {
                me.pipes.stop_for(&format!(
                    "stopped for flooding its output (a line over {} MiB without a message)",
                    MAX_LINE >> 20
                ));
                // The client sees the stream end; nothing more is read.
                buf.set_filled(before);
            }
        }
        polled
    }
}
