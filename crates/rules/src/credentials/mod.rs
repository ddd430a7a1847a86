//! Credentials the model never sees (`[[terminal.credentials]]`, DESIGN §9): what one is
//! and the judgements made of it, with no I/O.
//!
//! - a credential's spec: its variable, where its value comes from ([`Source`]), the hosts
//!   it is bound to, how it is injected ([`Inject`], which refuses a header that routes or
//!   frames the request) and its value ([`Secret`], never formatted by `Debug`, judged by
//!   [`value_of`]);
//! - the type prefix a placeholder keeps so that tools accept it ([`type_prefix`]);
//! - method and path rules on credential hosts ([`hosts`]);
//! - the spellings a request may carry a placeholder in ([`scan`]).
//!
//! The running vault (the values read from the environment or a file, reloaded on SIGHUP,
//! the placeholders made from random bytes) is `safe_mcp_core::credentials`; the proxy
//! carries its decisions out.

pub mod hosts;
pub mod scan;

use std::path::PathBuf;

use base64::Engine;

use crate::egress::DomainRule;
pub use hosts::{HostRule, PathPattern};

/// A real credential value: never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(Vec<u8>);

impl Secret {
    /// Wraps `bytes` (a trailing newline, as files end, already trimmed).
    pub fn new(bytes: Vec<u8>) -> Secret {
        Secret(bytes)
    }

    /// The value itself, for what must hold it (the redactor's rule for it).
    pub fn expose(&self) -> &[u8] {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "[secret: {} bytes]", self.0.len())
    }
}

/// Where a credential's real value comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// `env:VAR`: the server's environment, read at start.
    Env(String),
    /// `file:PATH`: a file outside every root, read at start and on SIGHUP.
    File(PathBuf),
}

impl Source {
    /// As written in the policy.
    pub fn text(&self) -> String {
        match self {
            Source::Env(v) => format!("env:{v}"),
            Source::File(p) => format!("file:{}", p.display()),
        }
    }
}

/// How the real value goes into a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Inject {
    /// `format = "Bearer {}"`: the header's value is `before` + value + `after`.
    Template {
        /// The header's name, lower case.
        header: String,
        /// What comes before the value.
        before: String,
        /// What comes after it.
        after: String,
    },
    /// `format = "Basic USER:{}"` (git over HTTPS): `Basic ` + base64 of `USER:value`.
    Basic {
        /// The header's name, lower case.
        header: String,
        /// The user name.
        user: String,
    },
}

/// Headers a credential may not be injected into: they route or frame the request.
const ROUTING: &[&str] = &[
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "upgrade",
    "te",
    "trailer",
    "proxy-authorization",
    "proxy-connection",
    "keep-alive",
    "forwarded",
    "x-forwarded-host",
];

impl Inject {
    /// Parses `inject = { header, format }`.
    pub fn parse(header: &str, format: &str) -> Result<Inject, String> {
        let token = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
        if header.is_empty() || !header.bytes().all(token) {
            return Err(format!("header {header:?} is not an HTTP header name"));
        }
        let header = header.to_ascii_lowercase();
        if ROUTING.contains(&header.as_str()) {
            return Err(format!(
                "header {header:?} routes or frames the request; name the header the host reads the credential from (Authorization)"
            ));
        }
        if format.matches("{}").count() != 1 {
            return Err(format!(
                "format {format:?} must hold the value's place, \"{{}}\", once (\"Bearer {{}}\", \"Basic USER:{{}}\")"
            ));
        }
        if format.bytes().any(|b| b.is_ascii_control()) {
            return Err(format!("format {format:?} holds a control character"));
        }
        if let Some(rest) = format.strip_prefix("Basic ") {
            let user = rest.strip_suffix(":{}").ok_or_else(|| {
                format!("format {format:?}: a Basic credential is written \"Basic USER:{{}}\"")
            })?;
            if user.is_empty() || user.contains(':') || user.contains('{') {
                return Err(format!(
                    "format {format:?}: name the user before \":{{}}\" (git's is often x-access-token)"
                ));
            }
            return Ok(Inject::Basic {
                header,
                user: user.to_owned(),
            });
        }
        let (before, after) = format.split_once("{}").unwrap_or((format, ""));
        Ok(Inject::Template {
            header,
            before: before.to_owned(),
            after: after.to_owned(),
        })
    }

    /// The header's name, lower case.
    pub fn header(&self) -> &str {
        match self {
            Inject::Template { header, .. } | Inject::Basic { header, .. } => header,
        }
    }

