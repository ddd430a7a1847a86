//! The entropy fallback: long base64/hex-alphabet tokens that look random.
//!
//! Owns the Shannon-entropy test behind `entropy_fallback`. It must never flag pure hex
//! (SHAs, checksums) or UUIDs, and it imports nothing from the engine.

/// Tokens of 24+ characters from the base64/hex alphabet with high Shannon entropy and
/// mixed character classes. Pure hex (SHAs, checksums) and UUIDs never qualify.
pub(crate) fn high_entropy_tokens(text: &str) -> Vec<(usize, usize)> {
    let is_token = |c: char| c.is_ascii_alphanumeric() || matches!(c, '+' | '/' | '=' | '_' | '-');
    let mut out = Vec::new();
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if !is_token(bytes[i] as char) {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && is_token(bytes[i] as char) {
            i += 1;
        }
        let token = &text[start..i];
        if token.len() < 24 {
            continue;
        }
        let hex = token.chars().all(|c| c.is_ascii_hexdigit() || c == '-');
        let (upper, lower, digit) = (
            token.chars().any(|c| c.is_ascii_uppercase()),
            token.chars().any(|c| c.is_ascii_lowercase()),
            token.chars().any(|c| c.is_ascii_digit()),
        );
        if !hex && upper && lower && digit && shannon(token) >= 4.2 {
            out.push((start, i));
        }
    }
    out
}

/// Shannon entropy of `s`, in bits per byte.
pub(crate) fn shannon(s: &str) -> f64 {
    let mut counts = [0usize; 256];
    for b in s.bytes() {
        counts[b as usize] += 1;
    }
    let n = s.len() as f64;
    counts
        .iter()
        .filter(|&&c| c > 0)
        .map(|&c| {
            let p = c as f64 / n;
            -p * p.log2()
        })
        .sum()
}
