//! Process sessions: commands that outlive one call (builds, dev servers, watchers, REPLs),
//! started by `start_process` and then read, written, listed and stopped by handle.
//!
//! Owns a session's state between those calls: the unread output of each stream (at most
//! `buffer_bytes`, older bytes dropped and counted), the write end of its stdin, how it
//! ended, and the rule that a read never splits a secret. A read takes what is new up to
//! the last complete line, redacted as a whole; a trailing partial line waits until the
//! stream has been quiet for [`QUIET`] (a prompt waiting for input) or the process ended, so
//! a secret printed in one write reaches the reader in one piece. Handles are 128 random
//! bits, and a handle is valid only for the owner (the connection) that started it. Holds
//! no runtime: the executor feeds output ([`OutputObserver`]) and hands over stdin
//! ([`InteractiveIo`]); the server schedules polls and idle checks.
//!
//! A session on a terminal (`start_process` with `pty`) also renders what its program
//! prints ([`Screen`]): a read hands out the screen, the cursor and the rows that scrolled
//! off since the last read, and writes may name keys ([`key_bytes`]); the raw bytes stay
//! in the stdout stream, for a read that asks for them.

mod keys;
mod screen;

pub use keys::{KEY_NAMES, key_bytes};
pub use screen::{MAX_SCROLLBACK_ROWS, Screen, ScreenView};

use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicU8, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Poll, Waker};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use safe_mcp_contract::{InteractiveIo, OutputObserver, OutputStream, TerminalSize};

use crate::audit::CallId;
pub use crate::audit::EndedBy;
pub use crate::config::Capacity;
use crate::redact::Redactor;

/// How long a trailing partial line must sit unchanged before a read hands it out.
pub const QUIET: Duration = Duration::from_millis(300);

/// One session.
pub struct Session {
    /// The handle the model uses.
    pub handle: String,
    /// Who started it (a connection); nobody else may use the handle.
    pub owner: String,
    /// The authenticated caller (`sub`) it counts against; empty for nobody (stdio).
    pub caller: String,
    /// The command, redacted, as the model wrote it.
    pub command: String,
    /// When it started, in seconds since the epoch.
    pub started: u64,
    /// The call that started it: its outcome record says how the session ended.
    pub call: CallId,
    pid: AtomicU32,
    /// Which streams reached their end (bit 0 stdout, bit 1 stderr).
    closed: AtomicU8,
    stdin: Mutex<Option<OwnedFd>>,
    out: Mutex<[Stream; 2]>,
    buffer_bytes: usize,
    /// How long nobody may read or write before it is stopped as idle.
    idle_after: Duration,
    stop: Trigger,
    stopped_because: Mutex<Option<EndedBy>>,
    last_used: Mutex<Instant>,
    end: Mutex<Option<SessionEnd>>,
    /// A session on a terminal: what its program shows. `None` for pipes.
    screen: Option<Mutex<Screen>>,
}

#[derive(Default)]
struct Stream {
    unread: Vec<u8>,
    /// Already redacted (as a whole, when it was taken from `unread`), not yet handed out
    /// because a read takes at most its limit.
    pending: String,
    /// The raw text of the current line already handed out (at most [`CONTEXT_BYTES`]),
    /// redacted again in front of what comes next: a secret printed in two parts, or a
    /// `password = ` and its value in two writes, is judged at the join.
    line_context: String,
    dropped: u64,
    last_output: Option<Instant>,
}

/// How much of a line already handed out is kept to redact the join with what follows.
const CONTEXT_BYTES: usize = 512;

/// The suffix of `text` after its last newline, at most [`CONTEXT_BYTES`] of it.
fn line_tail(text: &str) -> &str {
    let line = text.rfind('\n').map_or(text, |i| &text[i + 1..]);
    let mut from = line.len().saturating_sub(CONTEXT_BYTES);
    while !line.is_char_boundary(from) {
        from += 1;
    }
    &line[from..]
}

