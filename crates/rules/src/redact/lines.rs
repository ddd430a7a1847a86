//! One pass over a text's lines, nominating the few line shapes the other passes look at.
//!
//! Owns three shapes: lines that could be `.pgpass` entries; line breaks that may cut a token
//! in two (a *fold*: the line is 64, 76 or 80 columns wide and ends inside a token; a
//! *continuation*: the next line is nothing but the rest of a token); and lines that could
//! open a private key's base64 body. It only nominates: it never decides that anything is a
//! secret, and it imports nothing from the engine.

/// Widths at which tools fold long values: PEM and `openssl base64` (64), `base64` (76),
/// `fold` and terminals (80).
const FOLD_WIDTHS: [usize; 3] = [64, 76, 80];

/// The most indentation a continuation line may carry.
const MAX_INDENT: usize = 40;

/// A line break that may cut a token: the text from `cut` (the end of the first line's
/// content) to `resume` (the start of the next line's token) is a newline and indentation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Join {
    pub cut: usize,
    pub resume: usize,
}

/// What one pass over the lines found.
#[derive(Default)]
pub(crate) struct Lines {
    /// Byte ranges of lines (newline included) shaped like `host:port:db:user:password`.
    pub pgpass: Vec<(usize, usize)>,
    /// Line breaks that may cut a token, in order.
    pub joins: Vec<Join>,
    /// Starts of lines (after indentation) that are 64+ characters of base64 beginning the
    /// way a DER or OpenSSH private key does (`M…`, `b3Bl…`).
    pub key_lines: Vec<usize>,
}

/// A byte that may occur inside a token, an encoded value or a base64 body.
pub(crate) fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'=' | b'_' | b'-' | b'.' | b'~' | b'%')
}

/// A byte of the standard base64 alphabet, padding included.
pub(crate) fn is_base64_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'=')
}

/// Scans `text` once; `pgpass` says whether to look for `.pgpass` lines at all.
pub(crate) fn scan(text: &str, pgpass: bool) -> Lines {
    let bytes = text.as_bytes();
    let mut out = Lines::default();
    let mut start = 0;
    while start < bytes.len() {
        let end = text[start..].find('\n').map_or(bytes.len(), |i| start + i);
        let next = (end + 1).min(bytes.len());
        let line = &bytes[start..end];
        if pgpass && could_be_pgpass(line) {
            out.pgpass.push((start, next));
        }
        let content_end = if line.last() == Some(&b'\r') {
            end - 1
        } else {
            end
        };
        let indent = line
            .iter()
            .take_while(|c| matches!(c, b' ' | b'\t'))
            .count();
        let content = &bytes[start + indent..content_end];
        if content.len() >= 64
            && (content[0] == b'M' || content.starts_with(b"b3Bl"))
            && content.iter().all(|&c| is_base64_byte(c))
        {
            out.key_lines.push(start + indent);
        }
        if end < bytes.len()
            && content.last().is_some_and(|&c| is_token_byte(c))
            && let Some(join) = join_at(bytes, start, indent, content_end, next)
        {
            out.joins.push(join);
        }
        start = next;
    }
    out
}

