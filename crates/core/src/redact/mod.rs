//! Secret redaction: one entry point, [`Redactor::redact`].
//!
//! Owns turning text that may hold credentials into text that does not: each secret becomes
//! `[REDACTED:<kind>]`. It runs on command output *before* truncation, on command arguments,
//! and on every audited field. An Aho-Corasick pass over the rules' keywords picks the few
//! rules worth running, so secret-free text costs one scan. It must never emit any fragment
//! of a matched secret: overlapping matches are merged, and [`Redactor::redact_until`] tells
//! the caller where output that was cut mid-stream stops being safe to show.

mod rules;

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, AhoCorasickKind, MatchKind};
use std::sync::OnceLock;

use regex::Regex;

use crate::config::RedactionSettings;

/// A rule's regex is compiled on first use: startup pays only for the keyword automaton,
/// and secret-free output compiles only the rules its keywords trigger.
struct Rule {
    kind: String,
    pattern: String,
    compiled: OnceLock<Option<(Regex, bool)>>,
}

impl Rule {
    fn new(kind: &str, pattern: &str) -> Rule {
        Rule {
            kind: kind.to_owned(),
            pattern: pattern.to_owned(),
            compiled: OnceLock::new(),
        }
    }

    /// The regex and whether it has a `secret` group; `None` only for a pattern that does not
    /// compile, which the tests rule out for built-ins and startup rules out for operators'.
    fn get(&self) -> Option<&(Regex, bool)> {
        self.compiled
            .get_or_init(|| {
                Regex::new(&self.pattern).ok().map(|r| {
                    let secret = r.capture_names().any(|n| n == Some("secret"));
                    (r, secret)
                })
            })
            .as_ref()
    }
}

/// A compiled set of secret rules.
pub struct Redactor {
    rules: Vec<Rule>,
    prefilter: AhoCorasick,
    /// For each prefilter pattern, the rules it triggers.
    triggers: Vec<Vec<usize>>,
    /// Rules without keywords (operator patterns): always run.
    always: Vec<usize>,
    enabled: bool,
    entropy: bool,
}

impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Redactor")
            .field("rules", &self.rules.len())
            .field("enabled", &self.enabled)
            .finish()
    }
}

/// Why a rule could not be built.
#[derive(Debug, thiserror::Error)]
#[error("redaction pattern {name:?} is invalid: {message}")]
pub struct PatternError {
    /// The rule's kind.
    pub name: String,
    /// The regex error.
    pub message: String,
}

/// A secret found in text: byte span and rule.
type Span = (usize, usize, usize);

impl Redactor {
    /// Builds the built-in rules plus the operator's `extra_patterns`.
    pub fn new(settings: &RedactionSettings) -> Result<Self, PatternError> {
        let mut rules = Vec::new();
        let mut keywords: Vec<String> = Vec::new();
        let mut triggers: Vec<Vec<usize>> = Vec::new();
        let mut always = Vec::new();
        for (kind, words, pattern) in rules::RULES {
            let index = rules.len();
            rules.push(Rule::new(kind, pattern));
            // A one-character keyword (`.`, `:`) occurs everywhere: scanning for it costs more
            // than running the rule, so such a rule always runs.
            if words.iter().any(|w| w.len() < 2) {
                always.push(index);
                continue;
            }
            for word in *words {
                match keywords.iter().position(|k| k == word) {
                    Some(p) => triggers[p].push(index),
                    None => {
                        keywords.push((*word).to_owned());
                        triggers.push(vec![index]);
                    }
                }
            }
        }
        for extra in &settings.extra_patterns {
            let rule = Rule::new(&extra.name, &extra.regex);
            // Operators' patterns are checked now: a bad one is fatal at startup.
            if let Err(e) = Regex::new(&extra.regex) {
                return Err(PatternError {
                    name: extra.name.clone(),
                    message: e.to_string(),
                });
            }
            always.push(rules.len());
            rules.push(rule);
        }
        let prefilter = AhoCorasickBuilder::new()
            .ascii_case_insensitive(true)
            .match_kind(MatchKind::Standard)
            .kind(Some(AhoCorasickKind::DFA))
            .build(&keywords)
            .map_err(|e| PatternError {
                name: "prefilter".into(),
                message: e.to_string(),
            })?;
        Ok(Redactor {
            rules,
            prefilter,
            triggers,
            always,
            enabled: settings.enabled,
            entropy: settings.entropy_fallback,
        })
    }

    /// Compiles every rule now; `Err` names the first that does not compile.
    pub fn compile_all(&self) -> Result<(), PatternError> {
        for rule in &self.rules {
            if rule.get().is_none() {
                let message = Regex::new(&rule.pattern)
                    .err()
                    .map(|e| e.to_string())
                    .unwrap_or_default();
                return Err(PatternError {
                    name: rule.kind.clone(),
                    message,
                });
            }
        }
        Ok(())
    }