/// How a session ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionEnd {
    /// The exit code, when it exited.
    pub exit_code: Option<i32>,
    /// How: on its own, stopped (and why), or it never started.
    pub how: EndedBy,
    /// Why it never started, for `failed`: the code and reason start_process answers.
    pub failure: Option<(crate::ResultCode, String)>,
    /// The limit that stopped it, if one did: its policy key and a sentence.
    pub limit: Option<(&'static str, String)>,
}

/// What one read hands out.
#[derive(Debug, Clone)]
pub struct ReadOut {
    /// New standard output, redacted.
    pub stdout: String,
    /// New standard error, redacted.
    pub stderr: String,
    /// Output dropped so far because the buffer was full, both streams.
    pub dropped_bytes: u64,
    /// Whether the process still runs.
    pub running: bool,
    /// The exit code once it exited.
    pub exit_code: Option<i32>,
    /// How it ended, once it did.
    pub ended: Option<EndedBy>,
    /// Whether more output is ready than this read could take.
    pub more: bool,
}

/// What one read of a session on a terminal hands out.
#[derive(Debug, Clone)]
pub struct ScreenOut {
    /// The screen, the cursor, and what scrolled off since the last read, redacted.
    pub view: ScreenView,
    /// The bytes as printed, when asked for, redacted.
    pub raw: Option<String>,
    /// Whether more raw bytes are ready than this read could take.
    pub more: bool,
    /// Raw bytes dropped so far because the buffer was full.
    pub dropped_bytes: u64,
    /// Whether the process still runs.
    pub running: bool,
    /// The exit code once it exited.
    pub exit_code: Option<i32>,
    /// How it ended, once it did.
    pub ended: Option<EndedBy>,
}

/// What bounds one session: the output it keeps unread per stream, how long it may go
/// unread and unwritten before the executor stops it as idle, and, for a session on a
/// terminal, the terminal's size.
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    pub buffer_bytes: usize,
    pub idle_after: Duration,
    pub terminal: Option<TerminalSize>,
}

impl Bounds {
    /// Bounds of `buffer_bytes`, never idle (for tests).
    #[cfg(test)]
    fn buffer(buffer_bytes: usize) -> Bounds {
        Bounds {
            buffer_bytes,
            idle_after: Duration::from_secs(86_400),
            terminal: None,
        }
    }
}

impl Session {
    fn new(
        handle: String,
        owner: &str,
        caller: &str,
        command: String,
        call: CallId,
        bounds: Bounds,
    ) -> Session {
        Session {
            handle,
            owner: owner.to_owned(),
            caller: caller.to_owned(),
            command,
            started: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            call,
            pid: AtomicU32::new(0),
            closed: AtomicU8::new(0),
            stdin: Mutex::new(None),
            out: Mutex::new([Stream::default(), Stream::default()]),
            buffer_bytes: bounds.buffer_bytes,
            idle_after: bounds.idle_after,
            stop: Trigger::default(),
            stopped_because: Mutex::new(None),
            last_used: Mutex::new(Instant::now()),
            end: Mutex::new(None),
            // A screenful's worth of scrollback per row of the buffer, at most the bound.
            screen: bounds.terminal.map(|size| {
                let rows = bounds.buffer_bytes / usize::from(size.cols.max(1));
                Mutex::new(Screen::new(size, rows))
            }),
        }
    }

    /// The first stage's pid, once started (0 before).
    pub fn pid(&self) -> u32 {
        self.pid.load(Ordering::Acquire)
    }

    /// How it ended, if it did.
    pub fn end(&self) -> Option<SessionEnd> {
        lock(&self.end).clone()
    }

    /// Whether it still runs (started and not ended).
    pub fn running(&self) -> bool {
        self.end().is_none()
    }

    /// Whether both of its streams have reached their end while it is still counted as
    /// running: its processes are gone or going, and its end is moments away.
    pub fn ending(&self) -> bool {
        self.closed.load(Ordering::Acquire) == 0b11 && self.running()
    }

    /// Marks the session as used now (reads and writes keep it from idling out).
    pub fn touch(&self) {
        *lock(&self.last_used) = Instant::now();
    }

