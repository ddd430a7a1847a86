//! The gateway's rules driven with plain values: names, patterns, pointers and verdicts.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::json;

use super::*;
use crate::egress::DomainRule;
use crate::jail::{Entry, Resolver};

/// A filesystem where only the jail's root and `link` (a symlink to `/etc`) exist.
#[derive(Debug)]
struct Paper;

impl Resolver for Paper {
    fn canonicalize(&self, path: &Path) -> Option<PathBuf> {
        if path == Path::new("/jail/link") {
            return Some(PathBuf::from("/etc"));
        }
        self.exists(path).then(|| path.to_path_buf())
    }
    fn exists(&self, path: &Path) -> bool {
        ["/", "/jail", "/jail/link", "/etc"]
            .iter()
            .any(|p| Path::new(p) == path)
    }
    fn read_link(&self, path: &Path) -> Option<PathBuf> {
        (path == Path::new("/jail/link")).then(|| PathBuf::from("/etc"))
    }
    fn is_dir(&self, path: &Path) -> bool {
        self.exists(path)
    }
    fn entry(&self, path: &Path) -> Option<Entry> {
        self.exists(path).then_some(Entry::Dir)
    }
    fn find_program(&self, _: &[PathBuf], _: &str) -> Option<PathBuf> {
        None
    }
    fn read_small(&self, _: &Path, _: u64) -> Result<Option<String>, String> {
        Ok(None)
    }
}

fn jail() -> JailRoot {
    JailRoot::new(PathBuf::from("/jail"), Arc::new(Paper))
}

fn network() -> NetworkPolicy {
    NetworkPolicy {
        mode: NetworkMode::Allowlist,
        allow: vec![DomainRule::parse("example.com").unwrap()],
        ..NetworkPolicy::default()
    }
}

fn policy() -> ToolPolicy {
    ToolPolicy {
        allow: vec![
            NamePattern::new("read_*"),
            NamePattern::new("fetch"),
            NamePattern::new("write_file"),
        ],
        deny: vec![NamePattern::new("read_secret")],
        confirm: vec![NamePattern::new("write_*")],
        args: vec![
            ArgCheck {
                tool: NamePattern::new("*"),
                pointer: "/path".into(),
                kind: ArgKind::Path,
            },
            ArgCheck {
                tool: NamePattern::new("read_multiple_files"),
                pointer: "/paths/*".into(),
                kind: ArgKind::Path,
            },
            ArgCheck {
                tool: NamePattern::new("fetch"),
                pointer: "/url".into(),
                kind: ArgKind::Url,
            },
            ArgCheck {
                tool: NamePattern::new("write_file"),
                pointer: "/content".into(),
                kind: ArgKind::Refuse(Regex::new("(?i)begin .*private key").unwrap()),
            },
        ],
    }
}

fn verdict(tool: &str, args: serde_json::Value) -> ToolVerdict {
    let (jail, network) = (jail(), network());
    let bounds = Bounds {
        jail: &jail,
        network: &network,
    };
    judge(&policy(), "fs", tool, &args, &bounds)
}

fn code(v: &ToolVerdict) -> Option<ResultCode> {
    match v {
        ToolVerdict::Refuse { code, .. } => Some(*code),
        _ => None,
    }
}

#[test]
fn names_keep_to_what_every_client_accepts() {
    assert_eq!(client_name("fs", "read_file"), "fs__read_file");
    let dotted = client_name("gh", "repos.get");
    assert!(dotted.starts_with("gh__repos_get_"), "{dotted}");
    assert_ne!(dotted, client_name("gh", "repos/get"));
    let long = "x".repeat(100);
    let cut = client_name("srv", &long);
    assert_eq!(cut.len(), MAX_TOOL_NAME);
    assert_ne!(cut, client_name("srv", &"x".repeat(101)));
    for name in [dotted, cut, client_name("a", "ünï code")] {
        assert!(
            name.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-'),
            "{name}"
        );
    }
    assert!(valid_server_name("everything-2"));
    assert!(!valid_server_name("Fs"));
    assert!(!valid_server_name("a_b"));
    assert!(!valid_server_name(""));
}

