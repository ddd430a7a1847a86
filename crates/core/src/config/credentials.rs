//! `[[terminal.credentials]]`, `[[terminal.network.rules]]` and `[terminal.network]
//! upstream_ca_file`: read once the terminal section is, because each is checked against it.
//!
//! A credential is refused at load unless: the network mode is `allowlist` (only the proxy
//! can add it); its variable is a plain name no other setting gives a value; its source is
//! a variable of the server's environment that `[terminal.env] pass` does not hand on, or a
//! file of mode 0600 outside the jail, every read path and every write path; each of its
//! hosts is allowed (and not denied) by `[terminal.network]`. A rule must name a credential
//! host: only their requests are seen by the proxy. `upstream_ca_file` may not lie where
//! commands write.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::error::ConfigError;
use super::raw::{RawCredential, RawHostRule, RawTerminal};
use crate::credentials::{
    CredentialSpec, Credentials, HostRule, Inject, Source, SshKeySource, SshKeySpec,
};
use crate::egress::{DomainRule, NetworkMode};
use safe_mcp_rules::config::types::TerminalPolicy;

/// What this module reads, taken out of the raw terminal section before the rest is read.
#[derive(Debug, Default)]
pub(super) struct Raw {
    credentials: Vec<RawCredential>,
    rules: Vec<RawHostRule>,
    upstream_ca_file: Option<PathBuf>,
}

/// Takes the credentials, rules and upstream CA out of `raw`.
pub(super) fn take(raw: &mut RawTerminal) -> Raw {
    let network = raw.network.as_mut();
    let (rules, upstream_ca_file) = match network {
        Some(n) => (
            n.rules.take().unwrap_or_default(),
            n.upstream_ca_file.take(),
        ),
        None => (Vec::new(), None),
    };
    Raw {
        credentials: raw.credentials.take().unwrap_or_default(),
        rules,
        upstream_ca_file,
    }
}

/// Names a credential's variable may not have: what the server sets itself, or what
/// configures the loader or the proxy.
const RESERVED: &[&str] = &[
    "PATH",
    "HOME",
    "TMPDIR",
    "LANG",
    "LC_CTYPE",
    "SHELL",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "NO_PROXY",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "SAFE_MCP_NESTED",
    "SSH_AUTH_SOCK",
];

/// Reads and checks `raw` against the terminal policy `t`; `var` reads the server's
/// environment and `file_path` resolves a path as the policy file's are.
pub(super) fn read(
    raw: Raw,
    t: &TerminalPolicy,
    roots: &[PathBuf],
    var: impl Fn(&str) -> Option<OsString>,
    file_path: impl Fn(PathBuf) -> PathBuf,
) -> Result<Credentials, ConfigError> {
    let bad = |key: &str, message: String| ConfigError::Invalid {
        key: key.to_owned(),
        message,
    };
    const KEY: &str = "terminal.credentials";
    let (keys, tokens): (Vec<RawCredential>, Vec<RawCredential>) = raw
        .credentials
        .into_iter()
        .partition(|c| c.kind.as_deref() == Some("ssh"));
    let mut ssh = Vec::new();
    for c in keys {
        let key = ssh_key_of(c, &ssh, t, roots, &file_path)?;
        ssh.push(key);
    }
    if (!tokens.is_empty() || !raw.rules.is_empty() || raw.upstream_ca_file.is_some())
        && t.network.mode != NetworkMode::Allowlist
    {
        return Err(bad(
            KEY,
            format!(
                "credentials, rules and upstream_ca_file work through the proxy: set [terminal.network] mode = \"allowlist\" (mode is \"{}\")",
                t.network.mode.as_str()
            ),
        ));
    }
    let mut specs: Vec<CredentialSpec> = Vec::new();
    for c in tokens {
        let spec = spec_of(c, &specs, t, roots, (&var, &file_path))?;
        specs.push(spec);
    }
    let mut rules = Vec::new();
    for r in raw.rules {
        let rule = HostRule::parse(&r.host, &r.methods, &r.paths)
            .map_err(|m| bad("terminal.network.rules", format!("{}: {m}", r.host)))?;
        if !specs
            .iter()
            .any(|s| s.hosts.iter().any(|h| covers(h, &rule.host)))
        {
            return Err(bad(
                "terminal.network.rules",
                format!(
                    "{}: rules apply to the hosts of a [[terminal.credentials]] entry, whose requests the proxy sees (others stay end-to-end encrypted)",
                    r.host
                ),
            ));
        }
        rules.push(rule);
    }
    let upstream_ca_file = match raw.upstream_ca_file {
        Some(p) => {
            let p = file_path(p);
            // Readable by commands is fine (it holds certificates); writable is not: a CA the
            // model plants there would be trusted for the credential hosts.
            out_of_reach(&p, t, roots, Reach::Replace)
                .map_err(|m| bad("terminal.network.upstream_ca_file", m))?;
            Some(p)
        }
        None => None,
    };
    Ok(Credentials {
        specs,
        ssh,
        rules,
        upstream_ca_file,
    })
}

