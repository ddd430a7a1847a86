//! The OAuth 2.1 resource server in front of `--http` (issue 20): a test issuer whose keys
//! are made here (openssl), tokens signed here, a real server, the Python SDK's HTTP client
//! with a valid token end to end, and raw requests for every kind of bad token.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};

use super::support::Sandbox;

const ISSUER: &str = "https://issuer.test";

const AUDIENCE: &str = "https://mcp.test/mcp";

const SCOPE: &str = "mcp:terminal";

/// RSA keys made with openssl: the issuer's, and another.
pub(super) struct Issuer {
    key: Vec<u8>,
    other: Vec<u8>,
    jwks: PathBuf,
}

#[path = "../../../benches/common/issuer.rs"]
mod keys;

mod jwks_url;
mod limits;

use keys::b64url;

impl Issuer {
    pub(super) fn new(dir: &Path) -> Issuer {
        let (key, n) = keys::rsa_key(dir, "issuer.pem");
        let (other, _) = keys::rsa_key(dir, "other.pem");
        let jwks = keys::write_jwks(dir, &n);
        Issuer { key, other, jwks }
    }

    /// `jwks_file = "…"` for [`write_auth`].
    pub(super) fn jwks_setting(&self) -> String {
        format!("jwks_file = \"{}\"", self.jwks.display())
    }

    fn claims(&self) -> Value {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs();
        json!({"iss": ISSUER, "aud": AUDIENCE, "sub": "alice@example.com", "client_id": "claude-desktop",
               "scope": format!("openid {SCOPE}"), "iat": now, "nbf": now - 5, "exp": now + 600})
    }

    fn sign_with(&self, claims: &Value, pem: &[u8]) -> String {
        keys::sign(claims, pem)
    }

    pub(super) fn token(&self, edit: impl FnOnce(&mut Value)) -> String {
        let mut claims = self.claims();
        edit(&mut claims);
        self.sign_with(&claims, &self.key)
    }
}

fn serve(sb: &Sandbox, issuer: &Issuer) -> (super::http::Served, u16) {
    serve_policy("terminal", &sb.policy, issuer)
}

/// Adds `[http.auth]` for the test issuer to `policy` and serves `server` with it.
fn serve_policy(server: &str, policy: &Path, issuer: &Issuer) -> (super::http::Served, u16) {
    serve_with(server, policy, issuer, "")
}

/// As [`serve_policy`], with `http` added to `[http]`.
fn serve_with(
    server: &str,
    policy: &Path,
    issuer: &Issuer,
    http: &str,
) -> (super::http::Served, u16) {
    write_auth(policy, http, &issuer.jwks_setting());
    let (served, url) = super::http::serve_server(server, policy, "127.0.0.1:0");
    (served, super::http::port_of(&url))
}

/// Adds `[http]` (with `http`) and `[http.auth]` for the test issuer, its keys from `keys`.
pub(super) fn write_auth(policy: &Path, http: &str, keys: &str) {
    let text = std::fs::read_to_string(policy).unwrap();
    std::fs::write(
        policy,
        format!(
            "{text}\n[http]\n{http}\n[http.auth]\nmode = \"oauth\"\nissuer = \"{ISSUER}\"\naudience = \"{AUDIENCE}\"\n{keys}\nrequired_scopes = [\"{SCOPE}\"]\n"
        ),
    )
    .unwrap();
}

/// One raw request; returns the status and the whole reply (headers and body).
fn request(port: u16, method: &str, path: &str, headers: &str, body: &str) -> (u16, String) {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n{headers}\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).unwrap();
    let mut reply = String::new();
    let _ = s.read_to_string(&mut reply);
    (reply[9..12].parse().unwrap(), reply)
}

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;

fn initialize(port: u16, token: &str) -> (u16, String) {
    request(
        port,
        "POST",
        "/mcp",
        &format!("Authorization: Bearer {token}\r\n"),
        INITIALIZE,
    )
}

#[test]
fn the_metadata_and_the_challenge_name_the_issuer() {
    let sb = Sandbox::new("");
    let issuer = Issuer::new(sb.base());
    let (_server, port) = serve(&sb, &issuer);
    let (status, reply) = request(
        port,
        "GET",
        "/.well-known/oauth-protected-resource/mcp",
        "",
        "",
    );
    assert_eq!(status, 200, "{reply}");
    let body: Value = serde_json::from_str(reply.split("\r\n\r\n").nth(1).unwrap()).unwrap();
    assert_eq!(body["resource"], AUDIENCE);
    assert_eq!(body["authorization_servers"], json!([ISSUER]));
    assert_eq!(body["scopes_supported"], json!([SCOPE]));
    let (status, reply) = request(port, "POST", "/mcp", "", INITIALIZE);
    assert_eq!(status, 401, "{reply}");
    let challenge = reply
        .lines()
        .find(|l| l.to_lowercase().starts_with("www-authenticate:"))
        .unwrap_or_default()
        .to_owned();
    assert!(
        challenge.contains(
            "resource_metadata=\"https://mcp.test/.well-known/oauth-protected-resource/mcp\""
        ) && challenge.contains(&format!("scope=\"{SCOPE}\"")),
        "{challenge}"
    );
}

