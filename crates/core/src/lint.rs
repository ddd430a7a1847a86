//! The policy lint: what a reviewer should look at twice in a policy that loads.
//!
//! Owns the findings `safe-mcp policy check` prints as `warning: ...`: interpreters, shells
//! and trampolines on the allowlist (refused, or opted in with `allow_interpreter`), escapes
//! opted in with `allow_escapes`, and allowlisted tools the built-in knowledge
//! ([`crate::tools`]) does not know. Each is a typed [`Finding`] whose `Display` is the line
//! the CLI prints. It must never refuse a policy or change a verdict: what may run is decided
//! by [`crate::config`] at load and [`crate::policy`] per command, never here.

use std::fmt;

use crate::config::TerminalPolicy;
use crate::tools::{Kind, lookup};

/// One thing worth a second look.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Finding {
    /// An interpreter, shell or trampoline opted in with `allow_interpreter = true`.
    InterpreterAllowed {
        /// The program name.
        name: String,
        /// Why it counts as one (from the built-in knowledge).
        why: String,
    },
    /// An interpreter, shell or trampoline on the allowlist: every call to it is refused.
    InterpreterRefused {
        /// The program name.
        name: String,
        /// Why it counts as one (from the built-in knowledge).
        why: String,
    },
    /// A tool with no built-in knowledge: its arguments get generic path checks only.
    UnknownTool {
        /// The program name.
        name: String,
    },
    /// An allowlisted program that is on none of the server's PATH directories: every call
    /// to it will fail with OPERATION_FAILED.
    NotOnPath {
        /// The program name.
        name: String,
        /// The PATH searched.
        path: String,
    },
    /// A `[terminal.env]` variable whose name looks like a secret: every command (and so
    /// the model) can read it.
    SecretLikeVariable {
        /// The variable.
        name: String,
    },
    /// A profile's discovery found nothing: its toolchain paths are missing.
    ProfileDiscovery {
        /// The profile.
        profile: String,
        /// What was not found.
        note: String,
    },
    /// `exec_in_jail` is on (by the policy or a profile): programs the model wrote run.
    ExecInJail {
        /// Which profile turned it on, if one did.
        by: Option<String>,
    },
    /// An interpreter is allowed (`allow_interpreter`): code it runs starts every other
    /// program directly, past the argument rules, approvals and the built-in escape
    /// knowledge, which judge only the commands the model sends.
    InterpreterVoidsRules {
        /// The interpreters allowed.
        interpreters: Vec<String>,
        /// The programs whose `deny_args` or `confirm_args` it voids.
        ruled: Vec<String>,
        /// Why the exec allowlist does not route those programs through the server.
        because: &'static str,
    },
    /// `shared_cache = true`: the profile caches are shared with other projects.
    SharedCache,
    /// `[terminal.sessions] expose_bind` is not a loopback address.
    ExposedBeyondLoopback {
        /// The address.
        bind: String,
    },
    /// `unprotected_paths`: default protected paths the operator removed.
    Unprotected {
        /// The entries removed.
        paths: Vec<String>,
    },
    /// `drop_profile_rules`: profile rules the operator removed.
    ProfileRulesDropped {
        /// The programs whose profile rules no longer apply.
        names: Vec<String>,
    },
    /// An escape opted in with `allow_escapes`.
    EscapeOptedIn {
        /// The program name.
        name: String,
        /// The escape, as written in `allow_escapes`.
        escape: String,
    },
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Finding::InterpreterAllowed { name, why } => write!(
                f,
                "`{name}` is allowlisted with allow_interpreter = true: {why}; the model can run any code it can express, inside the sandbox"
            ),
            Finding::InterpreterRefused { name, why } => write!(
                f,
                "`{name}` is allowlisted but is an interpreter, shell or trampoline ({why}); it is refused until allow_interpreter = true"
            ),
            Finding::UnknownTool { name } => write!(
                f,
                "`{name}` has no built-in knowledge: its arguments get generic path checks only; check its manual for options that run programs"
            ),
            Finding::NotOnPath { name, path } => write!(
                f,
                "`{name}` is allowlisted but is not on the server's PATH ({path}); calls to it will fail until it is installed or [terminal] path names its directory"
            ),
            Finding::SecretLikeVariable { name } => write!(
                f,
                "[terminal.env] gives commands `{name}`, which looks like a secret: every command, and so the model, can read it"
            ),
            Finding::InterpreterVoidsRules {
                interpreters,
                ruled,
                because,
            } => write!(
                f,
                "an allowed interpreter ({}) can start any other program itself, since {because}: the argument rules and approvals{} and the built-in escape checks bind only the commands sent to run_command and start_process, not the programs that code starts; keep the exec allowlist on without exec_in_jail, or allow no interpreter, where those rules must hold",
                interpreters.join(", "),
                if ruled.is_empty() {
                    String::new()
                } else {
                    format!(" of {}", ruled.join(", "))
                }
            ),
            Finding::Unprotected { paths } => write!(
                f,
                "unprotected_paths removes {} from the protected paths: commands can write them, and what they write there runs later outside the sandbox (the operator's git, editor or agent client)",
                paths.join(", ")
            ),
            Finding::ProfileRulesDropped { names } => write!(
                f,
                "drop_profile_rules removes the profiles' rules for {}: only the policy's own rules for them apply (a profile's deny_args, such as git's force-push denial, no longer holds)",
                names.join(", ")
            ),
            Finding::SharedCache => write!(
                f,
                "shared_cache = true: every project whose policy names this cache_dir shares the profile caches, so one project's commands can leave what another's build reads (a poisoned package, a build artifact); the tool configuration files stay read-only only in the private view"
            ),
            Finding::ExposedBeyondLoopback { bind } => write!(
                f,
                "[terminal.sessions] expose_bind = \"{bind}\" is not loopback: a server a session exposes (expose_port) is reachable from the network, not only from this machine"
            ),
            Finding::EscapeOptedIn { name, escape } => write!(
                f,
                "`{name}` opts in the escape `{escape}`: the model can use it"
            ),
            Finding::ProfileDiscovery { profile, note } => write!(
                f,
                "profile {profile}: {note}; its toolchain is not on the commands' PATH or read paths"
            ),
            Finding::ExecInJail { by } => write!(
                f,
                "exec_in_jail is on{}: programs the model writes or builds in the jail can run (confined like any command), and so can a copy of any program it can read, past the exec allowlist",
                by.as_ref()
                    .map(|p| format!(" (by the {p} profile)"))
                    .unwrap_or_default()
            ),
        }
    }
}

