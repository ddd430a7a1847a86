//! The transport's ends of one run of a downstream server: its stdout as an `AsyncRead` the
//! MCP client reads, its stderr kept as a short redacted tail for the operator, and its stdin
//! handed over once it started.
//!
//! The executor tells the observer of each chunk from its own reader and cannot wait, so the
//! protocol stream is a bounded buffer: a server that prints faster than the gateway reads,
//! past [`MAX_UNREAD`], or a line longer than any message ([`MAX_LINE`]), is flooding, and
//! is stopped (and restarted) instead of growing the gateway's memory or its CPU.

use std::collections::VecDeque;
use std::os::fd::OwnedFd;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use safe_mcp_contract::{InteractiveIo, OutputObserver, OutputStream};
use tokio::io::{AsyncRead, ReadBuf};
use tokio_util::sync::CancellationToken;

/// The most protocol bytes waiting to be read before the server counts as flooding.
pub const MAX_UNREAD: usize = 32 * 1024 * 1024;
/// The longest line a message may be (rmcp's own bound): a server printing more without a
/// newline is not speaking MCP, and is flooding.
pub const MAX_LINE: usize = 16 * 1024 * 1024;
/// How much of the server's stderr is kept (its last bytes).
const STDERR_TAIL: usize = 8 * 1024;

#[derive(Default)]
struct Stdout {
    unread: VecDeque<u8>,
    /// Bytes since the last newline.
    line: usize,
    closed: bool,
    waker: Option<Waker>,
}

/// One run's ends, shared by the executor's side and the client's.
pub struct Pipes {
    stdout: Mutex<Stdout>,
    stderr: Mutex<VecDeque<u8>>,
    started: Mutex<Option<tokio::sync::oneshot::Sender<(OwnedFd, u32)>>>,
    /// Why the gateway stopped the run, once it did.
    why: Mutex<Option<String>>,
    stop: CancellationToken,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Pipes {
    /// New ends for one run, and where its stdin and pid arrive once it started. `stop`
    /// ends the run (a flood fires it).
    pub fn new(
        stop: CancellationToken,
    ) -> (Arc<Pipes>, tokio::sync::oneshot::Receiver<(OwnedFd, u32)>) {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let pipes = Pipes {
            stdout: Mutex::default(),
            stderr: Mutex::default(),
            started: Mutex::new(Some(tx)),
            why: Mutex::default(),
            stop,
        };
        (Arc::new(pipes), rx)
    }

    /// Stops the run, saying why (the first reason stays).
    pub fn stop_for(&self, why: &str) {
        lock(&self.why).get_or_insert_with(|| why.to_owned());
        self.stop.cancel();
    }

    /// Why the gateway stopped the run, if it did.
    pub fn stopped_because(&self) -> Option<String> {
        lock(&self.why).clone()
    }

    /// The last of what it wrote to stderr, as text (not yet redacted).
    pub fn stderr_tail(&self) -> String {
        let tail = lock(&self.stderr);
        String::from_utf8_lossy(&tail.iter().copied().collect::<Vec<u8>>()).into_owned()
    }

    /// Its stdout, for the MCP client.
    pub fn reader(self: &Arc<Self>) -> Reader {
        Reader(Arc::clone(self))
    }

    /// Marks the protocol stream ended (the run is over), waking the reader.
    pub fn close(&self) {
        let mut out = lock(&self.stdout);
        out.closed = true;
        if let Some(w) = out.waker.take() {
            w.wake();
        }
    }
}

impl OutputObserver for Pipes {
    fn output(&self, stream: OutputStream, bytes: &[u8]) {
        match stream {
            OutputStream::Stdout => {
                let mut out = lock(&self.stdout);
                out.line = match bytes.iter().rposition(|b| *b == b'\n') {
                    Some(i) => bytes.len() - i - 1,
                    None => out.line + bytes.len(),
                };
                if out.unread.len() + bytes.len() > MAX_UNREAD || out.line > MAX_LINE {
                    drop(out);
                    self.stop_for(&format!(
                        "stopped for flooding its output (more than {} MiB unread, or a line over {} MiB without a message)",
                        MAX_UNREAD >> 20,
                        MAX_LINE >> 20
                    ));
                    return;
                }
                out.unread.extend(bytes);
                if let Some(w) = out.waker.take() {
                    w.wake();
                }
            }
            OutputStream::Stderr => {
                let mut tail = lock(&self.stderr);
                tail.extend(bytes);
                let over = tail.len().saturating_sub(STDERR_TAIL);
                tail.drain(..over);
            }
        }
    }

    fn closed(&self, stream: OutputStream) {
        if stream == OutputStream::Stdout {
            self.close();
        }
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

/// The server's stdout as the MCP client reads it.
pub struct Reader(Arc<Pipes>);

impl AsyncRead for Reader {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let mut out = lock(&self.0.stdout);
        if out.unread.is_empty() {
            if out.closed {
                return Poll::Ready(Ok(()));
            }
            out.waker = Some(cx.waker().clone());
            return Poll::Pending;
        }
        let n = buf.remaining().min(out.unread.len());
        let (a, b) = out.unread.as_slices();
        let from_a = n.min(a.len());
        buf.put_slice(&a[..from_a]);
        buf.put_slice(&b[..n - from_a]);
        out.unread.drain(..n);
        Poll::Ready(Ok(()))
    }
}