#[test]
fn a_valid_token_works_end_to_end_and_names_the_caller_in_the_trail() {
    let sb = Sandbox::new("");
    let issuer = Issuer::new(sb.base());
    let (_server, port) = serve(&sb, &issuer);
    let token = issuer.token(|_| {});
    let out = super::python_sdk::run_script(
        "http_client.py",
        &[format!("http://127.0.0.1:{port}/mcp"), token],
    );
    assert!(out.contains("http session validated"), "{out}");
    let records = sb.audit_records();
    // Every record of every terminal tool the caller used names the caller.
    let calls: Vec<&Value> = records.iter().filter(|r| r["tool"].is_string()).collect();
    for tool in [
        "run_command",
        "explain_command",
        "describe_policy",
        "list_processes",
    ] {
        assert!(
            calls.iter().any(|r| r["tool"] == tool),
            "{tool}: {records:?}"
        );
    }
    for r in calls {
        assert_eq!(r["sub"], "alice@example.com", "{r}");
        assert_eq!(r["client_id"], "claude-desktop", "{r}");
    }
    // The token itself is never written anywhere.
    let trail = std::fs::read_to_string(&sb.audit).unwrap();
    assert!(!trail.contains("eyJ"), "a token reached the trail");
}

#[test]
fn every_bad_token_is_refused() {
    let sb = Sandbox::new("");
    let issuer = Issuer::new(sb.base());
    let (_server, port) = serve(&sb, &issuer);
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let mut claims = issuer.claims();
    claims["iss"] = json!("https://other.test");
    let wrong_iss = issuer.sign_with(&claims, &issuer.key);
    let cases: Vec<(&str, String, u16)> = vec![
        ("valid", issuer.token(|_| {}), 200),
        (
            "wrong key",
            issuer.sign_with(&issuer.claims(), &issuer.other),
            401,
        ),
        (
            "wrong audience",
            issuer.token(|c| c["aud"] = json!("https://other.test/mcp")),
            401,
        ),
        (
            "an audience list without ours",
            issuer.token(|c| c["aud"] = json!(["https://a.test", "https://b.test"])),
            401,
        ),
        ("wrong issuer", wrong_iss, 401),
        (
            "expired",
            issuer.token(|c| c["exp"] = json!(now - 3600)),
            401,
        ),
        (
            "not yet valid",
            issuer.token(|c| c["nbf"] = json!(now + 3600)),
            401,
        ),
        (
            "no sub",
            issuer.token(|c| {
                c.as_object_mut().unwrap().remove("sub");
            }),
            401,
        ),
        ("empty sub", issuer.token(|c| c["sub"] = json!("")), 401),
        (
            "missing scope",
            issuer.token(|c| c["scope"] = json!("openid")),
            403,
        ),
        ("garbage", "not.a.token".into(), 401),
    ];
    for (what, token, want) in cases {
        let (status, reply) = initialize(port, &token);
        assert_eq!(status, want, "{what}: {reply}");
        if want == 403 {
            assert!(
                reply.contains("error=\"insufficient_scope\""),
                "{what}: {reply}"
            );
        }
    }
    // alg = none, and HS256 keyed with the issuer's public key (algorithm confusion).
    let body = b64url(issuer.claims().to_string().as_bytes());
    let none = format!("{}.{body}.", b64url(br#"{"alg":"none","kid":"k1"}"#));
    assert_eq!(initialize(port, &none).0, 401, "alg none");
    let public = std::fs::read_to_string(&issuer.jwks).unwrap();
    let mut header = Header::new(Algorithm::HS256);
    header.kid = Some("k1".into());
    let confused = jsonwebtoken::encode(
        &header,
        &issuer.claims(),
        &EncodingKey::from_secret(public.as_bytes()),
    )
    .unwrap();
    assert_eq!(
        initialize(port, &confused).0,
        401,
        "HS256 with the public key"
    );
    // A token in the query string is refused even when it is valid.
    let valid = issuer.token(|_| {});
    let (status, _) = request(
        port,
        "POST",
        &format!("/mcp?access_token={valid}"),
        "",
        INITIALIZE,
    );
    assert_eq!(status, 400);
}

#[test]
fn a_session_belongs_to_the_caller_that_opened_it() {
    let sb = Sandbox::new("");
    let issuer = Issuer::new(sb.base());
    let (_server, port) = serve(&sb, &issuer);
    let alice = issuer.token(|_| {});
    let (status, reply) = initialize(port, &alice);
    assert_eq!(status, 200, "{reply}");
    let session = session_id(&reply);
    let bob = issuer.token(|c| c["sub"] = json!("bob@example.com"));
    let ping = r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#;
    let (status, reply) = request(
        port,
        "POST",
        "/mcp",
        &format!(
            "Authorization: Bearer {bob}\r\nMcp-Session-Id: {session}\r\nMcp-Protocol-Version: 2025-11-25\r\n"
        ),
        ping,
    );
    assert_eq!(status, 403, "{reply}");
    let refused = sb
        .find_record(|r| r["kind"] == "http")
        .expect("the refusal is in the trail");
    assert_eq!(
        (refused["event"].as_str(), refused["sub"].as_str()),
        (Some("session"), Some("bob@example.com")),
        "{refused}"
    );
    let (status, reply) = request(
        port,
        "POST",
        "/mcp",
        &format!(
            "Authorization: Bearer {alice}\r\nMcp-Session-Id: {session}\r\nMcp-Protocol-Version: 2025-11-25\r\n"
        ),
        ping,
    );
    assert_ne!(status, 403, "{reply}");
}

/// The `Mcp-Session-Id` an initialize reply names.
fn session_id(reply: &str) -> String {
    reply
        .lines()
        .find_map(|l| {
            l.to_lowercase()
                .starts_with("mcp-session-id:")
                .then(|| l.split_once(':').unwrap().1.trim().to_owned())
        })
        .expect("no session id")
}

/// A session of `token`'s caller over raw HTTP; returns the headers its requests carry.
fn open_session(port: u16, token: &str) -> String {
    let (status, reply) = initialize(port, token);
    assert_eq!(status, 200, "{reply}");
    let session = session_id(&reply);
    let headers = format!(
        "Authorization: Bearer {token}\r\nMcp-Session-Id: {session}\r\nMcp-Protocol-Version: 2025-11-25\r\n"
    );
    let (status, _) = request(
        port,
        "POST",
        "/mcp",
        &headers,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    );
    assert!(status == 202 || status == 200, "{status}");
    headers
}

/// Calls `tool` in a session; returns the whole reply (the envelope is in its data line).
fn call_tool(port: u16, headers: &str, id: u64, tool: &str, args: Value) -> String {
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                      "params": {"name": tool, "arguments": args}});
    let (status, reply) = request(port, "POST", "/mcp", headers, &body.to_string());
    assert_eq!(status, 200, "{reply}");
    reply
}