    /// Asks the executor to kill the tree; `why` becomes how it ended (the first reason
    /// given wins).
    pub fn stop(&self, why: EndedBy) {
        lock(&self.stopped_because).get_or_insert(why);
        self.stop.fire();
    }

    /// The future the executor watches: resolves once [`Session::stop`] is called.
    pub fn stopped(self: &Arc<Self>) -> safe_mcp_contract::Cancel {
        let me = Arc::clone(self);
        Box::pin(std::future::poll_fn(move |cx| me.stop.poll(cx.waker())))
    }

    /// Records how it ended: the reason it was stopped for, or `timeout`, or `exit`.
    pub fn ended(
        &self,
        exit_code: Option<i32>,
        timed_out: bool,
        failure: Option<(crate::ResultCode, String)>,
        limit: Option<(&'static str, String)>,
    ) -> SessionEnd {
        let how = match (&failure, *lock(&self.stopped_because), timed_out) {
            (Some(_), _, _) => EndedBy::Failed,
            (None, Some(why), _) => why,
            (None, None, true) => EndedBy::Timeout,
            (None, None, false) => EndedBy::Exit,
        };
        let end = SessionEnd {
            exit_code,
            how,
            failure,
            limit,
        };
        *lock(&self.end) = Some(end.clone());
        *lock(&self.stdin) = None;
        end
    }

    /// Whether a read now would hand out something: output ready (on a terminal, any byte:
    /// the screen changed), or the end.
    pub fn has_news(&self) -> bool {
        if !self.running() {
            return true;
        }
        let out = lock(&self.out);
        if self.screen.is_some() {
            return !out[0].unread.is_empty();
        }
        out.iter()
            .any(|s| !s.pending.is_empty() || ready(s, false) > 0)
    }

    /// How long both streams have printed nothing (zero before any output).
    pub fn quiet_for(&self) -> Duration {
        let out = lock(&self.out);
        out.iter()
            .filter_map(|s| s.last_output)
            .max()
            .map_or(Duration::ZERO, |t| t.elapsed())
    }

    /// Whether any output is still unread.
    pub fn has_unread(&self) -> bool {
        lock(&self.out)
            .iter()
            .any(|s| !s.unread.is_empty() || !s.pending.is_empty())
    }

    /// Takes what is new, at most `limit` bytes per stream (the rest waits for the next
    /// read), redacted (see the module doc).
    pub fn read(&self, redactor: &Redactor, limit: usize) -> ReadOut {
        let end = self.end();
        let finished = end.is_some();
        let (stdout, stderr, dropped, more) = {
            let mut out = lock(&self.out);
            let take = |s: &mut Stream| take_ready(s, redactor, limit, finished);
            let (a, b) = out.split_at_mut(1);
            let (o, e) = (take(&mut a[0]), take(&mut b[0]));
            let more = out
                .iter()
                .any(|s| !s.pending.is_empty() || (finished && !s.unread.is_empty()));
            (o, e, out[0].dropped + out[1].dropped, more)
        };
        ReadOut {
            more,
            stdout,
            stderr,
            dropped_bytes: dropped,
            running: !finished,
            exit_code: end.as_ref().and_then(|e| e.exit_code),
            ended: end.map(|e| e.how),
        }
    }

    /// Whether its program runs on a terminal.
    pub fn on_terminal(&self) -> bool {
        self.screen.is_some()
    }

    /// One read of a session on a terminal (`None` for pipes): the screen, the cursor and
    /// what scrolled off since the last read; with `raw`, also at most that many bytes as
    /// the program printed them since the last read, escape sequences and all (redacted,
    /// as a pipe's), else those bytes are let go.
    pub fn read_screen(&self, redactor: &Redactor, raw: Option<usize>) -> Option<ScreenOut> {
        let screen = self.screen.as_ref()?;
        let end = self.end();
        let (raw, more, dropped) = {
            let mut out = lock(&self.out);
            let stream = &mut out[0];
            let raw = match raw {
                // A terminal's output seldom ends a line where a read comes: take it all.
                Some(limit) => Some(take_ready(stream, redactor, limit, true)),
                None => {
                    stream.unread.clear();
                    stream.pending.clear();
                    None
                }
            };
            (raw, !stream.pending.is_empty(), stream.dropped)
        };
        let view = lock(screen).take(redactor);
        Some(ScreenOut {
            view,
            raw,
            more,
            dropped_bytes: dropped,
            running: end.is_none(),
            exit_code: end.as_ref().and_then(|e| e.exit_code),
            ended: end.map(|e| e.how),
        })
    }

    /// What a person typing `data`, then pressing `keys` ([`key_bytes`]), sends the
    /// terminal; or the first unknown key.
    pub fn typed(&self, data: &str, keys: &[String]) -> Result<Vec<u8>, String> {
        let application = self
            .screen
            .as_ref()
            .is_some_and(|s| lock(s).application_cursor());
        let mut bytes = data.as_bytes().to_vec();
        for key in keys {
            bytes.extend(key_bytes(key, application)?);
        }
        Ok(bytes)
    }

    /// Resizes its terminal: the kernel's size (the program gets SIGWINCH) and the screen's.
    pub fn resize(&self, size: TerminalSize) -> Result<(), String> {
        let Some(screen) = &self.screen else {
            return Err("it runs on pipes, not a terminal (start_process with pty)".into());
        };
        let master = lock(&self.stdin);
        let Some(fd) = master.as_ref() else {
            return Err("the process has ended".into());
        };
        let winsize = rustix::termios::Winsize {
            ws_row: size.rows,
            ws_col: size.cols,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        rustix::termios::tcsetwinsize(fd, winsize)
            .map_err(|e| format!("the terminal's size could not be set: {e}"))?;
        lock(screen).resize(size);
        Ok(())
    }

    /// Writes `data` to the process's stdin (as much as the pipe takes now), then closes it
    /// when asked. Returns the bytes written, or why nothing could be.
    pub fn write(&self, data: &[u8], close: bool) -> Result<usize, String> {
        let mut stdin = lock(&self.stdin);
        let Some(fd) = stdin.as_ref() else {
            return Err(if self.running() {
                "its stdin is closed".into()
            } else {
                "the process has ended".into()
            });
        };
        let mut written = 0;
        while written < data.len() {
            match rustix::io::write(fd, &data[written..]) {
                Ok(n) => written += n,
                Err(rustix::io::Errno::INTR) => continue,
                Err(rustix::io::Errno::AGAIN) => break,
                Err(rustix::io::Errno::PIPE) => {
                    *stdin = None;
                    return Err("the process no longer reads its stdin".into());
                }
                Err(e) => return Err(format!("stdin: {e}")),
            }
        }
        if close && written == data.len() {
            *stdin = None;
        }
        Ok(written)
    }
}

/// What is ready in `s` (everything once `finished`), redacted whole, then handed out in
/// pieces of at most `limit` cut after a newline: no secret is ever judged in parts.
fn take_ready(s: &mut Stream, redactor: &Redactor, limit: usize, finished: bool) -> String {
    if s.pending.is_empty() {
        let n = ready(s, finished);
        if n > 0 {
            let taken: Vec<u8> = s.unread.drain(..n).collect();
            let text = String::from_utf8_lossy(&taken);
            let joined = format!("{}{text}", s.line_context);
            // The redacted join, from where the context ends (or, when a secret runs across
            // it, from that secret's marker).
            let (redacted, at) = redactor.redact_until(&joined, s.line_context.len());
            s.pending = redacted[at..].to_owned();
            s.line_context = line_tail(&joined).to_owned();
        }
    }
    let cut = piece(&s.pending, limit);
    let rest = s.pending.split_off(cut);
    std::mem::replace(&mut s.pending, rest)
}

/// Where to cut the redacted `text` for one read of at most `limit` bytes: after its last
/// newline within the limit, else at the limit's character boundary.
fn piece(text: &str, limit: usize) -> usize {
    if text.len() <= limit {
        return text.len();
    }
    let mut end = limit;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].rfind('\n').map_or(end, |i| i + 1)
}

/// Bytes of `s` a read may hand out: everything at the end, else up to the last newline;
/// once a trailing partial line has been quiet for [`QUIET`], up to its last blank (a
/// token it ends in may be the first part of a secret), and all of it after three times
/// that (a prompt waiting for input).
fn ready(s: &Stream, finished: bool) -> usize {
    if finished {
        return s.unread.len();
    }
    let whole_lines = s
        .unread
        .iter()
        .rposition(|b| *b == b'\n')
        .map_or(0, |i| i + 1);
    let quiet = s.last_output.map_or(Duration::ZERO, |t| t.elapsed());
    if quiet >= 3 * QUIET {
        return s.unread.len();
    }
    if quiet >= QUIET {
        let token = s
            .unread
            .iter()
            .rev()
            .take_while(|b| !b.is_ascii_whitespace())
            .count();
        return (s.unread.len() - token).max(whole_lines);
    }
    whole_lines
}

impl OutputObserver for Session {
    fn closed(&self, stream: OutputStream) {
        let bit = match stream {
            OutputStream::Stdout => 0b01,
            OutputStream::Stderr => 0b10,
        };
        self.closed.fetch_or(bit, Ordering::AcqRel);
    }

