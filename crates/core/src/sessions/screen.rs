//! A process session's terminal as a person would see it: the `vt100` crate renders what
//! the program prints (a well-kept emulator over `vte`, with scrollback), and a read hands
//! out the screen's rows, the cursor, and the rows that scrolled off the top since the last
//! read, redacted.
//!
//! Redaction judges whole lines: a row that wraps onto the next (a long token at the
//! screen's edge), or a line that began in the scrollback and goes on on the screen, is
//! redacted as one text, and, where redaction changed it, laid out again over as many rows
//! as it had, so that the cursor's row still names the same line.

use std::num::NonZeroU16;

use safe_mcp_contract::TerminalSize;

use crate::redact::Redactor;

/// The most rows of scrollback a session keeps between two reads; older ones are counted.
pub const MAX_SCROLLBACK_ROWS: usize = 1000;

/// Counts the rows that fell off the top of a full scrollback before anyone read them.
#[derive(Debug, Default)]
struct Lost(u64);

impl vt100::Callbacks for Lost {
    fn on_scroll(&mut self, _row: vt100::capture::RowContents<'_>, alternate_screen: bool) {
        if !alternate_screen {
            self.0 += 1;
        }
    }
}

/// The emulated terminal of one session.
pub struct Screen {
    parser: vt100::Parser<Lost>,
}

impl std::fmt::Debug for Screen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Screen")
            .field("size", &self.size())
            .finish_non_exhaustive()
    }
}

/// What one read of a terminal hands out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScreenView {
    /// The screen, a string per row, from the top to the last row that holds text or the
    /// cursor (the blank rows below are left out), redacted.
    pub lines: Vec<String>,
    /// The cursor: row and column, from 0.
    pub cursor: (u16, u16),
    /// The rows that scrolled off the top since the last read, oldest first, redacted.
    pub scrollback: Vec<String>,
    /// Rows that scrolled off since the last read but were not kept
    /// ([`MAX_SCROLLBACK_ROWS`]).
    pub scrollback_dropped: u64,
    /// The terminal's size.
    pub size: TerminalSize,
    /// Whether the program shows its alternate screen (a pager, an editor, a TUI).
    pub alternate: bool,
}

/// A size the emulator accepts: at least one row and one column.
fn nonzero(size: TerminalSize) -> (NonZeroU16, NonZeroU16) {
    (
        NonZeroU16::new(size.rows).unwrap_or(NonZeroU16::MIN),
        NonZeroU16::new(size.cols).unwrap_or(NonZeroU16::MIN),
    )
}

impl Screen {
    /// A blank terminal of `size`, keeping at most `scrollback_rows` rows between reads.
    pub fn new(size: TerminalSize, scrollback_rows: usize) -> Screen {
        let (rows, cols) = nonzero(size);
        Screen {
            parser: vt100::Parser::new_with_callbacks(
                rows,
                cols,
                scrollback_rows.min(MAX_SCROLLBACK_ROWS),
                Lost::default(),
            ),
        }
    }

    /// What the program printed.
    pub fn feed(&mut self, bytes: &[u8]) {
        self.parser.process(bytes);
    }

    /// The terminal's size now.
    pub fn size(&self) -> TerminalSize {
        let (rows, cols) = self.parser.screen().size();
        TerminalSize {
            rows: rows.get(),
            cols: cols.get(),
        }
    }

    /// A new size, as a person resizing the window (the program learns it from the
    /// kernel's SIGWINCH, through the master).
    pub fn resize(&mut self, size: TerminalSize) {
        let (rows, cols) = nonzero(size);
        self.parser.set_size(rows, cols);
    }

    /// Whether the program asked for the cursor keys' application mode (`ESC O A` for up,
    /// instead of `ESC [ A`).
    pub fn application_cursor(&self) -> bool {
        self.parser.screen().application_cursor()
    }

    /// The screen and what scrolled off since the last call, redacted; the scrollback is
    /// then empty again.
    pub fn take(&mut self, redactor: &Redactor) -> ScreenView {
        let size = self.size();
        let kept = self.parser.screen().scrollback_len();
        let mut rows = self.scrolled_rows(kept, size.rows);
        rows.extend(row_texts(self.parser.screen()));
        let redacted = redact_rows(&rows, size.cols, redactor);
        let (scrollback, screen) = redacted.split_at(kept.min(redacted.len()));
        let cursor = self.parser.screen().cursor_position();
        let last_text = screen
            .iter()
            .rposition(|r| !r.is_empty())
            .map_or(0, |i| i + 1);
        let shown = last_text.max(usize::from(cursor.0) + 1).min(screen.len());
        self.parser.screen_mut().clear_scrollback();
        ScreenView {
            lines: screen[..shown].to_vec(),
            cursor,
            scrollback: scrollback.to_vec(),
            scrollback_dropped: std::mem::take(&mut self.parser.callbacks_mut().0),
            size,
            alternate: self.parser.screen().alternate_screen(),
        }
    }

    /// The `count` rows of scrollback (all of it), oldest first, each with whether it wraps
    /// onto the next; read a screenful at a time by moving the view up.
    fn scrolled_rows(&mut self, count: usize, height: u16) -> Vec<(String, bool)> {
        let mut rows = Vec::with_capacity(count);
        let mut offset = count;
        while offset > 0 {
            let screen = self.parser.screen_mut();
            screen.set_scrollback(offset);
            let take = offset.min(usize::from(height));
            rows.extend(row_texts(screen).take(take));
            offset -= take;
        }
        self.parser.screen_mut().set_scrollback(0);
        rows
    }
}