impl Finding {
    /// The built-in profile whose choice this finding is, when no key of the operator's
    /// caused it: `policy check` notes it under that profile instead of warning (a policy
    /// `init` writes checks clean).
    pub fn profile<'a>(&self, t: &'a TerminalPolicy) -> Option<&'a str> {
        let rule_of = |name: &str| t.rules.iter().find(|r| r.command == name);
        let added_by = |name: &str| {
            t.profiles
                .iter()
                .find(|p| p.commands.iter().any(|c| c == name))
                .map(|p| p.name.as_str())
        };
        match self {
            Finding::ExecInJail { by: Some(by) } => t
                .profiles
                .iter()
                .find(|p| &p.name == by)
                .map(|p| p.name.as_str()),
            Finding::EscapeOptedIn { name, .. } | Finding::InterpreterAllowed { name, .. } => {
                rule_of(name).and_then(|r| r.profile.as_deref())
            }
            Finding::UnknownTool { name } => added_by(name),
            Finding::InterpreterVoidsRules {
                interpreters,
                ruled,
                ..
            } => {
                let all_profiles = interpreters
                    .iter()
                    .chain(ruled)
                    .all(|n| rule_of(n).is_some_and(|r| r.profile.is_some()));
                if all_profiles {
                    interpreters
                        .first()
                        .and_then(|n| rule_of(n))
                        .and_then(|r| r.profile.as_deref())
                } else {
                    None
                }
            }
            _ => None,
        }
    }
}

/// The findings the operator's own keys caused (what `policy check` warns about), and for
/// each profile one line of what it chose (its findings, noted under it).
pub fn split(t: &TerminalPolicy) -> (Vec<Finding>, Vec<(String, String)>) {
    let mut warnings = Vec::new();
    let mut by_profile: Vec<(String, Vec<Finding>)> = Vec::new();
    for f in lint(t) {
        match f.profile(t) {
            None => warnings.push(f),
            Some(p) => match by_profile.iter_mut().find(|(n, _)| n == p) {
                Some((_, list)) => list.push(f),
                None => by_profile.push((p.to_owned(), vec![f])),
            },
        }
    }
    let notes = by_profile
        .into_iter()
        .map(|(profile, findings)| (profile, summary(&findings)))
        .collect();
    (warnings, notes)
}

