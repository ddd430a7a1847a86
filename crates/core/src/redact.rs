//! Secret redaction: one entry point, [`Redactor::redact`].
//!
//! Owns turning text that may hold credentials into text that does not: each secret becomes
//! `[REDACTED:<kind>]`. It runs on command output *before* truncation (so a cap can never cut
//! a secret in half and emit the first part), on command arguments, and on every audited
//! field. It must never emit any fragment of a matched secret; when a rule names a `secret`
//! group, only that group is replaced and the label around it (`password=`) stays readable.

use regex::Regex;

use crate::config::RedactionSettings;

struct Rule {
    kind: String,
    regex: Regex,
}

/// A compiled set of secret rules.
pub struct Redactor {
    rules: Vec<Rule>,
    enabled: bool,
}

impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Redactor")
            .field("rules", &self.rules.len())
            .field("enabled", &self.enabled)
            .finish()
    }
}

/// Built-in rules: (kind, pattern). A `(?P<secret>...)` group, when present, is what is hidden.
const BUILTIN: &[(&str, &str)] = &[
    (
        "private_key",
        r"-----BEGIN[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----(?s:.*?)(?:-----END[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----|\z)",
    ),
    (
        "aws_access_key_id",
        r"\b(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}\b",
    ),
    (
        "aws_secret_access_key",
        r#"(?i)aws_?secret_?access_?key["']?\s*[:=]\s*["']?(?P<secret>[A-Za-z0-9/+=]{40})"#,
    ),
    ("github_token", r"\bgh[pousr]_[A-Za-z0-9]{36,255}\b"),
    (
        "github_fine_grained_token",
        r"\bgithub_pat_[A-Za-z0-9_]{22,255}\b",
    ),
    ("gitlab_token", r"\bglpat-[A-Za-z0-9_\-]{20,}"),
    ("slack_token", r"\bxox[abposr]-[A-Za-z0-9-]{10,}"),
    (
        "slack_webhook",
        r"https://hooks\.slack\.com/services/[A-Za-z0-9_/]+",
    ),
    (
        "authorization_header",
        r"(?i)\b(?:proxy-)?authorization\s*:\s*(?:bearer|basic|token|digest)?\s*(?P<secret>[^\s,;]{6,})",
    ),
    (
        "bearer_token",
        r"(?i)\bbearer\s+(?P<secret>[A-Za-z0-9._~+/-]{16,}=*)",
    ),
    (
        "url_credentials",
        r"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s:/@]*:(?P<secret>[^\s@/]+)@",
    ),
    (
        "password_assignment",
        r#"(?i)\b[\w.-]*(?:password|passwd|pwd|secret|token|api[_-]?key|access[_-]?key|private[_-]?key)["']?\s*[:=]\s*["']?(?P<secret>[^\s"',;]{4,})"#,
    ),
];

/// Why a rule could not be built.
#[derive(Debug, thiserror::Error)]
#[error("redaction pattern {name:?} is invalid: {message}")]
pub struct PatternError {
    /// The rule's kind.
    pub name: String,
    /// The regex error.
    pub message: String,
}

impl Redactor {
    /// Builds the built-in rules plus the operator's `extra_patterns`.
    pub fn new(settings: &RedactionSettings) -> Result<Self, PatternError> {
        let mut rules = Vec::new();
        let builtin = BUILTIN.iter().map(|(k, p)| (k.to_string(), p.to_string()));
        let extra = settings
            .extra_patterns
            .iter()
            .map(|p| (p.name.clone(), p.regex.clone()));
        for (kind, pattern) in builtin.chain(extra) {
            let regex = Regex::new(&pattern).map_err(|e| PatternError {
                name: kind.clone(),
                message: e.to_string(),
            })?;
            rules.push(Rule { kind, regex });
        }
        Ok(Redactor {
            rules,
            enabled: settings.enabled,
        })
    }

