//! Secret redaction: one entry point, [`Redactor::redact`] (and [`Redactor::redact_argv`]
//! for argument vectors).
//!
//! Owns turning text that may hold credentials into text that does not: each secret becomes
//! `[REDACTED:<kind>]`. It runs on command output *before* truncation, on command arguments,
//! and on every audited field. One keyword scan (`scan`) picks the few rules worth running,
//! so secret-free text costs one pass for the keywords and one for the lines (`lines`).
//! Secrets a text splits are looked for again in views where they are whole (`view`):
//! without ANSI escapes, and with folded lines joined. Keys that lost their armour are
//! found by structure (`pem`), and flags whose value is the next argv word by `argv`. It
//! must never emit any fragment of a matched secret: overlapping matches are merged, and
//! [`Redactor::redact_until`] tells the caller where output that was cut mid-stream stops
//! being safe to show. Its children import only leaf siblings, never this module.

mod argv;
mod entropy;
mod lines;
mod pem;
mod placeholder;
mod rules;
mod scan;
mod view;

use std::sync::OnceLock;

use regex::Regex;

use lines::Lines;
use placeholder::{is_path_like, is_placeholder};
use view::View;

use serde::Deserialize;

/// `[redaction]`.
#[derive(Debug, Clone)]
pub struct RedactionSettings {
    /// Redaction on (default true).
    pub enabled: bool,
    /// High-entropy fallback (default false).
    pub entropy_fallback: bool,
    /// Operator patterns, already checked to compile.
    pub extra_patterns: Vec<ExtraPattern>,
}

/// One `extra_patterns` entry.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExtraPattern {
    /// The `<kind>` in `[REDACTED:<kind>]`.
    pub name: String,
    /// A `regex` crate pattern.
    pub regex: String,
}

/// A rule's regex is compiled on first use: startup pays only for the keyword automaton,
/// and secret-free output compiles only the rules its keywords trigger.
struct Rule {
    kind: String,
    pattern: String,
    /// A path in the secret's place is not a secret (`PWD=/srv/app`,
    /// `--from-file=password=./pw.txt`): for rules keyed on a name, not a value's shape.
    paths_are_not_secrets: bool,
    compiled: OnceLock<Option<(Regex, bool)>>,
}

