//! Table-driven redaction tests: realistic positives for every kind (env dumps, config
//! files, `curl -v`, `git remote -v`, logs, JSON) lose every fragment of the secret and keep
//! the text around it; look-alikes (SHAs, UUIDs, digests, integrity hashes, placeholders,
//! public keys, `ssh -p 2222`) come out unchanged.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use safe_mcp_core::config::RedactionSettings;
use safe_mcp_core::redact::Redactor;

include!("../testdata/redaction_cases.rs");

/// The classes a held-out corpus found missed or over-redacted.
#[path = "redaction/classes.rs"]
mod classes;

fn redactor() -> Redactor {
    Redactor::new(&RedactionSettings {
        enabled: true,
        entropy_fallback: false,
        extra_patterns: vec![],
    })
    .unwrap()
}

/// Every window of `n` characters of `secret` (a fragment that would still leak).
fn fragments(secret: &str, n: usize) -> Vec<String> {
    let chars: Vec<char> = secret.chars().collect();
    if chars.len() <= n {
        return vec![secret.to_owned()];
    }
    (0..=chars.len() - n)
        .map(|i| chars[i..i + n].iter().collect())
        .collect()
}

fn without_markers(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(i) = rest.find("[REDACTED:") {
        out.push_str(&rest[..i]);
        rest = rest[i..].split_once(']').map_or("", |(_, r)| r);
    }
    out.push_str(rest);
    out
}

#[test]
fn every_positive_loses_its_secret_and_keeps_its_context() {
    let r = redactor();
    let mut failures = Vec::new();
    let mut kinds = std::collections::BTreeSet::new();
    for (kind, text, secret) in positives() {
        kinds.insert(*kind);
        let out = r.redact(text);
        let start = text.find(secret).expect("the case holds its secret");
        let (before, after) = (&text[..start], &text[start + secret.len()..]);
        // No fragment of 12 characters survives (shorter windows are too common to mean
        // anything); a window that also stands in the surrounding text proves nothing.
        // The markers themselves name kinds (`braintree_access_token`); look past them.
        let visible = without_markers(&out);
        let leaked = fragments(secret, 12).into_iter().find(|f| {
            visible.contains(f.as_str())
                && !before.contains(f.as_str())
                && !after.contains(f.as_str())
        });
        if let Some(f) = leaked {
            failures.push(format!("{kind}: fragment {f:?} survived in {out:?}"));
            continue;
        }
        if !out.contains("[REDACTED:") {
            failures.push(format!("{kind}: no marker in {out:?}"));
        }
        // The text around the secret survives (up to the label a context rule keeps).
        // (When the text on one side holds another secret, that side is checked by its own case.)
        let head: String = before.chars().take(8).collect();
        let tail: String = after
            .chars()
            .rev()
            .take(8)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        let head_ok = r.redact(before) != before || out.starts_with(&head);
        let tail_ok = r.redact(after) != after || out.ends_with(&tail);
        if !head_ok || !tail_ok {
            failures.push(format!("{kind}: context lost: {text:?} -> {out:?}"));
        }
    }
    assert!(
        kinds.len() >= 60,
        "only {} kinds have positives",
        kinds.len()
    );
    assert!(
        failures.is_empty(),
        "{} of {} positives failed:\n{}",
        failures.len(),
        POSITIVES_A.len() + POSITIVES_B.len(),
        failures.join("\n")
    );
}

#[test]
fn negatives_come_out_unchanged() {
    let r = redactor();
    let failures: Vec<String> = NEGATIVES
        .iter()
        .filter_map(|t| {
            let out = r.redact(t);
            (out != *t).then(|| format!("{t:?}\n  -> {out:?}"))
        })
        .collect();
    assert!(
        failures.is_empty(),
        "false positives:\n{}",
        failures.join("\n")
    );
}

#[test]
fn a_private_key_cut_before_its_end_line_is_hidden() {
    let r = redactor();
    let text = "$ cat id_ed25519\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\nQyNTUxOQAAACDx7Q6b";
    let out = r.redact(text);
    assert!(
        !out.contains("b3BlbnNzaC1rZXkt") && !out.contains("QyNTUxOQ"),
        "{out}"
    );
    assert!(
        out.starts_with("$ cat id_ed25519\n-----BEGIN OPENSSH PRIVATE KEY-----"),
        "{out}"
    );
}