/// One `[[terminal.credentials]]` entry, checked: a plain capitalised name no other entry,
/// `[terminal.env]` or the server gives; its value from the server's environment (not one
/// `pass` hands to commands) or a file out of the commands' reach; hosts commands may reach.
fn spec_of(
    c: RawCredential,
    specs: &[CredentialSpec],
    t: &TerminalPolicy,
    roots: &[PathBuf],
    (var, file_path): (
        &impl Fn(&str) -> Option<OsString>,
        &impl Fn(PathBuf) -> PathBuf,
    ),
) -> Result<CredentialSpec, ConfigError> {
    let at = |m: String| ConfigError::Invalid {
        key: "terminal.credentials".to_owned(),
        message: format!("{}: {m}", c.name),
    };
    match c.kind.as_deref() {
        None | Some("token") => {}
        Some(other) => {
            return Err(at(format!(
                "kind = {other:?}: a credential is a \"token\" (the default) or an \"ssh\" key"
            )));
        }
    }
    if c.key_file.is_some()
        || c.passphrase_file.is_some()
        || c.sign.is_some()
        || c.known_hosts.is_some()
        || c.agent.is_some()
        || c.fingerprint.is_some()
    {
        return Err(at(
            "key_file, passphrase_file, agent, fingerprint, sign and known_hosts belong to kind = \"ssh\"".into(),
        ));
    }
    let (Some(from), Some(inject)) = (c.from.as_deref(), c.inject.as_ref()) else {
        return Err(at(
            "a token needs from (\"env:VAR\" or \"file:PATH\") and inject (header and format)"
                .into(),
        ));
    };
    let plain = !c.name.is_empty()
        && !c.name.starts_with(|ch: char| ch.is_ascii_digit())
        && c.name
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_');
    if !plain || RESERVED.contains(&c.name.as_str()) || c.name.starts_with("LD_") {
        return Err(at(
            "name the variable commands see in capitals (GH_TOKEN); not one the server sets".into(),
        ));
    }
    if specs.iter().any(|s| s.name == c.name)
        || t.env.pass.contains(&c.name)
        || t.env.set.iter().any(|(n, _)| *n == c.name)
    {
        return Err(at(
            "another credential or [terminal.env] already gives this variable".into(),
        ));
    }
    let (source, value) = if let Some(name) = from.strip_prefix("env:") {
        if t.env.pass.iter().any(|p| p == name) {
            return Err(at(format!(
                "{name} is in [terminal.env] pass, which hands its real value to every command; take it out of pass"
            )));
        }
        let raw_value =
            var(name).ok_or_else(|| at(format!("the server's environment has no {name}")))?;
        let value = crate::credentials::value_of(raw_value.into_encoded_bytes())
            .map_err(|m| at(format!("{name}: {m}")))?;
        (Source::Env(name.to_owned()), value)
    } else if let Some(path) = from.strip_prefix("file:") {
        let path = file_path(PathBuf::from(path));
        out_of_reach(&path, t, roots, Reach::Read).map_err(at)?;
        let value = crate::credentials::read_file(&path).map_err(at)?;
        (Source::File(path), value)
    } else {
        return Err(at(format!(
            "from = {from:?}: write \"env:VAR\" or \"file:PATH\""
        )));
    };
    if c.hosts.is_empty() {
        return Err(at("name the hosts it is sent to".into()));
    }
    let hosts = c
        .hosts
        .iter()
        .map(|h| DomainRule::parse(h).map_err(&at))
        .collect::<Result<Vec<_>, _>>()?;
    for host in &hosts {
        if !allowed(&t.network.allow, &t.network.deny, host) {
            return Err(at(format!(
                "host {} is not allowed by [terminal.network] allow_domains (or is denied); a credential goes only to hosts commands may reach",
                host.text()
            )));
        }
    }
    let inject = Inject::parse(&inject.header, &inject.format).map_err(at)?;
    Ok(CredentialSpec {
        name: c.name,
        source,
        value,
        hosts,
        inject,
    })
}

