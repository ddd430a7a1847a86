//! Egress policy (DESIGN §9): which host names a command may reach through the server's
//! proxy, and which addresses such a name may lead to.
//!
//! Owns the decisions, as pure functions: a name is normalised (case, trailing dot, IDNA to
//! its ASCII form), refused when it is an IP literal in any spelling `inet_aton` would
//! accept, then matched against `deny_domains` (which wins) and `allow_domains` (`*.x`
//! matches subdomains of x only; anything else matches exactly). The proxy resolves an
//! allowed name itself and [`NetworkPolicy::check_addresses`] refuses it when any answer is
//! loopback, private, link-local, CGNAT, ULA, multicast, reserved or an IPv4-mapped form,
//! unless `allow_private`. The proxy (`safe_mcp_proxy`) does the I/O; nothing here touches
//! the network.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use serde::Deserialize;

/// `[terminal.network] mode`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NetworkMode {
    /// No network: only unix sockets (the default).
    #[default]
    Off,
    /// Only through the server's proxy, to the names the lists allow.
    Allowlist,
    /// Anything (what `[terminal.sandbox] network = true` always meant).
    Open,
}

impl NetworkMode {
    /// The policy-file spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            NetworkMode::Off => "off",
            NetworkMode::Allowlist => "allowlist",
            NetworkMode::Open => "open",
        }
    }
}

/// One entry of `allow_domains` or `deny_domains`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DomainRule {
    /// `example.com`: that name only.
    Exact(String),
    /// `*.example.com`: names beneath it, not the name itself.
    Subdomains(String),
}

impl DomainRule {
    /// Parses a list entry; the name is normalised as hosts are.
    pub fn parse(raw: &str) -> Result<DomainRule, String> {
        let (wild, name) = match raw.strip_prefix("*.") {
            Some(rest) => (true, rest),
            None => (false, raw),
        };
        if name.contains('*') {
            return Err(format!(
                "{raw:?}: a wildcard may only be a leading \"*.\" (subdomains of the rest)"
            ));
        }
        let name = normalize(name).map_err(|r| format!("{raw:?}: {}", r.reason))?;
        Ok(if wild {
            DomainRule::Subdomains(name)
        } else {
            DomainRule::Exact(name)
        })
    }

    /// Whether `host` (normalised) matches.
    pub fn matches(&self, host: &str) -> bool {
        match self {
            DomainRule::Exact(name) => host == name,
            DomainRule::Subdomains(name) => host
                .strip_suffix(name.as_str())
                .is_some_and(|head| head.len() > 1 && head.ends_with('.')),
        }
    }

    /// The rule as written in the policy (normalised).
    pub fn text(&self) -> String {
        match self {
            DomainRule::Exact(name) => name.clone(),
            DomainRule::Subdomains(name) => format!("*.{name}"),
        }
    }
}

/// `[terminal.network]`, resolved.
#[derive(Debug, Clone, Default)]
pub struct NetworkPolicy {
    /// Off, allowlist or open.
    pub mode: NetworkMode,
    /// Names commands may reach (allowlist mode).
    pub allow: Vec<DomainRule>,
    /// Names they may never reach; wins over `allow`.
    pub deny: Vec<DomainRule>,
    /// Whether a name may resolve to loopback, private or link-local space.
    pub allow_private: bool,
    /// `[terminal.network.hosts]`: names the proxy resolves to these addresses instead of
    /// asking the system resolver (an internal registry, a pinned mirror). Their answers
    /// are checked like any other.
    pub hosts: BTreeMap<String, Vec<IpAddr>>,
    /// TCP ports commands may bind and connect to where there is no private view and they
    /// share the host's network (in the view, its own loopback is theirs anyway).
    pub listen_ports: Vec<u16>,
}