/// One line for a profile's findings.
fn summary(findings: &[Finding]) -> String {
    let mut parts = Vec::new();
    let mut escapes: Vec<(String, Vec<String>)> = Vec::new();
    let mut unknown = Vec::new();
    for f in findings {
        match f {
            Finding::ExecInJail { .. } => {
                parts.push(
                    "turns exec_in_jail on (what the model builds in the jail can run, confined)"
                        .to_owned(),
                );
            }
            Finding::EscapeOptedIn { name, escape } => {
                match escapes.iter_mut().find(|(n, _)| n == name) {
                    Some((_, list)) => list.push(escape.clone()),
                    None => escapes.push((name.clone(), vec![escape.clone()])),
                }
            }
            Finding::UnknownTool { name } => unknown.push(name.clone()),
            Finding::InterpreterAllowed { name, .. } => {
                parts.push(format!(
                    "allows {name} as an interpreter (any code, inside the sandbox)"
                ));
            }
            other => parts.push(other.to_string()),
        }
    }
    for (name, list) in escapes {
        parts.push(format!("opts in {name} {}", list.join(", ")));
    }
    if !unknown.is_empty() {
        parts.push(format!("{} get generic path checks", unknown.join(", ")));
    }
    parts.join("; ")
}

/// The findings for a terminal policy, by allowlisted program in name order; a program that
/// is also denylisted is skipped (the denylist wins, so nothing about it can run).
pub fn lint(t: &TerminalPolicy) -> Vec<Finding> {
    let mut out = Vec::new();
    for profile in &t.profiles {
        for note in &profile.notes {
            out.push(Finding::ProfileDiscovery {
                profile: profile.name.clone(),
                note: note.clone(),
            });
        }
    }
    if t.sandbox.exec_in_jail {
        out.push(Finding::ExecInJail {
            by: t
                .profiles
                .iter()
                .find(|p| p.exec_in_jail)
                .map(|p| p.name.clone()),
        });
    }
    if t.sandbox.shared_cache {
        out.push(Finding::SharedCache);
    }
    if !t.sessions.expose_bind.is_loopback() {
        out.push(Finding::ExposedBeyondLoopback {
            bind: t.sessions.expose_bind.to_string(),
        });
    }
    if !t.dropped_profile_rules.is_empty() {
        out.push(Finding::ProfileRulesDropped {
            names: t.dropped_profile_rules.clone(),
        });
    }
    if !t.protected.removed.is_empty() {
        out.push(Finding::Unprotected {
            paths: t.protected.removed.clone(),
        });
    }
    let names = t.env.pass.iter().chain(t.env.set.iter().map(|(n, _)| n));
    for name in names {
        let upper = name.to_ascii_uppercase();
        if [
            "TOKEN",
            "SECRET",
            "PASSWORD",
            "PASSWD",
            "CREDENTIAL",
            "API_KEY",
            "APIKEY",
            "PRIVATE",
        ]
        .iter()
        .any(|w| upper.contains(w))
            || upper.ends_with("_KEY")
        {
            out.push(Finding::SecretLikeVariable { name: name.clone() });
        }
    }
    for name in &t.allow {
        if t.deny.contains(name) {
            continue;
        }
        let rules: Vec<_> = t.rules.iter().filter(|r| &r.command == name).collect();
        match lookup(name).map(|s| s.kind) {
            Some(Kind::Interpreter(why)) => {
                let why = why.to_string();
                let name = name.clone();
                if rules.iter().any(|r| r.allow_interpreter) {
                    out.push(Finding::InterpreterAllowed { name, why });
                } else {
                    out.push(Finding::InterpreterRefused { name, why });
                }
            }
            Some(Kind::Tool) => {}
            None => out.push(Finding::UnknownTool { name: name.clone() }),
        }
        let on_path = crate::policy::resolve_program(&t.path, name).is_some();
        if !on_path {
            out.push(Finding::NotOnPath {
                name: name.clone(),
                path: t
                    .path
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(":"),
            });
        }
        for rule in rules {
            for escape in &rule.allow_escapes {
                out.push(Finding::EscapeOptedIn {
                    name: name.clone(),
                    escape: escape.clone(),
                });
            }
        }
    }
    out.extend(interpreter_voids_rules(t));
    out
}

