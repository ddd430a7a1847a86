//! `safe-mcp gateway`: the `[[gateway.servers]]` of a policy, written and shown.
//!
//! `add` is the gateway's `init`: it appends an entry for an installed server to the policy,
//! with the read paths its files need (a node package's `node_modules`, a venv's root, the
//! file's own directory otherwise) and the tools named with `--allow` (none by default: a
//! server's tools are denied until listed). The new text is loaded as the terminal server
//! would load it before anything is written: a policy that would not load is left as it
//! was, with the reason; one that does replaces the old at once (a crash leaves one or the
//! other, never half). `list` shows
//! each server's command, tools policy and confinement without starting anything. The
//! terminal server (`safe-mcp terminal`) runs the servers: there is no second process.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use safe_mcp_core::config::{ENV_POLICY_FILE, Section};

use crate::exit::{fatal, say};

/// What `gateway add` writes.
pub(crate) struct Add<'a> {
    /// The server's name (its tools' prefix).
    pub(crate) name: &'a str,
    /// Its argv.
    pub(crate) command: &'a [String],
    /// Profiles whose programs and read paths it gets (node, python).
    pub(crate) profiles: &'a [String],
    /// The tools the model may call.
    pub(crate) allow: &'a [String],
    /// Domains it may reach through the proxy.
    pub(crate) domains: &'a [String],
}

/// `safe-mcp gateway add`.
pub(crate) fn add(config: Option<&Path>, entry: &Add<'_>) -> ExitCode {
    let Some(path) = policy_path(config) else {
        return fatal(format!(
            "give the policy with --config (or {ENV_POLICY_FILE}); `safe-mcp init` writes one"
        ));
    };
    let before = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) => return fatal(format!("{}: {e}", path.display())),
    };
    // The jail: a read path inferred for the server never holds it (nor anything above it).
    let jail = super::load(Some(&path), Section::Terminal)
        .ok()
        .and_then(|p| p.terminal.map(|t| t.jail_root));
    let text = format!(
        "{}\n{}",
        before.trim_end(),
        entry_text(entry, jail.as_deref())
    );
    if let Err(e) = safe_mcp_core::load::policy_from_toml(
        &text,
        &path,
        &safe_mcp_core::config::ProcessEnv,
        Section::Terminal,
    ) {
        return fatal(format!("{e}\n(the policy is as it was: nothing was added)"));
    }
    if let Err(e) = replace(&path, &text) {
        return fatal(format!(
            "{}: {e} (the policy is as it was: nothing was added)",
            path.display()
        ));
    }
    say!("added the {} server to {}", entry.name, path.display());
    if entry.allow.is_empty() {
        say!(
            "its tools are denied until listed: add their names to [gateway.servers.tools] allow (\"*\" for all), then restart the terminal server"
        );
    }
    say!(
        "its tools are served by `safe-mcp terminal --config {}` as {}__<tool>",
        path.display(),
        entry.name
    );
    ExitCode::SUCCESS
}

/// Replaces the file at `path` (through a link, its target) with `text`: written beside it
/// with its mode and owner, made durable, renamed over it, the directory made durable.
fn replace(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
    let real = std::fs::canonicalize(path)?;
    let was = std::fs::metadata(&real)?;
    let (Some(dir), Some(name)) = (real.parent(), real.file_name()) else {
        return Err(std::io::Error::other("not a file's path"));
    };
    let temp = dir.join(format!(".{}.safe-mcp.tmp", name.to_string_lossy()));
    // What a killed add left behind; create_new then refuses anything put there since.
    let _ = std::fs::remove_file(&temp);
    let written = (|| {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(was.mode() & 0o777)
            .open(&temp)?;
        file.write_all(text.as_bytes())?;
        file.set_permissions(std::fs::Permissions::from_mode(was.mode() & 0o777))?;
        if rustix::process::geteuid().is_root() {
            std::os::unix::fs::fchown(&file, Some(was.uid()), Some(was.gid()))?;
        }
        file.sync_all()?;
        std::fs::rename(&temp, &real)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&temp);
        return written;
    }
    // Replaced: the rename stands whether or not the directory's fsync answers.
    let _ = std::fs::File::open(dir).and_then(|d| d.sync_all());
    Ok(())
}

/// The policy file `gateway` edits.
fn policy_path(config: Option<&Path>) -> Option<PathBuf> {
    config
        .map(Path::to_path_buf)
        .or_else(|| std::env::var_os(ENV_POLICY_FILE).map(PathBuf::from))
        .filter(|p| !p.as_os_str().is_empty())
}

/// A TOML basic string: JSON's escapes (`\"`, `\\`, `\n`, `\uXXXX`) are TOML's too.
fn quoted(text: &str) -> String {
    serde_json::Value::String(text.to_owned()).to_string()
}