    /// Every rule's pattern, for a naive baseline in benchmarks.
    pub fn patterns(&self) -> Vec<&str> {
        self.rules.iter().map(|r| r.pattern.as_str()).collect()
    }

    /// The number of secret kinds known (built-in and operator).
    pub fn kinds(&self) -> usize {
        let mut kinds: Vec<&str> = self.rules.iter().map(|r| r.kind.as_str()).collect();
        kinds.sort_unstable();
        kinds.dedup();
        kinds.len()
    }

    /// Replaces every secret in `text` with `[REDACTED:<kind>]`.
    pub fn redact(&self, text: &str) -> String {
        self.redact_until(text, text.len()).0
    }

    /// Like [`Redactor::redact`], and also maps the byte offset `safe_end` of `text` to the
    /// redacted text: output that was cut mid-stream is safe to show only up to there, since
    /// a secret may run past the cut. An offset inside a secret maps to the start of its
    /// marker.
    pub fn redact_until(&self, text: &str, safe_end: usize) -> (String, usize) {
        if !self.enabled || text.is_empty() {
            return (text.to_owned(), safe_end.min(text.len()));
        }
        let spans = self.spans(text);
        if spans.is_empty() {
            return (text.to_owned(), safe_end.min(text.len()));
        }
        let mut out = String::with_capacity(text.len());
        let mut cursor = 0;
        let mut mapped = None;
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
                cursor = cursor.max(end);
                continue;
            }
            if mapped.is_none() && safe_end < end {
                mapped = Some(out.len() + safe_end.saturating_sub(cursor).min(start - cursor));
            }
            out.push_str(&text[cursor..start]);
            out.push_str("[REDACTED:");
            out.push_str(match rule {
                usize::MAX => "high_entropy",
                r => &self.rules[r].kind,
            });
            out.push(']');
            cursor = end;
        }
        let mapped = mapped.unwrap_or(out.len() + safe_end.saturating_sub(cursor));
        out.push_str(&text[cursor..]);
        let len = out.len();
        (out, mapped.min(len))
    }

    /// The kinds whose rules the prefilter lets run on `text` (for benchmarks and tuning).
    pub fn triggered_kinds(&self, text: &str) -> Vec<&str> {
        let run = self.triggered(text);
        self.rules
            .iter()
            .zip(run)
            .filter(|(_, r)| *r)
            .map(|(rule, _)| rule.kind.as_str())
            .collect()
    }

    /// Which rules to run: one overlapping scan of the keyword automaton (a DFA), stopping
    /// early once every keyword has been seen.
    fn triggered(&self, text: &str) -> Vec<bool> {
        let mut run = vec![false; self.rules.len()];
        for &r in &self.always {
            run[r] = true;
        }
        let ac = &self.prefilter;
        let mut remaining = self.triggers.len();
        let mut seen = vec![false; self.triggers.len()];
        for m in ac.find_overlapping_iter(text) {
            let p = m.pattern().as_usize();
            if !seen[p] {
                seen[p] = true;
                remaining -= 1;
                for &r in &self.triggers[p] {
                    run[r] = true;
                }
                if remaining == 0 {
                    break;
                }
            }
        }
        run
    }

    fn spans(&self, text: &str) -> Vec<Span> {
        let run = self.triggered(text);
        let mut spans: Vec<Span> = Vec::new();
        for (i, rule) in self.rules.iter().enumerate() {
            if !run[i] {
                continue;
            }
            let Some((regex, has_secret_group)) = rule.get() else {
                continue;
            };
            if rule.kind == "pgpass_password" {
                // A whole-text scan for a line shape has no literal to skip ahead on; test
                // each line's shape by hand first, and run the regex on candidates only.
                let mut offset = 0;
                for line in text.split_inclusive('\n') {
                    if could_be_pgpass(line) {
                        push_matches(regex, *has_secret_group, line, offset, i, &mut spans);
                    }
                    offset += line.len();
                }
            } else {
                push_matches(regex, *has_secret_group, text, 0, i, &mut spans);
            }
        }
        if self.entropy {
            spans.extend(
                high_entropy_tokens(text)
                    .into_iter()
                    .map(|(s, e)| (s, e, usize::MAX)),
            );
        }
        spans.sort_by_key(|&(s, e, _)| (s, std::cmp::Reverse(e)));
        spans
    }
}

fn push_matches(
    regex: &Regex,
    secret_group: bool,
    text: &str,
    offset: usize,
    rule: usize,
    spans: &mut Vec<Span>,
) {
    for m in regex.find_iter(text) {
        let (s, e) = if secret_group {
            match regex
                .captures_at(text, m.start())
                .and_then(|c| c.name("secret"))
            {
                Some(g) => (g.start(), g.end()),
                None => continue,
            }
        } else {
            (m.start(), m.end())
        };
        if e > s && !is_placeholder(&text[s..e]) {
            spans.push((offset + s, offset + e, rule));
        }
    }
}