/// The allowed interpreters, and the programs whose argument rules and approvals they void
/// (round 3, item 7: `python3 -c "subprocess.run(['git', 'push', '--force'])"`), if any
/// interpreter is allowed where the exec allowlist does not route those programs through
/// the server (it is off, nothing is confined, or `exec_in_jail` lets a copy run).
pub fn interpreter_voids_rules(t: &TerminalPolicy) -> Option<Finding> {
    let because = if !t.sandbox.exec.enabled {
        "exec_allowlist is off"
    } else if t.sandbox.mode == crate::config::SandboxMode::Off {
        "sandbox mode is off"
    } else if t.sandbox.exec_in_jail {
        "exec_in_jail lets a copy of any program run from the jail"
    } else {
        return None;
    };
    let interpreters: Vec<String> = t
        .allow
        .iter()
        .filter(|name| !t.deny.contains(*name))
        .filter(|name| matches!(lookup(name).map(|s| s.kind), Some(Kind::Interpreter(_))))
        .filter(|name| {
            t.rules
                .iter()
                .any(|r| &r.command == *name && r.allow_interpreter)
        })
        .cloned()
        .collect();
    if interpreters.is_empty() {
        return None;
    }
    let ruled = t.ruled_commands();
    Some(Finding::InterpreterVoidsRules {
        interpreters,
        ruled,
        because,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Section;

    fn terminal(extra: &str) -> (tempfile::TempDir, TerminalPolicy) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("jail")).unwrap();
        let text = format!(
            "audit_log = \"a.jsonl\"\n[terminal]\njail_root = \"jail\"\n[terminal.allowlist]\ncommands = [\"ls\", \"zsh\", \"find\", \"python3\", \"frobnicate\", \"perl\"]\n[terminal.denylist]\ncommands = [\"perl\"]\n{extra}"
        );
        let source = dir.path().join("p.toml");
        let env = |_: &str| None;
        let policy = crate::config::from_toml(&text, &source, &env, Section::Terminal).unwrap();
        (dir, policy.terminal.unwrap())
    }

    #[test]
    fn findings_and_their_printed_text() {
        let rules = "[[terminal.rules]]\ncommand = \"find\"\nallow_escapes = [\"-delete\"]\n[[terminal.rules]]\ncommand = \"python3\"\nallow_interpreter = true\n";
        // With the exec allowlist on, what the interpreter starts meets the rules.
        let (_listed, on) = terminal(rules);
        assert!(interpreter_voids_rules(&on).is_none());
        let (_dir, t) = terminal(&format!(
            "{rules}[terminal.sandbox]\nexec_allowlist = false\n"
        ));
        let (missing, findings): (Vec<Finding>, Vec<Finding>) = lint(&t)
            .into_iter()
            .partition(|f| matches!(f, Finding::NotOnPath { .. }));
        // frobnicate exists nowhere; whether zsh does depends on the machine.
        assert!(
            missing
                .iter()
                .any(|f| matches!(f, Finding::NotOnPath { name, .. } if name == "frobnicate")),
            "{missing:?}"
        );
        let names: Vec<&str> = findings
            .iter()
            .map(|f| match f {
                Finding::InterpreterAllowed { name, .. }
                | Finding::InterpreterRefused { name, .. }
                | Finding::UnknownTool { name }
                | Finding::NotOnPath { name, .. }
                | Finding::SecretLikeVariable { name }
                | Finding::EscapeOptedIn { name, .. } => name.as_str(),
                Finding::ProfileDiscovery { profile, .. } => profile.as_str(),
                Finding::ExecInJail { .. } => "exec_in_jail",
                Finding::InterpreterVoidsRules { .. } => "interpreters",
                Finding::SharedCache => "shared_cache",
                Finding::ExposedBeyondLoopback { .. } => "expose_bind",
                Finding::Unprotected { .. } => "unprotected_paths",
                Finding::ProfileRulesDropped { .. } => "drop_profile_rules",
            })
            .collect();
        // BTreeSet order; `ls` is a known tool, `perl` is denylisted; last, what the
        // allowed interpreter voids.
        assert_eq!(
            names,
            ["find", "frobnicate", "python3", "zsh", "interpreters"]
        );
        let text: Vec<String> = findings.iter().map(ToString::to_string).collect();
        assert_eq!(
            text[0],
            "`find` opts in the escape `-delete`: the model can use it"
        );
        assert_eq!(
            text[1],
            "`frobnicate` has no built-in knowledge: its arguments get generic path checks only; check its manual for options that run programs"
        );
        assert!(
            text[2].starts_with("`python3` is allowlisted with allow_interpreter = true: ")
                && text[2]
                    .ends_with("; the model can run any code it can express, inside the sandbox"),
            "{}",
            text[2]
        );
        assert!(
            text[3]
                .starts_with("`zsh` is allowlisted but is an interpreter, shell or trampoline (")
                && text[3].ends_with("); it is refused until allow_interpreter = true"),
            "{}",
            text[3]
        );
        assert!(
            text[4].starts_with("an allowed interpreter (python3) can start any other program itself, since exec_allowlist is off: the argument rules and approvals and the built-in escape checks bind only"),
            "{}",
            text[4]
        );
    }

    #[test]
    fn a_plain_policy_has_nothing_to_say() {
        let (_dir, mut t) = terminal("");
        t.allow.retain(|n| n == "ls" || n == "perl");
        assert_eq!(lint(&t), []);
    }
}
