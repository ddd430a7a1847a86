//! The gateway's decisions, with no I/O: the name a downstream server's tool takes before the
//! client, and the verdict on one call of it.
//!
//! A downstream MCP server runs confined like a command (the kernel holds what it can reach);
//! these rules decide, before the call is forwarded, whether the model may make it at all:
//! the tool's name against `deny` then `allow` (nothing allowed when `allow` is empty: deny
//! by default), then each argument rule whose tool pattern matches (a path resolved against
//! the jail, a URL's host against the server's network allowlist, a value a pattern
//! refuses), then `confirm`, which sends an allowed call up the approval ladder. A rule
//! names a JSON pointer; `*` in it stands for every element of an array or every member of
//! an object, so `/paths/*` checks each path of a list.

pub mod result;

use std::path::Path;

use regex::Regex;
use serde_json::Value;

use crate::egress::{NetworkMode, NetworkPolicy};
use crate::envelope::ResultCode;
use crate::jail::{JailError, JailRoot};

/// The longest tool name clients accept: Claude Desktop and claude.ai refuse a whole
/// connector with a name outside `^[a-zA-Z0-9_-]{1,64}$`.
pub const MAX_TOOL_NAME: usize = 64;

/// What joins a server's name and its tool's in the name the client sees. Not `.` or `/`:
/// Claude's and Codex's checks refuse both.
pub const SEPARATOR: &str = "__";

/// The name the client sees for `tool` of `server`: `<server>__<tool>`, each character
/// outside `[A-Za-z0-9_-]` made `_`, and past [`MAX_TOOL_NAME`] cut, with eight hex digits
/// of the tool's own name after the cut so that two long names stay two.
pub fn client_name(server: &str, tool: &str) -> String {
    let clean: String = tool
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let whole = format!("{server}{SEPARATOR}{clean}");
    if whole.len() <= MAX_TOOL_NAME && clean == tool {
        return whole;
    }
    let tag = format!("_{:08x}", fnv1a(tool.as_bytes()));
    let keep = MAX_TOOL_NAME.saturating_sub(tag.len()).min(whole.len());
    format!("{}{tag}", &whole[..keep])
}

/// FNV-1a, 32 bits: a stable tag, not a defence (the names are the downstream server's).
fn fnv1a(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5_u32, |h, b| {
        (h ^ u32::from(*b)).wrapping_mul(0x0100_0193)
    })
}

