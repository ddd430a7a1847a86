//! Turning one raw section into its settings: `[terminal.env]`, `[terminal.network]`,
//! `[terminal.approvals]`, `[audit.ship]` and `[http]` with its OAuth and limits.

use std::path::PathBuf;

use super::checks::FIXED_VARIABLES;
use super::error::ConfigError;
use crate::egress::{DomainRule, NetworkMode, NetworkPolicy};
use crate::paths::lexical_normalize;
use safe_mcp_rules::config::types::EnvSettings;

/// `[terminal.env]`: valid names, none of the fixed ones.
pub(super) fn environment(raw: super::raw::RawEnv) -> Result<EnvSettings, ConfigError> {
    let valid = |name: &str| {
        let mut chars = name.chars();
        chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
    };
    for name in raw.pass.iter().chain(raw.set.keys()) {
        if !valid(name) {
            return Err(ConfigError::Invalid {
                key: "terminal.env".into(),
                message: format!("{name:?} is not a variable name"),
            });
        }
        if FIXED_VARIABLES.contains(&name.as_str()) || name.starts_with("LD_") {
            return Err(ConfigError::Invalid {
                key: "terminal.env".into(),
                message: format!(
                    "{name} is set by the server for every command and cannot be passed or set"
                ),
            });
        }
    }
    if let Some(v) = raw.set.values().find(|v| v.contains('\0')) {
        return Err(ConfigError::Invalid {
            key: "terminal.env.set".into(),
            message: format!("a value contains a NUL byte: {v:?}"),
        });
    }
    for name in &raw.prefix_allow {
        if !valid(name) {
            return Err(ConfigError::Invalid {
                key: "terminal.env.prefix_allow".into(),
                message: format!("{name:?} is not a variable name"),
            });
        }
        if let Some(why) = crate::env_prefix::dangerous(name) {
            return Err(ConfigError::Invalid {
                key: "terminal.env.prefix_allow".into(),
                message: format!(
                    "{name} {why}: a command may never set it (set it yourself in [terminal.env] set)"
                ),
            });
        }
    }
    Ok(EnvSettings {
        pass: raw.pass,
        set: raw.set.into_iter().collect(),
        prefix_allow: raw.prefix_allow,
    })
}

