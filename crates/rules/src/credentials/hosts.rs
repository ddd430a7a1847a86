//! Method and path rules on the hosts whose requests the proxy sees
//! (`[[terminal.network.rules]]`): where a host has rules, a request must match one of
//! them: its method among the rule's `methods`, its path (the query aside) matching one of
//! its `paths`. A pattern's `*` stands for any characters but `/`, `**` for any at all.
//!
//! A path a server might read as another is refused before matching, wherever a host has
//! rules: dot segments, empty segments, a backslash, and `%2e`, `%2f` and `%5c` in any case,
//! so that `/org/repo.git/../other.git/git-receive-pack` cannot pass as a path under
//! `/org/repo.git/`; also `;` (`..;/`), `%00`, `%25` and bytes outside printable ASCII.
//! What overrides a method or a path elsewhere in the request is refused there too
//! ([`OVERRIDES`], a `_method` parameter).

/// Headers some frameworks let override the method or the path the rules judged; refused
/// on a host with rules.
pub const OVERRIDES: &[&str] = &[
    "x-http-method-override",
    "x-http-method",
    "x-method-override",
    "x-original-url",
    "x-rewrite-url",
    "x-original-method",
];

use crate::egress::DomainRule;

/// One `[[terminal.network.rules]]` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostRule {
    /// The host (or `*.x` hosts) it applies to.
    pub host: DomainRule,
    /// The methods it allows, upper case; `*` for any.
    pub methods: Vec<String>,
    /// The paths it allows.
    pub paths: Vec<PathPattern>,
}

/// A path pattern: `/`-separated, `*` within a segment, `**` across segments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathPattern(String);

impl PathPattern {
    /// Parses a pattern, which starts with `/`.
    pub fn parse(raw: &str) -> Result<PathPattern, String> {
        if !raw.starts_with('/') {
            return Err(format!("path {raw:?} must start with /"));
        }
        if raw.contains('?') || raw.contains('#') {
            return Err(format!(
                "path {raw:?}: rules match the path without its query; leave out ? and #"
            ));
        }
        if raw.contains("***") {
            return Err(format!("path {raw:?}: use * (one segment) or ** (any)"));
        }
        Ok(PathPattern(raw.to_owned()))
    }

    /// As written.
    pub fn text(&self) -> &str {
        &self.0
    }

    /// Whether `path` matches.
    pub fn matches(&self, path: &str) -> bool {
        glob(self.0.as_bytes(), path.as_bytes())
    }
}

/// One piece of a pattern.
#[derive(Clone, Copy, PartialEq)]
enum Piece {
    Byte(u8),
    /// `*`: any run without `/`.
    Star,
    /// `**`: any run.
    Stars,
}

/// `*` matches a run without `/`, `**` any run. One pass over the text with the set of
/// pattern positions reached (no backtracking: a long path costs its length times the
/// pattern's, whatever the pattern).
fn glob(pattern: &[u8], text: &[u8]) -> bool {
    let mut pieces = Vec::with_capacity(pattern.len());
    let mut i = 0;
    while i < pattern.len() {
        match (pattern[i], pattern.get(i + 1)) {
            (b'*', Some(b'*')) => {
                pieces.push(Piece::Stars);
                i += 2;
            }
            (b'*', _) => {
                pieces.push(Piece::Star);
                i += 1;
            }
            (b, _) => {
                pieces.push(Piece::Byte(b));
                i += 1;
            }
        }
    }
    // `reached[k]`: the first k pieces match the text read so far.
    let mut reached = vec![false; pieces.len() + 1];
    reached[0] = true;
    let close = |reached: &mut Vec<bool>| {
        for k in 0..pieces.len() {
            if reached[k] && matches!(pieces[k], Piece::Star | Piece::Stars) {
                reached[k + 1] = true;
            }
        }
    };
    close(&mut reached);
    for &b in text {
        let mut next = vec![false; pieces.len() + 1];
        for k in 0..pieces.len() {
            if !reached[k] {
                continue;
            }
            match pieces[k] {
                Piece::Byte(p) if p == b => next[k + 1] = true,
                Piece::Byte(_) => {}
                Piece::Star if b != b'/' => next[k] = true,
                Piece::Star => {}
                Piece::Stars => next[k] = true,
            }
        }
        close(&mut next);
        reached = next;
    }
    reached[pieces.len()]
}