    fn output(&self, stream: OutputStream, bytes: &[u8]) {
        let mut out = lock(&self.out);
        let s = &mut out[match stream {
            OutputStream::Stdout => 0,
            OutputStream::Stderr => 1,
        }];
        s.unread.extend_from_slice(bytes);
        s.last_output = Some(Instant::now());
        if let Some(screen) = &self.screen {
            lock(screen).feed(bytes);
        }
        // Trimmed once it holds twice the buffer, so that each chunk costs what it brings,
        // not a move of the whole buffer.
        if s.unread.len() > 2 * self.buffer_bytes {
            // Drop whole lines from the front: what stays starts at a line boundary, so no
            // read hands out the tail of a secret whose start was dropped.
            let excess = s.unread.len() - self.buffer_bytes;
            let cut = s.unread[excess..]
                .iter()
                .position(|b| *b == b'\n')
                .map_or(s.unread.len(), |i| excess + i + 1);
            s.unread.drain(..cut);
            s.dropped += cut as u64;
        }
    }
}

impl InteractiveIo for Session {
    fn started(&self, stdin: OwnedFd, pid: u32) {
        // The executor made it non-blocking: a full pipe takes what it can.
        *lock(&self.stdin) = Some(stdin);
        self.pid.store(pid, Ordering::Release);
    }

