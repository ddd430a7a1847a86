//! `safe-mcp init`: writes a commented, working policy for one project and prints the MCP
//! client configuration that starts the server with it.
//!
//! Owns the first step of a new user: a policy they did not have to write, which `policy
//! check` accepts and the server runs as written. The jail is the project directory (the
//! current one unless `--jail` says otherwise); the policy goes outside it
//! (`$XDG_CONFIG_HOME/safe-mcp/<project>.toml` unless `--output` says otherwise), with the
//! audit trail beside it. It never overwrites a file, and a policy that does not load is
//! removed again with the reason.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use safe_mcp_core::config::{Section, profile_names};

use crate::exit::{fatal, say};

/// Runs `init` with the given profiles, jail and output.
pub(crate) fn run(profiles: &[String], jail: Option<&Path>, output: Option<&Path>) -> ExitCode {
    match write_policy(profiles, jail, output) {
        Ok(path) => {
            let exe = std::env::current_exe()
                .map(|p| p.display().to_string())
                .unwrap_or_else(|_| "safe-mcp".into());
            say!("wrote {}", path.display());
            say!(
                "check it:  safe-mcp policy check --config {}",
                path.display()
            );
            let name = server_name(&path);
            say!("{}", client_config(&exe, &path, &client_env(), &name));
            ExitCode::SUCCESS
        }
        Err(e) => fatal(e),
    }
}

/// The policy `terminal --jail DIR` serves: the one `init` wrote for `jail` at the default
/// place, written now (no profiles) if there is none. Reported on stderr, since stdout
/// carries MCP. An existing file there that names another jail is refused, not served: two
/// projects of one name would otherwise share a policy. This is how a bundle or a registry
/// entry starts the server with nothing but a directory; the operator edits the file to
/// allow more.
pub(crate) fn policy_for_jail(jail: &Path) -> Result<PathBuf, String> {
    let canonical = std::fs::canonicalize(jail)
        .ok()
        .filter(|j| j.is_dir())
        .ok_or_else(|| format!("--jail {}: not an existing directory", jail.display()))?;
    let path = default_output(&canonical)?;
    if std::fs::symlink_metadata(&path).is_err() {
        let written = write_policy(&[], Some(&canonical), None)?;
        eprintln!(
            "safe-mcp: wrote the policy for {} to {} (edit it to allow more)",
            canonical.display(),
            written.display()
        );
        return Ok(written);
    }
    let policy = crate::cli::load(Some(&path), Section::Terminal)?;
    let named = policy.terminal.map(|t| t.jail_root);
    if named.as_deref() != Some(canonical.as_path()) {
        return Err(format!(
            "{} is the policy of another jail ({}), not of {}; pass --config with this project's policy, or move that file",
            path.display(),
            named.map_or_else(|| "none".into(), |j| j.display().to_string()),
            canonical.display()
        ));
    }
    Ok(path)
}

/// The name a client knows this project's server by: `safe-terminal-<policy file stem>`
/// (the project's directory name, as `init` names the file), in the characters every
/// client accepts in a server name; so two projects' servers never collide in a client.
pub(crate) fn server_name(policy: &Path) -> String {
    let stem: String = policy
        .file_stem()
        .map(|s| s.to_string_lossy().to_lowercase())
        .unwrap_or_default()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let stem = stem.trim_matches('-');
    if stem.is_empty() {
        "safe-terminal".to_owned()
    } else {
        format!("safe-terminal-{stem}")
    }
}

