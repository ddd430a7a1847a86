//! The project file: `.safe-mcp.toml` at the jail root, read once at start, which may only
//! narrow the operator's policy.
//!
//! A repository can carry its own stricter rules: commands it removes (`[terminal]
//! remove_commands`, or `[terminal.denylist] commands`), argument rules that only deny
//! (`[[terminal.rules]]` with `command`, `deny_args` and `reason`), and lower limits
//! (`[terminal.limits]`, each at most the operator's). Every other key, and any value that
//! would widen (a higher limit, `allow_interpreter`, `allow_escapes`, an allowlist), is a
//! fatal startup error naming the key. The model can write the jail, and so this file; since
//! it can only narrow, the worst it can do is refuse more (at the next start). It is opened
//! without following a symlink, must be a regular file, and is read up to 64 KiB.

use std::path::Path;

use super::error::ConfigError;
use safe_mcp_rules::config::settings::ProjectReport;
use safe_mcp_rules::config::types::{ArgRule, Limits};

/// The project file's name, at the jail root.
pub const FILE_NAME: &str = ".safe-mcp.toml";

const MAX_BYTES: u64 = 64 * 1024;

/// The narrowing a project file asks for.
#[derive(Debug, Default)]
pub(super) struct Narrowing {
    pub(super) report: ProjectReport,
    pub(super) removed: Vec<String>,
    pub(super) rules: Vec<ArgRule>,
    pub(super) limits: Limits,
    pub(super) protected: Vec<String>,
}

fn widening(key: &str, why: &str) -> ConfigError {
    ConfigError::Invalid {
        key: format!("{FILE_NAME}: {key}"),
        message: format!(
            "{why}; a project file may only narrow the operator's policy (remove_commands, [terminal.denylist], [[terminal.rules]] with deny_args, lower [terminal.limits], more protected_paths)"
        ),
    }
}

/// Reads the project file of `jail`, if there is one, against the operator's `limits`.
pub(super) fn read(jail: &Path, limits: &Limits) -> Result<Option<Narrowing>, ConfigError> {
    let path = jail.join(FILE_NAME);
    let text = match read_plain_file(&path) {
        Ok(Some(text)) => text,
        Ok(None) => return Ok(None),
        Err(message) => {
            return Err(ConfigError::Invalid {
                key: FILE_NAME.into(),
                message,
            });
        }
    };
    let table: toml::Table = toml::from_str(&text).map_err(|e| ConfigError::Invalid {
        key: FILE_NAME.into(),
        message: format!("not valid TOML: {e}"),
    })?;
    let mut out = Narrowing {
        limits: *limits,
        report: ProjectReport {
            path,
            ..ProjectReport::default()
        },
        ..Narrowing::default()
    };
    for (key, value) in &table {
        if key != "terminal" {
            return Err(widening(key, "not a key a project file may set"));
        }
        let Some(terminal) = value.as_table() else {
            return Err(widening("terminal", "must be a table"));
        };
        for (key, value) in terminal {
            let at = format!("terminal.{key}");
            match key.as_str() {
                "remove_commands" => out.removed.extend(strings(&at, value)?),
                // More protected paths only: a project file never removes one.
                "protected_paths" => {
                    let added = strings(&at, value)?;
                    for p in &added {
                        crate::protected::check_entry(p.trim_end_matches('/'))
                            .map_err(|why| widening(&at, &why))?;
                    }
                    out.report.protected_paths.extend(added.iter().cloned());
                    out.protected.extend(added);
                }
                "denylist" => {
                    let t = value
                        .as_table()
                        .ok_or_else(|| widening(&at, "must be a table"))?;
                    for (k, v) in t {
                        if k != "commands" {
                            return Err(widening(
                                &format!("{at}.{k}"),
                                "not a key a project file may set",
                            ));
                        }
                        out.removed.extend(strings(&format!("{at}.commands"), v)?);
                    }
                }
                "rules" => {
                    let list = value
                        .as_array()
                        .ok_or_else(|| widening(&at, "must be an array of tables"))?;
                    for (i, rule) in list.iter().enumerate() {
                        out.rules.push(deny_rule(&format!("{at}[{i}]"), rule)?);
                    }
                }
                "limits" => lower_limits(&at, value, &mut out.limits, &mut out.report.limits)?,
                _ => {
                    return Err(widening(
                        &at,
                        "would widen or replace the operator's policy",
                    ));
                }
            }
        }
    }
    out.report.removed = out.removed.clone();
    out.report.rules = out.rules.iter().map(|r| r.command.clone()).collect();
    Ok(Some(out))
}