#[test]
fn patterns_match_whole_names() {
    assert!(NamePattern::new("read_*").matches("read_file"));
    assert!(!NamePattern::new("read_*").matches("unread_file"));
    assert!(NamePattern::new("*").matches(""));
    assert!(NamePattern::new("a*b*c").matches("aXXbYYc"));
    assert!(!NamePattern::new("a*b*c").matches("aXXbYY"));
    assert!(NamePattern::new("exact").matches("exact"));
    assert!(!NamePattern::new("exact").matches("exactly"));
}

#[test]
fn deny_wins_and_nothing_is_allowed_by_default() {
    assert_eq!(
        code(&verdict("read_secret", json!({}))),
        Some(ResultCode::PolicyDenied)
    );
    assert_eq!(
        code(&verdict("delete_file", json!({}))),
        Some(ResultCode::PolicyDenied)
    );
    let empty = ToolPolicy::default();
    let (jail, network) = (jail(), network());
    let bounds = Bounds {
        jail: &jail,
        network: &network,
    };
    assert!(matches!(
        judge(&empty, "fs", "anything", &json!({}), &bounds),
        ToolVerdict::Refuse { ref rule, .. } if rule == "tools.allow"
    ));
    assert!(policy().lists("read_file"));
    assert!(!policy().lists("read_secret"));
    assert!(!policy().lists("delete_file"));
}

#[test]
fn paths_stay_in_the_jail() {
    assert_eq!(
        verdict("read_file", json!({"path": "notes/a.txt"})),
        ToolVerdict::Allow {
            rule: "tools.allow read_*".into()
        }
    );
    assert!(matches!(
        verdict("read_file", json!({"path": "file:///jail/a%20b.txt"})),
        ToolVerdict::Allow { .. }
    ));
    assert_eq!(
        verdict("read_file", json!({"path": "/jail/a.txt"})),
        ToolVerdict::Allow {
            rule: "tools.allow read_*".into()
        }
    );
    for outside in [
        "/etc/shadow",
        "../x",
        "link/shadow",
        "file:///etc/passwd",
        "FILE:///etc/passwd",
        "file://localhost/etc/passwd",
        "file://other.host/jail/x",
        // A file URL's path is percent-encoded: a server decodes it, so the jail judges it
        // decoded too.
        "file:///jail/%2e%2e/etc/passwd",
        "file:///jail/a/%2E%2E/%2E%2E/etc/passwd",
        "file:///jail/..%2f..%2fetc/passwd",
    ] {
        assert_eq!(
            code(&verdict("read_file", json!({"path": outside}))),
            Some(ResultCode::PathEscape),
            "{outside}"
        );
    }
    // Every element of a list, and a value that is not text where a path must be.
    assert_eq!(
        code(&verdict(
            "read_multiple_files",
            json!({"paths": ["a", "/etc/passwd"]})
        )),
        Some(ResultCode::PathEscape)
    );
    assert_eq!(
        code(&verdict("read_file", json!({"path": ["/etc"]}))),
        Some(ResultCode::InvalidRequest)
    );
}

#[test]
fn urls_stay_on_the_network() {
    assert!(matches!(
        verdict("fetch", json!({"url": "https://example.com/x"})),
        ToolVerdict::Allow { .. }
    ));
    assert!(matches!(
        verdict("fetch", json!({"url": "HTTPS://user@Example.COM:443/x"})),
        ToolVerdict::Allow { .. }
    ));
    for bad in [
        "https://evil.test/",
        "http://127.0.0.1:9/",
        "http://[::1]/",
        "ftp://example.com/",
        // Parsers disagree on a backslash in the authority: WHATWG's (Node's) ends the host
        // at it, RFC 3986's (Python's) reads up to the last '@'. Both readings are judged.
        "http://evil.test\\@example.com/",
        "http://example.com\\@evil.test/",
    ] {
        assert!(
            code(&verdict("fetch", json!({"url": bad}))).is_some(),
            "{bad}"
        );
    }
}

