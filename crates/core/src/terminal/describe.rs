//! `explain_command` and `describe_policy`: the verdict and the policy in force, answered
//! without an executor, so neither can run anything.

use std::time::Instant;

use safe_mcp_contract::{ConfinementReport, ViewKind};
use serde_json::{Value, json};

use super::request::CommandInput;
use super::result::{decision_detail, syntax_refusal};
use super::state::TerminalService;
use crate::audit::Caller;
use crate::envelope::{OperationResult, ResultCode};
use crate::policy::evaluate;

pub(super) const EXPLAIN: &str = "explain_command";
const DESCRIBE: &str = "describe_policy";

/// `explain_command` and `describe_policy` as calls of the terminal server
/// over the service's policy and trail.
#[derive(Clone, Copy)]
pub struct Describe<'a>(pub(super) &'a TerminalService);

impl<'a> Describe<'a> {
    pub fn new(service: &'a TerminalService) -> Describe<'a> {
        Describe(service)
    }

    /// The verdict for `command` run from `cwd`, without running anything.
    pub fn explain(
        &self,
        command: &CommandInput,
        cwd: Option<&str>,
        confinement: &ConfinementReport,
    ) -> OperationResult {
        let started = Instant::now();
        let result = match command.parse() {
            Err(e) => syntax_refusal(EXPLAIN, &e),
            Ok(list) => {
                let decision = evaluate(&self.0.policy, &self.0.jail, &list, cwd);
                let mut detail = decision_detail(&decision);
                detail.insert("would_run".into(), json!(decision.code == ResultCode::Ok));
                // The gist; describe_policy has the confinement in full.
                detail.insert("confinement".into(), report_gist(confinement));
                if decision.code == ResultCode::Ok {
                    let programs = decision.stages.iter().filter_map(|s| s.program.as_deref());
                    if let Some(may) = may_execute(confinement, programs) {
                        detail.insert("may_execute".into(), may);
                    }
                }
                detail.insert(
                    "timeout_seconds".into(),
                    json!(self.0.policy.limits.timeout_seconds),
                );
                // Which file tools answer here: the way to change a file without a command.
                let f = &self.0.policy.files;
                let writes = f.enabled && !f.read_only;
                detail.insert(
                    "file_tools".into(),
                    json!({"read_file": f.enabled, "write_file": writes, "edit_file": writes}),
                );
                OperationResult::new(EXPLAIN, decision.code, decision.reason.clone())
                    .with_detail(Value::Object(detail))
            }
        };
        self.0.redacted(result).with_duration(started.elapsed())
    }

    /// `explain`, recorded in the audit trail as every call of every tool is (the CLI's
    /// `explain` uses the unrecorded one).
    pub fn explain_call(
        &self,
        command: &CommandInput,
        cwd: Option<&str>,
        confinement: &ConfinementReport,
        caller: &Caller,
    ) -> OperationResult {
        let result = self.explain(command, cwd, confinement);
        let mut attempt = self.0.attempt_for(EXPLAIN, &command.display(), caller);
        attempt.cwd = cwd.map(str::to_owned);
        self.0.gate.record(attempt, &result);
        result
    }

    /// `describe`, recorded.
    pub fn describe_call(
        &self,
        confinement: &ConfinementReport,
        caller: &Caller,
        verbose: bool,
    ) -> OperationResult {
        let result = if verbose {
            self.describe(confinement)
        } else {
            self.describe_short(confinement)
        };
        self.0
            .gate
            .record(self.0.attempt_for(DESCRIBE, DESCRIBE, caller), &result);
        result
    }

    /// The policy in a few lines, as a model needs it before its first command (the default
    /// of `describe_policy`): what can run and the notable rules, where commands and the
    /// file tools write, the network, the limits, the syntax that works, how to change a
    /// file, and the confinement in one line. [`Self::describe`] has every detail.
    pub fn describe_short(&self, confinement: &ConfinementReport) -> OperationResult {
        let p = &self.0.policy;
        let list = |v: &mut dyn Iterator<Item = String>| v.collect::<Vec<_>>().join(", ");
        let commands = list(&mut p.allow.iter().cloned());
        let rules: Vec<String> = p
            .rules
            .iter()
            .filter(|r| !r.deny_args.is_empty())
            .map(|r| {
                let why = r
                    .reason
                    .as_deref()
                    .map(|w| format!(" ({w})"))
                    .unwrap_or_default();
                format!("{}: refuses {}{why}", r.command, r.deny_args.join(", "))
            })
            .collect();
        let mut writes = vec![p.jail_root.display().to_string()];
        writes.extend(p.write_paths.iter().map(|w| w.display().to_string()));
        let network = match p.network.mode {
            crate::egress::NetworkMode::Off => "off: commands have no network".to_owned(),
            crate::egress::NetworkMode::Open => "open: any network the view has".to_owned(),
            crate::egress::NetworkMode::Allowlist => {
                let names = |rules: &[crate::egress::DomainRule]| {
                    let v: Vec<String> = rules.iter().map(|d| d.text()).collect();
                    if v.is_empty() {
                        "none".to_owned()
                    } else {
                        v.join(", ")
                    }
                };
                format!(
                    "allowlist, through the server's proxy: {}; never {}",
                    names(&p.network.allow),
                    names(&p.network.deny)
                )
            }
        };
        let l = &p.limits;
        let limits = format!(
            "timeout {} s per call (longer work: start_process), output {} bytes per stream (past it, its start and end), cpu {} s and memory {} MiB and files {} MiB per process",
            l.timeout_seconds,
            l.max_output_bytes,
            l.cpu_seconds,
            l.memory_bytes >> 20,
            l.file_size_bytes >> 20
        );
        let prefixes = list(
            &mut crate::env_prefix::DEFAULT_ALLOWED
                .iter()
                .map(|n| n.to_string())
                .chain(p.env.prefix_allow.iter().cloned()),
        );
        let files = if !p.files.enabled {
            "the file tools are off here; no command writes a file by redirection either".to_owned()
        } else if p.files.read_only {
            "read_file only (the write tools are off)".to_owned()
        } else {
            "edit_file changes a file (old_text -> new_text, all or nothing, returns the diff), write_file creates or replaces one, read_file reads one by lines".to_owned()
        };
        let r = confinement;
        let confinement_line = format!(
            "sandbox {}, {} view, Landlock {}, seccomp {}, capabilities {}, {}",
            r.mode,
            r.view.view,
            r.landlock.enforced,
            if r.seccomp.enabled { "on" } else { "off" },
            r.capabilities
                .split(['(', ';'])
                .next()
                .unwrap_or("?")
                .trim(),
            execute_words(r),
        );
        let mut detail = json!({
            "commands": commands,
            "rules": rules,
            "writes": format!(
                "in {} (commands and the file tools); never the protected paths ({})",
                writes.join(", "),
                p.protected.entries.iter().map(|e| e.path.as_str()).take(6).collect::<Vec<_>>().join(", ")
            ),
            "files": files,
            "network": network,
            "limits": limits,
            "syntax": format!(
                "a command, a pipeline (|) or a list (&&, ||, ;); 'single' and \"double\" quotes; NAME=value before a command for {prefixes}; no $ expansion, redirection, globs, subshells, & or cd (pass cwd instead)"
            ),
            "confinement": confinement_line,
            "more": "describe_policy {\"verbose\": true} has every detail",
        });
        let warnings: Vec<String> = crate::lint::interpreter_voids_rules(p)
            .map(|f| f.to_string())
            .into_iter()
            .collect();
        if !warnings.is_empty() {
            detail["warnings"] = json!(warnings);
        }
        if let Some(keys) = ssh_keys(p) {
            detail["ssh_keys"] = keys;
        }
        if rules.is_empty()
            && let Some(map) = detail.as_object_mut()
        {
            map.remove("rules");
        }
        self.described(detail)
    }

    /// `describe_policy`'s result around either detail.
    fn described(&self, detail: Value) -> OperationResult {
        OperationResult::new(
            DESCRIBE,
            ResultCode::Ok,
            format!(
                "{} commands allowlisted; everything else is denied",
                self.0.policy.allow.len()
            ),
        )
        .with_detail(detail)
    }

    /// The policy in full (`describe_policy {"verbose": true}`).
    pub fn describe(&self, confinement: &ConfinementReport) -> OperationResult {
        let p = &self.0.policy;
        let rules: Vec<Value> = p
            .rules
            .iter()
            .map(|r| json!({"command": r.command, "deny_args": r.deny_args, "reason": r.reason}))
            .collect();
        let detail = json!({
            "jail_root": p.jail_root,
            "allowlist": p.allow,
            "denylist": p.deny,
            "rules": rules,
            "limits": {
                "timeout_seconds": p.limits.timeout_seconds,
                "max_output_bytes": p.limits.max_output_bytes,
                "max_output_total_bytes": p.limits.max_output_total_bytes,
                "cpu_seconds": p.limits.cpu_seconds,
                "memory_bytes": p.limits.memory_bytes,
                "file_size_bytes": p.limits.file_size_bytes,
                "open_files": p.limits.open_files,
                "processes": p.limits.processes,
                "jail_bytes": p.limits.jail_bytes,
            },
            "syntax": {
                "accepted": ["'single' and \"double\" quotes (tokenization only)", "\\ escapes", "|", "&&", "||", ";", "NAME=value before a command, for the names in env_prefixes"],
                "refused": crate::syntax::Forbidden::ALL.map(crate::syntax::Forbidden::construct),
                "expansion": "none: no globs, braces, tilde or variables; words are passed literally",
                "programs": "bare names resolved through the server's PATH; a name containing / is refused",
            },
            "env_prefixes": crate::env_prefix::DEFAULT_ALLOWED
                .iter()
                .map(|n| n.to_string())
                .chain(p.env.prefix_allow.iter().cloned())
                .collect::<Vec<_>>(),
            "environment": self
                .0
                .env
                .iter()
                .map(|(k, _)| k.as_str())
                .chain(safe_mcp_contract::CALL_TMP_VARIABLES.iter().copied())
                .collect::<Vec<_>>(),
            "sessions": {
                "max_sessions": p.sessions.max_sessions,
                "max_sessions_per_caller": p.sessions.capacity().per_caller,
                "idle_timeout_seconds": p.sessions.idle_timeout_seconds,
                "max_seconds": p.sessions.max_seconds,
                "buffer_bytes": p.sessions.buffer_bytes,
                "when": "use start_process instead of run_command for a command that runs longer than one call should wait, never ends by itself (a dev server, a watcher), or needs input after it starts (a REPL); then read_process_output, write_process_input, stop_process",
                "on_a_terminal": "start_process with pty {rows, cols} runs one program on a terminal of its own (a REPL with its prompt, git add -p, less, a TUI): read_process_output returns its screen and cursor, write_process_input takes text then keys by name (Enter, Ctrl-C, Up, ...) and resize; where confinement.view.terminals is false it is refused",
            },
            "profiles": p.profiles,
            "profile_rules_dropped_by_the_operator": p.dropped_profile_rules,
            "project_policy": p.project,
            "write_paths": p.write_paths,
            "network": {
                "mode": p.network.mode.as_str(),
                "allow_domains": p.network.allow.iter().map(|d| d.text()).collect::<Vec<_>>(),
                "deny_domains": p.network.deny.iter().map(|d| d.text()).collect::<Vec<_>>(),
                "allow_private": p.network.allow_private,
                "how": match p.network.mode {
                    crate::egress::NetworkMode::Off => "commands have no network (loopback only in the private view)",
                    crate::egress::NetworkMode::Allowlist => "only through the server's proxy (HTTP_PROXY, HTTPS_PROXY), to the allowed names; deny wins; IP literals and private addresses are refused",
                    crate::egress::NetworkMode::Open => "any network the view has (in the private view, its own loopback only)",
                },
            },
            "file_tools": {
                "read_file": p.files.enabled,
                "write_file": p.files.enabled && !p.files.read_only,
                "edit_file": p.files.enabled && !p.files.read_only,
                "max_file_bytes": p.files.max_file_bytes,
                "confirm_paths": p.files.confirm_paths,
                "how": "to change a file use edit_file (old_text -> new_text, all or nothing, returns the diff); to create or replace one write_file; to read one read_file (by lines). They work in the jail and the write paths, never through a symlink, never on a protected path",
            },
            "protected_paths": {
                "paths": p.protected.entries.iter().map(|e| e.path.as_str()).collect::<Vec<_>>(),
                "removed_by_the_operator": p.protected.removed,
                "how": "no command, file tool or move may write, create or replace these: they configure programs that run outside the sandbox (the operator's git, editor, agent client); in the private view they are bound read-only",
                "git_trust": git_trust(confinement),
                "confirm_paths": "commands never write a confirm path (held read-only in the private view, refused by argument in both views; a `**` pattern by argument only); write_file and edit_file write one after a person's approval",
            },
            "caches": if p.sandbox.shared_cache {
                "shared_cache = true: the profile caches are shared with every project whose policy names the same cache_dir (the operator's choice); their tool configuration files stay read-only"
            } else {
                "per jail: the profile caches belong to this jail alone; their tool configuration files (config.toml, pip.conf, .npmrc, ...) are read-only"
            },
            "confinement": report_value(confinement),
            "warnings": crate::lint::interpreter_voids_rules(p)
                .map(|f| f.to_string())
                .into_iter()
                .collect::<Vec<_>>(),
        });
        self.described(detail)
    }
}

/// What confinement a command would get, in one line's worth of fields.
pub(super) fn report_gist(r: &ConfinementReport) -> Value {
    let mut gist = json!({
        "mode": r.mode,
        "view": r.view.view,
        "landlock": r.landlock.enforced,
        "seccomp": r.seccomp.enabled,
        "capabilities": r.capabilities,
        "tcp": r.landlock.tcp,
    });
    if let Some(egress) = &r.egress {
        gist["egress"] = json!({ "tier": egress.tier, "detail": egress.detail });
    }
    gist
}

/// What the stages of `programs` may execute, by the command or anything it starts; `None`
/// where the exec allowlist does not bind.
fn may_execute<'p>(
    r: &ConfinementReport,
    programs: impl Iterator<Item = &'p std::path::Path>,
) -> Option<Value> {
    let e = &r.landlock.execute;
    if e.mode != "allowlist" {
        return None;
    }
    let mut may = e.every.clone();
    for program in programs {
        if let Some(own) = e.helpers.get(&program.display().to_string()) {
            may.extend(
                own.iter()
                    .filter(|p| !may.contains(p))
                    .cloned()
                    .collect::<Vec<_>>(),
            );
        }
    }
    Some(json!(may))
}