/// The file's text, `None` when it does not exist, or why it cannot be used.
fn read_plain_file(path: &Path) -> Result<Option<String>, String> {
    crate::untrusted::read_small_file(path, MAX_BYTES)
}

fn strings(at: &str, value: &toml::Value) -> Result<Vec<String>, ConfigError> {
    value
        .as_array()
        .and_then(|list| list.iter().map(|v| v.as_str().map(str::to_owned)).collect())
        .ok_or_else(|| widening(at, "must be a list of strings"))
}

/// A `[[terminal.rules]]` entry that only denies.
fn deny_rule(at: &str, value: &toml::Value) -> Result<ArgRule, ConfigError> {
    let t = value
        .as_table()
        .ok_or_else(|| widening(at, "must be a table"))?;
    let mut rule = ArgRule {
        command: String::new(),
        deny_args: Vec::new(),
        confirm_args: Vec::new(),
        reason: None,
        allow_escapes: Vec::new(),
        allow_interpreter: false,
        should_allow: Vec::new(),
        should_deny: Vec::new(),
        profile: None,
    };
    for (k, v) in t {
        let key = format!("{at}.{k}");
        match k.as_str() {
            "command" => {
                rule.command = v
                    .as_str()
                    .ok_or_else(|| widening(&key, "must be a string"))?
                    .to_owned();
            }
            "deny_args" => rule.deny_args = strings(&key, v)?,
            "reason" => {
                rule.reason = Some(
                    v.as_str()
                        .ok_or_else(|| widening(&key, "must be a string"))?
                        .to_owned(),
                );
            }
            "should_deny" => rule.should_deny = strings(&key, v)?,
            _ => {
                return Err(widening(
                    &key,
                    "a project rule may only deny (command, deny_args, reason, should_deny)",
                ));
            }
        }
    }
    if rule.command.is_empty() || rule.deny_args.is_empty() {
        return Err(widening(
            at,
            "a project rule needs a command and at least one deny_args pattern",
        ));
    }
    Ok(rule)
}

/// Lowers `limits` by the `[terminal.limits]` table `value`; a higher value is fatal.
fn lower_limits(
    at: &str,
    value: &toml::Value,
    limits: &mut Limits,
    lowered: &mut Vec<String>,
) -> Result<(), ConfigError> {
    let t = value
        .as_table()
        .ok_or_else(|| widening(at, "must be a table"))?;
    for (k, v) in t {
        let key = format!("{at}.{k}");
        let asked = v
            .as_integer()
            .and_then(|n| u64::try_from(n).ok())
            .filter(|n| *n > 0)
            .ok_or_else(|| widening(&key, "must be a positive integer"))?;
        let slot: &mut u64 = match k.as_str() {
            "timeout_seconds" => &mut limits.timeout_seconds,
            "cpu_seconds" => &mut limits.cpu_seconds,
            "memory_bytes" => &mut limits.memory_bytes,
            "file_size_bytes" => &mut limits.file_size_bytes,
            "open_files" => &mut limits.open_files,
            "processes" => &mut limits.processes,
            // 0 is "no bound": any bound the project file sets narrows it.
            "jail_bytes" if limits.jail_bytes == 0 => {
                limits.jail_bytes = asked;
                lowered.push(format!("{k} = {asked}"));
                continue;
            }
            "jail_bytes" => &mut limits.jail_bytes,
            "max_output_bytes" => {
                let own = limits.max_output_bytes as u64;
                if asked > own {
                    return Err(widening(
                        &key,
                        &format!("{asked} is above the operator's {own}"),
                    ));
                }
                limits.max_output_bytes = usize::try_from(asked).unwrap_or(limits.max_output_bytes);
                lowered.push(format!("{k} = {asked}"));
                continue;
            }
            _ => return Err(widening(&key, "not a limit")),
        };
        if asked > *slot {
            return Err(widening(
                &key,
                &format!("{asked} is above the operator's {}", *slot),
            ));
        }
        *slot = asked;
        lowered.push(format!("{k} = {asked}"));
    }
    Ok(())
}