/// Whether the break after the line `[start, content_end)` may cut a token, and where the
/// next line's token starts.
fn join_at(
    bytes: &[u8],
    start: usize,
    indent: usize,
    content_end: usize,
    next: usize,
) -> Option<Join> {
    let line = &bytes[start..content_end];
    let tail = line.iter().rev().take_while(|&&c| is_token_byte(c)).count();
    let skip = bytes[next..]
        .iter()
        .take(MAX_INDENT + 1)
        .take_while(|c| matches!(c, b' ' | b'\t'))
        .count();
    if skip > MAX_INDENT {
        return None;
    }
    let resume = next + skip;
    let head = bytes[resume..]
        .iter()
        .take_while(|&&c| is_token_byte(c))
        .count();
    if head == 0 {
        return None;
    }
    // A next line that opens with `name =`, `name:` or `NAME=value` is an assignment of its
    // own, not the rest of a token: a value ends at its line's end (`secret = …⏎region =
    // eu-west-1`). A token's tail holds `=` only as padding.
    let run = &bytes[resume..resume + head];
    let padded = run
        .iter()
        .rev()
        .skip_while(|&&c| c == b'=')
        .all(|&c| c != b'=');
    let assigns = bytes[resume + head..]
        .iter()
        .find(|c| !matches!(c, b' ' | b'\t'))
        .is_some_and(|c| matches!(c, b'=' | b':'));
    if assigns || !padded {
        return None;
    }
    let width = line.len();
    let join = Join {
        cut: content_end,
        resume,
    };
    if tail >= 4 && (FOLD_WIDTHS.contains(&width) || FOLD_WIDTHS.contains(&(width - indent))) {
        return Some(join);
    }
    if tail < 4 || head < 8 {
        return None;
    }
    // Only closing punctuation may follow the run on its line.
    let after = bytes[resume + head..]
        .iter()
        .take_while(|c| matches!(c, b'"' | b'\'' | b'`' | b',' | b';' | b')' | b'}' | b']'))
        .count();
    let rest = &bytes[resume + head + after..];
    if !(rest.is_empty() || rest[0] == b'\n' || rest.starts_with(b"\r\n")) {
        return None;
    }
    let classes = [
        run.iter().any(u8::is_ascii_uppercase),
        run.iter().any(u8::is_ascii_lowercase),
        run.iter().any(u8::is_ascii_digit),
    ];
    (classes.iter().filter(|&&c| c).count() >= 2).then_some(join)
}

/// `host:port:database:user:password`, field by field as the `.pgpass` rule reads it:
/// `[A-Za-z0-9.*_-]+`, digits or `*`, then database and user each starting with a letter,
/// `_` or `*` and holding no space or colon. Most lines fail within their first few bytes.
fn could_be_pgpass(line: &[u8]) -> bool {
    let host = line
        .iter()
        .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'*' | b'_' | b'-'))
        .count();
    if host == 0 || line.get(host) != Some(&b':') {
        return false;
    }
    let rest = &line[host + 1..];
    let port = rest
        .iter()
        .take_while(|c| c.is_ascii_digit() || **c == b'*')
        .count();
    if port == 0 || rest.get(port) != Some(&b':') {
        return false;
    }
    let mut rest = &rest[port + 1..];
    for _ in 0..2 {
        if !rest
            .first()
            .is_some_and(|c| c.is_ascii_alphabetic() || matches!(c, b'_' | b'*'))
        {
            return false;
        }
        let field = rest
            .iter()
            .take_while(|c| **c != b':' && !c.is_ascii_whitespace())
            .count();
        if rest.get(field) != Some(&b':') {
            return false;
        }
        rest = &rest[field + 1..];
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folds_continuations_and_key_lines() {
        let fold = format!("{}\n{}\n", "a".repeat(76), "b".repeat(10));
        assert_eq!(
            scan(&fold, false).joins,
            vec![Join {
                cut: 76,
                resume: 77
            }]
        );
        let cont = "token: ghp_abcd\n   EFGH1234ijkl'}\nnext line here\n";
        let j = scan(cont, false).joins;
        assert_eq!(
            j,
            vec![Join {
                cut: 15,
                resume: 19
            }]
        );
        assert!(
            scan("words on a line\nanother_word_here\n", false)
                .joins
                .is_empty()
        );
        assert!(
            scan("PWD=/srv/app\nOLDPWD=/srv/Old1\n", false)
                .joins
                .is_empty()
        );
        let key = format!("  M{}\n", "A".repeat(63));
        assert_eq!(scan(&key, false).key_lines, vec![2]);
        assert_eq!(scan("db:5432:app:bob:pw\n", true).pgpass, vec![(0, 19)]);
        assert_eq!(scan("*:*:*:bob:pw\r\n", true).pgpass, vec![(0, 14)]);
        assert!(
            scan("2026-11-30T01:02:03.004Z INFO a:b:c\n", true)
                .pgpass
                .is_empty()
        );
    }
}
