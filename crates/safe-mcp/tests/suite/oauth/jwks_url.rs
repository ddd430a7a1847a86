//! Keys from the issuer's HTTPS URL (`jwks_url`): a real TLS key server the test starts,
//! rotation followed, and an untrusted certificate refused at start.

use super::*;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

/// The issuer's key endpoint: `openssl s_server -WWW` serving `dir/www` over TLS, with a
/// certificate for 127.0.0.1 signed by a CA made here (`dir/ca.pem`). Killed when dropped.
struct KeyServer {
    child: std::process::Child,
    port: u16,
    www: PathBuf,
    ca: PathBuf,
}

impl KeyServer {
    fn start(dir: &Path) -> KeyServer {
        use std::io::BufRead;
        let openssl = |args: &[&str]| {
            let ok = std::process::Command::new("openssl")
                .args(args)
                .current_dir(dir)
                .stderr(std::process::Stdio::null())
                .status()
                .unwrap()
                .success();
            assert!(ok, "openssl {args:?}");
        };
        openssl(&[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "ca.key",
            "-out",
            "ca.pem",
            "-days",
            "2",
            "-subj",
            "/CN=safe-mcp test CA",
        ]);
        openssl(&[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "srv.key",
            "-out",
            "srv.csr",
            "-subj",
            "/CN=127.0.0.1",
        ]);
        std::fs::write(
            dir.join("ext.cnf"),
            "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n",
        )
        .unwrap();
        openssl(&[
            "x509",
            "-req",
            "-in",
            "srv.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "srv.pem",
            "-days",
            "2",
            "-extfile",
            "ext.cnf",
        ]);
        let www = dir.join("www");
        std::fs::create_dir_all(&www).unwrap();
        let mut child = std::process::Command::new("openssl")
            .args(["s_server", "-WWW", "-accept", "0", "-cert"])
            .arg(dir.join("srv.pem"))
            .arg("-key")
            .arg(dir.join("srv.key"))
            .current_dir(&www)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let out = child.stdout.take().unwrap();
        let mut lines = std::io::BufReader::new(out).lines();
        let line = lines
            .by_ref()
            .map_while(Result::ok)
            .find(|l| l.starts_with("ACCEPT"))
            .expect("s_server did not start");
        std::thread::spawn(move || lines.for_each(drop));
        let port = line.rsplit(':').next().unwrap().trim().parse().unwrap();
        KeyServer {
            child,
            port,
            www,
            ca: dir.join("ca.pem"),
        }
    }

    fn url(&self) -> String {
        format!("https://127.0.0.1:{}/jwks.json", self.port)
    }

    /// Publishes the public halves of `keys` (kid, modulus).
    fn publish(&self, keys: &[(&str, &str)]) {
        let keys: Vec<Value> = keys
            .iter()
            .map(|(kid, n)| json!({"kty": "RSA", "kid": kid, "use": "sig", "alg": "RS256", "n": n, "e": "AQAB"}))
            .collect();
        std::fs::write(
            self.www.join("jwks.json"),
            json!({"keys": keys}).to_string(),
        )
        .unwrap();
    }
}

impl Drop for KeyServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn keys_come_from_the_issuers_https_url_and_follow_its_rotation() {
    let sb = Sandbox::new("");
    let issuer = Issuer::new(sb.base());
    let (second, second_n) = keys::rsa_key(sb.base(), "second.pem");
    let keys = KeyServer::start(sb.base());
    let first_jwks: Value =
        serde_json::from_str(&std::fs::read_to_string(&issuer.jwks).unwrap()).unwrap();
    let first_n = first_jwks["keys"][0]["n"].as_str().unwrap().to_owned();
    keys.publish(&[("k1", &first_n)]);
    write_auth(
        &sb.policy,
        "",
        &format!(
            "jwks_url = \"{}\"\njwks_ca_file = \"{}\"",
            keys.url(),
            keys.ca.display()
        ),
    );
    let started = std::time::Instant::now();
    let (_server, url) = super::super::http::serve(&sb.policy, "127.0.0.1:0");
    let port = super::super::http::port_of(&url);
    let before = issuer.token(|_| {});
    let (status, reply) = initialize(port, &before);
    assert_eq!(status, 200, "keys from the URL verify: {reply}");
    // The issuer rotates: k1 goes, k2 comes. The first token with k2 makes the server
    // fetch the keys again (at most every 10 s after the last fetch).
    keys.publish(&[("k2", &second_n)]);
    std::thread::sleep(Duration::from_secs(11).saturating_sub(started.elapsed()));
    let rotated = sign_as(&issuer.claims(), &second, "k2");
    let (status, reply) = initialize(port, &rotated);
    assert_eq!(status, 200, "a key the issuer added verifies: {reply}");
    // Tokens of the removed key no longer verify: one not seen before, and the one verified
    // (and remembered) before the rotation.
    let stale = issuer.token(|c| c["jti"] = json!("never-seen"));
    let (status, reply) = initialize(port, &stale);
    assert_eq!(status, 401, "a key the issuer removed: {reply}");
    let (status, reply) = initialize(port, &before);
    assert_eq!(status, 401, "a remembered token of a removed key: {reply}");
}

#[test]
fn a_key_url_whose_certificate_is_not_trusted_stops_the_start() {
    let sb = Sandbox::new("");
    let keys = KeyServer::start(sb.base());
    keys.publish(&[]);
    // Without jwks_ca_file only Mozilla's roots are trusted, and the test CA is not one.
    write_auth(&sb.policy, "", &format!("jwks_url = \"{}\"", keys.url()));
    let out = std::process::Command::new(super::super::support::BIN)
        .args(["terminal", "--config"])
        .arg(&sb.policy)
        .args(["--http", "127.0.0.1:0"])
        .env_clear()
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("jwks_url") && stderr.to_lowercase().contains("certificate"),
        "{stderr}"
    );
}
