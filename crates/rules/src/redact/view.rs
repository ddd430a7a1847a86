//! Views of a text in which a secret that the text splits is whole again, with the map back.
//!
//! Owns two rewritings: with ANSI escape sequences taken out (`\x1b[32mghp_\x1b[0m…` reads
//! `ghp_…`), and with the line breaks of a [`Join`] chain taken out (a token folded at 76
//! columns reads as one). Each view keeps, for every piece it copied, where that piece came
//! from, so a span found in the view maps to the span of the original that covers it, the
//! escapes and line breaks inside included. It must never map a span to less than the
//! original bytes it covers, and it imports only its leaf sibling [`super::lines`].

use super::lines::Join;

/// A rewritten text and, for each piece copied from the original, (offset in the view,
/// offset in the original). Pieces are in order and never split a character.
pub(crate) struct View {
    pub text: String,
    pieces: Vec<(usize, usize)>,
    /// Offsets in the view where two pieces that were apart in the original meet.
    seams: Vec<usize>,
}

impl View {
    /// The original offset of view offset `at` (a span's start).
    fn start(&self, at: usize) -> usize {
        let i = self
            .pieces
            .partition_point(|&(v, _)| v <= at)
            .saturating_sub(1);
        let (v, o) = self.pieces.get(i).copied().unwrap_or((0, 0));
        o + (at - v)
    }

    /// The original offset just past view offset `at - 1` (a span's exclusive end).
    fn end(&self, at: usize) -> usize {
        if at == 0 {
            return self.start(0);
        }
        self.start(at - 1) + 1
    }

    /// The original span covering view span `[s, e)`.
    pub(crate) fn map(&self, s: usize, e: usize) -> (usize, usize) {
        (self.start(s), self.end(e))
    }

    /// Whether view span `[s, e)` reaches across a seam (or starts right at one): only such
    /// spans tell something the original did not.
    pub(crate) fn crosses_seam(&self, s: usize, e: usize) -> bool {
        let i = self.seams.partition_point(|&m| m < s);
        self.seams.get(i).is_some_and(|&m| m < e)
    }
}

/// `text` without its ANSI escape sequences (CSI `ESC [ … final`, OSC `ESC ] … BEL|ESC \`,
/// and two-byte escapes), or `None` when it has none.
pub(crate) fn without_ansi(text: &str) -> Option<View> {
    let b = text.as_bytes();
    if !b.contains(&0x1b) {
        return None;
    }
    let mut out = String::with_capacity(text.len());
    let mut pieces = Vec::new();
    let mut seams = Vec::new();
    let mut copied_from = 0;
    let mut i = 0;
    while i < b.len() {
        if b[i] != 0x1b {
            i += 1;
            continue;
        }
        let end = escape_end(b, i);
        if copied_from < i {
            if !pieces.is_empty() {
                seams.push(out.len());
            }
            pieces.push((out.len(), copied_from));
            out.push_str(&text[copied_from..i]);
        }
        copied_from = end;
        i = end;
    }
    if copied_from < b.len() {
        if !pieces.is_empty() {
            seams.push(out.len());
        }
        pieces.push((out.len(), copied_from));
        out.push_str(&text[copied_from..]);
    }
    Some(View {
        text: out,
        pieces,
        seams,
    })
}

/// The end of the escape sequence that starts at `i` (an ESC byte).
fn escape_end(b: &[u8], i: usize) -> usize {
    match b.get(i + 1) {
        Some(b'[') => {
            // Parameter and intermediate bytes, then one final byte.
            let mut j = i + 2;
            while j < b.len() && (0x20..=0x3f).contains(&b[j]) {
                j += 1;
            }
            if j < b.len() && (0x40..=0x7e).contains(&b[j]) {
                j + 1
            } else {
                j
            }
        }
        Some(b']') => {
            let mut j = i + 2;
            while j < b.len() {
                if b[j] == 0x07 {
                    return j + 1;
                }
                if b[j] == 0x1b && b.get(j + 1) == Some(&b'\\') {
                    return j + 2;
                }
                if b[j] == b'\n' {
                    return j;
                }
                j += 1;
            }
            j
        }
        // A character-set designation: one more (ASCII) byte names the set.
        Some(b'(' | b')' | b'*' | b'+') if b.get(i + 2).is_some_and(u8::is_ascii) => i + 3,
        Some(c) if (0x30..=0x7e).contains(c) => i + 2,
        _ => i + 1,
    }
}

/// Windows of `text` around chains of consecutive joins, each with its line breaks (and the
/// next lines' indentation) taken out. A window runs from the start of the chain's first
/// line to the end of its last. A chain of two or more joins also gets a window without its
/// first line, since that line may be a prompt or a label glued onto a folded block
/// (`$ base64 < key` above 76-column lines) and would hide where the token starts.
pub(crate) fn joined(text: &str, joins: &[Join]) -> Vec<View> {
    let b = text.as_bytes();
    let mut views = Vec::new();
    let mut i = 0;
    while i < joins.len() {
        let mut k = i;
        // A join continues the chain when its cut is on the line the previous one resumed.
        while k + 1 < joins.len() && !b[joins[k].resume..joins[k + 1].cut].contains(&b'\n') {
            k += 1;
        }
        let from = b[..joins[i].cut]
            .iter()
            .rposition(|&c| c == b'\n')
            .map_or(0, |p| p + 1);
        views.push(window(text, from, &joins[i..=k]));
        if k > i {
            views.push(window(text, joins[i].resume, &joins[i + 1..=k]));
        }
        i = k + 1;
    }
    views
}

/// The window from `from` through the line `chain`'s last join resumes on.
fn window(text: &str, from: usize, chain: &[Join]) -> View {
    let mut out = String::new();
    let mut pieces = Vec::new();
    let mut seams = Vec::new();
    let mut at = from;
    for j in chain {
        pieces.push((out.len(), at));
        out.push_str(&text[at..j.cut]);
        seams.push(out.len());
        at = j.resume;
    }
    let to = text[at..].find(['\r', '\n']).map_or(text.len(), |p| at + p);
    pieces.push((out.len(), at));
    out.push_str(&text[at..to]);
    View {
        text: out,
        pieces,
        seams,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ansi_is_taken_out_and_spans_map_back() {
        let text = "a \u{1b}[1mghp_\u{1b}[0mXYZ\u{1b}]8;;http://x\u{1b}\\ b";
        let v = without_ansi(text).unwrap();
        assert_eq!(v.text, "a ghp_XYZ b");
        let (s, e) = v.map(2, 9);
        assert_eq!(&text[s..e], "ghp_\u{1b}[0mXYZ");
        assert!(v.crosses_seam(2, 9));
        assert!(!v.crosses_seam(0, 2));
        assert!(without_ansi("plain").is_none());
        // An escape never swallows part of a multi-byte character.
        assert_eq!(without_ansi("a\u{1b}(é\u{1b}[…b").unwrap().text, "a(é…b");
    }

    #[test]
    fn joined_windows_map_back() {
        let text = "x\nkey: abcd\n    efgh\nend";
        let joins = [Join {
            cut: 11,
            resume: 16,
        }];
        let v = &joined(text, &joins)[0];
        assert_eq!(v.text, "key: abcdefgh");
        let (s, e) = v.map(5, 13);
        assert_eq!(&text[s..e], "abcd\n    efgh");
        assert!(v.crosses_seam(5, 13));
        assert!(v.crosses_seam(9, 13));
        assert!(!v.crosses_seam(5, 9));
    }
}
