//! Private keys without their armour, found by structure instead of by header.
//!
//! Owns two detectors. *Headless bodies*: the base64 lines of a PEM key whose BEGIN line was
//! dropped (`sed 1d key.pem`, `tail -n +2`, `grep -v BEGIN`). A run of base64 lines counts
//! when an `-----END … PRIVATE KEY-----` line follows it (any length, since the END line
//! names what it closes), or when its first line decodes to the start of a private key:
//! an ASN.1 SEQUENCE whose first field is the version INTEGER 0 or 1 (PKCS#1 RSA, DSA,
//! SEC1 EC, PKCS#8), or the PKCS#12 version 3, or an encrypted PKCS#8 algorithm (PBES1/2,
//! PKCS#12 PBE), or the `openssh-key-v1` magic. Certificates (SEQUENCE of SEQUENCE) and
//! public keys (SEQUENCE of SEQUENCE, or INTEGER modulus) do not start that way, so they
//! stay. *Encoded PEM*: base64 of a whole PEM file (`client-key-data: LS0tLS1CRUdJTi…`,
//! a Secret's `tls.key`), hidden when the decoded label names a private key; certificates
//! and public keys stay readable. Both must never extend past the run of base64 they judged,
//! and they import only their leaf sibling [`super::lines`].

use super::lines::is_base64_byte;

/// base64 of `-----BEGIN` at offset 0.
pub(crate) const ENCODED_BEGIN: &str = "LS0tLS1CRUdJTi";

/// The most a body line may be wide (PEM 64, OpenSSH 70, some tools 76).
const MAX_BODY_WIDTH: usize = 76;

/// Spans of headless key bodies: from the runs that end at an END line (found by scanning
/// for `-----END `) and from the nominated `key_lines` whose DER/OpenSSH start marks a key.
pub(crate) fn headless_bodies(
    text: &str,
    key_lines: &[usize],
    end_lines: bool,
) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    if end_lines {
        for (at, _) in text.match_indices("-----END ") {
            let line_start = text[..at].rfind('\n').map_or(0, |p| p + 1);
            if !text[line_start..at]
                .bytes()
                .all(|c| c == b' ' || c == b'\t')
            {
                continue;
            }
            let line_end = text[at..].find('\n').map_or(text.len(), |p| at + p);
            if !closes_private_key(text[at..line_end].trim_end()) {
                continue;
            }
            if let Some(span) = body_before(text, line_start) {
                out.push(span);
            }
        }
    }
    // Lines inside a body already found are not walked again: each line is read once.
    let mut covered = 0;
    for &start in key_lines {
        if start < covered {
            continue;
        }
        let line_end = text[start..]
            .find(['\r', '\n'])
            .map_or(text.len(), |p| start + p);
        if starts_private_key(&text[start..line_end]) {
            let end = body_end(text, start, line_end - start);
            out.push((start, end));
            covered = end;
        }
    }
    out
}

/// `-----END <label>-----` whose label names a private key.
fn closes_private_key(line: &str) -> bool {
    let Some(label) = line
        .strip_prefix("-----END ")
        .and_then(|l| l.strip_suffix("-----"))
    else {
        return false;
    };
    label
        .bytes()
        .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == b' ')
        && (label.ends_with("PRIVATE KEY") || label.ends_with("PRIVATE KEY BLOCK"))
}

/// The base64 lines just above the line starting at `line_start`, back to the first line
/// that is not base64 (a blank line, an armour header, the prompt).
fn body_before(text: &str, line_start: usize) -> Option<(usize, usize)> {
    let mut first: Option<usize> = None;
    let mut last_end = None;
    let mut end = line_start.checked_sub(1)?; // the newline ending the previous line
    loop {
        let start = text[..end].rfind('\n').map_or(0, |p| p + 1);
        let line = text[start..end].trim_end_matches('\r');
        let content = line.trim_start_matches([' ', '\t']);
        if content.is_empty()
            || content.len() > MAX_BODY_WIDTH
            || !content.bytes().all(is_base64_byte)
        {
            break;
        }
        let content_start = start + (line.len() - content.len());
        first = Some(content_start);
        if last_end.is_none() {
            last_end = Some(start + line.len());
        }
        if start == 0 {
            break;
        }
        end = start - 1;
    }
    Some((first?, last_end?))
}

/// Where the body that starts with the line at `start` (`width` wide) ends: the end of the
/// last following line that is base64 and no wider, stopping before an END line.
fn body_end(text: &str, start: usize, width: usize) -> usize {
    let mut end = start + width;
    let mut at = end;
    while let Some(rest) = text.get(at..) {
        let Some(nl) = rest.find('\n') else { break };
        let next = at + nl + 1;
        let line_end = text[next..].find('\n').map_or(text.len(), |p| next + p);
        let line = text[next..line_end].trim_end_matches('\r');
        let content = line.trim_start_matches([' ', '\t']);
        if content.is_empty() || content.len() > width || !content.bytes().all(is_base64_byte) {
            break;
        }
        end = next + line.len();
        at = end;
    }
    end
}

