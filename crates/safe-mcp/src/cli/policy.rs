//! Reading a policy without serving it: `explain`, `policy check`, `redact` and
//! `auth check-token`.

use std::io::Read;
use std::path::Path;
use std::process::ExitCode;

use safe_mcp_core::ResultCode;
use safe_mcp_core::config::Section;
use safe_mcp_core::redact::Redactor;
use safe_mcp_core::terminal::{CommandInput, TerminalService};
use safe_mcp_exec::planned_report;
use safe_mcp_http as http;

use super::load;
use crate::exit::{fatal, say};

pub(crate) fn explain(config: Option<&Path>, cwd: Option<&str>, command: String) -> ExitCode {
    let policy = match load(config, Section::Terminal) {
        Ok(p) => p,
        Err(e) => return fatal(e),
    };
    let service = match TerminalService::new(&policy) {
        Ok(s) => s,
        Err(e) => return fatal(e),
    };
    // Described, not built: a read-only call makes no cgroup and no ruleset.
    let confinement = planned_report(&service.confinement_spec());
    let result = safe_mcp_core::terminal::Describe::new(&service).explain(
        &CommandInput::Line(command),
        cwd,
        &confinement,
    );
    match serde_json::to_string_pretty(&result) {
        Ok(text) => say!("{text}"),
        Err(e) => return fatal(e),
    }
    if result.code == ResultCode::Ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// `1 rule`, `2 rules`.
pub(crate) fn plural(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

pub(crate) fn policy_check(config: Option<&Path>) -> ExitCode {
    let policy = match load(config, Section::Any) {
        Ok(p) => p,
        Err(e) => return fatal(e),
    };
    // [http.auth]'s keys are read as `--http` would read them at start (a URL is not
    // fetched here: `policy check` makes no network request).
    if let Some(oauth) = &policy.http.oauth {
        match &oauth.jwks {
            safe_mcp_core::config::JwksSource::File(_) => {
                if let Err(e) = http::jwks::load(&oauth.jwks) {
                    return fatal(e);
                }
            }
            safe_mcp_core::config::JwksSource::Url { .. } => {}
        }
    }
    say!("policy {}: valid", policy.source.display());
    if let Some(t) = &policy.terminal {
        let examples: usize = t
            .rules
            .iter()
            .map(|r| r.should_allow.len() + r.should_deny.len())
            .sum::<usize>()
            + t.examples
                .iter()
                .map(|e| e.should_allow.len() + e.should_deny.len())
                .sum::<usize>();
        say!(
            "  terminal: jail {} | {} allowed, {} denied, {} | sandbox {} | {}",
            t.jail_root.display(),
            t.allow.len(),
            t.deny.len(),
            plural(t.rules.len(), "rule"),
            t.sandbox.mode.as_str(),
            match examples {
                0 => "no examples".to_owned(),
                n => format!("{} passed", plural(n, "example")),
            }
        );
        for p in &t.profiles {
            let list = |items: &[std::path::PathBuf]| match items {
                [] => "none".to_owned(),
                _ => items
                    .iter()
                    .map(|i| i.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
            };
            say!(
                "  profile {}: commands {} | rules for {} | read {} | PATH {} | writable {} | env {}",
                p.name,
                p.commands.join(", "),
                if p.rules.is_empty() {
                    "none".to_owned()
                } else {
                    p.rules.join(", ")
                },
                list(&p.read_paths),
                list(&p.path),
                list(&p.write_paths),
                if p.env.is_empty() {
                    "none".to_owned()
                } else {
                    p.env.join(", ")
                }
            );
        }
        if let Some(project) = &t.project {
            say!(
                "  project file {}: removes {} | deny rules for {} | lowers {}",
                project.path.display(),
                if project.removed.is_empty() {
                    "nothing".to_owned()
                } else {
                    project.removed.join(", ")
                },
                if project.rules.is_empty() {
                    "nothing".to_owned()
                } else {
                    project.rules.join(", ")
                },
                if project.limits.is_empty() {
                    "nothing".to_owned()
                } else {
                    project.limits.join(", ")
                }
            );
        }
        // What a built-in profile chose is noted under it; what the operator's own keys
        // did is a warning (a policy `init` writes checks clean).
        let (warnings, notes) = safe_mcp_core::lint::split(t);
        for (profile, note) in notes {
            say!("  profile {profile} chose: {note}");
        }
        for warning in warnings {
            say!("warning: {warning}");
        }
    }
    if let Some(f) = &policy.files {
        say!(
            "  files: workspace {} | {}",
            f.workspace_root.display(),
            plural(f.skip.len(), "skip rule")
        );
    }
    // Valid is not enough: the user running this must be able to write what it names.
    let problems = safe_mcp_core::preflight::access_problems(&policy);
    for p in &problems {
        say!("error: {p}");
    }
    if problems.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

pub(crate) fn redact(config: Option<&Path>) -> ExitCode {
    let settings = match config {
        Some(_) => match load(config, Section::Any) {
            Ok(p) => p.redaction,
            Err(e) => return fatal(e),
        },
        None => safe_mcp_core::config::RedactionSettings {
            enabled: true,
            entropy_fallback: false,
            extra_patterns: vec![],
        },
    };
    let redactor = match Redactor::new(&settings) {
        Ok(r) => r,
        Err(e) => return fatal(e),
    };
    let mut input = Vec::new();
    if let Err(e) = std::io::stdin().read_to_end(&mut input) {
        return fatal(format!("cannot read stdin: {e}"));
    }
    print!("{}", redactor.redact(&String::from_utf8_lossy(&input)));
    ExitCode::SUCCESS
}

pub(crate) fn check_token(config: Option<&Path>, token: &str) -> ExitCode {
    let policy = match load(config, Section::Any) {
        Ok(p) => p,
        Err(e) => return fatal(e),
    };
    let Some(oauth) = policy.http.oauth.clone() else {
        return fatal("the policy has no [http.auth] mode = \"oauth\"");
    };
    let token = if token == "-" {
        let mut text = String::new();
        if let Err(e) = std::io::Read::read_to_string(&mut std::io::stdin(), &mut text) {
            return fatal(format!("cannot read the token from stdin: {e}"));
        }
        text
    } else {
        token.to_owned()
    };
    let guard = match http::oauth::Guard::new(oauth) {
        Ok(g) => g,
        Err(e) => return fatal(e),
    };
    match guard.explain(&token) {
        Ok(line) => {
            say!("{line}");
            ExitCode::SUCCESS
        }
        Err(why) => {
            say!("refused: {why}");
            ExitCode::from(1)
        }
    }
}
