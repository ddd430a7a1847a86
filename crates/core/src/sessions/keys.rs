//! Named keys for a session on a terminal: what a person's keyboard sends for `Enter`,
//! `Ctrl-C` or an arrow, as xterm sends it. The arrows, `Home` and `End` follow the mode the
//! program asked for (application cursor keys: `ESC O A` instead of `ESC [ A`), as a
//! terminal's keyboard does.

/// Every name [`key_bytes`] takes, for a refusal that says what to use instead.
pub const KEY_NAMES: &str = "Enter, Tab, Esc, Backspace, Delete, Insert, Space, Up, Down, Left, Right, Home, End, PageUp, PageDown, F1 to F12, Ctrl-<letter> (Ctrl-C, Ctrl-D, Ctrl-Z, ...), Alt-<key>";

/// The bytes a keyboard sends for the key `name` (case does not matter; `Ctrl+C`, `C-c` and
/// `^C` are `Ctrl-C`), or why there is no such key.
pub fn key_bytes(name: &str, application_cursor: bool) -> Result<Vec<u8>, String> {
    let unknown = || format!("unknown key `{name}`: use one of {KEY_NAMES}");
    let lower = name.trim().to_ascii_lowercase();
    if let Some(rest) = ["alt-", "alt+", "m-", "meta-"]
        .iter()
        .find_map(|p| lower.strip_prefix(p))
        .filter(|rest| !rest.is_empty())
    {
        // The key's own bytes after an escape. `rest` is lower case: an Alt-letter is the
        // lower-case letter, as a keyboard without Shift sends it.
        let mut bytes = vec![0x1b];
        bytes.extend(key_bytes(rest, application_cursor).map_err(|_| unknown())?);
        return Ok(bytes);
    }
    if let Some(rest) = ["ctrl-", "ctrl+", "control-", "c-", "^"]
        .iter()
        .find_map(|p| lower.strip_prefix(p))
    {
        return control(rest).ok_or_else(unknown);
    }
    let cursor = |last: u8| {
        if application_cursor {
            vec![0x1b, b'O', last]
        } else {
            vec![0x1b, b'[', last]
        }
    };
    let tilde = |n: &str| format!("\x1b[{n}~").into_bytes();
    Ok(match lower.as_str() {
        "enter" | "return" | "cr" => b"\r".to_vec(),
        "tab" => b"\t".to_vec(),
        "esc" | "escape" => vec![0x1b],
        "backspace" | "bs" => vec![0x7f],
        "space" => b" ".to_vec(),
        "up" => cursor(b'A'),
        "down" => cursor(b'B'),
        "right" => cursor(b'C'),
        "left" => cursor(b'D'),
        "home" => cursor(b'H'),
        "end" => cursor(b'F'),
        "insert" => tilde("2"),
        "delete" | "del" => tilde("3"),
        "pageup" | "page-up" | "pgup" => tilde("5"),
        "pagedown" | "page-down" | "pgdn" => tilde("6"),
        "f1" => b"\x1bOP".to_vec(),
        "f2" => b"\x1bOQ".to_vec(),
        "f3" => b"\x1bOR".to_vec(),
        "f4" => b"\x1bOS".to_vec(),
        "f5" => tilde("15"),
        "f6" => tilde("17"),
        "f7" => tilde("18"),
        "f8" => tilde("19"),
        "f9" => tilde("20"),
        "f10" => tilde("21"),
        "f11" => tilde("23"),
        "f12" => tilde("24"),
        // One printable character is itself (for Alt-x).
        one if one.chars().count() == 1 => one.as_bytes().to_vec(),
        _ => return Err(unknown()),
    })
}

/// Ctrl with `rest` (one character): a letter or one of `@[\]^_ ?`.
fn control(rest: &str) -> Option<Vec<u8>> {
    let mut chars = rest.chars();
    let (Some(c), None) = (chars.next(), chars.next()) else {
        return None;
    };
    let byte = match c {
        'a'..='z' => c as u8 - b'a' + 1,
        '@' | ' ' | '2' => 0,
        '[' | '3' => 0x1b,
        '\\' | '4' => 0x1c,
        ']' | '5' => 0x1d,
        '^' | '6' => 0x1e,
        '_' | '7' | '/' => 0x1f,
        '?' | '8' => 0x7f,
        _ => return None,
    };
    Some(vec![byte])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_what_a_keyboard_sends() {
        let k = |name: &str| key_bytes(name, false).unwrap();
        assert_eq!(k("Enter"), b"\r");
        assert_eq!(k("ctrl-c"), [3]);
        assert_eq!(k("Ctrl+D"), [4]);
        assert_eq!(k("^Z"), [26]);
        assert_eq!(k("C-a"), [1]);
        assert_eq!(k("Up"), b"\x1b[A");
        assert_eq!(key_bytes("Up", true).unwrap(), b"\x1bOA");
        assert_eq!(k("PageDown"), b"\x1b[6~");
        assert_eq!(k("F1"), b"\x1bOP");
        assert_eq!(k("F12"), b"\x1b[24~");
        assert_eq!(k("Alt-b"), b"\x1bb");
        assert_eq!(k("Alt-Left"), b"\x1b\x1b[D");
        assert_eq!(k("Esc"), [0x1b]);
        assert_eq!(k("q"), b"q");
        for bad in ["Hyper-x", "Ctrl-", "Ctrl-cc", "F13", "", "Alt-"] {
            let why = key_bytes(bad, false).unwrap_err();
            assert!(
                why.contains("unknown key") && why.contains("Ctrl-<letter>"),
                "{why}"
            );
        }
    }
}