/// The client configuration for the server named `name`, started as `exe terminal
/// --config policy` with `env` and nothing else, in each client's own form. The README
/// shows the same lines (a test keeps the two one story).
pub(crate) fn client_config(
    exe: &str,
    policy: &Path,
    env: &[(String, String)],
    name: &str,
) -> String {
    let policy = policy.display().to_string();
    let args = ["terminal", "--config", policy.as_str()];
    let env_map: serde_json::Map<String, serde_json::Value> = env
        .iter()
        .map(|(k, v)| (k.clone(), v.clone().into()))
        .collect();
    let json = |root: &str, extra: Option<(&str, &str)>| {
        let mut server = serde_json::json!({"command": exe, "args": args, "env": env_map});
        if let Some((k, v)) = extra {
            server[k] = v.into();
        }
        let doc = serde_json::json!({ root: { name: server } });
        serde_json::to_string_pretty(&doc).unwrap_or_default()
    };
    let flags = |flag: &str| {
        env.iter()
            .map(|(k, v)| format!("{flag} {}", shell_word(&format!("{k}={v}"))))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let command = format!("{} {}", shell_word(exe), args.map(shell_word).join(" "));
    format!(
        "MCP client configuration (the server is named {name}):\n\
         Claude Code:  claude mcp add --scope user {name} {} -- {command}\n\
         Codex:        codex mcp add {name} {} -- {command}\n\
         Gemini CLI:   gemini mcp add --scope user {} {name} {command}\n\
         Claude Desktop, Cursor (mcpServers):\n{}\n\
         VS Code (mcp.json, servers):\n{}",
        flags("-e"),
        flags("--env"),
        flags("-e"),
        json("mcpServers", None),
        json("servers", Some(("type", "stdio")))
    )
}

/// `s` as one shell word: unchanged when it holds nothing a shell reads, else in single
/// quotes.
fn shell_word(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./=:,@+%".contains(&b))
    {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// The environment the printed client configuration starts the server with: this user's
/// PATH and HOME (the profiles find the toolchains through them), and nothing else.
fn client_env() -> Vec<(String, String)> {
    ["PATH", "HOME"]
        .into_iter()
        .filter_map(|name| {
            std::env::var(name)
                .ok()
                .filter(|v| !v.is_empty())
                .map(|v| (name.to_owned(), v))
        })
        .collect()
}

fn write_policy(
    profiles: &[String],
    jail: Option<&Path>,
    output: Option<&Path>,
) -> Result<PathBuf, String> {
    let known: Vec<&str> = profile_names().collect();
    if let Some(bad) = profiles.iter().find(|p| !known.contains(&p.as_str())) {
        return Err(format!(
            "no profile {bad:?}; the built-in ones are {}",
            known.join(", ")
        ));
    }
    let jail = match jail {
        Some(j) => j.to_path_buf(),
        None => std::env::current_dir().map_err(|e| format!("the current directory: {e}"))?,
    };
    let jail = std::fs::canonicalize(&jail)
        .ok()
        .filter(|j| j.is_dir())
        .ok_or_else(|| format!("--jail {}: not an existing directory", jail.display()))?;
    if jail == Path::new("/") {
        return Err("the filesystem root cannot be a jail".into());
    }
    let output = match output {
        Some(o) => o.to_path_buf(),
        None => default_output(&jail)?,
    };
    let parent = output
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    make_private_dir(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
    let parent = std::fs::canonicalize(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
    if parent.starts_with(&jail) {
        return Err(format!(
            "the policy {} would lie inside the jail {}, where the model could rewrite it; choose --output outside it",
            output.display(),
            jail.display()
        ));
    }
    let path = parent.join(output.file_name().ok_or("--output names no file")?);
    // The profiles' caches, named in the file: the client starts the server with another
    // environment than this shell's (no XDG_CACHE_HOME, say), and the policy must load there.
    let cache_dir = client_env()
        .iter()
        .find(|(k, _)| k == "HOME")
        .map(|(_, home)| PathBuf::from(home).join(".cache/safe-mcp"))
        .ok_or("HOME is not set: the profiles' caches need a home (or pass --output and edit cache_dir)")?;
    // The trail beside the policy, named after it: two projects' servers never share one
    // trail (nor, so, one approval desk).
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "policy".into());
    let text = policy_text(
        &jail,
        profiles,
        &git_identity(),
        &cache_dir,
        &stem,
        jail_bytes(&jail),
    );
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&path)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::AlreadyExists => format!(
                "{} exists; init never overwrites a policy (choose another --output, or edit it)",
                path.display()
            ),
            _ => format!("{}: {e}", path.display()),
        })?;
    file.write_all(text.as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(|e| format!("{}: {e}", path.display()))?;
    // Loaded as the client will start the server: with the environment the snippet names,
    // nothing else.
    let env = client_env();
    let lookup = |name: &str| {
        env.iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| std::ffi::OsString::from(v))
    };
    if let Err(e) = safe_mcp_core::load::load_policy(Some(&path), &lookup, Section::Terminal) {
        let _ = std::fs::remove_file(&path);
        return Err(format!(
            "the policy it would write does not load ({e}); nothing was written"
        ));
    }
    Ok(path)
}

/// `$XDG_CONFIG_HOME/safe-mcp/<jail name>.toml`, else `$HOME/.config/safe-mcp/...`.
fn default_output(jail: &Path) -> Result<PathBuf, String> {
    let absolute = |name: &str| {
        std::env::var_os(name)
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
    };
    let base = absolute("XDG_CONFIG_HOME")
        .or_else(|| absolute("HOME").map(|h| h.join(".config")))
        .ok_or("neither XDG_CONFIG_HOME nor HOME is set; pass --output")?;
    let name = jail
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "project".into());
    Ok(base.join("safe-mcp").join(format!("{name}.toml")))
}

fn make_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

