//! The policies and sessions many tests build: a sandbox's `[terminal]` table extended, a
//! profile named with a cache of the sandbox's own, python's sandbox, a session as another
//! user, and the small readers of a result.

use serde_json::{Value, json};

use super::support::{DEFAULT_ALLOW, Sandbox, Session};

/// A sandbox's policy built up from [`Sandbox::new`]'s defaults: the allowlist, the limits,
/// TOML after the `[terminal]` sub-tables, lines in the `[terminal]` table itself.
pub struct SandboxBuilder {
    allow: String,
    limits: String,
    fail_mode: String,
    extra: String,
    terminal: Vec<String>,
}

impl Sandbox {
    /// A sandbox allowing exactly `names`, with the `[terminal.limits]` lines `limits`.
    pub fn allowing(names: &[&str], limits: &str) -> Sandbox {
        Sandbox::builder().allow(names).limits(limits).build()
    }

    /// A builder whose `build()` with nothing set is `Sandbox::new("")`.
    pub fn builder() -> SandboxBuilder {
        SandboxBuilder {
            allow: DEFAULT_ALLOW.to_owned(),
            limits: "timeout_seconds = 10\nmax_output_bytes = 4096".to_owned(),
            fail_mode: "closed".to_owned(),
            extra: String::new(),
            terminal: Vec::new(),
        }
    }
}

impl SandboxBuilder {
    /// Allows exactly `names`.
    pub fn allow(mut self, names: &[&str]) -> Self {
        let quoted: Vec<String> = names.iter().map(|n| format!("\"{n}\"")).collect();
        self.allow = quoted.join(", ");
        self
    }

    /// Allows `names` on top of [`DEFAULT_ALLOW`].
    pub fn allow_more(self, names: &[&str]) -> Self {
        let more = Sandbox::builder().allow(names).allow;
        SandboxBuilder {
            allow: format!("{DEFAULT_ALLOW}, {more}"),
            ..self
        }
    }

    /// The `[terminal.limits]` lines.
    pub fn limits(mut self, lines: &str) -> Self {
        self.limits = lines.to_owned();
        self
    }

    /// `timeout_seconds` with a `max_output_bytes` of 64 KiB.
    pub fn roomy(self, timeout_seconds: u32) -> Self {
        self.limits(&format!(
            "timeout_seconds = {timeout_seconds}\nmax_output_bytes = 65536"
        ))
    }

    /// `audit_fail_mode` (`closed` unless set).
    pub fn fail_mode(mut self, mode: &str) -> Self {
        self.fail_mode = mode.to_owned();
        self
    }

    /// Names `profiles` in `[terminal]`, their caches in `cache_dir` (relative to the
    /// policy's folder, or absolute).
    pub fn profiles(self, profiles: &[&str], cache_dir: &str) -> Self {
        let list = Sandbox::builder().allow(profiles).allow;
        self.terminal(&format!("profiles = [{list}]\ncache_dir = \"{cache_dir}\""))
    }

    /// TOML (whole tables) added after the default `[terminal]` sub-tables.
    pub fn extra(mut self, toml: &str) -> Self {
        self.extra.push_str(toml);
        self.extra.push('\n');
        self
    }

    /// A `[terminal.sandbox]` table holding `lines`.
    pub fn sandbox(self, lines: &str) -> Self {
        self.extra(&format!("[terminal.sandbox]\n{lines}"))
    }

    /// A `[terminal.sandbox]` table setting `namespaces`.
    pub fn namespaces(self, namespaces: &str) -> Self {
        self.sandbox(&format!("namespaces = \"{namespaces}\""))
    }

    /// `lines` added to the `[terminal]` table itself.
    pub fn terminal(mut self, lines: &str) -> Self {
        self.terminal.push(lines.to_owned());
        self
    }

    /// The sandbox, its policy written.
    pub fn build(self) -> Sandbox {
        let sb = Sandbox::with(&self.allow, &self.limits, &self.fail_mode, &self.extra);
        if !self.terminal.is_empty() {
            in_terminal_table(&sb, &self.terminal.join("\n"));
        }
        sb
    }
}