    /// The header's value carrying `value`.
    pub fn render(&self, value: &[u8]) -> Vec<u8> {
        match self {
            Inject::Template { before, after, .. } => {
                [before.as_bytes(), value, after.as_bytes()].concat()
            }
            Inject::Basic { user, .. } => {
                let pair = [user.as_bytes(), b":", value].concat();
                let encoded = base64::engine::general_purpose::STANDARD.encode(pair);
                format!("Basic {encoded}").into_bytes()
            }
        }
    }
}

/// One `[[terminal.credentials]]` entry, read.
#[derive(Debug, Clone)]
pub struct CredentialSpec {
    /// The variable commands see (holding the placeholder).
    pub name: String,
    /// Where the value comes from.
    pub source: Source,
    /// The value, as read at load.
    pub value: Secret,
    /// The hosts it is sent to (each also allowed by `[terminal.network]`).
    pub hosts: Vec<DomainRule>,
    /// How it is sent.
    pub inject: Inject,
}

/// Where an ssh key comes from.
#[derive(Debug, Clone)]
pub enum SshKeySource {
    /// `key_file` (0600, outside every root, read path and write path), read at load, and
    /// its passphrase when the key is encrypted (`passphrase_file`, checked as the key).
    File {
        path: PathBuf,
        key: Secret,
        passphrase: Option<Secret>,
    },
    /// `agent` and `fingerprint`: a key the operator's running agent holds (its socket out
    /// of the commands' reach); the server's agent asks it to sign what it decided to.
    Agent {
        socket: PathBuf,
        fingerprint: String,
    },
}

/// `[[terminal.credentials]] kind = "ssh"`: a private key the server's own agent holds
/// (issue 54); commands reach it only through `SSH_AUTH_SOCK`, never its file.
#[derive(Debug, Clone)]
pub struct SshKeySpec {
    /// How the policy, the trail and refusals name it.
    pub name: String,
    /// Where the key is: a file the server reads, or the operator's running agent.
    pub source: SshKeySource,
    /// Whether the agent signs git objects with it (`sign = true`: `git commit -S` with
    /// `gpg.format = ssh`).
    pub sign: bool,
    /// The hosts (and ports) commands may log in to with it, through the proxy.
    pub hosts: Vec<(String, u16)>,
    /// The host keys the operator pinned for those hosts, as `known_hosts` lines: the only
    /// keys an SSH session of this key may be bound to.
    pub known_hosts: Vec<String>,
}

/// A host as `known_hosts` and the ssh agent's bindings name it: `name`, or
/// `[name]:port` off port 22.
pub fn known_host_name(host: &str, port: u16) -> String {
    if port == 22 {
        host.to_owned()
    } else {
        format!("[{host}]:{port}")
    }
}

/// The credentials of a terminal policy and what comes with them.
#[derive(Debug, Clone, Default)]
pub struct Credentials {
    /// `[[terminal.credentials]]` of the default kind: tokens the proxy adds.
    pub specs: Vec<CredentialSpec>,
    /// `[[terminal.credentials]] kind = "ssh"`: keys the server's agent holds.
    pub ssh: Vec<SshKeySpec>,
    /// `[[terminal.network.rules]]`: methods and paths allowed on credential hosts.
    pub rules: Vec<HostRule>,
    /// `[terminal.network] upstream_ca_file`: certificates trusted for upstream hosts besides
    /// the system's roots (a private CA; a test's origin).
    pub upstream_ca_file: Option<PathBuf>,
}

/// Type prefixes of well-known tokens, longest first: a placeholder copies one of these and
/// nothing else of the value, so that tools that check a token's type accept it.
pub const KNOWN_PREFIXES: &[&str] = &[
    "github_pat_",
    "sk-proj-",
    "sk-ant-",
    "sk_live_",
    "sk_test_",
    "rk_live_",
    "rk_test_",
    "dop_v1_",
    "glpat-",
    "gldt-",
    "glrt-",
    "shpat_",
    "xoxb-",
    "xoxp-",
    "pypi-",
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "npm_",
    "hf_",
    "sk-",
];

/// The value's type prefix, when it starts with a known one (see [`KNOWN_PREFIXES`]).
pub fn type_prefix(value: &[u8]) -> &[u8] {
    KNOWN_PREFIXES
        .iter()
        .find(|p| value.starts_with(p.as_bytes()))
        .map_or(&value[..0], |p| &value[..p.len()])
}

/// A value as read: the trailing line end dropped; one non-empty line of printable ASCII.
pub fn value_of(mut bytes: Vec<u8>) -> Result<Secret, String> {
    while bytes.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
        bytes.pop();
    }
    if bytes.len() < 8 {
        return Err("a credential holds at least 8 characters".into());
    }
    if !bytes.iter().all(|b| b.is_ascii_graphic()) {
        return Err("a credential is one line of printable characters, without spaces".into());
    }
    Ok(Secret(bytes))
}