/// One `[[terminal.credentials]] kind = "ssh"` entry, checked: a plain name no other key
/// has; a key file (and a passphrase file) of mode 0600 out of every root, read path and
/// write path, read now; and something to do with it: `sign = true` (git objects), or
/// `hosts` to log in to (each allowed by `[terminal.network]`, through the proxy) with the
/// operator's `known_hosts` pinning a key for each.
fn ssh_key_of(
    c: RawCredential,
    keys: &[SshKeySpec],
    t: &TerminalPolicy,
    roots: &[PathBuf],
    file_path: &impl Fn(PathBuf) -> PathBuf,
) -> Result<SshKeySpec, ConfigError> {
    let at = |m: String| ConfigError::Invalid {
        key: "terminal.credentials".to_owned(),
        message: format!("{}: {m}", c.name),
    };
    let plain = !c.name.is_empty()
        && c.name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if !plain || keys.iter().any(|k| k.name == c.name) {
        return Err(at(
            "name an ssh key with letters, digits, - and _, once".into()
        ));
    }
    if c.from.is_some() || c.inject.is_some() {
        return Err(at(
            "an ssh key is read from key_file and used through the server's agent: it takes no from or inject".into(),
        ));
    }
    let hosts = ssh_hosts(&c.hosts, t).map_err(&at)?;
    if c.sign != Some(true) && hosts.is_empty() {
        return Err(at(
            "give it hosts to log in to, or sign = true (git commit -S with gpg.format = ssh); without either the key would do nothing".into(),
        ));
    }
    let known_hosts = match (&c.known_hosts, hosts.is_empty()) {
        (_, true) => Vec::new(),
        (None, false) => {
            return Err(at(
                "known_hosts: name the file that pins each host's key (checked by you, never learned on first use)".into(),
            ));
        }
        (Some(path), false) => {
            let path = file_path(path.clone());
            out_of_reach(&path, t, roots, Reach::Replace)
                .map_err(|m| at(format!("known_hosts: {m}")))?;
            let text = std::fs::read_to_string(&path)
                .map_err(|e| at(format!("known_hosts: {}: {e}", path.display())))?;
            pinned(&text, &hosts).map_err(|m| at(format!("known_hosts: {m}")))?
        }
    };
    let secret = |key: &str, path: PathBuf| {
        let path = file_path(path);
        out_of_reach(&path, t, roots, Reach::Read).map_err(|m| at(format!("{key}: {m}")))?;
        let value =
            crate::credentials::read_secret_file(&path).map_err(|m| at(format!("{key}: {m}")))?;
        Ok::<_, ConfigError>((path, value))
    };
    let source = match (c.key_file.clone(), c.agent.clone(), c.fingerprint.clone()) {
        (Some(key_file), None, None) => {
            let (path, key) = secret("key_file", key_file)?;
            let passphrase = match c.passphrase_file.clone() {
                Some(p) => Some(secret("passphrase_file", p)?.1),
                None => None,
            };
            SshKeySource::File {
                path,
                key,
                passphrase,
            }
        }
        (None, Some(socket), Some(fingerprint)) if c.passphrase_file.is_none() => {
            let socket = file_path(socket);
            // Commands must not reach the operator's agent: it holds every key.
            out_of_reach(&socket, t, roots, Reach::Read).map_err(|m| at(format!("agent: {m}")))?;
            if !fingerprint.starts_with("SHA256:") {
                return Err(at(
                    "fingerprint: write it as ssh-add -l prints it (SHA256:...)".into(),
                ));
            }
            SshKeySource::Agent {
                socket,
                fingerprint,
            }
        }
        _ => {
            return Err(at(
                "name the key: key_file (and passphrase_file), or agent and fingerprint (a key of your running agent)".into(),
            ));
        }
    };
    Ok(SshKeySpec {
        name: c.name,
        source,
        sign: c.sign == Some(true),
        hosts,
        known_hosts,
    })
}