#[test]
fn files_plans_and_records_belong_to_their_caller() {
    let ws = super::files::Workspace::new(false);
    for name in ["report.pdf", "photo.jpg"] {
        let path = ws.root.join(name);
        std::fs::write(&path, name).unwrap();
        super::files::backdate(&path);
    }
    let issuer = Issuer::new(ws.policy.parent().unwrap());
    let (_server, port) = serve_policy("files", &ws.policy, &issuer);
    let alice = open_session(port, &issuer.token(|_| {}));
    let bob = open_session(port, &issuer.token(|c| c["sub"] = json!("bob@example.com")));
    let planned = call_tool(port, &alice, 2, "plan_organize", json!({}));
    let plan_id = planned
        .split("\"plan_id\":\"")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .unwrap_or_else(|| panic!("no plan id: {planned}"))
        .to_owned();
    // Bob cannot apply Alice's plan: to him it is an unknown id, and nothing moves.
    let stolen = call_tool(port, &bob, 3, "apply_plan", json!({"plan_id": plan_id}));
    assert!(
        stolen.contains("INVALID_REQUEST") && stolen.contains("unknown plan id"),
        "{stolen}"
    );
    assert!(ws.root.join("report.pdf").exists());
    let applied = call_tool(port, &alice, 4, "apply_plan", json!({"plan_id": plan_id}));
    assert!(applied.contains("\"code\":\"OK\""), "{applied}");
    assert!(!ws.root.join("report.pdf").exists());
    let records: Vec<Value> = std::fs::read_to_string(&ws.audit)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let subs = |tool: &str| -> Vec<String> {
        records
            .iter()
            .filter(|r| r["tool"] == tool)
            .map(|r| r["sub"].as_str().unwrap_or("").to_owned())
            .collect()
    };
    assert!(
        subs("plan_organize")
            .iter()
            .all(|s| s == "alice@example.com"),
        "{records:?}"
    );
    let apply = subs("apply_plan");
    assert!(apply.contains(&"bob@example.com".to_owned()), "{apply:?}");
    assert!(apply.contains(&"alice@example.com".to_owned()), "{apply:?}");
    assert!(
        apply.iter().all(|s| !s.is_empty()),
        "every apply record names its caller: {apply:?}"
    );
}