/// Whether a base64 line starts the way a private key's DER or OpenSSH encoding does.
fn starts_private_key(line: &str) -> bool {
    if line.starts_with("b3BlbnNzaC1rZXktdjE") {
        return true; // "openssh-key-v1"
    }
    let der = decode(line.get(..32).unwrap_or(line));
    let hdr = match der.get(..2) {
        Some([0x30, l]) if *l < 0x80 => 2,
        Some([0x30, 0x81]) => 3,
        Some([0x30, 0x82]) => 4,
        Some([0x30, 0x83]) => 5,
        _ => return false,
    };
    let rest = der.get(hdr..).unwrap_or(&[]);
    const PKCS5: [u8; 10] = [0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x05];
    const PKCS12_PBE: [u8; 11] = [
        0x06, 0x0a, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x0c, 0x01,
    ];
    match rest {
        [0x02, 0x01, 0x00 | 0x01, ..] => true,
        [0x02, 0x01, 0x03, 0x30, ..] => true,
        [0x30, l, tail @ ..] if *l < 0x80 => {
            tail.starts_with(&PKCS5) || tail.starts_with(&PKCS12_PBE)
        }
        [0x30, 0x81, _, tail @ ..] => tail.starts_with(&PKCS5) || tail.starts_with(&PKCS12_PBE),
        _ => false,
    }
}

/// Spans of base64-encoded PEM files holding a private key: any block whose label names
/// one (a bundle whose first block is a certificate or EC parameters counts too, and is
/// hidden whole). A run cut off by the end of the text before it closes counts as well,
/// since what follows the cut is unknown.
pub(crate) fn encoded_pems(text: &str) -> Vec<(usize, usize)> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    // No boundary is asked for before the run: the string only occurs where `-----BEGIN`
    // was encoded at a group boundary, and a key inside a longer blob is a key all the same.
    let mut from = 0;
    while let Some(i) = text[from..].find(ENCODED_BEGIN) {
        let at = from + i;
        let end = at + b[at..].iter().take_while(|&&c| is_base64_byte(c)).count();
        from = end.max(at + 1);
        let decoded = decode(&text[at..end]);
        let decoded = String::from_utf8_lossy(&decoded);
        let private = decoded.match_indices("-----BEGIN ").any(|(h, _)| {
            decoded[h + 11..]
                .split_once("-----")
                .is_some_and(|(label, _)| label.len() <= 64 && label.contains("PRIVATE KEY"))
        });
        let cut = end == text.len() && !decoded.trim_end().ends_with("-----");
        if (private && end - at > 64) || cut {
            out.push((at, end));
        }
    }
    out
}

/// Standard base64 decoded up to the first byte outside the alphabet or padding; a trailing
/// partial group yields the bytes it completes.
fn decode(s: &str) -> Vec<u8> {
    let value = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    };
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let mut acc = 0u32;
    let mut bits = 0;
    for c in s.bytes() {
        let Some(v) = value(c) else { break };
        acc = (acc << 6) | v;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_starts_are_told_from_certificates() {
        assert!(starts_private_key(
            "MIIEpAIBAAKCAQEA1h2YfE1vWKTjHRH1yb0wdvuZvpknqu6SsVDa5+abL7WbT/ML"
        ));
        assert!(starts_private_key(
            "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKdFhxPbztOBEMvaLAHQFOlPOLHEsKkJ"
        ));
        assert!(starts_private_key(
            "MHcCAQEEII6BXijOpFLkTi7qmsGZu/tlRQ+FIxhulJwPygateI6SoAoGCCqGSM49"
        ));
        assert!(starts_private_key(
            "MIIFHDBOBgkqhkiG9w0BBQ0wQYmVR6d35LkG4JugVqnm6/Ac8baIlef25cWQbQfc"
        ));
        assert!(starts_private_key(
            "MC4CAQAwBQYDK2VwBCIEIA8Qa2QGJm1uX9s8eXs0bZ0F3C8l3yJ3jYqkZ7w5d2Hk"
        ));
        assert!(!starts_private_key(
            "MIIDdzCCAl+gAwIBAgIEuHuf18FZTKTJPOFQ8O30B00EMa8vFYTFP0HN501N0uU1"
        ));
        assert!(!starts_private_key(
            "MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEAu1SU1LfVLPHCozMxH2Mo"
        ));
        assert!(!starts_private_key(
            "MIIBCgKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gunVTLw"
        ));
        assert_eq!(
            decode("LS0tLS1CRUdJTiBSU0EgUFJJVkFURSBLRVk"),
            b"-----BEGIN RSA PRIVATE KEY"
        );
    }

    #[test]
    fn bodies_stop_at_their_run() {
        let text = "$ x\nAAAA\nBBBB==\n-----END EC PRIVATE KEY-----\n";
        assert_eq!(headless_bodies(text, &[], true), vec![(4, 15)]);
        assert!(headless_bodies("a b\n-----END PRIVATE KEY-----", &[], true).is_empty());
        assert!(headless_bodies("AAAA\n-----END CERTIFICATE-----", &[], true).is_empty());
    }
}