impl Rule {
    fn new(kind: &str, pattern: &str) -> Rule {
        Rule {
            kind: kind.to_owned(),
            pattern: pattern.to_owned(),
            paths_are_not_secrets: matches!(
                kind,
                "generic_secret_assignment" | "cli_password_flag"
            ),
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

/// Finders that are not one regex, triggered by keywords like the rules.
#[derive(Clone, Copy)]
enum Detector {
    /// Key bodies above an `-----END … PRIVATE KEY-----` line (their BEGIN line gone).
    PemEnd,
    /// base64 of a whole PEM private key (`client-key-data: LS0tLS1CRUdJTi…`).
    EncodedPem,
    /// Our own markers: text redacted once is not redacted again (a rule that matches
    /// across a marker, `https://[REDACTED:sentry_dsn]@host`, keeps only what lies outside).
    Markers,
}

const DETECTORS: &[(Detector, &[&str])] = &[
    (Detector::PemEnd, &["-----end "]),
    (Detector::EncodedPem, &["ls0tls1crudjti"]),
    (Detector::Markers, &["[redacted:"]),
];

/// What a span's marker names: a rule's kind, or a fixed kind.
#[derive(Clone, Copy, Debug)]
enum Mark {
    Rule(usize),
    Kind(&'static str),
}

/// A compiled set of secret rules.
pub struct Redactor {
    rules: Vec<Rule>,
    keywords: scan::Keywords,
    /// For each keyword, the rules (`< rules.len()`) and detectors (`rules.len() + d`) it
    /// triggers.
    triggers: Vec<Vec<usize>>,
    /// Rules without keywords (operator patterns, one-character keywords): always run.
    always: Vec<usize>,
    /// The `.pgpass` rule, which runs on candidate lines only.
    pgpass: Option<usize>,
    enabled: bool,
    entropy: bool,
    /// Exact values that are secrets whatever they look like (the credentials' real values,
    /// [`Redactor::add_literal`]): redacted even with redaction off.
    literals: std::sync::RwLock<Vec<String>>,
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

/// A secret found in text: byte span and what to call it.
type Span = (usize, usize, Mark);

impl Redactor {
    /// Builds the built-in rules plus the operator's `extra_patterns`.
    pub fn new(settings: &RedactionSettings) -> Result<Self, PatternError> {
        let mut rules = Vec::new();
        let mut keywords: Vec<String> = Vec::new();
        let mut triggers: Vec<Vec<usize>> = Vec::new();
        let mut always = Vec::new();
        let mut add = |target: usize, words: &[&str]| {
            for word in words {
                match keywords.iter().position(|k| k == word) {
                    Some(p) => triggers[p].push(target),
                    None => {
                        keywords.push((*word).to_owned());
                        triggers.push(vec![target]);
                    }
                }
            }
        };
        for (kind, words, pattern) in rules::RULES {
            let index = rules.len();
            rules.push(Rule::new(kind, pattern));
            // A one-character keyword (`.`, `:`) occurs everywhere: scanning for it costs more
            // than running the rule, so such a rule always runs.
            if words.iter().any(|w| w.len() < 2) {
                always.push(index);
            } else {
                add(index, words);
            }
        }
        let builtin = rules.len();
        for (d, (_, words)) in DETECTORS.iter().enumerate() {
            add(builtin + d, words);
        }
        for extra in &settings.extra_patterns {
            // Operators' patterns are checked now: a bad one is fatal at startup.
            if let Err(e) = Regex::new(&extra.regex) {
                return Err(PatternError {
                    name: extra.name.clone(),
                    message: e.to_string(),
                });
            }
            always.push(rules.len());
            rules.push(Rule::new(&extra.name, &extra.regex));
        }
        // Detectors are numbered after every rule, operators' included.
        for list in &mut triggers {
            for t in list.iter_mut() {
                if *t >= builtin {
                    *t += rules.len() - builtin;
                }
            }
        }
        let keywords = scan::Keywords::new(&keywords).map_err(|message| PatternError {
            name: "prefilter".into(),
            message,
        })?;
        let pgpass = rules.iter().position(|r| r.kind == "pgpass_password");
        Ok(Redactor {
            rules,
            keywords,
            triggers,
            always,
            pgpass,
            enabled: settings.enabled,
            entropy: settings.entropy_fallback,
            literals: std::sync::RwLock::default(),
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

    /// Redacts each word of an argument vector, and also the word after a flag that takes a
    /// secret (`--password X`, `--api-key X`, `mysql -p X`, `curl -u user:X`, `openssl …
    /// -passout pass:X`), which a word-by-word [`Redactor::redact`] cannot see. The result
    /// has one word per word of `argv`.
    pub fn redact_argv(&self, argv: &[String]) -> Vec<String> {
        let mut out: Vec<String> = argv.iter().map(|w| self.redact(w)).collect();
        if !self.enabled {
            return out;
        }
        for hide in argv::hidden(argv) {
            if let (Some(word), Some(slot)) = (argv.get(hide.word), out.get_mut(hide.word)) {
                let kept = word.get(..hide.from).unwrap_or("");
                *slot = format!("{}[REDACTED:{}]", self.redact(kept), hide.kind);
            }
        }
        out
    }

    /// Like [`Redactor::redact`], and also maps the byte offset `safe_end` of `text` to the
    /// redacted text: output that was cut mid-stream is safe to show only up to there, since
    /// a secret may run past the cut. An offset inside a secret maps to the start of its
    /// marker.
    pub fn redact_until(&self, text: &str, safe_end: usize) -> (String, usize) {
        if text.is_empty() {
            return (text.to_owned(), 0);
        }
        let mut spans = match self.enabled {
            true => self.spans(text),
            false => Vec::new(),
        };
        self.literal_spans(text, &mut spans);
        if spans.is_empty() {
            return (text.to_owned(), safe_end.min(text.len()));
        }
        let mut out = String::with_capacity(text.len());
        let mut cursor = 0;
        let mut mapped = None;
        let mut iter = spans.into_iter().peekable();
        while let Some((start, mut end, mark)) = iter.next() {
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
            out.push_str(match mark {
                Mark::Rule(r) => &self.rules[r].kind,
                Mark::Kind(kind) => kind,
            });
            out.push(']');
            cursor = end;
        }
        let mapped = mapped.unwrap_or(out.len() + safe_end.saturating_sub(cursor));
        out.push_str(&text[cursor..]);
        let len = out.len();
        (out, mapped.min(len))
    }

    /// Makes `value` a secret wherever it appears, whatever it looks like (it shows as
    /// `[REDACTED:credential]`); values shorter than 8 bytes are ignored.
    pub fn add_literal(&self, value: &str) {
        if value.len() < 8 {
            return;
        }
        let mut literals = self.literals.write().unwrap_or_else(|e| e.into_inner());
        if !literals.iter().any(|l| l == value) {
            literals.push(value.to_owned());
        }
    }

    /// Adds each occurrence of a literal in `text` to `spans`, keeping them sorted.
    fn literal_spans(&self, text: &str, spans: &mut Vec<Span>) {
        let literals = self.literals.read().unwrap_or_else(|e| e.into_inner());
        if literals.is_empty() {
            return;
        }
        for literal in literals.iter() {
            for (at, _) in text.match_indices(literal.as_str()) {
                spans.push((at, at + literal.len(), Mark::Kind("credential")));
            }
        }
        spans.sort_by_key(|&(s, e, _)| (s, std::cmp::Reverse(e)));
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

    /// Which rules and detectors to run: one keyword scan, stopping early once every
    /// keyword has been seen.
    fn triggered(&self, text: &str) -> Vec<bool> {
        let mut run = vec![false; self.rules.len() + DETECTORS.len()];
        for &r in &self.always {
            run[r] = true;
        }
        for (p, seen) in self.keywords.scan(text.as_bytes()).into_iter().enumerate() {
            if seen {
                for &t in &self.triggers[p] {
                    run[t] = true;
                }
            }
        }
        run
    }

    /// Every secret in `text`, sorted by start (longest first), possibly overlapping.
    fn spans(&self, text: &str) -> Vec<Span> {
        let mut spans = self.layer(text);
        if let Some(plain) = view::without_ansi(text) {
            let found = self.layer(&plain.text);
            spans.extend(mapped(&plain, found, false));
        }
        if self.entropy {
            spans.extend(
                entropy::high_entropy_tokens(text)
                    .into_iter()
                    .map(|(s, e)| (s, e, Mark::Kind("high_entropy"))),
            );
        }
        spans.sort_by_key(|&(s, e, _)| (s, std::cmp::Reverse(e)));
        spans
    }

    /// The secrets in `text` and, mapped back, those that only its joined windows (folded
    /// or continued tokens) show whole.
    fn layer(&self, text: &str) -> Vec<Span> {
        let lines = lines::scan(text, self.pgpass.is_some());
        let mut spans = self.detect(text, &lines);
        for window in view::joined(text, &lines.joins) {
            let inner = lines::scan(&window.text, self.pgpass.is_some());
            let found = self.detect(&window.text, &inner);
            spans.extend(mapped(&window, found, true));
        }
        spans
    }

    /// The rules' and detectors' matches in `text`, as it stands.
    fn detect(&self, text: &str, lines: &Lines) -> Vec<Span> {
        let run = self.triggered(text);
        let mut spans: Vec<Span> = Vec::new();
        for (i, rule) in self.rules.iter().enumerate() {
            if !run[i] {
                continue;
            }
            let Some((regex, secret_group)) = rule.get() else {
                continue;
            };
            if Some(i) == self.pgpass {
                // A whole-text scan for a line shape has no literal to skip ahead on: the
                // line pass nominated candidate lines; the regex runs on those only.
                for &(s, e) in &lines.pgpass {
                    push_matches(
                        rule,
                        regex,
                        *secret_group,
                        &text[s..e],
                        s,
                        Mark::Rule(i),
                        &mut spans,
                    );
                }
            } else {
                push_matches(
                    rule,
                    regex,
                    *secret_group,
                    text,
                    0,
                    Mark::Rule(i),
                    &mut spans,
                );
            }
        }
        let detector = |d: usize| run.get(self.rules.len() + d).copied().unwrap_or(false);
        let key = Mark::Kind("private_key");
        for (d, (which, _)) in DETECTORS.iter().enumerate() {
            match which {
                Detector::PemEnd => {
                    let found = pem::headless_bodies(text, &lines.key_lines, detector(d));
                    spans.extend(found.into_iter().map(|(s, e)| (s, e, key)));
                }
                Detector::EncodedPem if detector(d) => {
                    spans.extend(
                        pem::encoded_pems(text)
                            .into_iter()
                            .map(|(s, e)| (s, e, key)),
                    );
                }
                Detector::Markers if detector(d) => spans = outside_markers(text, spans),
                Detector::EncodedPem | Detector::Markers => {}
            }
        }
        spans
    }
}

/// Spans found in `view`, mapped to the original; with `seams_only`, just those that reach
/// across a place the view joined (the rest the original shows by itself).
fn mapped(view: &View, found: Vec<Span>, seams_only: bool) -> impl Iterator<Item = Span> + '_ {
    found
        .into_iter()
        .filter(move |&(s, e, _)| !seams_only || view.crosses_seam(s, e))
        .map(|(s, e, mark)| {
            let (s, e) = view.map(s, e);
            (s, e, mark)
        })
}

fn push_matches(
    rule: &Rule,
    regex: &Regex,
    secret_group: bool,
    text: &str,
    offset: usize,
    mark: Mark,
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
        let value = &text[s..e];
        if e <= s || is_placeholder(value) || (rule.paths_are_not_secrets && is_path_like(value)) {
            continue;
        }
        spans.push((offset + s, offset + e, mark));
    }
}

/// `spans` with the markers already in `text` cut out of them; what is left of a span counts
/// only if it still holds six letters or digits.
fn outside_markers(text: &str, spans: Vec<Span>) -> Vec<Span> {
    let mut markers = Vec::new();
    let mut from = 0;
    while let Some(i) = text[from..].find("[REDACTED:") {
        let start = from + i;
        let end = text[start..]
            .find(']')
            .map_or(text.len(), |p| start + p + 1);
        markers.push((start, end));
        from = end;
    }
    let mut out = Vec::new();
    for (s, e, mark) in spans {
        let mut at = s;
        // Markers are sorted and disjoint: start at the first that ends after the span starts.
        let first = markers.partition_point(|&(_, me)| me <= s);
        for &(ms, me) in markers[first..].iter().take_while(|&&(ms, _)| ms < e) {
            out.push((at, ms.max(at), mark));
            at = me.max(at);
        }
        out.push((at, e.max(at), mark));
    }
    out.retain(|&(s, e, _)| {
        text[s..e]
            .chars()
            .filter(char::is_ascii_alphanumeric)
            .count()
            >= 6
    });
    out
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
    fn a_value_ends_at_its_lines_end() {
        // Round 3, item 15: a 64-column line (a fold width) ending in a secret must not be
        // joined to the next line's own `key = value`.
        let r = redactor(false);
        let key = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
        for (line, rest) in [
            (
                format!("aws_secret_access_key = {key}"),
                "region = eu-west-1",
            ),
            (
                format!("aws_secret_access_key = {key}"),
                "region: eu-west-1",
            ),
            (format!("aws_secret_access_key  ={key}"), "region=eu-west-1"),
        ] {
            assert_eq!(line.len(), 64, "{line}");
            let out = r.redact(&format!("{line}\n{rest}\n"));
            assert!(out.ends_with(&format!("]\n{rest}\n")), "{out}");
            assert!(!out.contains(key), "{out}");
        }
    }

    #[test]
    fn operator_patterns_apply() {
        let settings = RedactionSettings {
            enabled: true,
            entropy_fallback: false,
            extra_patterns: vec![ExtraPattern {
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