/// Whether `name` may name a downstream server: 1 to 24 of `[a-z0-9-]`, so that its tools'
/// names stay readable and the separator stays unambiguous.
pub fn valid_server_name(name: &str) -> bool {
    (1..=24).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// A tool name, or a pattern of them with `*` for any run of characters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamePattern(String);

impl NamePattern {
    /// The pattern as written.
    pub fn new(text: impl Into<String>) -> NamePattern {
        NamePattern(text.into())
    }

    /// The pattern as written.
    pub fn text(&self) -> &str {
        &self.0
    }

    /// Whether `name` matches.
    pub fn matches(&self, name: &str) -> bool {
        glob(self.0.as_bytes(), name.as_bytes())
    }
}

/// `*`-only glob matching, iterative (no backtracking blow-up).
fn glob(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pattern.len() && pattern[p] == b'*' {
            star = Some((p, t));
            p += 1;
        } else if p < pattern.len() && pattern[p] == text[t] {
            p += 1;
            t += 1;
        } else if let Some((sp, st)) = star {
            p = sp + 1;
            t = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|b| *b == b'*')
}

/// What an argument rule checks of the values its pointer finds.
#[derive(Debug, Clone)]
pub enum ArgKind {
    /// A path the server opens: it must resolve inside the jail (or a write path), as a
    /// command's path operand must (PATH_ESCAPE).
    Path,
    /// A URL the server fetches: its host must be one the server's network allows.
    Url,
    /// A value this pattern matches is refused (POLICY_DENIED).
    Refuse(Regex),
}

/// `[[gateway.servers.tools.args]]`: for the tools `tool` matches, what the values at
/// `pointer` must be.
#[derive(Debug, Clone)]
pub struct ArgCheck {
    /// The tools it applies to.
    pub tool: NamePattern,
    /// A JSON pointer into the arguments; `*` as a segment stands for every element.
    pub pointer: String,
    /// The check.
    pub kind: ArgKind,
}

impl ArgCheck {
    /// How the rule is named in a refusal and the trail.
    pub fn describe(&self) -> String {
        let kind = match &self.kind {
            ArgKind::Path => "path".to_owned(),
            ArgKind::Url => "url".to_owned(),
            ArgKind::Refuse(re) => format!("refuse {:?}", re.as_str()),
        };
        format!("tools.args {} {} {kind}", self.tool.text(), self.pointer)
    }
}

/// `[gateway.servers.tools]`: which of a server's tools the model may call, and how.
#[derive(Debug, Clone, Default)]
pub struct ToolPolicy {
    /// Tools the model may call; empty: none (deny by default).
    pub allow: Vec<NamePattern>,
    /// Tools never called, whatever `allow` says.
    pub deny: Vec<NamePattern>,
    /// Allowed tools a person approves each call of, as a command's `confirm` rule.
    pub confirm: Vec<NamePattern>,
    /// The argument rules.
    pub args: Vec<ArgCheck>,
}

impl ToolPolicy {
    /// Whether the tool is listed to the client at all (allowed and not denied).
    pub fn lists(&self, tool: &str) -> bool {
        self.deny_rule(tool).is_none() && self.allow.iter().any(|p| p.matches(tool))
    }

    /// Whether each call of the tool needs a person's approval (`confirm`).
    pub fn needs_approval(&self, tool: &str) -> bool {
        self.confirm.iter().any(|p| p.matches(tool))
    }

    fn deny_rule(&self, tool: &str) -> Option<&NamePattern> {
        self.deny.iter().find(|p| p.matches(tool))
    }
}

/// The verdict on one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolVerdict {
    /// Forward it.
    Allow {
        /// The allow entry that matched.
        rule: String,
    },
    /// Forward it once a person approves.
    Confirm {
        /// The confirm entry that matched.
        rule: String,
    },
    /// Refuse it.
    Refuse {
        /// The envelope's code.
        code: ResultCode,
        /// The rule that refused.
        rule: String,
        /// Why, and what to do instead.
        reason: String,
    },
}

/// What a call's arguments are judged against besides the tool policy: the jail the
/// server's paths must stay in, and the network its URLs must stay on.
pub struct Bounds<'a> {
    /// The jail (and write paths).
    pub jail: &'a JailRoot,
    /// The server's network policy.
    pub network: &'a NetworkPolicy,
}

/// The verdict on calling `tool` of `server` with `args`.
pub fn judge(
    policy: &ToolPolicy,
    server: &str,
    tool: &str,
    args: &Value,
    bounds: &Bounds<'_>,
) -> ToolVerdict {
    if let Some(p) = policy.deny_rule(tool) {
        return refuse(
            ResultCode::PolicyDenied,
            format!("tools.deny {}", p.text()),
            format!(
                "{server}'s tool {tool} is denied by the gateway policy ([[gateway.servers]] {server}: tools.deny {:?}); it is not callable here",
                p.text()
            ),
        );
    }
    let Some(allowed) = policy.allow.iter().find(|p| p.matches(tool)) else {
        return refuse(
            ResultCode::PolicyDenied,
            "tools.allow".into(),
            format!(
                "{server}'s tool {tool} is not in tools.allow of [[gateway.servers]] {server}; tools are denied by default (the operator can allow it)"
            ),
        );
    };
    for check in policy.args.iter().filter(|c| c.tool.matches(tool)) {
        let mut values = Vec::new();
        pointed(args, &check.pointer, &mut values);
        for value in values {
            if let Err((code, reason)) = check_value(check, value, bounds) {
                return refuse(code, check.describe(), reason);
            }
        }
    }
    match policy.confirm.iter().find(|p| p.matches(tool)) {
        Some(p) => ToolVerdict::Confirm {
            rule: format!("tools.confirm {}", p.text()),
        },
        None => ToolVerdict::Allow {
            rule: format!("tools.allow {}", allowed.text()),
        },
    }
}