    fn idle_at(&self) -> Option<Instant> {
        Some(*lock(&self.last_used) + self.idle_after)
    }

    fn terminal(&self) -> Option<TerminalSize> {
        self.screen.as_ref().map(|s| lock(s).size())
    }
}

/// Every session of a server.
#[derive(Default)]
pub struct SessionTable {
    sessions: Mutex<HashMap<String, Arc<Session>>>,
    /// This server's id, which every handle names as its owner ([`crate::fleet::owned`]).
    server: String,
}

impl std::fmt::Debug for SessionTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionTable")
            .field("sessions", &lock(&self.sessions).len())
            .finish()
    }
}

/// Why no session could be made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CreateError {
    /// `max_sessions` are running.
    Full,
    /// The caller has `max_sessions_per_caller` running.
    FullForCaller,
    /// No randomness for a handle.
    Internal(String),
}

/// Why a handle was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HandleError {
    /// Unknown here, started by another owner, or already collected.
    Unknown,
    /// Started by another server of a fleet, this one: the request reached the wrong
    /// replica.
    Elsewhere(String),
}

impl SessionTable {
    /// The sessions of the server named `server` (its handles say so).
    pub fn for_server(server: String) -> SessionTable {
        SessionTable {
            sessions: Mutex::default(),
            server,
        }
    }

