//! Where long text is cut for a reader: at a line end near the limit, so that what is shown
//! of a run's output (its start and its end, issue 32) reads as whole lines where it can.

/// The start of `text`, at most `max` bytes, ending at a line end where one is near.
pub fn prefix(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    match text[..end].rfind('\n') {
        Some(nl) if nl + 1 >= end / 2 => text[..=nl].to_owned(),
        _ => text[..end].to_owned(),
    }
}

/// The end of `text`, at most `max` bytes, starting at a line start where one is near.
pub fn suffix(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut start = text.len() - max;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    match text[start..].find('\n') {
        Some(nl) if nl < max / 2 => text[start + nl + 1..].to_owned(),
        _ => text[start..].to_owned(),
    }
}

/// `text` (already redacted) in at most about `cap` bytes: all of it, or its first quarter
/// and its last three quarters around a line that says how much was left out.
pub fn head_and_tail(text: &str, cap: usize) -> (String, bool) {
    if text.len() <= cap {
        return (text.to_owned(), false);
    }
    let (first, last) = (prefix(text, cap / 4), suffix(text, cap - cap / 4));
    let lines = text.bytes().filter(|b| *b == b'\n').count() as u64;
    (joined(&first, &last, lines, text.len() as u64), true)
}

/// `first` and `last` of a text of `lines` newlines and `total` bytes, around the line that
/// says how many lines and bytes lie between them.
pub fn joined(first: &str, last: &str, lines: u64, total: u64) -> String {
    let newlines = |s: &str| s.bytes().filter(|b| *b == b'\n').count() as u64;
    // A head that ends inside a line shows that line (or its start) too.
    let open_line = u64::from(!first.is_empty() && !first.ends_with('\n'));
    let shown = newlines(first) + open_line + newlines(last);
    let left_lines = lines.saturating_sub(shown);
    let left_bytes = total.saturating_sub((first.len() + last.len()) as u64);
    let seam = if first.is_empty() || first.ends_with('\n') {
        ""
    } else {
        "\n"
    };
    format!(
        "{first}{seam}[… {left_lines} lines ({left_bytes} bytes) left out of {total} bytes: the start and the end are shown …]\n{last}"
    )
}

#[cfg(test)]
mod tests {
    use super::head_and_tail;

    #[test]
    fn short_text_is_whole_and_long_text_keeps_both_ends() {
        assert_eq!(head_and_tail("a\nb\n", 100), ("a\nb\n".to_owned(), false));
        let text: String = (0..1000).map(|i| format!("line {i}\n")).collect();
        let (cut, was_cut) = head_and_tail(&text, 400);
        assert!(was_cut);
        assert!(cut.starts_with("line 0\n"), "{cut}");
        assert!(cut.ends_with("line 999\n"), "{cut}");
        let shown = cut.lines().filter(|l| l.starts_with("line ")).count();
        let marker = format!("[… {} lines", 1000 - shown);
        assert!(cut.contains(&marker), "{cut}");
    }
}