#[test]
fn a_refused_value_is_refused_and_confirm_asks() {
    assert_eq!(
        code(&verdict(
            "write_file",
            json!({"path": "k", "content": "-----BEGIN OPENSSH PRIVATE KEY-----"})
        )),
        Some(ResultCode::PolicyDenied)
    );
    // Hidden in a list, still refused.
    assert_eq!(
        code(&verdict(
            "write_file",
            json!({"path": "k", "content": ["x", "BEGIN RSA PRIVATE KEY"]})
        )),
        Some(ResultCode::PolicyDenied)
    );
    assert_eq!(
        verdict("write_file", json!({"path": "k", "content": "hello"})),
        ToolVerdict::Confirm {
            rule: "tools.confirm write_*".into()
        }
    );
}

#[test]
fn pointers_escape_and_index() {
    let mut out = Vec::new();
    let v = json!({"a/b": {"~": [1, 2]}});
    pointed(&v, "/a~1b/~0/1", &mut out);
    assert_eq!(out, vec![&json!(2)]);
    out.clear();
    pointed(&v, "/missing", &mut out);
    assert!(out.is_empty());
}

fn redactor() -> crate::redact::Redactor {
    crate::redact::Redactor::new(&crate::config::types::RedactionSettings {
        enabled: true,
        entropy_fallback: false,
        extra_patterns: Vec::new(),
    })
    .unwrap()
}

#[test]
fn a_result_is_redacted_everywhere_but_its_bytes() {
    let token = "ghp_0123456789abcdefghijABCDEFGHIJ012345";
    let result = json!({
        "content": [
            {"type": "text", "text": format!("token {token}")},
            {"type": "image", "data": "aGVsbG8=", "mimeType": "image/png"},
            {"type": "resource", "resource": {"uri": "x://a", "text": format!("t={token}")}}
        ],
        "structuredContent": {"deep": [{"value": token}]},
    });
    let shaped = result::shape(result, &redactor(), 1 << 20);
    let text = shaped.value.to_string();
    assert!(!text.contains(token), "{text}");
    assert!(text.contains("aGVsbG8="), "{text}");
    assert_eq!(shaped.cut, 0);
    assert!(!shaped.is_error);
}

#[test]
fn a_result_is_held_to_its_cap() {
    let big = "é".repeat(5000);
    let result = json!({"content": [
        {"type": "text", "text": "first"},
        {"type": "text", "text": big},
        {"type": "image", "data": "A".repeat(4000), "mimeType": "image/png"}
    ]});
    let shaped = result::shape(result, &redactor(), 2000);
    let blocks = shaped.value["content"].as_array().unwrap();
    assert_eq!(blocks[0]["text"], "first");
    let kept = blocks[1]["text"].as_str().unwrap();
    assert!(
        kept.len() < 2000 && kept.chars().all(|c| c == 'é'),
        "{}",
        kept.len()
    );
    assert_eq!(blocks.len(), 3, "the image left out, a note added");
    assert!(
        blocks[2]["text"]
            .as_str()
            .unwrap()
            .contains("max_result_bytes")
    );
    assert!(shaped.cut > 0 && shaped.bytes > 14000);
    let structured = json!({"content": [], "structuredContent": {"x": "y".repeat(3000)}});
    let shaped = result::shape(structured, &redactor(), 2000);
    assert!(shaped.is_error);
    assert!(shaped.value["structuredContent"].is_null());
}

#[test]
fn only_the_protocols_payloads_escape_redaction_and_keys_do_not() {
    let token = "ghp_0123456789abcdefghijABCDEFGHIJ012345";
    let result = json!({
        "content": [{"type": "text", "text": "ok"}],
        "structuredContent": {"data": token, "blob": token, token: "as a key"},
        "_meta": {"data": token},
    });
    let shaped = result::shape(result, &redactor(), 1 << 20);
    assert!(
        !shaped.value.to_string().contains(token),
        "{}",
        shaped.value
    );
}

#[test]
fn the_cap_counts_the_serialized_result() {
    // Quotes serialize as two bytes each: a cut by raw length would pass twice the cap.
    let quotes = "\"".repeat(10_000);
    let result =
        json!({"content": [{"type": "text", "text": quotes}], "_meta": {"x": "y".repeat(500)}});
    let shaped = result::shape(result, &redactor(), 4000);
    let size = shaped.value.to_string().len();
    assert!(size <= 4000, "{size}");
    assert!(shaped.cut > 0);
}