/// Issue 28, item 9: `safe-mcp auth check-token` says whether `--http` would accept a token
/// and, if not, which check refuses it (aud, iss, exp, kid, scope); the server logs each
/// refusal's reason on stderr. Neither ever prints the token.
#[test]
fn check_token_and_the_servers_log_say_why_a_token_is_refused() {
    let sb = Sandbox::new("");
    let issuer = Issuer::new(sb.base());
    let check = |token: &str| {
        let out = std::process::Command::new(super::support::BIN)
            .args(["auth", "check-token", "--config"])
            .arg(&sb.policy)
            .arg(token)
            .env_clear()
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(!text.contains(token), "the token was printed: {text}");
        (out.status.code(), text)
    };
    let (served, port) = serve(&sb, &issuer);
    let good = issuer.token(|_| {});
    let (code, text) = check(&good);
    assert_eq!(code, Some(0), "{text}");
    assert!(
        text.contains("accepted: sub \"alice@example.com\""),
        "{text}"
    );
    let cases: Vec<(String, &str)> = vec![
        (
            issuer.token(|c| c["aud"] = json!("https://other.test/mcp")),
            "aud does not name",
        ),
        (
            issuer.token(|c| c["iss"] = json!("https://evil.test")),
            "iss is not",
        ),
        (issuer.token(|c| c["exp"] = json!(1_000_000)), "expired"),
        (
            issuer.token(|c| c["scope"] = json!("openid")),
            "lacks the scopes",
        ),
        (
            issuer.sign_with(&issuer.claims(), &issuer.other),
            "signature does not verify",
        ),
        (
            sign_as(&issuer.claims(), &issuer.key, "nobody-knows-me"),
            "no key with kid",
        ),
    ];
    for (token, why) in &cases {
        let (code, text) = check(token);
        assert_eq!(code, Some(1), "{why}: {text}");
        assert!(text.contains(why), "{why}: {text}");
        let (status, _) = initialize(port, token);
        assert!(status == 401 || status == 403, "{why}: {status}");
    }
    assert!(
        super::support::eventually_blocking(10, || served
            .stderr
            .lock()
            .unwrap()
            .matches("refused a request")
            .count()
            >= cases.len()),
        "{}",
        served.stderr.lock().unwrap()
    );
    let log = served.stderr.lock().unwrap().clone();
    for (token, why) in &cases {
        assert!(log.contains(why), "{why} not logged: {log}");
        assert!(!log.contains(token.as_str()), "a token was logged");
    }
}

/// Issue 28, item 9: docs/HTTP.md's recipe (`scripts/oauth_test_issuer.sh`) makes a key, the
/// JWKS file and a token that the server accepts, with openssl and python3 alone.
#[test]
fn the_oauth_recipe_makes_a_token_the_server_accepts() {
    let sb = Sandbox::new("");
    let dir = sb.base().join("issuer");
    let script =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scripts/oauth_test_issuer.sh");
    let out = std::process::Command::new("bash")
        .arg(&script)
        .arg(&dir)
        .args([ISSUER, AUDIENCE, "bob@example.com", SCOPE])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let token = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    write_auth(
        &sb.policy,
        "",
        &format!("jwks_file = \"{}/jwks.json\"", dir.display()),
    );
    let check = std::process::Command::new(super::support::BIN)
        .args(["auth", "check-token", "--config"])
        .arg(&sb.policy)
        .arg(&token)
        .env_clear()
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&check.stdout);
    assert_eq!(check.status.code(), Some(0), "{text}");
    assert!(text.contains("bob@example.com"), "{text}");
    let (_served, url) = super::http::serve_server("terminal", &sb.policy, "127.0.0.1:0");
    let (status, reply) = initialize(super::http::port_of(&url), &token);
    assert_eq!(status, 200, "{reply}");
}

/// `claims` signed RS256 with `pem` as key `kid`.
fn sign_as(claims: &Value, pem: &[u8], kid: &str) -> String {
    let mut header = Header::new(Algorithm::RS256);
    header.kid = Some(kid.into());
    jsonwebtoken::encode(&header, claims, &EncodingKey::from_rsa_pem(pem).unwrap()).unwrap()
}
