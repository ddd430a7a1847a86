//! A test OAuth issuer: an RSA key made with openssl, its JWKS, and tokens signed with it.
//! Shared by the HTTP bench and the OAuth tests (which include this file by path).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// base64url without padding.
pub fn b64url(bytes: &[u8]) -> String {
    const ABC: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = (u32::from(chunk[0]) << 16)
            | (u32::from(*chunk.get(1).unwrap_or(&0)) << 8)
            | u32::from(*chunk.get(2).unwrap_or(&0));
        for i in 0..=chunk.len() {
            out.push(ABC[(n >> (18 - 6 * i) & 63) as usize] as char);
        }
    }
    out
}

/// A 2048-bit RSA key at `dir/name`: its PEM, and its modulus in base64url (the JWK's `n`).
pub fn rsa_key(dir: &Path, name: &str) -> (Vec<u8>, String) {
    let path = dir.join(name);
    let ok = Command::new("openssl")
        .args([
            "genpkey",
            "-algorithm",
            "RSA",
            "-pkeyopt",
            "rsa_keygen_bits:2048",
            "-out",
        ])
        .arg(&path)
        .stderr(Stdio::null())
        .status()
        .unwrap()
        .success();
    assert!(ok, "openssl genpkey");
    let out = Command::new("openssl")
        .args(["rsa", "-noout", "-modulus", "-in"])
        .arg(&path)
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let hex = text.trim().trim_start_matches("Modulus=");
    let modulus: Vec<u8> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect();
    (std::fs::read(&path).unwrap(), b64url(&modulus))
}

/// Writes `dir/jwks.json` holding the public half of a key with modulus `n`, as kid `k1`.
pub fn write_jwks(dir: &Path, n: &str) -> PathBuf {
    let jwks = dir.join("jwks.json");
    let set = serde_json::json!({"keys": [{"kty": "RSA", "kid": "k1", "use": "sig", "alg": "RS256", "n": n, "e": "AQAB"}]});
    std::fs::write(&jwks, set.to_string()).unwrap();
    jwks
}

/// `claims` signed RS256 with `pem`, as kid `k1`.
pub fn sign(claims: &serde_json::Value, pem: &[u8]) -> String {
    let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::RS256);
    header.kid = Some("k1".into());
    jsonwebtoken::encode(
        &header,
        claims,
        &jsonwebtoken::EncodingKey::from_rsa_pem(pem).unwrap(),
    )
    .unwrap()
}
