//! Finding a placeholder in what a request carries, in the spellings an HTTP client uses
//! without being asked (as is, percent-encoded in a URL or form, base64 in a Basic pair),
//! and masking a real value in a response.

use base64::Engine;

/// Whether `haystack` holds `needle`.
fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() || needle.len() > haystack.len() {
        return None;
    }
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Whether a header value carries `placeholder`: as is, or as the password of a Basic pair.
pub fn carries(value: &[u8], placeholder: &[u8]) -> bool {
    find(value, placeholder).is_some()
        || basic_pairs(value)
            .iter()
            .any(|pair| find(pair, placeholder).is_some())
}

/// The decoded pairs of each `Basic <base64>` in `bytes` (any case).
fn basic_pairs(bytes: &[u8]) -> Vec<Vec<u8>> {
    let lower = bytes.to_ascii_lowercase();
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(at) = find(&lower[from..], b"basic ") {
        let start = from + at + b"basic ".len();
        let token: Vec<u8> = bytes[start..]
            .iter()
            .copied()
            .skip_while(|b| *b == b' ')
            .take_while(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'='))
            .collect();
        if let Ok(pair) = base64::engine::general_purpose::STANDARD.decode(&token) {
            out.push(pair);
        }
        from = start;
    }
    out
}

/// `bytes` with each `%XX` decoded (and `+` as a space), for a URL or a form body.
fn percent_decoded(bytes: &[u8]) -> Vec<u8> {
    let hex = |b: u8| (b as char).to_digit(16).and_then(|d| u8::try_from(d).ok());
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                (Some(h), Some(l)) => {
                    out.push(h * 16 + l);
                    i += 3;
                    continue;
                }
                _ => out.push(b'%'),
            },
            b'+' => out.push(b' '),
            b => out.push(b),
        }
        i += 1;
    }
    out
}

/// What a request carries, in each spelling looked at.
pub struct Decoded {
    spellings: Vec<Vec<u8>>,
}

impl Decoded {
    /// The spellings of `bytes`.
    pub fn of(bytes: &[u8]) -> Decoded {
        let mut spellings = vec![bytes.to_vec(), percent_decoded(bytes)];
        spellings.extend(basic_pairs(bytes));
        Decoded { spellings }
    }

    /// Whether one of them holds `needle`.
    pub fn holds(&self, needle: &[u8]) -> bool {
        self.spellings.iter().any(|s| find(s, needle).is_some())
    }
}