/// Which check refused a request. Its name ([`RefusalRule::as_str`]) is what the trail's
/// `refused` record and the proxy's `X-Safe-Mcp-Refusal` header say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RefusalRule {
    /// A `deny_domains` entry matched: the entry.
    Denied(String),
    /// A host given as an IP address, not a name.
    IpLiteral,
    /// No `allow_domains` entry names the host.
    NotAllowed,
    /// The name resolves to a private, loopback or link-local address.
    PrivateAddress,
    /// The name resolves to no address.
    NoAddress,
    /// Not a valid host name.
    BadName,
    /// A request the proxy cannot read, or whose parts disagree (the Host header, the URL).
    BadRequest,
    /// A method or path a credential host's rules refuse.
    MethodPath,
    /// A credential's placeholder sent to a host it is not bound to.
    CredentialHost,
    /// The credential could not be added.
    Credential,
    /// The call has used up the records its trail may hold.
    RecordLimit,
    /// The trail is unavailable, so nothing is relayed.
    Audit,
    /// The host's answer could not be relayed.
    Upstream,
    /// The command's TLS could not be terminated.
    Tls,
    /// The TLS ClientHello names another host than the CONNECT.
    SniMismatch,
}

impl RefusalRule {
    /// The rule's name as the trail and the header give it: the deny entry itself, or the
    /// check's kebab-case name.
    pub fn as_str(&self) -> &str {
        match self {
            RefusalRule::Denied(entry) => entry,
            RefusalRule::IpLiteral => "ip-literal",
            RefusalRule::NotAllowed => "not-allowed",
            RefusalRule::PrivateAddress => "private-address",
            RefusalRule::NoAddress => "no-address",
            RefusalRule::BadName => "bad-name",
            RefusalRule::BadRequest => "bad-request",
            RefusalRule::MethodPath => "method-path",
            RefusalRule::CredentialHost => "credential-host",
            RefusalRule::Credential => "credential",
            RefusalRule::RecordLimit => "record-limit",
            RefusalRule::Audit => "audit",
            RefusalRule::Upstream => "upstream",
            RefusalRule::Tls => "tls",
            RefusalRule::SniMismatch => "sni-mismatch",
        }
    }
}

impl std::fmt::Display for RefusalRule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq<&str> for RefusalRule {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

/// Why the proxy refused a request: the rule (or check) and a sentence for the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The deny entry that matched, or the check that refused.
    pub rule: RefusalRule,
    /// Why, in a sentence.
    pub reason: String,
}

impl Refusal {
    /// A refusal by `rule`, saying `reason`.
    pub fn new(rule: RefusalRule, reason: impl Into<String>) -> Refusal {
        Refusal {
            rule,
            reason: reason.into(),
        }
    }
}

/// The longest name DNS can carry.
const MAX_NAME: usize = 253;

/// A host as the proxy compares it: lower case, no trailing dot, IDNA's ASCII form, every
/// label letters, digits, `-` or `_`. IP literals in any spelling are refused here.
pub fn normalize(raw: &str) -> Result<String, Refusal> {
    let trimmed = raw.strip_suffix('.').unwrap_or(raw);
    let bare = trimmed
        .strip_prefix('[')
        .and_then(|r| r.strip_suffix(']'))
        .unwrap_or(trimmed);
    if bare.parse::<IpAddr>().is_ok() {
        return Err(ip_literal(raw));
    }
    if trimmed.is_empty() || trimmed.len() > MAX_NAME {
        return Err(Refusal::new(
            RefusalRule::BadName,
            format!("{raw:?} is not a host name"),
        ));
    }
    let ascii = idna::domain_to_ascii(trimmed).map_err(|_| {
        Refusal::new(
            RefusalRule::BadName,
            format!("{raw:?} is not a valid host name"),
        )
    })?;
    let labels: Vec<&str> = ascii.split('.').collect();
    let ldh = |l: &&str| {
        !l.is_empty()
            && l.len() <= 63
            && l.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    };
    if !labels.iter().all(ldh) {
        return Err(Refusal::new(
            RefusalRule::BadName,
            format!("{raw:?} is not a valid host name"),
        ));
    }
    // inet_aton reads `127.1`, `2130706433`, `0x7f.0.0.1` and `0177.0.0.1` as addresses:
    // a name whose every label is a number in some base is one of those.
    let numeric = |l: &&str| {
        l.bytes().all(|b| b.is_ascii_digit())
            || l.strip_prefix("0x")
                .is_some_and(|h| h.bytes().all(|b| b.is_ascii_hexdigit()))
    };
    if labels.iter().all(numeric) {
        return Err(ip_literal(raw));
    }
    Ok(ascii)
}

fn ip_literal(raw: &str) -> Refusal {
    Refusal::new(
        RefusalRule::IpLiteral,
        format!(
            "{raw} is an IP address; the proxy reaches names only, so that the lists decide (ask for the host by name)"
        ),
    )
}