    /// Whether one more session would fit: the first limit it would pass, if any.
    pub fn room(&self, caller: &str, capacity: Capacity) -> Result<(), CreateError> {
        Self::room_in(&lock(&self.sessions), caller, capacity)
    }

    fn room_in(
        sessions: &HashMap<String, Arc<Session>>,
        caller: &str,
        capacity: Capacity,
    ) -> Result<(), CreateError> {
        let running = sessions.values().filter(|s| s.running());
        let (all, theirs) = running.fold((0, 0), |(all, theirs), s| {
            (all + 1, theirs + usize::from(s.caller == caller))
        });
        if all >= capacity.total {
            Err(CreateError::Full)
        } else if !caller.is_empty() && theirs >= capacity.per_caller {
            // Per caller needs a caller: stdio and --http without auth count in all only.
            Err(CreateError::FullForCaller)
        } else {
            Ok(())
        }
    }

    /// A new session under a fresh handle, unless `capacity` is reached in all or for
    /// `caller` (checked and taken under one lock, so concurrent starts cannot overshoot).
    /// Of the ended sessions whose output nobody collected, only the newest `total` are
    /// kept (their buffers go with them).
    pub fn create(
        &self,
        owner: &str,
        caller: &str,
        command: String,
        call: CallId,
        bounds: Bounds,
        capacity: Capacity,
    ) -> Result<Arc<Session>, CreateError> {
        let handle = crate::random::hex(16)
            .map_err(|e| CreateError::Internal(format!("no randomness for a handle: {e}")))?;
        let handle = crate::fleet::owned(&handle, &self.server);
        let mut sessions = lock(&self.sessions);
        Self::room_in(&sessions, caller, capacity)?;
        let max = capacity.total;
        let mut ended: Vec<(u64, String)> = sessions
            .values()
            .filter(|s| !s.running())
            .map(|s| (s.started, s.handle.clone()))
            .collect();
        ended.sort();
        for (_, old) in ended.iter().rev().skip(max) {
            sessions.remove(old);
        }
        let session = Arc::new(Session::new(
            handle.clone(),
            owner,
            caller,
            command,
            call,
            bounds,
        ));
        sessions.insert(handle, Arc::clone(&session));
        Ok(session)
    }

    /// The session behind `handle`, if `owner` started it.
    pub fn get(&self, handle: &str, owner: &str) -> Result<Arc<Session>, HandleError> {
        if let Some(other) = crate::fleet::elsewhere(handle, &self.server) {
            return Err(HandleError::Elsewhere(other.to_owned()));
        }
        lock(&self.sessions)
            .get(handle)
            .filter(|s| s.owner == owner)
            .cloned()
            .ok_or(HandleError::Unknown)
    }

    /// Forgets an ended session whose last output was read.
    pub fn collect(&self, handle: &str) {
        lock(&self.sessions).remove(handle);
    }

    /// `owner`'s sessions, oldest first.
    pub fn of(&self, owner: &str) -> Vec<Arc<Session>> {
        let mut list: Vec<Arc<Session>> = lock(&self.sessions)
            .values()
            .filter(|s| s.owner == owner)
            .cloned()
            .collect();
        list.sort_by_key(|s| (s.started, s.call.to_string()));
        list
    }

    /// Every running session, for a shutdown.
    pub fn all_running(&self) -> Vec<Arc<Session>> {
        lock(&self.sessions)
            .values()
            .filter(|s| s.running())
            .cloned()
            .collect()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A one-shot signal a future can wait on, without a runtime.
#[derive(Default)]
struct Trigger {
    state: Mutex<(bool, Option<Waker>)>,
}

impl Trigger {
    fn fire(&self) {
        let waker = {
            let mut s = lock(&self.state);
            s.0 = true;
            s.1.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }

    fn poll(&self, waker: &Waker) -> Poll<()> {
        let mut s = lock(&self.state);
        if s.0 {
            Poll::Ready(())
        } else {
            s.1 = Some(waker.clone());
            Poll::Pending
        }
    }
}

#[cfg(test)]
mod tests;