impl HostRule {
    /// Parses one entry's fields.
    pub fn parse(host: &str, methods: &[String], paths: &[String]) -> Result<HostRule, String> {
        let host = DomainRule::parse(host)?;
        if methods.is_empty() || paths.is_empty() {
            return Err("a rule names its methods and paths (\"*\" for any method)".into());
        }
        let methods = methods
            .iter()
            .map(|m| {
                let upper = m.to_ascii_uppercase();
                if upper == "*"
                    || (!upper.is_empty() && upper.bytes().all(|b| b.is_ascii_uppercase()))
                {
                    Ok(upper)
                } else {
                    Err(format!("method {m:?} is not an HTTP method"))
                }
            })
            .collect::<Result<Vec<_>, _>>()?;
        let paths = paths
            .iter()
            .map(|p| PathPattern::parse(p))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(HostRule {
            host,
            methods,
            paths,
        })
    }

    fn allows(&self, method: &str, path: &str) -> bool {
        self.methods.iter().any(|m| m == "*" || m == method)
            && self.paths.iter().any(|p| p.matches(path))
    }
}

/// Why `path` could be read by a server as another path, if it could.
fn ambiguous(path: &str) -> Option<&'static str> {
    let lower = path.to_ascii_lowercase();
    if ["%2e", "%2f", "%5c", "%00", "%25"]
        .iter()
        .any(|e| lower.contains(e))
    {
        return Some("an encoded dot, slash, backslash, NUL or percent sign");
    }
    if path.contains('\\') {
        return Some("a backslash");
    }
    if path.contains(';') {
        return Some("a path parameter (;), which some servers drop before routing");
    }
    if !path.bytes().all(|b| b.is_ascii_graphic()) {
        return Some("a byte that is not printable ASCII");
    }
    let mut segments = path.split('/').skip(1).peekable();
    while let Some(s) = segments.next() {
        if s == "." || s == ".." {
            return Some("a dot segment");
        }
        if s.is_empty() && segments.peek().is_some() {
            return Some("an empty segment");
        }
    }
    None
}

/// Whether the rules allow `method` on `target` (a request's path and query) to `host`.
pub fn allows(rules: &[HostRule], host: &str, method: &str, target: &str) -> Result<(), String> {
    let mine: Vec<&HostRule> = rules.iter().filter(|r| r.host.matches(host)).collect();
    if mine.is_empty() {
        return Ok(());
    }
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let path = path.split('#').next().unwrap_or_default();
    if query
        .split('&')
        .any(|p| p.to_ascii_lowercase().starts_with("_method="))
    {
        return Err(format!(
            "{method} {path}: a _method parameter overrides the method the rules judged; {host}'s rules refuse it"
        ));
    }
    if !path.starts_with('/') {
        return Err(format!("{method} {target}: the path must start with /"));
    }
    if let Some(why) = ambiguous(path) {
        return Err(format!(
            "{method} {path} has {why}, which a server may read as another path; {host}'s rules allow only plain paths"
        ));
    }
    if mine.iter().any(|r| r.allows(method, path)) {
        return Ok(());
    }
    let allowed: Vec<String> = mine
        .iter()
        .map(|r| {
            let paths: Vec<&str> = r.paths.iter().map(PathPattern::text).collect();
            format!("{} {}", r.methods.join("|"), paths.join(" "))
        })
        .collect();
    Err(format!(
        "{method} {path} on {host} matches no [[terminal.network.rules]] entry (allowed: {})",
        allowed.join("; ")
    ))
}
