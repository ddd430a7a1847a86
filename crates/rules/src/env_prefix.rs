//! `NAME=value cmd`: environment prefixes a model may put before a command.
//!
//! Models write `RUST_BACKTRACE=1 cargo test` or `NODE_ENV=test npm test` constantly, as a
//! compiler's own advice says to. A prefix is accepted for a name on the safe list (the
//! defaults below, plus `[terminal.env] prefix_allow`), and refused, naming the rule, for a
//! name that changes what runs or where it reaches (the loader's `LD_*`, `PATH`, proxies,
//! git's hooks and programs, pagers and editors, interpreters' startup options, compilers
//! and wrappers); any other name is refused with the key that would allow it. The value is
//! passed literally (no expansion). It decides only; the verdict's environment carries the
//! accepted ones to the executor, under the catalog's hardening, which wins.

/// Names a prefix may set without the operator's word: output, logging, test and locale
/// switches that change no program and no destination.
pub const DEFAULT_ALLOWED: &[&str] = &[
    "RUST_BACKTRACE",
    "RUST_LOG",
    "RUST_TEST_THREADS",
    "RUST_MIN_STACK",
    "CARGO_TERM_COLOR",
    "CARGO_INCREMENTAL",
    "NO_COLOR",
    "FORCE_COLOR",
    "CLICOLOR",
    "CI",
    "TZ",
    "LANG",
    "LC_ALL",
    "NODE_ENV",
    "PYTHONUNBUFFERED",
    "PYTHONDONTWRITEBYTECODE",
    "PYTHONHASHSEED",
    "COLUMNS",
    "LINES",
    "DEBUG",
    "VERBOSE",
];

/// Why `name` may never be a prefix (and never be allowed by `prefix_allow`): it changes
/// what runs or where it reaches. `None` for any other name.
pub fn dangerous(name: &str) -> Option<&'static str> {
    const EXACT: &[(&str, &str)] = &[
        ("PATH", "chooses the programs that run"),
        ("HOME", "points programs at another configuration"),
        ("TMPDIR", "moves the call's private temporary directory"),
        ("TMP", "moves the call's private temporary directory"),
        ("TEMP", "moves the call's private temporary directory"),
        ("SHELL", "names a program that tools start"),
        ("PAGER", "names a program that tools start"),
        ("EDITOR", "names a program that tools start"),
        ("VISUAL", "names a program that tools start"),
        ("BROWSER", "names a program that tools start"),
        ("LESSOPEN", "names a program that less starts"),
        ("LESSCLOSE", "names a program that less starts"),
        ("MANPAGER", "names a program that man starts"),
        ("MANOPT", "passes options to man"),
        ("BASH_ENV", "names a script that bash runs first"),
        ("ENV", "names a script that sh runs first"),
        ("PYTHONSTARTUP", "names a script that python runs first"),
        ("PYTHONPATH", "chooses the modules python imports"),
        ("PYTHONHOME", "chooses the python that runs"),
        ("NODE_OPTIONS", "passes options (--require) to node"),
        ("NODE_PATH", "chooses the modules node loads"),
        ("PERL5OPT", "passes options to perl"),
        ("PERL5LIB", "chooses the modules perl loads"),
        ("RUBYOPT", "passes options to ruby"),
        ("RUBYLIB", "chooses the modules ruby loads"),
        ("JAVA_TOOL_OPTIONS", "passes options (agents) to java"),
        ("_JAVA_OPTIONS", "passes options (agents) to java"),
        ("RUSTFLAGS", "passes options (a linker) to rustc"),
        ("RUSTDOCFLAGS", "passes options to rustdoc"),
        ("RUSTC", "chooses the compiler that runs"),
        ("RUSTDOC", "chooses the program that runs"),
        ("CARGO_HOME", "points cargo at another configuration"),
        ("CC", "chooses the compiler build scripts run"),
        ("CXX", "chooses the compiler build scripts run"),
        ("LD", "chooses the linker that runs"),
        ("AR", "chooses the program build scripts run"),
        ("MAKEFLAGS", "passes options to make"),
        ("GOFLAGS", "passes options (-toolexec) to go"),
        ("SSL_CERT_FILE", "changes which servers are trusted"),
        ("SSL_CERT_DIR", "changes which servers are trusted"),
        ("CURL_CA_BUNDLE", "changes which servers are trusted"),
        ("REQUESTS_CA_BUNDLE", "changes which servers are trusted"),
        ("NODE_EXTRA_CA_CERTS", "changes which servers are trusted"),
    ];
    if let Some((_, why)) = EXACT.iter().find(|(n, _)| *n == name) {
        return Some(why);
    }
    let upper = name.to_ascii_uppercase();
    if name.starts_with("LD_") {
        Some("changes what the dynamic loader loads")
    } else if upper.ends_with("_PROXY") {
        Some("changes where the network goes")
    } else if name.starts_with("GIT_") {
        Some("configures git's programs, hooks and config")
    } else if upper.ends_with("_WRAPPER") || upper.ends_with("_RUNNER") {
        Some("wraps the programs that run")
    } else if name.starts_with("CARGO_")
        && name != "CARGO_TERM_COLOR"
        && name != "CARGO_INCREMENTAL"
    {
        Some("configures cargo, which can name programs to run")
    } else if name.starts_with("npm_config_") || name.starts_with("NPM_CONFIG_") {
        Some("configures npm, which can name programs to run")
    } else {
        None
    }
}

/// The verdict on a prefix `name`: `Ok` on the safe list (the defaults or `extra`), else
/// why not, with what to do instead.
pub fn judge(name: &str, extra: &[String]) -> Result<(), String> {
    if let Some(why) = dangerous(name) {
        return Err(format!(
            "`{name}=…` before a command is refused: {name} {why}; the operator sets such variables in [terminal.env] set, if at all"
        ));
    }
    if DEFAULT_ALLOWED.contains(&name) || extra.iter().any(|e| e == name) {
        return Ok(());
    }
    Err(format!(
        "`{name}=…` before a command is refused: {name} is not on the list of variables a command may set ({}); the operator can add it to [terminal.env] prefix_allow",
        DEFAULT_ALLOWED.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_safe_list_passes_and_what_changes_what_runs_does_not() {
        for name in ["RUST_BACKTRACE", "NODE_ENV", "PYTHONUNBUFFERED", "TZ"] {
            assert_eq!(judge(name, &[]), Ok(()), "{name}");
        }
        for name in [
            "LD_PRELOAD",
            "PATH",
            "HOME",
            "https_proxy",
            "GIT_SSH_COMMAND",
            "GIT_CONFIG_GLOBAL",
            "PAGER",
            "BASH_ENV",
            "NODE_OPTIONS",
            "RUSTC_WRAPPER",
            "CARGO_BUILD_RUSTC_WRAPPER",
            "CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUNNER",
            "RUSTFLAGS",
            "PYTHONSTARTUP",
        ] {
            let why = judge(name, &["LD_PRELOAD".into()]).unwrap_err();
            assert!(why.contains("[terminal.env] set"), "{name}: {why}");
        }
        let why = judge("MY_FLAG", &[]).unwrap_err();
        assert!(why.contains("prefix_allow"), "{why}");
        assert_eq!(judge("MY_FLAG", &["MY_FLAG".into()]), Ok(()));
    }
}
