//! Loading a policy ready to serve: the file's own checks, then the policy's own examples.
//!
//! Owns the one public way from a policy file to a [`Policy`]. [`load_policy`] runs the loader
//! of [`crate::config`] (TOML, keys, roots, paths, environment overrides) and then
//! [`crate::policy::check_examples`], so a policy whose `should_allow` / `should_deny`
//! examples do not get their verdict is a fatal load error, as a bad key is. It sits above
//! both, so the imports run load → policy → config and never back up. It also derives the
//! audit trail's options from a policy ([`audit_options`]), which config cannot do
//! without importing audit.
//!
//! It must never decide anything itself: every rule it applies belongs to config (what the
//! file may say) or to policy (what a command gets), and it must never hand out a policy whose
//! examples were not run.

use std::fmt;
use std::path::Path;

use crate::audit::AuditOptions;
use crate::config::{self, ConfigError, Env, Policy, Section};
use crate::policy::{ExampleMismatch, check_examples};

/// Why a policy could not be loaded. Each is fatal at startup.
#[derive(Debug)]
#[non_exhaustive]
pub enum LoadError {
    /// The file itself is wrong: unreadable, bad TOML, an unknown key, a missing root, ...
    Config(ConfigError),
    /// The file is well formed but one of its own examples does not get its verdict.
    Example(ExampleMismatch),
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LoadError::Config(e) => e.fmt(f),
            LoadError::Example(m) => write!(f, "invalid `terminal examples`: {m}"),
        }
    }
}

impl std::error::Error for LoadError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            LoadError::Config(e) => Some(e),
            LoadError::Example(m) => Some(m),
        }
    }
}

impl From<ConfigError> for LoadError {
    fn from(e: ConfigError) -> Self {
        LoadError::Config(e)
    }
}

impl From<ExampleMismatch> for LoadError {
    fn from(m: ExampleMismatch) -> Self {
        LoadError::Example(m)
    }
}

/// Finds the policy path (`flag` wins over `SAFE_MCP_POLICY_FILE`), reads and validates it,
/// then runs its examples.
pub fn load_policy(
    flag: Option<&Path>,
    env: &dyn Env,
    section: Section,
) -> Result<Policy, LoadError> {
    let policy = config::read(flag, env, section)?;
    self_test(&policy)?;
    Ok(policy)
}

/// Validates policy text (relative paths resolve against `source`'s directory), then runs
/// its examples.
pub fn policy_from_toml(
    text: &str,
    source: &Path,
    env: &dyn Env,
    section: Section,
) -> Result<Policy, LoadError> {
    let policy = config::from_toml(text, source, env, section)?;
    self_test(&policy)?;
    Ok(policy)
}

/// A policy tests itself: every example must get the verdict it names, or nothing runs.
fn self_test(policy: &Policy) -> Result<(), LoadError> {
    if let Some(terminal) = &policy.terminal {
        check_examples(terminal, &crate::policy::jail_of(terminal))?;
    }
    Ok(())
}

/// How the audit trail is kept, from the policy's `[audit]`. Defined here, not in config,
/// because config must not import audit.
pub fn audit_options(policy: &Policy) -> AuditOptions {
    let audit = &policy.audit;
    AuditOptions {
        fail_mode: audit.fail_mode,
        max_bytes: audit.max_bytes,
        keep: audit.keep,
        key: audit.hmac_key.clone(),
        checkpoint_every: audit
            .ship
            .as_ref()
            .map(|s| std::time::Duration::from_secs(s.checkpoint_seconds)),
        server_id: audit.server_id.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_env(_: &str) -> Option<std::ffi::OsString> {
        None
    }

    fn load(text: &str, section: Section) -> (tempfile::TempDir, Result<Policy, LoadError>) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("jail")).unwrap();
        std::fs::create_dir(dir.path().join("inbox")).unwrap();
        let path = dir.path().join("policy.toml");
        std::fs::write(&path, text).unwrap();
        let result = load_policy(Some(&path), &no_env, section);
        (dir, result)
    }

    const BASE: &str = "audit_log = \"a.jsonl\"\n[terminal]\njail_root = \"jail\"\n[terminal.allowlist]\ncommands = [\"ls\", \"find\"]\n";

    #[test]
    fn a_failing_example_is_a_load_error_naming_rule_and_example() {
        let text = format!(
            "{BASE}[[terminal.rules]]\ncommand = \"find\"\ndeny_args = [\"-delete\"]\nshould_allow = [\"find . -delete\"]\n"
        );
        let (_dir, result) = load(&text, Section::Terminal);
        let err = result.unwrap_err();
        assert!(matches!(err, LoadError::Example(_)), "{err:?}");
        let text = err.to_string();
        assert!(
            text.starts_with(
                "invalid `terminal examples`: terminal.rules[0] (find): should_allow example `find . -delete` got POLICY_DENIED: "
            ),
            "{text}"
        );
        let (_dir, result) = load(
            &format!("{BASE}[[terminal.examples]]\nshould_deny = [\"ls\"]\n"),
            Section::Any,
        );
        assert!(result.unwrap_err().to_string().starts_with(
            "invalid `terminal examples`: terminal.examples[0]: should_deny example `ls` got OK: "
        ),);
    }

    #[test]
    fn passing_examples_and_config_errors_pass_through() {
        let text = format!(
            "{BASE}[[terminal.examples]]\nshould_allow = [\"ls\"]\nshould_deny = [\"rm x\"]\n"
        );
        let (_dir, result) = load(&text, Section::Terminal);
        let policy = result.unwrap();
        let options = audit_options(&policy);
        assert_eq!(options.keep, policy.audit.keep);
        assert_eq!(options.max_bytes, policy.audit.max_bytes);
        let (_dir, result) = load("[terminal", Section::Terminal);
        assert!(matches!(
            result,
            Err(LoadError::Config(ConfigError::Parse { .. }))
        ));
        // The files server never builds the terminal section, so never runs its examples.
        let text = format!(
            "{BASE}[[terminal.examples]]\nshould_deny = [\"ls\"]\n[files]\nworkspace_root = \"inbox\"\njournal = \"j.jsonl\"\n"
        );
        assert!(load(&text, Section::Files).1.is_ok());
    }
}
