//! `[[gateway.servers]]`: the MCP servers the terminal server runs confined, read and checked.
//!
//! Owns how an entry becomes the policy its process runs under. The entry is not a second
//! kind of policy: its keys replace those of the file's own `[terminal]` section (the
//! program alone on the allowlist, with the entry's profiles and `exec`; its write and read
//! paths; its network and credentials; its environment; no argument rules, examples or
//! project file), and the result goes through the same loader as the terminal's own, so every
//! check a command's policy gets (the trail out of reach, write paths outside protected
//! places, credentials' files, domains) holds for the server by construction. It must never
//! start anything.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::error::ConfigError;
use super::raw::RawPolicy;
use safe_mcp_rules::config::types::{GatewayServer, Policy};
use safe_mcp_rules::gateway::{ArgCheck, ArgKind, NamePattern, ToolPolicy};

/// Programs that fetch or resolve a package at start, from the working directory (the jail).
const RUNNERS: &[&str] = &["npx", "pnpx", "bunx", "uvx", "pipx"];
/// What a bare operand names when it is a script to run (resolved against the jail).
const SCRIPT_SUFFIXES: &[&str] = &[".js", ".mjs", ".cjs", ".ts", ".py", ".rb", ".pl", ".sh"];

/// The largest result forwarded by default (1 MiB).
const DEFAULT_RESULT_BYTES: usize = 1024 * 1024;
/// How long a call waits for its answer by default.
const DEFAULT_CALL_SECONDS: u64 = 120;

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawGateway {
    #[serde(default)]
    servers: Vec<RawServer>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawServer {
    name: String,
    command: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    #[serde(default)]
    profiles: Vec<String>,
    #[serde(default)]
    exec: Vec<String>,
    #[serde(default)]
    write_paths: Vec<PathBuf>,
    #[serde(default)]
    read_paths: Vec<PathBuf>,
    network: Option<toml::Value>,
    credentials: Option<toml::Value>,
    #[serde(default)]
    tools: RawTools,
    max_result_bytes: Option<usize>,
    call_timeout_seconds: Option<u64>,
    #[serde(default)]
    allow_sampling: bool,
    #[serde(default)]
    allow_elicitation: bool,
    #[serde(default)]
    resources: bool,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawTools {
    #[serde(default)]
    allow: Vec<String>,
    #[serde(default)]
    deny: Vec<String>,
    #[serde(default)]
    confirm: Vec<String>,
    #[serde(default)]
    args: Vec<RawArg>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawArg {
    tool: String,
    pointer: String,
    kind: String,
    pattern: Option<String>,
}

fn invalid(key: String, message: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        key,
        message: message.into(),
    }
}

/// How a narrowed document becomes a policy: the loader's own build, as the file's.
pub(super) type Build<'a> = &'a dyn Fn(RawPolicy) -> Result<Policy, ConfigError>;

/// The `[[gateway.servers]]` of the document `doc`, each with the policy its process runs
/// under, made by `build` as the file's own.
pub(super) fn servers(
    doc: &toml::Table,
    build: Build<'_>,
) -> Result<Vec<GatewayServer>, ConfigError> {
    let Some(raw) = doc.get("gateway") else {
        return Ok(Vec::new());
    };
    let raw = RawGateway::deserialize(raw.clone())
        .map_err(|e| invalid("gateway".into(), e.to_string()))?;
    let mut seen = std::collections::BTreeSet::new();
    let mut out = Vec::new();
    for (i, server) in raw.servers.into_iter().enumerate() {
        let key = format!("gateway.servers[{i}]");
        if !safe_mcp_rules::gateway::valid_server_name(&server.name) {
            return Err(invalid(
                format!("{key}.name"),
                format!(
                    "{:?}: a server's name is 1 to 24 of a-z, 0-9 and '-' (it prefixes its tools' names)",
                    server.name
                ),
            ));
        }
        if !seen.insert(server.name.clone()) {
            return Err(invalid(
                format!("{key}.name"),
                format!("{:?} names two servers", server.name),
            ));
        }
        out.push(one(doc, build, &key, server)?);
    }
    Ok(out)
}

fn one(
    doc: &toml::Table,
    build: Build<'_>,
    key: &str,
    server: RawServer,
) -> Result<GatewayServer, ConfigError> {
    let program = server.command.first().cloned().unwrap_or_default();
    if !safe_mcp_rules::gateway::program_form(&program) {
        return Err(invalid(
            format!("{key}.command"),
            "give the program first: a bare name on the terminal's PATH, or an absolute path",
        ));
    }
    // Its code must not be what the model writes: it runs in the jail, so a file named
    // relative to it, or a runner that fetches or resolves packages from there, would be.
    let runner = Path::new(&program)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if RUNNERS.contains(&runner.as_str()) {
        return Err(invalid(
            format!("{key}.command"),
            format!(
                "{runner} fetches or resolves the server's package when it starts, from the jail the model writes; install the server (npm install --prefix DIR, a venv) outside the jail and give its entry script by absolute path"
            ),
        ));
    }
    for operand in &server.command[1..] {
        let relative = operand.contains('/') && !Path::new(operand).is_absolute();
        let bare_script =
            !operand.contains('/') && SCRIPT_SUFFIXES.iter().any(|s| operand.ends_with(s));
        if relative || bare_script {
            return Err(invalid(
                format!("{key}.command"),
                format!(
                    "{operand:?}: give the server's files by absolute path, outside the jail (it runs in the jail, where the model writes)"
                ),
            ));
        }
    }
    let tools = tool_policy(&server.tools, key)?;
    let terminal =
        narrowed(doc, &server, &program).map_err(|message| invalid(key.to_owned(), message))?;
    let mut narrowed_doc = doc.clone();
    narrowed_doc.remove("gateway");
    narrowed_doc.insert("terminal".into(), toml::Value::Table(terminal));
    let raw = RawPolicy::deserialize(toml::Value::Table(narrowed_doc))
        .map_err(|e| invalid(key.to_owned(), e.to_string()))?;
    let mut policy: Policy = build(raw).map_err(|e| invalid(key.to_owned(), e.to_string()))?;
    // A server's profiles give it their programs, helpers and read paths; their caches are
    // for a package manager the model runs, not for a running server, and are not its write
    // paths.
    if let Some(t) = policy.terminal.as_mut() {
        let caches: Vec<PathBuf> = t.caches.drain(..).map(|c| c.dir).collect();
        t.write_paths.retain(|w| !caches.contains(w));
    }
    Ok(GatewayServer {
        name: server.name,
        command: server.command,
        tools,
        max_result_bytes: server.max_result_bytes.unwrap_or(DEFAULT_RESULT_BYTES),
        call_timeout_seconds: server
            .call_timeout_seconds
            .unwrap_or(DEFAULT_CALL_SECONDS)
            .max(1),
        allow_sampling: server.allow_sampling,
        allow_elicitation: server.allow_elicitation,
        resources: server.resources,
        policy: Box::new(policy),
    })
}

/// The file's `[terminal]` section with the entry's keys in place of its own.
fn narrowed(doc: &toml::Table, server: &RawServer, program: &str) -> Result<toml::Table, String> {
    let mut t = match doc.get("terminal") {
        Some(toml::Value::Table(t)) => t.clone(),
        _ => {
            return Err(
                "[[gateway.servers]] runs under the [terminal] section's jail and sandbox; the policy has none (the flat layout is not read for a gateway)".into(),
            );
        }
    };
    let text = |s: &str| toml::Value::String(s.to_owned());
    let paths = |v: &[PathBuf]| {
        toml::Value::Array(
            v.iter()
                .map(|p| toml::Value::String(p.to_string_lossy().into_owned()))
                .collect(),
        )
    };
    let (name, dir) = match Path::new(program)
        .parent()
        .filter(|_| program.contains('/'))
    {
        Some(dir) => (
            Path::new(program)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            Some(dir.to_path_buf()),
        ),
        None => (program.to_owned(), None),
    };
    let commands: Vec<toml::Value> = std::iter::once(name.as_str())
        .chain(server.exec.iter().map(String::as_str))
        .map(text)
        .collect();
    let mut allowlist = toml::Table::new();
    allowlist.insert("commands".into(), toml::Value::Array(commands));
    t.insert("allowlist".into(), toml::Value::Table(allowlist));
    for gone in [
        "rules",
        "denylist",
        "examples",
        "drop_profile_rules",
        "credentials",
        "network",
        "write_paths",
        "profiles",
        "env",
    ] {
        t.remove(gone);
    }
    // The program is the operator's own argv, never the model's: it may run as the
    // interpreter it usually is (node, python), and nothing else may.
    let mut own = toml::Table::new();
    own.insert("command".into(), text(&name));
    own.insert("allow_interpreter".into(), toml::Value::Boolean(true));
    t.insert(
        "rules".into(),
        toml::Value::Array(vec![toml::Value::Table(own)]),
    );
    t.insert(
        "profiles".into(),
        toml::Value::Array(server.profiles.iter().map(|p| text(p)).collect()),
    );
    t.insert("write_paths".into(), paths(&server.write_paths));
    // The program's own directory leads PATH and is readable: the allowlist names it by
    // name, and the name must resolve to this file.
    if let Some(dir) = &dir {
        let mut path = vec![text(&dir.to_string_lossy())];
        if let Some(toml::Value::Array(old)) = t.get("path") {
            path.extend(old.iter().cloned());
        } else {
            path.extend(
                safe_mcp_rules::config::types::DEFAULT_PATH
                    .iter()
                    .map(|p| text(p)),
            );
        }
        t.insert("path".into(), toml::Value::Array(path));
    }
    let mut sandbox = match t.remove("sandbox") {
        Some(toml::Value::Table(s)) => s,
        _ => toml::Table::new(),
    };
    // The terminal's read paths (the defaults when it names none), then the entry's.
    let mut read = match sandbox.remove("read_paths") {
        Some(toml::Value::Array(a)) => a,
        _ => safe_mcp_rules::config::types::DEFAULT_READ_PATHS
            .iter()
            .map(|p| text(p))
            .collect(),
    };
    read.extend(server.read_paths.iter().map(|p| text(&p.to_string_lossy())));
    if let Some(dir) = &dir {
        read.push(text(&dir.to_string_lossy()));
    }
    sandbox.insert("read_paths".into(), toml::Value::Array(read));
    t.insert("sandbox".into(), toml::Value::Table(sandbox));
    let mut env = toml::Table::new();
    // Python does not import from its working directory (the jail) unless the entry says so.
    let mut set: toml::Table = server
        .env
        .iter()
        .map(|(k, v)| (k.clone(), text(v)))
        .collect();
    set.entry("PYTHONSAFEPATH").or_insert_with(|| text("1"));
    env.insert("set".into(), toml::Value::Table(set));
    t.insert("env".into(), toml::Value::Table(env));
    if let Some(network) = &server.network {
        t.insert("network".into(), network.clone());
    }
    if let Some(credentials) = &server.credentials {
        t.insert("credentials".into(), credentials.clone());
    }
    Ok(t)
}

/// The server's program and files lie where neither the model's commands nor any server may
/// write (`writable`: the jail, the terminal's write paths and caches, the server's own write
/// paths). The program's own directory is a read path of its view, bound read-only.
fn code_out_of_reach(key: &str, command: &[String], writable: &[&Path]) -> Result<(), ConfigError> {
    for part in command.iter().filter(|c| Path::new(c).is_absolute()) {
        let path = std::fs::canonicalize(part).unwrap_or_else(|_| PathBuf::from(part));
        if let Some(w) = writable.iter().find(|w| path.starts_with(w)) {
            return Err(invalid(
                format!("{key}.command"),
                format!(
                    "{part} lies in {}, where commands may write: a server's code must be out of the model's reach (install it elsewhere)",
                    w.display()
                ),
            ));
        }
    }
    Ok(())
}

/// The terminal's secrets a server's view must not show: its credentials' files, its ssh
/// keys' files and its agent's socket.
fn terminal_secrets(t: &safe_mcp_rules::config::types::TerminalPolicy) -> Vec<PathBuf> {
    use safe_mcp_rules::credentials::{Source, SshKeySource};
    let files = t.credentials.specs.iter().filter_map(|c| match &c.source {
        Source::File(p) => Some(p.clone()),
        Source::Env(_) => None,
    });
    let keys = t.credentials.ssh.iter().map(|k| match &k.source {
        SshKeySource::File { path, .. } => path.clone(),
        SshKeySource::Agent { socket, .. } => socket.clone(),
    });
    files.chain(keys).collect()
}

fn tool_policy(raw: &RawTools, key: &str) -> Result<ToolPolicy, ConfigError> {
    let names = |v: &[String]| v.iter().map(NamePattern::new).collect::<Vec<_>>();
    let mut args = Vec::new();
    for (i, a) in raw.args.iter().enumerate() {
        let at = format!("{key}.tools.args[{i}]");
        if !(a.pointer.is_empty() || a.pointer.starts_with('/')) {
            return Err(invalid(
                format!("{at}.pointer"),
                format!(
                    "{:?} is not a JSON pointer: it starts with '/', such as \"/path\" or \"/paths/*\"",
                    a.pointer
                ),
            ));
        }
        let kind = match (a.kind.as_str(), &a.pattern) {
            ("path", None) => ArgKind::Path,
            ("url", None) => ArgKind::Url,
            ("refuse", Some(p)) => ArgKind::Refuse(regex::Regex::new(p).map_err(|e| {
                invalid(
                    format!("{at}.pattern"),
                    format!("{p:?} does not compile: {e}"),
                )
            })?),
            ("refuse", None) => {
                return Err(invalid(
                    format!("{at}.pattern"),
                    "kind = \"refuse\" needs the pattern of values it refuses",
                ));
            }
            (other, _) => {
                return Err(invalid(
                    format!("{at}.kind"),
                    format!(
                        "{other:?}: the kinds are \"path\", \"url\" and \"refuse\" (with pattern)"
                    ),
                ));
            }
        };
        args.push(ArgCheck {
            tool: NamePattern::new(a.tool.clone()),
            pointer: a.pointer.clone(),
            kind,
        });
    }
    Ok(ToolPolicy {
        allow: names(&raw.allow),
        deny: names(&raw.deny),
        confirm: names(&raw.confirm),
        args,
    })
}

/// What each server gets is held against the terminal's policy: its write paths lie in the
/// jail or a terminal write path (where the terminal's holder keeps the protected paths and
/// every git directory); its code lies outside everything any command or server may write;
/// and none of its read paths shows a secret of the terminal's (a credential's file, an ssh
/// key, the agent's socket), which its own narrowed policy no longer names.
pub(super) fn against_terminal(
    main: &Policy,
    servers: &[GatewayServer],
) -> Result<(), ConfigError> {
    let Some(terminal) = &main.terminal else {
        return Ok(());
    };
    let secrets = terminal_secrets(terminal);
    for server in servers {
        let Some(narrowed) = &server.policy.terminal else {
            continue;
        };
        let key = format!("gateway.servers {}", server.name);
        for w in &narrowed.write_paths {
            let inside = w.starts_with(&terminal.jail_root)
                || terminal.write_paths.iter().any(|t| w.starts_with(t));
            if !inside {
                return Err(invalid(
                    format!("{key}.write_paths"),
                    format!(
                        "{} is outside the jail and the terminal's write_paths, where the protected paths are not held; give a path inside the jail, or add it to [terminal] write_paths first",
                        w.display()
                    ),
                ));
            }
        }
        let writable: Vec<&Path> = std::iter::once(terminal.jail_root.as_path())
            .chain(terminal.write_paths.iter().map(PathBuf::as_path))
            .chain(terminal.caches.iter().map(|c| c.dir.as_path()))
            .chain(narrowed.write_paths.iter().map(PathBuf::as_path))
            .collect();
        code_out_of_reach(&key, &server.command, &writable)?;
        for r in &narrowed.sandbox.read_paths {
            let real = std::fs::canonicalize(r).unwrap_or_else(|_| r.clone());
            if let Some(secret) = secrets
                .iter()
                .find(|s| s.starts_with(&real) || s.starts_with(r))
            {
                return Err(invalid(
                    format!("{key}.read_paths"),
                    format!(
                        "{} holds {}, a secret of the terminal's (a credential or an ssh key): the server could read it; name a narrower directory",
                        r.display(),
                        secret.display()
                    ),
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