    /// Replaces every secret in `text` with `[REDACTED:<kind>]`.
    pub fn redact(&self, text: &str) -> String {
        if !self.enabled || text.is_empty() {
            return text.to_owned();
        }
        // Collect (start, end, rule) spans, then merge overlaps so no fragment survives.
        let mut spans: Vec<(usize, usize, usize)> = Vec::new();
        for (i, rule) in self.rules.iter().enumerate() {
            for caps in rule.regex.captures_iter(text) {
                let m = caps.name("secret").or_else(|| caps.get(0));
                if let Some(m) = m.filter(|m| !m.is_empty() && !is_placeholder(m.as_str())) {
                    spans.push((m.start(), m.end(), i));
                }
            }
        }
        if spans.is_empty() {
            return text.to_owned();
        }
        spans.sort_by_key(|&(s, e, _)| (s, std::cmp::Reverse(e)));
        let mut out = String::with_capacity(text.len());
        let mut cursor = 0;
        let mut iter = spans.into_iter().peekable();
        while let Some((start, mut end, rule)) = iter.next() {
            while let Some(&(s, e, _)) = iter.peek() {
                if s < end {
                    end = end.max(e);
                    iter.next();
                } else {
                    break;
                }
            }
            if start < cursor {
                // Fully inside an earlier span (sorted by start): extend it instead.
                if end > cursor {
                    cursor = end;
                }
                continue;
            }
            out.push_str(&text[cursor..start]);
            out.push_str("[REDACTED:");
            out.push_str(&self.rules[rule].kind);
            out.push(']');
            cursor = end;
        }
        out.push_str(&text[cursor..]);
        out
    }
}

/// Values that are obviously not secrets: `${DB_PASSWORD}`, `****`, `changeme`, `<token>`.
fn is_placeholder(value: &str) -> bool {
    let v = value.trim_matches(|c| c == '"' || c == '\'');
    (v.starts_with("${") && v.ends_with('}'))
        || (v.starts_with('<') && v.ends_with('>'))
        || v.chars()
            .all(|c| c == '*' || c == 'x' || c == 'X' || c == '.')
        || matches!(
            v.to_ascii_lowercase().as_str(),
            "changeme" | "redacted" | "null" | "none" | "true" | "false"
        )
        || v.starts_with("[REDACTED:")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn redactor() -> Redactor {
        Redactor::new(&RedactionSettings {
            enabled: true,
            entropy_fallback: false,
            extra_patterns: vec![],
        })
        .unwrap()
    }

    fn assert_hidden(input: &str, secret: &str, kind: &str) {
        let out = redactor().redact(input);
        assert!(!out.contains(secret), "{kind}: secret survived in {out:?}");
        assert!(
            out.contains(&format!("[REDACTED:{kind}]")),
            "{kind}: no marker in {out:?}"
        );
    }

    #[test]
    fn first_cut_kinds() {
        assert_hidden(
            "key AKIAIOSFODNN7EXAMPLE here",
            "AKIAIOSFODNN7EXAMPLE",
            "aws_access_key_id",
        );
        assert_hidden(
            "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            "aws_secret_access_key",
        );
        let ghp = "ghp_0123456789abcdefghijklmnopqrstuvwxyz";
        assert_hidden(&format!("token: {ghp}"), ghp, "github_token");
        assert_hidden(
            "glpat-abcdefghij0123456789",
            "glpat-abcdefghij0123456789",
            "gitlab_token",
        );
        assert_hidden(
            "xoxb-1234567890-abcdefghij",
            "xoxb-1234567890-abcdefghij",
            "slack_token",
        );
        assert_hidden(
            "-----BEGIN RSA PRIVATE KEY-----\nMIIEabc\n-----END RSA PRIVATE KEY-----",
            "MIIEabc",
            "private_key",
        );
        assert_hidden(
            "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk",
            "b3BlbnNzaC1rZXk",
            "private_key",
        );
        assert_hidden(
            "Authorization: Bearer abcdef0123456789abcdef",
            "abcdef0123456789abcdef",
            "authorization_header",
        );
        assert_hidden(
            "origin https://bob:hunter22@example.com/r.git",
            "hunter22",
            "url_credentials",
        );
        assert_hidden(
            "DB_PASSWORD=s3cr3t-value",
            "s3cr3t-value",
            "password_assignment",
        );
    }

    #[test]
    fn context_survives_and_placeholders_stay() {
        let r = redactor();
        assert_eq!(
            r.redact("password=${DB_PASSWORD}"),
            "password=${DB_PASSWORD}"
        );
        assert_eq!(r.redact("password: ****"), "password: ****");
        assert_eq!(
            r.redact("commit 3f786850e387550fdab836ed7e6dc881de23001b"),
            "commit 3f786850e387550fdab836ed7e6dc881de23001b"
        );
        assert_eq!(
            r.redact("DB_PASSWORD=hunter22 rest"),
            "DB_PASSWORD=[REDACTED:password_assignment] rest"
        );
    }

    #[test]
    fn operator_patterns_apply() {
        let settings = RedactionSettings {
            enabled: true,
            entropy_fallback: false,
            extra_patterns: vec![crate::config::ExtraPattern {
                name: "internal_id".into(),
                regex: "INT-[0-9]{8}".into(),
            }],
        };
        let r = Redactor::new(&settings).unwrap();
        assert_eq!(r.redact("id INT-12345678."), "id [REDACTED:internal_id].");
    }
}
