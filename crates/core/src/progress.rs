//! Progress of a running command, for `notifications/progress`: how much it has printed, and
//! its latest line, redacted.
//!
//! Owns the rule that a secret never appears in a progress message, not even in part: the
//! message is the last non-empty *complete* line of everything the stream printed so far,
//! redacted as a whole (so a key whose BEGIN line came earlier, or a token cut by a read
//! boundary, is judged as the final result will judge it), then cut to a short width. The
//! executor feeds raw chunks ([`OutputObserver`]); the server asks [`CommandProgress::poll`]
//! on its own schedule (at most 4 a second) and sends what is new. Holds no runtime.

use std::sync::Mutex;

use safe_mcp_contract::{OutputObserver, OutputStream};

use crate::redact::Redactor;

/// The widest progress message, in characters.
const MESSAGE_CHARS: usize = 160;

/// What a command printed so far, fed by the executor.
#[derive(Debug)]
pub struct CommandProgress {
    state: Mutex<State>,
    limit: usize,
}

#[derive(Debug)]
struct State {
    /// The last bytes of each stream (at most the limit), and whether earlier ones were
    /// dropped (then the window's first line may be a part, and is never shown).
    stdout: (Vec<u8>, bool),
    stderr: (Vec<u8>, bool),
    last: OutputStream,
    total: u64,
    reported: u64,
}

/// One progress notification's content.
#[derive(Debug, Clone, PartialEq)]
pub struct ProgressUpdate {
    /// Bytes printed so far: rises with every update.
    pub progress: f64,
    /// The latest complete line, redacted, when there is one.
    pub message: Option<String>,
}

impl CommandProgress {
    /// Keeps the last `limit` bytes per stream (the executor's capture limit), so that the
    /// message follows a command that prints more than it.
    pub fn new(limit: usize) -> CommandProgress {
        CommandProgress {
            state: Mutex::new(State {
                stdout: (Vec::new(), false),
                stderr: (Vec::new(), false),
                last: OutputStream::Stdout,
                total: 0,
                reported: 0,
            }),
            limit,
        }
    }

    /// What is new since the last poll, or `None` when the command printed nothing since.
    pub fn poll(&self, redactor: &Redactor) -> Option<ProgressUpdate> {
        let (total, lines) = {
            let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
            if s.total == s.reported {
                return None;
            }
            s.reported = s.total;
            let (buf, trimmed) = match s.last {
                OutputStream::Stdout => &s.stdout,
                OutputStream::Stderr => &s.stderr,
            };
            let complete = buf.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
            let start = if *trimmed {
                buf.iter()
                    .position(|b| *b == b'\n')
                    .map_or(complete, |i| (i + 1).min(complete))
            } else {
                0
            };
            (s.total, buf[start..complete].to_vec())
        };
        let text = String::from_utf8_lossy(&lines);
        let redacted = redactor.redact(&text);
        let message = redacted
            .lines()
            .rev()
            .map(str::trim)
            .find(|l| !l.is_empty())
            .map(|l| match l.char_indices().nth(MESSAGE_CHARS) {
                Some((cut, _)) => format!("{}…", &l[..cut]),
                None => l.to_owned(),
            });
        Some(ProgressUpdate {
            progress: total as f64,
            message,
        })
    }
}

impl OutputObserver for CommandProgress {
    fn output(&self, stream: OutputStream, bytes: &[u8]) {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let (buf, trimmed) = match stream {
            OutputStream::Stdout => &mut s.stdout,
            OutputStream::Stderr => &mut s.stderr,
        };
        let printed = bytes.len() as u64;
        buf.extend_from_slice(&bytes[bytes.len().saturating_sub(self.limit)..]);
        let over = buf.len().saturating_sub(self.limit);
        if over > 0 || bytes.len() > self.limit {
            buf.drain(..over);
            *trimmed = true;
        }
        s.total += printed;
        s.last = stream;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::RedactionSettings;

    #[test]
    fn the_message_is_the_latest_complete_line_redacted() {
        let redactor = Redactor::new(&RedactionSettings {
            enabled: true,
            entropy_fallback: false,
            extra_patterns: Vec::new(),
        })
        .unwrap();
        let p = CommandProgress::new(1 << 20);
        assert_eq!(p.poll(&redactor), None);
        p.output(
            OutputStream::Stdout,
            b"compiling a\ncompiling b\npartial ghp_0123",
        );
        let u = p.poll(&redactor).unwrap();
        assert_eq!(u.message.as_deref(), Some("compiling b"));
        assert_eq!(p.poll(&redactor), None, "nothing new");
        // The token completes: the line that holds it is redacted whole.
        p.output(OutputStream::Stdout, b"456789abcdefghijklmnopqrstuvwxyz\n");
        let u = p.poll(&redactor).unwrap();
        let m = u.message.unwrap();
        assert!(!m.contains("ghp_0123"), "{m}");
        assert!(u.progress > 0.0);
        // A key body line after a BEGIN line printed earlier is never shown.
        p.output(
            OutputStream::Stderr,
            b"-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n",
        );
        let m = p.poll(&redactor).unwrap().message.unwrap_or_default();
        assert!(!m.contains("b3BlbnNzaC1rZXktdjE"), "{m}");
    }
}
