//! One output stream of a call, captured: its first bytes and its last, the number of
//! lines and bytes in all, and the lines cut from the middle that look like an error
//! ([`safe_mcp_contract::looks_like_an_error`]), each passed on to the session's observer
//! as it arrives.

use std::os::fd::OwnedFd;

use rustix::io::Errno;
use safe_mcp_contract::{
    NOTABLE_LINE_BYTES, NOTABLE_LINES, Observer, OutputStream, looks_like_an_error,
};

const READ_CHUNK: usize = 64 * 1024;

pub(crate) struct Capture {
    pub(crate) fd: Option<OwnedFd>,
    /// The first bytes, up to `head_limit`.
    head: Vec<u8>,
    /// The last bytes after the head, a ring of at most `tail_limit`.
    tail: std::collections::VecDeque<u8>,
    head_limit: usize,
    tail_limit: usize,
    pub(crate) total: u64,
    pub(crate) lines: u64,
    /// The lines dropped between head and tail that look like errors, with their numbers.
    pub(crate) notable: Vec<(u64, Vec<u8>)>,
    /// The dropped line being read (its first `NOTABLE_LINE_BYTES`), and its number once
    /// the first byte was dropped.
    dropping: Vec<u8>,
    dropping_line: Option<u64>,
    /// Whether output is kept here (a call) or only handed to the observer (a session).
    keep: bool,
    /// Who else sees each chunk (progress), and as which stream.
    observer: Option<(Observer, OutputStream)>,
}

impl Capture {
    /// Keeps at most `limit` bytes: a quarter from the start, the rest from the end.
    pub(crate) fn new(
        fd: OwnedFd,
        observer: Option<(Observer, OutputStream)>,
        keep: bool,
        limit: usize,
    ) -> Self {
        let head_limit = limit / 4;
        Capture {
            fd: Some(fd),
            head: Vec::new(),
            tail: std::collections::VecDeque::new(),
            head_limit,
            tail_limit: limit - head_limit,
            total: 0,
            lines: 0,
            notable: Vec::new(),
            dropping: Vec::new(),
            dropping_line: None,
            keep,
            observer,
        }
    }

    /// Drops the tail's first `n` bytes, keeping the lines among them that look like errors.
    fn drop_from_tail(&mut self, n: usize) {
        if n == 0 {
            return;
        }
        let mut line = match self.dropping_line {
            Some(line) => line,
            None => self.head.iter().filter(|b| **b == b'\n').count() as u64 + 1,
        };
        for byte in self.tail.drain(..n) {
            if byte != b'\n' {
                // One byte past the bound marks a line too long to keep: a part of a line
                // could hold a part of a secret the redactor would not recognise.
                if self.dropping.len() <= NOTABLE_LINE_BYTES {
                    self.dropping.push(byte);
                }
                continue;
            }
            if self.notable.len() < NOTABLE_LINES
                && self.dropping.len() <= NOTABLE_LINE_BYTES
                && looks_like_an_error(&self.dropping)
            {
                self.notable.push((line, self.dropping.clone()));
            }
            self.dropping.clear();
            line += 1;
        }
        self.dropping_line = Some(line);
    }

    /// What was kept: all of it as the first part (the second empty), or, when bytes between
    /// them were dropped, the head and the tail.
    pub(crate) fn kept(self) -> (Vec<u8>, Vec<u8>) {
        let (mut head, tail) = (self.head, Vec::from(self.tail));
        if self.total == (head.len() + tail.len()) as u64 {
            head.extend_from_slice(&tail);
            (head, Vec::new())
        } else {
            (head, tail)
        }
    }

    /// Reads from `fd` from now on, instead of the pipe it was made with (a session's
    /// terminal).
    pub(crate) fn read_from(&mut self, fd: OwnedFd) {
        self.fd = Some(fd);
    }

    /// Reads what is available, keeping the head and the tail. A stream never stops the
    /// call by its volume: memory is bounded by the two limits.
    pub(crate) fn read_some(&mut self) {
        let Some(fd) = &self.fd else { return };
        let mut chunk = [0u8; READ_CHUNK];
        loop {
            match rustix::io::read(fd, &mut chunk) {
                Ok(0) => {
                    self.fd = None;
                    if let Some((observer, stream)) = &self.observer {
                        observer.0.closed(*stream);
                    }
                    return;
                }
                Ok(n) if !self.keep => {
                    // A session: the observer keeps what it can. One chunk per call, so that
                    // a writer faster than the observer cannot keep the loop from seeing a
                    // stop or the deadline.
                    self.total += n as u64;
                    if let Some((observer, stream)) = &self.observer {
                        observer.0.output(*stream, &chunk[..n]);
                    }
                    return;
                }
                Ok(n) => {
                    let data = &chunk[..n];
                    self.total += n as u64;
                    self.lines += data.iter().filter(|b| **b == b'\n').count() as u64;
                    if let Some((observer, stream)) = &self.observer {
                        observer.0.output(*stream, data);
                    }
                    let room = self.head_limit.saturating_sub(self.head.len());
                    let (first, rest) = data.split_at(room.min(n));
                    self.head.extend_from_slice(first);
                    self.tail.extend(rest);
                    let over = self.tail.len().saturating_sub(self.tail_limit);
                    self.drop_from_tail(over);
                    // One chunk per call here too, for the same reason as a session's.
                    return;
                }
                Err(Errno::AGAIN) => return,
                Err(Errno::INTR) => continue,
                Err(_) => {
                    self.fd = None;
                    if let Some((observer, stream)) = &self.observer {
                        observer.0.closed(*stream);
                    }
                    return;
                }
            }
        }
    }
}
