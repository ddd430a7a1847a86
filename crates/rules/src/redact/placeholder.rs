//! Values a rule matched that are not secrets: placeholders, masks, our own markers, paths.
//!
//! Owns the judgement "this matched value holds no secret": `${DB_PASSWORD}`, `<token>`,
//! `gho_****`, `sk-…abcd`, `[REDACTED:jwt]`, `changeme`, and (for the rules that name a
//! variable rather than a value's shape) a directory or file path. It must never call a value
//! harmless while it still shows 12 or more characters of a real secret in a row, and it
//! imports nothing from the engine.

/// Values that are obviously not secrets: `${DB_PASSWORD}`, `<token>`, `****`, `changeme`,
/// `your-api-key-here`, `gho_****`, `[REDACTED]`, a marker we already wrote. Percent-encoded
/// values are judged decoded too (`%24%7BTOKEN%7D` is `${TOKEN}`).
pub(crate) fn is_placeholder(value: &str) -> bool {
    if plain_placeholder(value) {
        return true;
    }
    value.contains('%') && plain_placeholder(&percent_decoded(value))
}

fn plain_placeholder(value: &str) -> bool {
    let v = value.trim_matches(|c| c == '"' || c == '\'');
    let lower = v.to_ascii_lowercase();
    let mut chars = v.chars();
    let first = chars.next();
    (v.starts_with("${") || v.starts_with('$') || v.starts_with("{{"))
        || windows_variable(v)
        || (v.starts_with('<') && v.ends_with('>'))
        || first.is_some_and(|f| v.chars().all(|c| c == f))
        || v.chars()
            .all(|c| c == '*' || c == 'x' || c == 'X' || c == '.')
        || matches!(
            lower.trim_matches(|c: char| matches!(c, '[' | ']' | '(' | ')' | '<' | '>')),
            "changeme"
                | "change_me"
                | "change-me"
                | "changeit"
                | "replaceme"
                | "replace_me"
                | "replace-me"
                | "example"
                | "placeholder"
                | "redacted"
                | "hidden"
                | "masked"
                | "filtered"
                | "omitted"
                | "removed"
                | "sensitive"
                | "deleted"
                | "none"
                | "nil"
                | "n/a"
                | "unset"
                | "empty"
                | "null"
                | "undefined"
                | "true"
                | "false"
                | "dummy"
                | "password"
                | "passwd"
                | "secret"
                | "token"
        )
        || lower.contains("redacted")
        || lower.contains("data+omitted")
        || ["your-", "your_", "your ", "my-", "my_", "my "]
            .iter()
            .any(|p| lower.starts_with(p))
        || ["-here", "_here", " here"]
            .iter()
            .any(|s| lower.ends_with(s))
        || v.starts_with("[REDACTED:")
        || is_masked(v)
}

/// `%TOKEN%`, `%DB_PASSWORD%`: a Windows environment variable, not its value.
fn windows_variable(v: &str) -> bool {
    v.len() > 2
        && v.starts_with('%')
        && v.ends_with('%')
        && v[1..v.len() - 1]
            .bytes()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == b'_')
}

/// A value shown masked: a run of mask characters (`***`, `…`, `•`, `xxxx`, `...`, `###`)
/// with fewer than 12 other characters in a row anywhere (`ghp_****1234`,
/// `sk-proj-********abcd`, `****************EKEY`, `xxxx-xxxx-xxxx`).
pub(crate) fn is_masked(value: &str) -> bool {
    let mut masked = false;
    let mut longest = 0usize;
    let mut segment = 0usize;
    let chars: Vec<char> = value.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        // Each character is looked at once: a run is measured and then stepped over whole.
        let run = chars[i..].iter().take_while(|&&d| same_mask(c, d)).count();
        let is_mask = match c {
            '*' | '•' | '●' | '·' | '∙' | '…' => true,
            'x' | 'X' => run >= 4,
            '.' | '#' => run >= 3,
            _ => false,
        };
        if is_mask {
            masked |= c != '*' || run >= 3;
            segment = 0;
        } else {
            segment += run;
            longest = longest.max(segment);
        }
        i += run;
    }
    masked && longest < 12
}

fn same_mask(c: char, d: char) -> bool {
    c == d || (matches!(c, 'x' | 'X') && matches!(d, 'x' | 'X'))
}

/// A directory or file path (`/srv/app`, `./secrets/pw.txt`, `~/tokens/ci`, `C:\Users\x`):
/// what `PWD=`, `GOOGLE_APPLICATION_CREDENTIALS=` and `--from-file=password=` hold. A value
/// with a long random-looking segment (`/aB3kQ9zX7mW2pL5nR8t`) is not taken for a path.
pub(crate) fn is_path_like(value: &str) -> bool {
    let v = value.trim_matches(|c| c == '"' || c == '\'');
    let b = v.as_bytes();
    let drive =
        b.len() >= 3 && b[0].is_ascii_alphabetic() && b[1] == b':' && matches!(b[2], b'\\' | b'/');
    let rooted = v.starts_with('/')
        || v.starts_with("./")
        || v.starts_with("../")
        || v.starts_with("~/")
        || drive;
    if !rooted || v.len() < 2 {
        return false;
    }
    if !v.bytes().all(|c| {
        c.is_ascii_alphanumeric()
            || matches!(c, b'.' | b'_' | b'/' | b'-' | b'~' | b'@' | b':' | b'\\')
    }) {
        return false;
    }
    !v.split(['/', '\\']).any(random_looking)
}

/// A path segment of 16+ characters mixing upper case, lower case and digits.
fn random_looking(segment: &str) -> bool {
    segment.len() >= 16
        && segment.bytes().any(|c| c.is_ascii_uppercase())
        && segment.bytes().any(|c| c.is_ascii_lowercase())
        && segment.bytes().any(|c| c.is_ascii_digit())
}

/// `%XX` escapes decoded (bytes that do not form UTF-8 become U+FFFD).
pub(crate) fn percent_decoded(value: &str) -> String {
    let b = value.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        if b[i] == b'%'
            && i + 2 < b.len()
            && let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2]))
        {
            out.push((h * 16 + l) as u8);
            i += 3;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_and_paths() {
        for v in [
            "gho_****",
            "sk-…****",
            "****************EKEY",
            "xxxx-xxxx",
            "••••••••",
        ] {
            assert!(is_placeholder(v), "{v}");
        }
        for v in [
            "ghp_u8jzPde0IgxLd6GncfBAepfJBd0Kh8oOOL8d",
            "Tr0ub4dor&3x",
            "a*b",
            "box",
        ] {
            assert!(!is_placeholder(v), "{v}");
        }
        for v in [
            "/srv/app",
            "./pw.txt",
            "~/t/ci.txt",
            "C:\\Users\\x",
            "/dev/null",
        ] {
            assert!(is_path_like(v), "{v}");
        }
        for v in [
            "/aB3kQ9zX7mW2pL5nR8tY4vC6",
            "/pass+word",
            "relative/path",
            "/",
        ] {
            assert!(!is_path_like(v), "{v}");
        }
        assert_eq!(percent_decoded("%24%7BTOKEN%7D"), "${TOKEN}");
        assert_eq!(percent_decoded("a%2"), "a%2");
    }
}