fn refuse(code: ResultCode, rule: String, reason: String) -> ToolVerdict {
    ToolVerdict::Refuse { code, rule, reason }
}

/// Every value `pointer` reaches in `value`, `*` segments fanning out.
fn pointed<'v>(value: &'v Value, pointer: &str, out: &mut Vec<&'v Value>) {
    let Some(rest) = pointer.strip_prefix('/') else {
        if pointer.is_empty() {
            out.push(value);
        }
        return;
    };
    let (head, tail) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    let key = head.replace("~1", "/").replace("~0", "~");
    match (value, head) {
        (Value::Array(items), "*") => items.iter().for_each(|v| pointed(v, tail, out)),
        (Value::Object(map), "*") => map.values().for_each(|v| pointed(v, tail, out)),
        (Value::Array(items), _) => {
            if let Some(v) = key.parse::<usize>().ok().and_then(|i| items.get(i)) {
                pointed(v, tail, out);
            }
        }
        (Value::Object(map), _) => {
            if let Some(v) = map.get(&key) {
                pointed(v, tail, out);
            }
        }
        _ => {}
    }
}

/// One value against one rule. A value that is not text where a path or URL is expected is
/// refused: a rule the server's schema could slip past would hold nothing.
fn check_value(
    check: &ArgCheck,
    value: &Value,
    bounds: &Bounds<'_>,
) -> Result<(), (ResultCode, String)> {
    let text = match (value, &check.kind) {
        (Value::String(s), _) => s.as_str(),
        (Value::Null, _) => return Ok(()),
        // A refused value may hide in a list or an object: every string in it is judged.
        (Value::Array(_) | Value::Object(_), ArgKind::Refuse(_)) => {
            let mut strings = Vec::new();
            strings_in(value, &mut strings);
            return strings
                .into_iter()
                .try_for_each(|s| refuse_pattern(check, s));
        }
        (_, ArgKind::Refuse(_)) => return refuse_pattern(check, &value.to_string()),
        _ => {
            return Err((
                ResultCode::InvalidRequest,
                format!(
                    "{} must be text here ({}); give it as a string",
                    check.pointer,
                    check.describe()
                ),
            ));
        }
    };
    match &check.kind {
        ArgKind::Path => check_path(text, bounds.jail),
        ArgKind::Url => check_url(text, bounds.network),
        ArgKind::Refuse(_) => refuse_pattern(check, text),
    }
}

/// Every string inside `value`.
fn strings_in<'v>(value: &'v Value, out: &mut Vec<&'v str>) {
    match value {
        Value::String(s) => out.push(s),
        Value::Array(items) => items.iter().for_each(|v| strings_in(v, out)),
        Value::Object(map) => map.values().for_each(|v| strings_in(v, out)),
        _ => {}
    }
}

fn refuse_pattern(check: &ArgCheck, text: &str) -> Result<(), (ResultCode, String)> {
    match &check.kind {
        ArgKind::Refuse(re) if re.is_match(text) => Err((
            ResultCode::PolicyDenied,
            format!(
                "the value at {} matches a pattern the gateway policy refuses ({}); call the tool with another value",
                check.pointer,
                check.describe()
            ),
        )),
        _ => Ok(()),
    }
}