/// `host:port:database:user:password`: at least four colons, and a port field of digits or `*`.
fn could_be_pgpass(line: &str) -> bool {
    let b = line.as_bytes();
    let Some(first) = b.iter().position(|&c| c == b':') else {
        return false;
    };
    let rest = &b[first + 1..];
    let port_len = rest
        .iter()
        .take_while(|c| c.is_ascii_digit() || **c == b'*')
        .count();
    port_len > 0
        && rest.get(port_len) == Some(&b':')
        && rest[port_len + 1..].iter().filter(|&&c| c == b':').count() >= 2
}

/// Values that are obviously not secrets: `${DB_PASSWORD}`, `<token>`, `****`, `changeme`,
/// `your-api-key-here`, a marker we already wrote.
pub(crate) fn is_placeholder(value: &str) -> bool {
    let v = value.trim_matches(|c| c == '"' || c == '\'');
    let lower = v.to_ascii_lowercase();
    let mut chars = v.chars();
    let first = chars.next();
    (v.starts_with("${") || v.starts_with('$') || v.starts_with("{{"))
        || (v.starts_with('<') && v.ends_with('>'))
        || first.is_some_and(|f| v.chars().all(|c| c == f))
        || v.chars()
            .all(|c| c == '*' || c == 'x' || c == 'X' || c == '.')
        || matches!(
            lower.as_str(),
            "changeme"
                | "change_me"
                | "change-me"
                | "changeit"
                | "placeholder"
                | "redacted"
                | "none"
                | "null"
                | "undefined"
                | "true"
                | "false"
                | "dummy"
                | "password"
                | "passwd"
                | "secret"
                | "token"
        )
        || ["your-", "your_", "your ", "my-", "my_", "my "]
            .iter()
            .any(|p| lower.starts_with(p))
        || ["-here", "_here", " here"]
            .iter()
            .any(|s| lower.ends_with(s))
        || v.starts_with("[REDACTED:")
}

/// Tokens of 24+ characters from the base64/hex alphabet with high Shannon entropy and
/// mixed character classes. Pure hex (SHAs, checksums) and UUIDs never qualify.
fn high_entropy_tokens(text: &str) -> Vec<(usize, usize)> {
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

fn shannon(s: &str) -> f64 {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn redactor(entropy: bool) -> Redactor {
        Redactor::new(&RedactionSettings {
            enabled: true,
            entropy_fallback: entropy,
            extra_patterns: vec![],
        })
        .unwrap()
    }

    #[test]
    fn every_builtin_rule_compiles_and_there_are_at_least_sixty_kinds() {
        let r = redactor(false);
        r.compile_all().unwrap();
        assert!(r.kinds() >= 60, "{}", r.kinds());
    }

    #[test]
    fn context_survives_and_placeholders_stay() {
        let r = redactor(false);
        assert_eq!(
            r.redact("password=${DB_PASSWORD}"),
            "password=${DB_PASSWORD}"
        );
        assert_eq!(r.redact("password: ****"), "password: ****");
        let sha = "commit 3f786850e387550fdab836ed7e6dc881de23001b";
        assert_eq!(r.redact(sha), sha);
        assert_eq!(
            r.redact("DB_PASSWORD=hunter22 rest"),
            "DB_PASSWORD=[REDACTED:generic_secret_assignment] rest"
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

    #[test]
    fn the_safe_end_maps_through_redactions() {
        let r = redactor(false);
        let text = "a ghp_0123456789abcdefghijklmnopqrstuvwxyz b";
        let (out, at) = r.redact_until(text, text.len());
        assert_eq!(at, out.len());
        // A cut inside the secret maps to the start of its marker.
        let (out, at) = r.redact_until(text, 10);
        assert_eq!(&out[..at], "a ");
        // A cut before it is unchanged.
        assert_eq!(r.redact_until(text, 1).1, 1);
    }

    #[test]
    fn entropy_fallback_leaves_shas_and_uuids() {
        let r = redactor(true);
        let text = "sha 3f786850e387550fdab836ed7e6dc881de23001b uuid 550e8400-e29b-41d4-a716-446655440000";
        assert_eq!(r.redact(text), text);
        let out = r.redact("blob Zq8Lk2VbT9xR4mWn7YpC3sDf6GhJ1aKe end");
        assert!(out.contains("[REDACTED:high_entropy]"), "{out}");
        assert!(
            !redactor(false)
                .redact("blob Zq8Lk2VbT9xR4mWn7YpC3sDf6GhJ1aKe end")
                .contains("REDACTED")
        );
    }
}