/// What may be executed, in a few words for `describe_policy`'s short form.
fn execute_words(r: &ConfinementReport) -> &'static str {
    match r.landlock.execute.mode {
        "allowlist" => {
            "only allowlisted programs and their helpers execute (explain_command lists them)"
        }
        "read-paths" => "anything beneath the read paths may execute",
        _ => "exec not confined",
    }
}

/// A confinement report as JSON (a plain struct: serializing it cannot fail).
pub(super) fn report_value(report: &ConfinementReport) -> Value {
    serde_json::to_value(report).unwrap_or_default()
}

/// What holds of git's trust surface ([`crate::held`]) in the view commands get.
fn git_trust(confinement: &ConfinementReport) -> &'static str {
    if confinement.view.view == ViewKind::Private {
        "every git directory in the jail, at any depth: the operator's (present at the first start) have their config, hooks, commondir, worktree entries, .git pointers and the paths their config names bound read-only; one a command makes is the model's, and after every call its config is rewritten from inert keys and its hooks leave the jail; an operation left in progress loses its exec lines; what the sweep moves goes outside the jail, and a sweep that cannot finish refuses every call until one does"
    } else {
        "host view: the operator's git config, hooks and commondir are held only by the argument checks and the file tools (an interpreter could write them); git directories a command makes are neutralized after every call as in the private view, and operations in progress lose their exec lines"
    }
}

/// What the model needs of the policy's ssh keys (issue 54): their names and how a git
/// commit is signed with them, through the server's agent; never the keys.
fn ssh_keys(p: &crate::config::TerminalPolicy) -> Option<Value> {
    let keys: Vec<Value> = p
        .credentials
        .ssh
        .iter()
        .map(|k| {
            let hosts: Vec<String> = k
                .hosts
                .iter()
                .map(|(h, port)| format!("{h}:{port}"))
                .collect();
            json!({"name": k.name, "signs_commits": k.sign, "logs_in_to": hosts})
        })
        .collect();
    (!keys.is_empty()).then(|| {
        json!({
            "held": keys,
            "how": "the server's SSH agent (SSH_AUTH_SOCK) holds them; git push and fetch over ssh:// to a host in logs_in_to just work (the server's ssh config, the pinned host keys, through the proxy); with gpg.format = ssh and user.signingkey (key::<public key>, or gpg.ssh.defaultKeyCommand = \"ssh-add -L\"), git commit -S signs where signs_commits; anything else is refused",
        })
    })
}