fn list(items: impl IntoIterator<Item = String>) -> String {
    let items: Vec<String> = items.into_iter().map(|i| quoted(&i)).collect();
    format!("[{}]", items.join(", "))
}

/// The entry `add` appends, commented.
fn entry_text(entry: &Add<'_>, jail: Option<&Path>) -> String {
    let reads = read_paths(entry.command, jail);
    let mut text = format!(
        "\n# The {name} MCP server, run confined by the terminal server; its tools are served as\n# {name}__<tool>. Written by `safe-mcp gateway add`.\n[[gateway.servers]]\nname = {}\ncommand = {}\n",
        quoted(entry.name),
        list(entry.command.iter().cloned()),
        name = entry.name,
    );
    if !entry.profiles.is_empty() {
        text.push_str(&format!(
            "profiles = {}\n",
            list(entry.profiles.iter().cloned())
        ));
    }
    if !reads.is_empty() {
        text.push_str("# Its files, readable (never writable) in its view.\n");
        text.push_str(&format!(
            "read_paths = {}\n",
            list(reads.iter().map(|p| p.display().to_string()))
        ));
    }
    if !entry.domains.is_empty() {
        text.push_str(&format!(
            "\n# Its network: these names only, through the terminal's proxy.\n[gateway.servers.network]\nmode = \"allowlist\"\nallow_domains = {}\n",
            list(entry.domains.iter().cloned())
        ));
    }
    text.push_str(&format!(
        "\n# Which tools the model may call (none until listed; \"*\" for all), which it may never\n# call, and which a person approves each call of.\n[gateway.servers.tools]\nallow = {}\ndeny = []\nconfirm = []\n",
        list(entry.allow.iter().cloned())
    ));
    text
}

/// What a server's files need readable: for each absolute path of its argv that is a file
/// (a directory operand is data, such as a root it serves: never inferred), the topmost
/// `node_modules` above it (a node package imports its siblings), a venv's root for a venv's
/// script, or the file's own directory; never a system directory, nor one holding the jail.
fn read_paths(command: &[String], jail: Option<&Path>) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    for part in command
        .iter()
        .map(Path::new)
        .filter(|p| p.is_absolute() && p.is_file())
    {
        let modules = part
            .ancestors()
            .filter(|a| a.file_name().is_some_and(|n| n == "node_modules"))
            .last();
        let venv = part.ancestors().find(|a| a.join("pyvenv.cfg").is_file());
        let Some(dir) = modules.or(venv).or_else(|| part.parent()) else {
            continue;
        };
        let system = ["/", "/usr", "/usr/bin", "/bin", "/usr/local/bin"]
            .iter()
            .any(|d| dir == Path::new(d));
        let holds_jail = jail.is_some_and(|j| j.starts_with(dir));
        if !system && !holds_jail && !out.iter().any(|o| dir.starts_with(o)) {
            out.push(dir.to_path_buf());
        }
    }
    out
}

/// `safe-mcp gateway list`: each server of the policy, as the terminal would run it.
pub(crate) fn show(config: Option<&Path>) -> ExitCode {
    let policy = match super::load(config, Section::Terminal) {
        Ok(p) => p,
        Err(e) => return fatal(e),
    };
    if policy.gateway.is_empty() {
        say!("no [[gateway.servers]] in this policy (safe-mcp gateway add writes one)");
        return ExitCode::SUCCESS;
    }
    for server in &policy.gateway {
        let names = |v: &[safe_mcp_core::gateway::NamePattern]| -> Vec<String> {
            v.iter().map(|p| p.text().to_owned()).collect()
        };
        say!("{}: {}", server.name, server.command.join(" "));
        say!(
            "  tools: allow {:?}, deny {:?}, confirm {:?}, {} argument rule(s)",
            names(&server.tools.allow),
            names(&server.tools.deny),
            names(&server.tools.confirm),
            server.tools.args.len()
        );
        if let Some(t) = &server.policy.terminal {
            let programs: Vec<&String> = t.allow.iter().collect();
            let domains: Vec<String> = t.network.allow.iter().map(|d| d.text()).collect();
            say!("  programs its tree may run: {programs:?}");
            say!(
                "  writes: the jail {}{}",
                t.jail_root.display(),
                t.write_paths
                    .iter()
                    .map(|w| format!(", {}", w.display()))
                    .collect::<String>()
            );
            say!(
                "  network: {}{}",
                t.network.mode.as_str(),
                if domains.is_empty() {
                    String::new()
                } else {
                    format!(" {domains:?}")
                }
            );
        }
    }
    ExitCode::SUCCESS
}