/// The user's git identity (`git config user.name` / `user.email`), or a stand-in that says
/// what it is: commits need one, and the commands' HOME holds no git config.
fn git_identity() -> (String, String) {
    let ask = |key: &str| {
        std::process::Command::new("git")
            .args(["config", "--get", key])
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
            .filter(|v| !v.is_empty() && !v.contains(['"', '\\', '\n']))
    };
    (
        ask("user.name").unwrap_or_else(|| "safe-mcp agent".into()),
        ask("user.email").unwrap_or_else(|| "agent@safe-mcp.invalid".into()),
    )
}

/// `s` as a TOML basic string: JSON's string escapes are a subset of TOML's.
fn toml_string(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}

/// The bound `init` writes for what the jail and the caches may hold: the lesser of 16 GiB
/// (a Rust project's `target/` of several GiB fits) and half the space free on the jail's
/// file system now, in whole GiB and at least one, so that sandboxed code cannot fill the
/// disk the host shares. Measuring it costs a walk in the background after calls, at most a
/// tenth of a core (docs/PERFORMANCE.md).
fn jail_bytes(jail: &Path) -> u64 {
    const GIB: u64 = 1 << 30;
    let free = rustix::fs::statvfs(jail)
        .map(|st| st.f_bavail.saturating_mul(st.f_frsize))
        .unwrap_or(u64::MAX);
    ((free / 2).min(16 * GIB) / GIB).max(1) * GIB
}

fn policy_text(
    jail: &Path,
    profiles: &[String],
    identity: &(String, String),
    cache_dir: &Path,
    stem: &str,
    jail_bytes: u64,
) -> String {
    let trail = toml_string(&format!("{stem}.audit.jsonl"));
    let cache_dir = toml_string(&cache_dir.to_string_lossy());
    let list = profiles
        .iter()
        .map(|p| toml_string(p))
        .collect::<Vec<_>>()
        .join(", ");
    let jail = toml_string(&jail.to_string_lossy());
    let (name, email) = (toml_string(&identity.0), toml_string(&identity.1));
    let gib = jail_bytes >> 30;
    format!(
        r#"# safe-mcp policy, written by `safe-mcp init`. Check it with `safe-mcp policy check`.
# Reference: docs/POLICY.md in safe-mcp's source. Relative paths resolve against this file's
# directory.

# Every attempt is recorded here before anything runs (a hash chain; `safe-mcp audit
# verify` checks it). Keep it outside the jail.
audit_log = {trail}

[terminal]
# The directory the model works in: commands run here and may write only here (plus
# their private TMPDIR and the profiles' caches).
jail_root = {jail}

# Built-in packs: git, rust, python, node, readonly. Each adds its commands, argument
# rules, the toolchain it finds on this machine (read-only) and a cache of its own;
# `safe-mcp policy check` lists what each one added.
profiles = [{list}]
# Where the profiles keep their caches (CARGO_HOME, the pip and npm caches): one set per
# jail beneath it. Named here because the client may start the server without your shell's
# XDG_CACHE_HOME.
cache_dir = {cache_dir}

# Commands beyond the profiles, by bare name. Everything not listed is refused.
[terminal.allowlist]
commands = ["ls", "cat", "head", "tail", "wc", "grep", "find", "sort", "diff", "mkdir", "touch", "echo"]

[terminal.limits]
timeout_seconds = 300          # a build or a test suite can take minutes
cpu_seconds = 1200             # CPU time per process: a compiler on 4 cores for the whole timeout
max_output_bytes = 12288       # per stream: ~5k tokens; past it the start, the end and the lines
                               # that look like errors are kept (a client holds ~25k tokens a result)
jail_bytes = {jail_bytes}  # what the jail and the caches may hold ({gib} GiB: the lesser of 16 GiB
                               # and half the disk's free space when init ran); 0: no bound

# Variables every command gets. git needs an identity to commit (the commands' HOME holds no
# git config); a name that looks like a secret would be readable by the model.
[terminal.env]
set = {{ GIT_AUTHOR_NAME = {name}, GIT_AUTHOR_EMAIL = {email}, GIT_COMMITTER_NAME = {name}, GIT_COMMITTER_EMAIL = {email} }}

[terminal.sandbox]
mode = "enforce"               # refuse to run where the kernel cannot confine
namespaces = "auto"            # each command in a private view of the machine where possible
network = false                # commands get no network

# The files server (`safe-mcp files`, the safe organizer) tidies one folder of its own;
# to use it with this policy, uncomment and name that folder (outside the jail), and add
# it to the client as for the terminal with `files` instead of `terminal`.
# [files]
# workspace_root = "/path/to/Downloads"
# journal = "files-journal.jsonl"     # beside this policy, outside every root
"#
    )
}