/// A `[terminal.env]` table that sets git's author and committer to `name` <`email`>.
pub(super) fn git_env(name: &str, email: &str) -> String {
    format!(
        "[terminal.env]\nset = {{ GIT_AUTHOR_NAME = \"{name}\", GIT_AUTHOR_EMAIL = \"{email}\", GIT_COMMITTER_NAME = \"{name}\", GIT_COMMITTER_EMAIL = \"{email}\" }}\n"
    )
}

/// The sandbox's policy with `lines` added to its `[terminal]` table.
pub(super) fn in_terminal_table(sb: &Sandbox, lines: &str) {
    let text = std::fs::read_to_string(&sb.policy).unwrap().replacen(
        "jail_root = \"jail\"",
        &format!("jail_root = \"jail\"\n{lines}"),
        1,
    );
    std::fs::write(&sb.policy, text).unwrap();
}

/// Names `profile` in the sandbox's `[terminal]`, with a profile cache of the sandbox's own.
pub(super) fn with_profile(sb: &Sandbox, profile: &str) {
    in_terminal_table(
        sb,
        &format!(
            "profiles = [\"{profile}\"]\ncache_dir = \"{}/cache\"",
            sb.base().display()
        ),
    );
}

/// A result's `detail.stdout`, or "" where there is none.
pub(super) fn stdout(r: &Value) -> &str {
    r["detail"]["stdout"].as_str().unwrap_or_default()
}

/// A result's `detail.stderr`, or "" where there is none.
pub(super) fn stderr(r: &Value) -> &str {
    r["detail"]["stderr"].as_str().unwrap_or_default()
}

/// A session whose server has `path` and this test's HOME, so that the profiles find the
/// toolchains as they would for an operator.
pub(super) async fn session_with(sb: &Sandbox, path: &str, uid: Option<u32>) -> Session {
    let home = std::env::var("HOME").unwrap_or_default();
    match uid {
        None => {
            let path = path.to_owned();
            Session::start(&sb.policy, |c| {
                c.env("PATH", path).env("HOME", home);
            })
            .await
        }
        Some(uid) => sb.session_as_with_path(uid, Some(path)).await,
    }
}

/// Every entry beneath `dir` (not following links).
pub(super) fn walkdir(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(p.clone());
            }
            out.push(p);
        }
    }
    out
}

/// A sandbox allowing python3 (an interpreter, so only the kernel stands in its way) in
/// `namespaces`, with `extra` TOML.
pub(super) fn python_sandbox(namespaces: &str, extra: &str) -> Sandbox {
    Sandbox::with(
        "\"python3\", \"echo\"",
        "timeout_seconds = 20\nmax_output_bytes = 65536",
        "closed",
        &format!("[terminal.sandbox]\nnamespaces = \"{namespaces}\"\n{extra}"),
    )
}

pub(super) async fn python(s: &Session, script: &str) -> String {
    let r = s
        .call("run_command", json!({"command": ["python3", "-c", script]}))
        .await;
    assert_eq!(r["code"], "OK", "{r}");
    format!(
        "{}{}",
        stdout(&r),
        r["detail"]["stderr"].as_str().unwrap_or_default()
    )
}

/// A cargo project `proj` in `dir`: a library whose `two()` has a passing test, and a
/// `.gitignore` for `target/`.
pub(super) fn cargo_project(dir: &std::path::Path) {
    std::fs::create_dir_all(dir.join("src")).unwrap();
    for (name, text) in [
        (
            "Cargo.toml",
            "[package]\nname = \"proj\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
        ),
        (
            "src/lib.rs",
            "pub fn two() -> u32 { 2 }\n#[test]\nfn is_two() { assert_eq!(two(), 2); }\n",
        ),
        (".gitignore", "target/\n"),
    ] {
        std::fs::write(dir.join(name), text).unwrap();
    }
}