/// A path argument inside the jail. A `file:` URL is read two ways, as a server may: its
/// path as written (RFC 3986, as Python's `urlparse` leaves it) and decoded (WHATWG, as
/// Node's `fileURLToPath` and the `url` crate do: `%2e%2e` is `..`); both must lie inside.
fn check_path(text: &str, jail: &JailRoot) -> Result<(), (ResultCode, String)> {
    let inside = |path: &str| {
        jail.check_path(path, jail.path()).map_err(|e| match e {
            JailError::NoSuchDirectory { .. } => (ResultCode::InvalidRequest, e.to_string()),
            _ => (ResultCode::PathEscape, e.to_string()),
        })
    };
    if !text
        .get(..5)
        .is_some_and(|p| p.eq_ignore_ascii_case("file:"))
    {
        return inside(text);
    }
    let elsewhere = || {
        (
            ResultCode::PathEscape,
            format!(
                "{text:?} is not a file URL of this machine's paths; name a path inside the jail"
            ),
        )
    };
    let rest = &text[5..];
    let written = match rest.strip_prefix("//") {
        None => rest,
        Some(authority) => {
            let (host, path) = authority.split_at(authority.find('/').unwrap_or(authority.len()));
            if !(host.is_empty() || host.eq_ignore_ascii_case("localhost")) {
                return Err(elsewhere());
            }
            path
        }
    };
    inside(written)?;
    // `to_file_path` refuses a host other than `localhost`; a path that does not decode to
    // text cannot be judged.
    let decoded = url::Url::parse(text)
        .ok()
        .and_then(|u| u.to_file_path().ok())
        .ok_or_else(elsewhere)?;
    inside(decoded.to_str().ok_or_else(elsewhere)?)
}

/// A URL argument whose host is on the server's network allowlist. The host is read two
/// ways, as a server may: by RFC 3986 (Python's `urllib` and `httpx`: the authority runs to
/// the first `/`, `?` or `#`, the host follows its last `@`) and by WHATWG (Node's, the
/// browsers', the `url` crate: a `\` ends the authority too); both must be allowed.
fn check_url(text: &str, network: &NetworkPolicy) -> Result<(), (ResultCode, String)> {
    let not_a_url = || {
        (
            ResultCode::InvalidRequest,
            format!("{text:?} is not an http(s) URL with a host name"),
        )
    };
    let rfc3986 = url_host(text).ok_or_else(not_a_url)?;
    let whatwg = url::Url::parse(text)
        .ok()
        .filter(|u| matches!(u.scheme(), "http" | "https"))
        .and_then(|u| match u.host()? {
            url::Host::Domain(d) => Some(d.to_owned()),
            url::Host::Ipv4(a) => Some(a.to_string()),
            url::Host::Ipv6(a) => Some(a.to_string()),
        })
        .ok_or_else(not_a_url)?;
    if network.mode != NetworkMode::Allowlist {
        return Err((
            ResultCode::PolicyDenied,
            format!(
                "this server has no network allowlist, so no URL is fetched for it (give its [[gateway.servers]] entry network.allow_domains with {rfc3986})"
            ),
        ));
    }
    for host in [rfc3986, whatwg.as_str()] {
        network
            .judge(host)
            .map_err(|r| (ResultCode::PolicyDenied, r.reason))?;
    }
    Ok(())
}

/// The host of an `http` or `https` URL as RFC 3986 reads it, without user info or port.
fn url_host(text: &str) -> Option<&str> {
    let lower = text
        .get(..8)
        .map(str::to_ascii_lowercase)
        .unwrap_or_default();
    let rest = if lower.starts_with("https://") {
        &text[8..]
    } else if lower.starts_with("http://") {
        &text[7..]
    } else {
        return None;
    };
    let authority = rest.split(['/', '?', '#']).next()?;
    let host_port = authority.rsplit('@').next()?;
    let host = if let Some(v6) = host_port.strip_prefix('[') {
        v6.split(']').next()?
    } else {
        host_port.split(':').next()?
    };
    (!host.is_empty()).then_some(host)
}

/// Whether `path` is the server's argv\[0\] form the loader accepts: a bare name found on
/// PATH, or an absolute path.
pub fn program_form(path: &str) -> bool {
    !path.is_empty() && (Path::new(path).is_absolute() || !path.contains('/'))
}

#[cfg(test)]
mod tests;