/// An ssh key's `hosts`: `name` or `name:port` (22 by default), each allowed by
/// `[terminal.network]` (mode `allowlist`: SSH goes through the proxy like every connection).
fn ssh_hosts(hosts: &[String], t: &TerminalPolicy) -> Result<Vec<(String, u16)>, String> {
    if !hosts.is_empty() && t.network.mode != NetworkMode::Allowlist {
        return Err(format!(
            "hosts go through the proxy: set [terminal.network] mode = \"allowlist\" (mode is \"{}\")",
            t.network.mode.as_str()
        ));
    }
    hosts
        .iter()
        .map(|h| {
            let (name, port) = match h.rsplit_once(':') {
                Some((name, port)) => (
                    name,
                    port.parse::<u16>()
                        .ok()
                        .filter(|p| *p != 0)
                        .ok_or_else(|| format!("host {h:?}: the port is not a port number"))?,
                ),
                None => (h.as_str(), 22),
            };
            let rule = DomainRule::parse(name)?;
            if !matches!(rule, DomainRule::Exact(_)) || !allowed(&t.network.allow, &t.network.deny, &rule) {
                return Err(format!(
                    "host {name} must be one name allowed by [terminal.network] allow_domains (and not denied)"
                ));
            }
            Ok((name.to_ascii_lowercase(), port))
        })
        .collect()
}

/// The `known_hosts` lines that pin a key for `hosts` (`name`, or `[name]:port` off port
/// 22); every host must have one. Hashed names and markers (`@revoked`) are refused: a
/// person must be able to read what is pinned.
fn pinned(text: &str, hosts: &[(String, u16)]) -> Result<Vec<String>, String> {
    let mut kept = Vec::new();
    for (name, port) in hosts {
        let want = crate::credentials::known_host_name(name, *port);
        let lines: Vec<&str> = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .filter(|l| {
                l.split_whitespace()
                    .next()
                    .is_some_and(|field| field.split(',').any(|h| h.eq_ignore_ascii_case(&want)))
            })
            .collect();
        if lines.is_empty() {
            return Err(format!(
                "no key pinned for {want}: add its line (ssh-keyscan, checked against what the host's operator says)"
            ));
        }
        if lines
            .iter()
            .any(|l| l.starts_with('@') || l.starts_with('|'))
        {
            return Err(format!(
                "{want}: markers and hashed names are not read; write the host's name"
            ));
        }
        kept.extend(lines.iter().map(|l| (*l).to_owned()));
    }
    Ok(kept)
}

/// What commands must not be able to do to a file.
#[derive(Clone, Copy, PartialEq)]
enum Reach {
    /// Read it (a credential): not in a root, a read path or a write path.
    Read,
    /// Replace it (the upstream CA): not in a root or a write path.
    Replace,
}

/// Refuses `path` where commands could `reach` it.
fn out_of_reach(
    path: &Path,
    t: &TerminalPolicy,
    roots: &[PathBuf],
    reach: Reach,
) -> Result<(), String> {
    let real = std::fs::canonicalize(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let read_paths = match reach {
        Reach::Read => t.sandbox.read_paths.as_slice(),
        Reach::Replace => &[],
    };
    let places = roots
        .iter()
        .map(|r| ("root", r))
        .chain(read_paths.iter().map(|r| ("sandbox read path", r)))
        .chain(t.write_paths.iter().map(|w| ("write path", w)));
    let verb = match reach {
        Reach::Read => "read",
        Reach::Replace => "replace",
    };
    for (what, place) in places {
        let place = std::fs::canonicalize(place).unwrap_or_else(|_| place.clone());
        if real.starts_with(&place) {
            return Err(format!(
                "{} lies under the {what} {}, where commands could {verb} it; keep it outside",
                path.display(),
                place.display()
            ));
        }
    }
    Ok(())
}

/// Whether every name `rule` matches is allowed and none is denied.
fn allowed(allow: &[DomainRule], deny: &[DomainRule], rule: &DomainRule) -> bool {
    allow.iter().any(|a| covers(a, rule)) && !deny.iter().any(|d| overlaps(d, rule))
}

/// Whether every name `inner` matches, `outer` matches too.
fn covers(outer: &DomainRule, inner: &DomainRule) -> bool {
    match inner {
        DomainRule::Exact(name) => outer.matches(name),
        DomainRule::Subdomains(name) => match outer {
            DomainRule::Exact(_) => false,
            DomainRule::Subdomains(o) => name == o || outer.matches(name),
        },
    }
}

/// Whether some name matches both.
fn overlaps(a: &DomainRule, b: &DomainRule) -> bool {
    covers(a, b) || covers(b, a)
}