/// The visible rows of `screen` (after its scrollback offset), with their wrap flags.
fn row_texts(screen: &vt100::Screen) -> impl Iterator<Item = (String, bool)> + '_ {
    let (_, cols) = screen.size();
    screen
        .rows(0, cols.get())
        .enumerate()
        .map(|(i, text)| (text, screen.row_wrapped(i as u16)))
}

/// Redacts `rows` a line at a time (a row that wraps is joined with the next), laying a
/// line that redaction changed out again over as many rows as it had: at `cols` characters
/// a row, the last taking what is left over.
fn redact_rows(rows: &[(String, bool)], cols: u16, redactor: &Redactor) -> Vec<String> {
    let mut out = Vec::with_capacity(rows.len());
    let mut start = 0;
    while start < rows.len() {
        let end = rows[start..]
            .iter()
            .position(|(_, wrapped)| !wrapped)
            .map_or(rows.len(), |i| start + i + 1);
        let line: String = rows[start..end].iter().map(|(t, _)| t.as_str()).collect();
        let redacted = redactor.redact(&line);
        if redacted == line {
            out.extend(rows[start..end].iter().map(|(t, _)| t.clone()));
        } else {
            out.extend(lay_out(&redacted, end - start, usize::from(cols.max(1))));
        }
        start = end;
    }
    out
}

/// `text` over exactly `count` rows of `cols` characters, the last row taking the rest (and
/// rows past the text blank).
fn lay_out(text: &str, count: usize, cols: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    (0..count)
        .map(|i| {
            let from = (i * cols).min(chars.len());
            let to = if i + 1 == count {
                chars.len()
            } else {
                ((i + 1) * cols).min(chars.len())
            };
            chars[from..to].iter().collect()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sessions::tests::redactor;

    const SMALL: TerminalSize = TerminalSize { rows: 4, cols: 20 };

    #[test]
    fn the_screen_is_what_a_person_sees_and_scrolled_rows_come_once() {
        let mut s = Screen::new(SMALL, 100);
        s.feed(b">>> 1+1\r\n2\r\n>>> ");
        let v = s.take(&redactor());
        assert_eq!(v.lines, [">>> 1+1", "2", ">>> "]);
        assert_eq!(v.cursor, (2, 4));
        assert!(v.scrollback.is_empty() && !v.alternate);
        // Eight rows in all on four: the first four scroll off, once.
        s.feed(b"a\r\nb\r\nc\r\nd\r\ne\r\nf");
        let v = s.take(&redactor());
        assert_eq!(v.scrollback, [">>> 1+1", "2", ">>> a", "b"]);
        assert_eq!(v.lines, ["c", "d", "e", "f"]);
        assert_eq!(s.take(&redactor()).scrollback, Vec::<String>::new());
        // Cursor movement and erasing: the screen, not the bytes.
        s.feed(b"\x1b[2J\x1b[Hhello\x1b[1;1Hj");
        assert_eq!(s.take(&redactor()).lines, ["jello"]);
    }

    #[test]
    fn a_secret_wrapped_over_rows_or_across_the_scroll_is_redacted() {
        let secret = "ghp_0123456789abcdefghijklmnopqrstuvwxyz";
        let mut s = Screen::new(SMALL, 100);
        s.feed(format!("token {secret}\r\n").as_bytes());
        let v = s.take(&redactor());
        let all = format!("{}{}", v.scrollback.join(""), v.lines.join(""));
        assert!(
            !all.contains(&secret[4..12]) && !all.contains(&secret[24..]),
            "{v:?}"
        );
        // Three rows it had, three rows it keeps: the cursor's row is still the next one.
        assert_eq!(v.lines.len() + v.scrollback.len(), 4, "{v:?}");
        // Half of it scrolled off before the read, half still on the screen.
        let mut s = Screen::new(SMALL, 100);
        s.feed(format!("a\r\nb\r\nc\r\n{secret}\r\n").as_bytes());
        let v = s.take(&redactor());
        let all = format!("{}{}", v.scrollback.join(""), v.lines.join(""));
        assert!(
            !all.contains(&secret[4..12]) && !all.contains(&secret[24..]),
            "{v:?}"
        );
    }

    #[test]
    fn scrollback_past_its_bound_is_counted_and_a_resize_is_seen() {
        let mut s = Screen::new(SMALL, 3);
        for i in 0..10 {
            s.feed(format!("{i}\r\n").as_bytes());
        }
        let v = s.take(&redactor());
        assert_eq!(v.scrollback, ["4", "5", "6"]);
        assert_eq!(v.scrollback_dropped, 4);
        s.resize(TerminalSize { rows: 10, cols: 40 });
        assert_eq!(
            s.take(&redactor()).size,
            TerminalSize { rows: 10, cols: 40 }
        );
        // The alternate screen (a pager) is said so.
        s.feed(b"\x1b[?1049hpage");
        let v = s.take(&redactor());
        assert!(
            v.alternate && v.lines.first().is_some_and(|l| l == "page"),
            "{v:?}"
        );
    }
}