impl NetworkPolicy {
    /// Whether a command may reach `raw_host`: its normalised name and the allow entry that
    /// matched, or the refusal.
    pub fn judge(&self, raw_host: &str) -> Result<(String, String), Refusal> {
        let host = normalize(raw_host)?;
        if let Some(rule) = self.deny.iter().find(|r| r.matches(&host)) {
            return Err(Refusal::new(
                RefusalRule::Denied(rule.text()),
                format!("{host} is denied by deny_domains entry {}", rule.text()),
            ));
        }
        match self.allow.iter().find(|r| r.matches(&host)) {
            Some(rule) => Ok((host, rule.text())),
            None => Err(Refusal::new(
                RefusalRule::NotAllowed,
                format!(
                    "{host} is not in allow_domains ({}); the operator can add it",
                    self.allowed_list()
                ),
            )),
        }
    }

    fn allowed_list(&self) -> String {
        if self.allow.is_empty() {
            return "empty".into();
        }
        self.allow
            .iter()
            .map(DomainRule::text)
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The addresses `[terminal.network.hosts]` pins for `host`, if any.
    pub fn pinned(&self, host: &str) -> Option<&[IpAddr]> {
        self.hosts.get(host).map(Vec::as_slice)
    }

    /// Whether every address `host` resolved to may be reached: any non-public answer
    /// refuses the name (unless `allow_private`), so that a rebinding resolver cannot slip
    /// one past among public ones.
    pub fn check_addresses(&self, host: &str, addresses: &[IpAddr]) -> Result<(), Refusal> {
        if addresses.is_empty() {
            return Err(Refusal::new(
                RefusalRule::NoAddress,
                format!("{host} did not resolve"),
            ));
        }
        if self.allow_private {
            return Ok(());
        }
        for ip in addresses {
            if let Some(class) = non_public(*ip) {
                return Err(Refusal::new(
                    RefusalRule::PrivateAddress,
                    format!(
                        "{host} resolves to {ip}, a {class} address; allow_private = false keeps commands off the host's own and internal networks"
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// The kind of address `ip` is when it is not a public unicast one.
pub fn non_public(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => non_public_v4(v4),
        IpAddr::V6(v6) => non_public_v6(v6),
    }
}

fn non_public_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, c, _] = ip.octets();
    Some(match (a, b, c) {
        (0, ..) => "this-network",
        (127, ..) => "loopback",
        (10, ..) | (192, 168, _) => "private",
        (172, b, _) if (16..32).contains(&b) => "private",
        (169, 254, _) => "link-local",
        (100, b, _) if (64..128).contains(&b) => "CGNAT (shared)",
        (192, 0, 0) => "IETF protocol assignment",
        (192, 0, 2) | (198, 51, 100) | (203, 0, 113) => "documentation",
        (198, 18 | 19, _) => "benchmarking",
        (a, ..) if (224..240).contains(&a) => "multicast",
        (a, ..) if a >= 240 => "reserved",
        _ => return None,
    })
}

fn non_public_v6(ip: Ipv6Addr) -> Option<&'static str> {
    let s = ip.segments();
    Some(match s {
        [0, 0, 0, 0, 0, 0, 0, 0] => "unspecified",
        [0, 0, 0, 0, 0, 0, 0, 1] => "loopback",
        [0, 0, 0, 0, 0, 0xffff, ..] => "IPv4-mapped",
        [0, 0, 0, 0, 0, 0, ..] => "IPv4-compatible",
        [0x64, 0xff9b, ..] => "NAT64",
        [0x2002, ..] => "6to4",
        [0x2001, 0xdb8, ..] => "documentation",
        [0x2001, 0, ..] => "Teredo",
        [x, ..] if x & 0xfe00 == 0xfc00 => "unique local (ULA)",
        [x, ..] if x & 0xffc0 == 0xfe80 => "link-local",
        [x, ..] if x & 0xffc0 == 0xfec0 => "site-local",
        [x, ..] if x & 0xff00 == 0xff00 => "multicast",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(allow: &[&str], deny: &[&str]) -> NetworkPolicy {
        NetworkPolicy {
            mode: NetworkMode::Allowlist,
            allow: allow
                .iter()
                .map(|r| DomainRule::parse(r).unwrap())
                .collect(),
            deny: deny.iter().map(|r| DomainRule::parse(r).unwrap()).collect(),
            ..NetworkPolicy::default()
        }
    }

    #[test]
    fn names_are_compared_in_one_form() {
        assert_eq!(normalize("GitHub.COM.").unwrap(), "github.com");
        assert_eq!(
            normalize("bücher.example").unwrap(),
            "xn--bcher-kva.example"
        );
        assert_eq!(
            normalize("BÜCHER.example").unwrap(),
            "xn--bcher-kva.example"
        );
        for bad in ["", ".", "a..b", "a b.com", "a/b", "x@y.com", "a:80"] {
            assert_eq!(normalize(bad).unwrap_err().rule, "bad-name", "{bad:?}");
        }
    }

    #[test]
    fn ip_literals_are_refused_in_every_spelling() {
        for literal in [
            "127.0.0.1",
            "8.8.8.8",
            "::1",
            "[::1]",
            "[2001:db8::1]",
            "127.1",
            "2130706433",
            "0x7f.0.0.1",
            "0x7f000001",
            "0177.0.0.1",
            "1.1.1.1.",
        ] {
            assert_eq!(
                normalize(literal).unwrap_err().rule,
                "ip-literal",
                "{literal}"
            );
        }
        // A name with a number in it is still a name.
        assert!(normalize("1password.com").is_ok());
        assert!(normalize("0x7f.example").is_ok());
    }

    #[test]
    fn a_wildcard_matches_subdomains_only() {
        let p = policy(&["*.crates.io", "github.com"], &[]);
        assert_eq!(p.judge("index.crates.io").unwrap().1, "*.crates.io");
        assert_eq!(p.judge("a.b.crates.io").unwrap().1, "*.crates.io");
        assert_eq!(p.judge("crates.io").unwrap_err().rule, "not-allowed");
        assert_eq!(p.judge("evilcrates.io").unwrap_err().rule, "not-allowed");
        assert_eq!(p.judge("GITHUB.com.").unwrap().0, "github.com");
        assert_eq!(p.judge("api.github.com").unwrap_err().rule, "not-allowed");
        assert_eq!(
            p.judge("github.com.evil.io").unwrap_err().rule,
            "not-allowed"
        );
    }

    #[test]
    fn deny_wins_over_allow() {
        let p = policy(&["*.example.com"], &["secret.example.com"]);
        assert!(p.judge("www.example.com").is_ok());
        let r = p.judge("SECRET.example.com").unwrap_err();
        assert_eq!(r.rule, "secret.example.com");
        assert!(r.reason.contains("deny_domains"), "{}", r.reason);
    }

    #[test]
    fn bad_rules_are_refused_at_load() {
        for bad in [
            "*",
            "*example.com",
            "a.*.com",
            "10.0.0.1",
            "*.",
            "exa mple.com",
        ] {
            assert!(DomainRule::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn private_answers_are_refused_unless_allowed() {
        let mut p = policy(&["x.test"], &[]);
        let refused = [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "224.0.0.1",
            "255.255.255.255",
            "::1",
            "::",
            "fc00::1",
            "fd12:3456::1",
            "fe80::1",
            "::ffff:127.0.0.1",
            "::ffff:8.8.8.8",
            "64:ff9b::a00:1",
            "ff02::1",
        ];
        for ip in refused {
            let ip: IpAddr = ip.parse().unwrap();
            let r = p.check_addresses("x.test", &[ip]).unwrap_err();
            assert_eq!(r.rule, "private-address", "{ip}");
        }
        for ip in ["8.8.8.8", "172.32.0.1", "100.128.0.1", "2606:4700::1111"] {
            let ip: IpAddr = ip.parse().unwrap();
            assert!(p.check_addresses("x.test", &[ip]).is_ok(), "{ip}");
        }
        // One private answer among public ones refuses the name.
        let mixed: Vec<IpAddr> = vec!["8.8.8.8".parse().unwrap(), "10.0.0.1".parse().unwrap()];
        assert!(p.check_addresses("x.test", &mixed).is_err());
        assert_eq!(
            p.check_addresses("x.test", &[]).unwrap_err().rule,
            "no-address"
        );
        p.allow_private = true;
        assert!(p.check_addresses("x.test", &mixed).is_ok());
    }
}