/// `[terminal.network]`, with the older `[terminal.sandbox] network = true|false` (which
/// means mode open or off) folded in; the two may not disagree.
pub(super) fn network_policy(
    raw: super::raw::RawNetwork,
    sandbox_network: Option<bool>,
) -> Result<NetworkPolicy, ConfigError> {
    let bad = |key: &str, message: String| ConfigError::Invalid {
        key: format!("terminal.network.{key}"),
        message,
    };
    let mode = match (raw.mode, sandbox_network) {
        (Some(mode), None) => mode,
        (None, Some(true)) => NetworkMode::Open,
        (None, Some(false) | None) => NetworkMode::Off,
        (Some(mode), Some(open)) if (mode == NetworkMode::Open) == open => mode,
        (Some(mode), Some(open)) => {
            return Err(bad(
                "mode",
                format!(
                    "mode = \"{}\" contradicts [terminal.sandbox] network = {open}; keep one of the two",
                    mode.as_str()
                ),
            ));
        }
    };
    let rules = |key: &str, list: Option<Vec<String>>| {
        list.unwrap_or_default()
            .iter()
            .map(|r| DomainRule::parse(r).map_err(|m| bad(key, m)))
            .collect::<Result<Vec<_>, _>>()
    };
    let allow = rules("allow_domains", raw.allow_domains)?;
    let deny = rules("deny_domains", raw.deny_domains)?;
    let mut hosts = std::collections::BTreeMap::new();
    for (name, addresses) in raw.hosts.unwrap_or_default() {
        let host = crate::egress::normalize(&name).map_err(|r| bad("hosts", r.reason))?;
        let parsed = addresses
            .iter()
            .map(|a| {
                a.parse::<std::net::IpAddr>()
                    .map_err(|_| bad("hosts", format!("{name}: {a:?} is not an IP address")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        if parsed.is_empty() {
            return Err(bad("hosts", format!("{name}: give at least one address")));
        }
        hosts.insert(host, parsed);
    }
    if mode != NetworkMode::Allowlist
        && (!allow.is_empty() || !deny.is_empty() || !hosts.is_empty())
    {
        return Err(bad(
            "allow_domains",
            format!(
                "the domain lists and hosts apply only to mode = \"allowlist\" (mode is \"{}\")",
                mode.as_str()
            ),
        ));
    }
    let listen_ports = raw.listen_ports.unwrap_or_default();
    if mode != NetworkMode::Off && !listen_ports.is_empty() {
        return Err(bad(
            "listen_ports",
            format!(
                "listen_ports applies to mode = \"off\" (mode is \"{}\": commands have the proxy, or every port, already)",
                mode.as_str()
            ),
        ));
    }
    if listen_ports.contains(&0) {
        return Err(bad(
            "listen_ports",
            "0 is no port; name the ports a dev server listens on (8000, 5173)".into(),
        ));
    }
    Ok(NetworkPolicy {
        mode,
        allow,
        deny,
        allow_private: raw.allow_private.unwrap_or(false),
        hosts,
        listen_ports,
    })
}

/// `[terminal.approvals]`: `url_base` must be an `http://` URL on a loopback address with a
/// port (the page is served there, by this process, for people on this machine).
pub(super) fn approval_settings(
    raw: super::raw::RawApprovals,
) -> Result<safe_mcp_rules::config::settings::ApprovalSettings, ConfigError> {
    let bad = |key: &str, message: String| ConfigError::Invalid {
        key: format!("terminal.approvals.{key}"),
        message,
    };
    let timeout = raw.timeout_seconds.unwrap_or(120);
    if timeout == 0 || timeout > 3600 {
        return Err(bad("timeout_seconds", "must be between 1 and 3600".into()));
    }
    let url_base = match raw.url_base.as_deref().map(str::trim) {
        None | Some("") => None,
        Some(url) => {
            let base = url.trim_end_matches('/');
            let authority = base.strip_prefix("http://").ok_or_else(|| {
                bad(
                    "url_base",
                    format!("{url:?}: give http://127.0.0.1:PORT (a loopback address and port)"),
                )
            })?;
            let (host, port) = authority
                .rsplit_once(':')
                .ok_or_else(|| bad("url_base", format!("{url:?} names no port")))?;
            let port: u16 = port
                .parse()
                .map_err(|_| bad("url_base", format!("{url:?}: the port is not a number")))?;
            let ip: std::net::IpAddr = match host {
                "localhost" => std::net::Ipv4Addr::LOCALHOST.into(),
                h => h
                    .trim_start_matches('[')
                    .trim_end_matches(']')
                    .parse()
                    .map_err(|_| {
                        bad(
                            "url_base",
                            format!("{url:?}: the host must be a loopback address"),
                        )
                    })?,
            };
            if !ip.is_loopback() || port == 0 {
                return Err(bad(
                    "url_base",
                    format!(
                        "{url:?}: the approval page is served on loopback only, on a fixed port"
                    ),
                ));
            }
            Some((base.to_owned(), std::net::SocketAddr::new(ip, port)))
        }
    };
    let ticket = raw.ticket_seconds.unwrap_or(600);
    if !(10..=86400).contains(&ticket) {
        return Err(bad("ticket_seconds", "must be between 10 and 86400".into()));
    }
    let lasting = |key: &'static str, value: Option<u64>, default: u64, most: u64| {
        let seconds = value.unwrap_or(default);
        if (1..=most).contains(&seconds) {
            Ok(seconds)
        } else {
            Err(bad(key, format!("must be between 1 and {most}")))
        }
    };
    Ok(safe_mcp_rules::config::settings::ApprovalSettings {
        mode: raw.mode.unwrap_or_default(),
        url_base,
        timeout: std::time::Duration::from_secs(timeout),
        ticket_ttl: std::time::Duration::from_secs(ticket),
        state_key: None,
        // Set by the loader, which knows where the policy file is.
        scopes_file: None,
        session_scope_seconds: lasting(
            "session_scope_seconds",
            raw.session_scope_seconds,
            8 * 3600,
            7 * 86_400,
        )?,
        rule_scope_seconds: lasting(
            "rule_scope_seconds",
            raw.rule_scope_seconds,
            30 * 86_400,
            366 * 86_400,
        )?,
    })
}

/// `[audit.ship]`: sink addresses that parse, and a spool directory outside every root (a
/// command must not be able to edit what waits to be shipped).
pub(super) fn ship_settings(
    spool_dir: Option<PathBuf>,
    raw: super::raw::RawShip,
    roots: &[PathBuf],
) -> Result<safe_mcp_rules::config::settings::ShipSettings, ConfigError> {
    let bad = |key: &str, message: String| ConfigError::Invalid {
        key: format!("audit.ship.{key}"),
        message,
    };
    let host_port = |key: &str, value: &str| -> Result<String, ConfigError> {
        let (host, port) = value
            .rsplit_once(':')
            .ok_or_else(|| bad(key, format!("{value:?} names no port (host:port)")))?;
        let port: u16 = port
            .parse()
            .ok()
            .filter(|p| *p != 0)
            .ok_or_else(|| bad(key, format!("{value:?}: the port is not a port number")))?;
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let name_ok = !host.is_empty()
            && host
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-._:".contains(&b));
        if !name_ok {
            return Err(bad(key, format!("{value:?}: not a host name or address")));
        }
        Ok(if host.contains(':') {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        })
    };
    let otlp_http = match raw.otlp_http.as_deref() {
        None => None,
        Some(url) => {
            let rest = url.strip_prefix("http://").ok_or_else(|| {
                bad(
                    "otlp_http",
                    format!("{url:?}: give http://HOST:PORT/v1/logs (a local collector forwards with TLS)"),
                )
            })?;
            let (authority, path) = match rest.find('/') {
                Some(i) => (&rest[..i], &rest[i..]),
                None => (rest, "/v1/logs"),
            };
            Some((host_port("otlp_http", authority)?, path.to_owned()))
        }
    };
    let syslog_tcp = match raw.syslog_tcp.as_deref() {
        None => None,
        Some(a) => Some(host_port("syslog_tcp", a)?),
    };
    if otlp_http.is_none() && syslog_tcp.is_none() {
        return Err(bad(
            "otlp_http",
            "[audit.ship] names no sink: set otlp_http, syslog_tcp or both".into(),
        ));
    }
    let spool_dir = spool_dir.ok_or_else(|| {
        bad(
            "spool_dir",
            "set a directory for records that wait for a sink (outside every root)".into(),
        )
    })?;
    let real = std::fs::canonicalize(&spool_dir).unwrap_or_else(|_| lexical_normalize(&spool_dir));
    if let Some(root) = roots
        .iter()
        .find(|r| real.starts_with(r) || r.starts_with(&real))
    {
        return Err(ConfigError::InsideRoot {
            key: "audit.ship.spool_dir",
            path: spool_dir.clone(),
            root: root.clone(),
        });
    }
    let checkpoint_seconds = raw.checkpoint_seconds.unwrap_or(60);
    if checkpoint_seconds > 86400 {
        return Err(bad("checkpoint_seconds", "must be at most 86400".into()));
    }
    Ok(safe_mcp_rules::config::settings::ShipSettings {
        otlp_http,
        syslog_tcp,
        on_failure: raw.on_failure.unwrap_or_default(),
        spool_dir,
        checkpoint_seconds,
        format: raw.format.unwrap_or_default(),
    })
}

/// `[http.auth]`: `mode = "none"` (the default: loopback and unix sockets only) or
/// `"oauth"` with every key a resource server needs.
fn oauth_settings(
    raw: super::raw::RawHttpAuth,
    path: impl Fn(PathBuf) -> PathBuf,
) -> Result<Option<safe_mcp_rules::config::types::OAuthSettings>, ConfigError> {
    let bad = |key: &str, message: &str| ConfigError::Invalid {
        key: format!("http.auth.{key}"),
        message: message.to_owned(),
    };
    match raw.mode.as_deref() {
        None | Some("none") => return Ok(None),
        Some("oauth") => {}
        Some(other) => {
            return Err(bad(
                "mode",
                &format!("{other:?}: give \"oauth\" or \"none\""),
            ));
        }
    }
    // An HTTP(S) URL, or the key's error saying what it names.
    let url = |value: Option<String>, key: &str, names: &str| {
        value
            .filter(|v| v.starts_with("https://") || v.starts_with("http://"))
            .ok_or_else(|| bad(key, names))
    };
    let issuer = url(
        raw.issuer,
        "issuer",
        "the authorization server's URL (iss of its tokens)",
    )?;
    let audience = url(
        raw.audience,
        "audience",
        "this server's resource URI, exactly as tokens name it in aud",
    )?;
    let jwks = match (raw.jwks_file, raw.jwks_url) {
        (Some(file), None) => {
            if raw.jwks_ca_file.is_some() {
                return Err(bad("jwks_ca_file", "goes with jwks_url, not jwks_file"));
            }
            safe_mcp_rules::config::types::JwksSource::File(path(file))
        }
        (None, Some(url)) => {
            // Keys fetched in the clear could be swapped by anyone on the path, and with
            // them every token: https only.
            let authority = url
                .strip_prefix("https://")
                .and_then(|rest| rest.split(['/', '?', '#']).next())
                .unwrap_or_default();
            if authority.is_empty()
                || authority.contains('@')
                || url.contains(|c: char| c.is_whitespace() || c.is_control())
            {
                return Err(bad(
                    "jwks_url",
                    &format!("{url:?}: give the issuer's https:// JWKS URL"),
                ));
            }
            safe_mcp_rules::config::types::JwksSource::Url {
                url,
                ca_file: raw.jwks_ca_file.map(path),
            }
        }
        (Some(_), Some(_)) => {
            return Err(bad("jwks_url", "give jwks_file or jwks_url, not both"));
        }
        (None, None) => {
            return Err(bad(
                "jwks_file",
                "the issuer's public keys: a JWKS file (jwks_file) or its https:// URL (jwks_url)",
            ));
        }
    };
    let leeway_seconds = raw.leeway_seconds.unwrap_or(30);
    if leeway_seconds > 300 {
        return Err(bad("leeway_seconds", "must be at most 300"));
    }
    Ok(Some(safe_mcp_rules::config::types::OAuthSettings {
        issuer,
        audience,
        jwks,
        required_scopes: raw.required_scopes.unwrap_or_default(),
        leeway_seconds,
    }))
}

/// `[http]`: origins that name their scheme, a sane body cap, and `[http.auth]`.
pub(super) fn http_settings(
    raw: super::raw::RawHttp,
    path: impl Fn(PathBuf) -> PathBuf,
) -> Result<safe_mcp_rules::config::types::HttpSettings, ConfigError> {
    let limits = http_limits(&raw)?;
    let origins = raw.allowed_origins.unwrap_or_default();
    if let Some(bad) = origins
        .iter()
        .find(|o| !(o.starts_with("http://") || o.starts_with("https://") || *o == "null"))
    {
        return Err(ConfigError::Invalid {
            key: "http.allowed_origins".into(),
            message: format!("{bad:?}: an origin names its scheme (https://app.example.com:443)"),
        });
    }
    let max_body_bytes = raw.max_body_bytes.unwrap_or(1 << 20);
    if !(1024..=64 << 20).contains(&max_body_bytes) {
        return Err(ConfigError::Invalid {
            key: "http.max_body_bytes".into(),
            message: "must be between 1024 and 67108864".into(),
        });
    }
    let oauth = match raw.auth {
        None => None,
        Some(auth) => oauth_settings(auth, path)?,
    };
    Ok(safe_mcp_rules::config::types::HttpSettings {
        allowed_origins: origins,
        allowed_hosts: raw.allowed_hosts.unwrap_or_default(),
        max_body_bytes,
        oauth,
        limits,
    })
}

/// `[http]`'s limits: each at least 1, a caller's at most the total.
fn http_limits(
    raw: &super::raw::RawHttp,
) -> Result<safe_mcp_rules::config::types::HttpLimits, ConfigError> {
    let default = safe_mcp_rules::config::types::HttpLimits::default();
    let pair = |total: Option<usize>, per: Option<usize>, name: &str, d: (usize, usize)| {
        let total = total.unwrap_or(d.0);
        // An unset per-caller limit follows a lowered total.
        let per = per.unwrap_or(d.1.min(total));
        if total == 0 || total > 4096 {
            return Err(ConfigError::Invalid {
                key: format!("http.{name}"),
                message: "must be between 1 and 4096".into(),
            });
        }
        if per == 0 || per > total {
            return Err(ConfigError::Invalid {
                key: format!("http.{name}_per_caller"),
                message: format!("must be at least 1 and at most {name} ({total})"),
            });
        }
        Ok((total, per))
    };
    let (max_mcp_sessions, max_mcp_sessions_per_caller) = pair(
        raw.max_mcp_sessions,
        raw.max_mcp_sessions_per_caller,
        "max_mcp_sessions",
        (
            default.max_mcp_sessions,
            default.max_mcp_sessions_per_caller,
        ),
    )?;
    let (max_requests, max_requests_per_caller) = pair(
        raw.max_requests,
        raw.max_requests_per_caller,
        "max_requests",
        (default.max_requests, default.max_requests_per_caller),
    )?;
    Ok(safe_mcp_rules::config::types::HttpLimits {
        max_mcp_sessions,
        max_mcp_sessions_per_caller,
        max_requests,
        max_requests_per_caller,
    })
}
