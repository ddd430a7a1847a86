//! `safe-mcp`: the binary. Parses flags, loads the policy, wires the core to MCP or stdout.
//!
//! Every startup failure prints `fatal: <reason>` on stderr and exits non-zero. Nothing here
//! decides what may run; that is `safe_mcp_core`.

#![forbid(unsafe_code)]

mod approval;
mod audit_cli;
mod demo;
mod exit;
mod file_tools_server;
mod files_server;

mod init;
mod progress;
mod runtime;
mod stdio;
mod terminal_server;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand};
use rmcp::ServiceExt;
use safe_mcp_core::ResultCode;
use safe_mcp_core::config::{Policy, ProcessEnv, SandboxMode, Section};
use safe_mcp_core::load::load_policy;
use safe_mcp_core::redact::Redactor;
use safe_mcp_core::terminal::confinement_spec;
use safe_mcp_core::terminal::{CommandInput, TerminalService};
use safe_mcp_exec::{LocalExecutor, planned_report};
use safe_mcp_http as http;

use exit::{fatal, say};

#[derive(Parser)]
#[command(
    name = "safe-mcp",
    version,
    about = "MCP servers that let an AI model act on a machine without being trusted"
)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Serve the terminal tools over MCP on stdio.
    Terminal {
        /// The policy file (else SAFE_MCP_POLICY_FILE).
        #[arg(long)]
        config: Option<PathBuf>,
        /// Serve MCP Streamable HTTP at /mcp on ADDR (a loopback ADDRESS:PORT, or
        /// unix:PATH) instead of stdio.
        #[arg(long, value_name = "ADDR")]
        http: Option<String>,
    },
    /// Serve the files tools (the safe organizer) over MCP on stdio.
    Files {
        /// The policy file (else SAFE_MCP_POLICY_FILE).
        #[arg(long)]
        config: Option<PathBuf>,
        /// Serve MCP Streamable HTTP at /mcp on ADDR (a loopback ADDRESS:PORT, or
        /// unix:PATH) instead of stdio.
        #[arg(long, value_name = "ADDR")]
        http: Option<String>,
    },
    /// Print the verdict for a command as JSON; exit 0 allow, 1 deny, 2 error.
    Explain {
        /// The policy file (else SAFE_MCP_POLICY_FILE).
        #[arg(long)]
        config: Option<PathBuf>,
        /// Working directory inside the jail.
        #[arg(long)]
        cwd: Option<String>,
        /// The command, as one string.
        #[arg(last = true, required = true)]
        command: Vec<String>,
    },
    /// Validate a policy file.
    Policy {
        #[command(subcommand)]
        action: PolicyCmd,
    },
    /// Check OAuth bearer tokens against a policy's [http.auth].
    Auth {
        #[command(subcommand)]
        action: AuthCmd,
    },
    /// Verify or read the audit trail.
    Audit {
        #[command(subcommand)]
        action: AuditCmd,
    },
    /// Redact secrets from stdin to stdout.
    Redact {
        /// A policy whose [redaction] settings to use.
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Report what this kernel can enforce.
    Doctor {
        /// Also report the confinement a policy would apply.
        #[arg(long)]
        config: Option<PathBuf>,
        /// Print the whole report as JSON instead of the verdict and a summary.
        #[arg(long)]
        json: bool,
    },
    /// Write a commented, working policy for a project and print the MCP client config.
    Init {
        /// A built-in profile (git, rust, python, node, readonly); repeatable.
        #[arg(long = "profile")]
        profiles: Vec<String>,
        /// The project directory the model works in (default: the current directory).
        #[arg(long)]
        jail: Option<PathBuf>,
        /// Where to write the policy (default: $XDG_CONFIG_HOME/safe-mcp/<project>.toml).
        #[arg(long)]
        output: Option<PathBuf>,
    },
    /// Seed a temporary sandbox, start the real server, drive it with a real MCP client.
    Demo {
        /// Print every envelope in full, as the client receives it.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand)]
enum AuditCmd {
    /// Recompute the chain; print OK with the record count, or the first broken record.
    /// Exit 0 intact, 1 broken, 2 error.
    Verify {
        /// A policy whose audit_hmac_key_file to use.
        #[arg(long)]
        config: Option<PathBuf>,
        /// The HMAC key file, when the trail is keyed.
        #[arg(long)]
        key_file: Option<PathBuf>,
        /// The lines as a receiver stored them (OTLP bodies or syslog messages, one per
        /// line, any order, duplicates allowed): verify by seq and report gaps. `-` or no
        /// file reads stdin.
        #[arg(long)]
        received: bool,
        /// Files oldest first; one live file brings its rotated `.N` siblings along.
        #[arg(required_unless_present = "received")]
        files: Vec<PathBuf>,
    },
    /// One readable line per call.
    Tail {
        /// Keep reading as the trail grows (and across rotation).
        #[arg(short, long)]
        follow: bool,
        /// The trail.
        file: PathBuf,
    },
}

#[derive(Subcommand)]
enum AuthCmd {
    /// Say whether `--http` would accept TOKEN, and if not, why (aud, iss, exp, kid, scope);
    /// exit 0 accepted, 1 refused, 2 error. The token is never printed.
    CheckToken {
        /// The policy file (else SAFE_MCP_POLICY_FILE).
        #[arg(long)]
        config: Option<PathBuf>,
        /// The token (a JWT; `-` reads it from stdin).
        token: String,
    },
}

#[derive(Subcommand)]
enum PolicyCmd {
    /// Load and validate; print a summary.
    Check {
        /// The policy file (else SAFE_MCP_POLICY_FILE).
        #[arg(long)]
        config: Option<PathBuf>,
    },
}

fn load(config: Option<&Path>, section: Section) -> Result<Policy, String> {
    load_policy(config, &ProcessEnv, section).map_err(|e| e.to_string())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Cmd::Terminal { config, http } => serve_terminal(config.as_deref(), http.as_deref()),
        Cmd::Files { config, http } => serve_files(config.as_deref(), http.as_deref()),
        Cmd::Explain {
            config,
            cwd,
            command,
        } => explain(config.as_deref(), cwd.as_deref(), command.join(" ")),
        Cmd::Policy {
            action: PolicyCmd::Check { config },
        } => policy_check(config.as_deref()),
        Cmd::Audit {
            action:
                AuditCmd::Verify {
                    config,
                    key_file,
                    received,
                    files,
                },
        } if received => {
            audit_cli::verify_received_cmd(config.as_deref(), key_file.as_deref(), &files)
        }
        Cmd::Audit {
            action:
                AuditCmd::Verify {
                    config,
                    key_file,
                    files,
                    ..
                },
        } => audit_cli::verify_cmd(config.as_deref(), key_file.as_deref(), &files),
        Cmd::Audit {
            action: AuditCmd::Tail { follow, file },
        } => audit_cli::tail_cmd(&file, follow),
        Cmd::Redact { config } => redact(config.as_deref()),
        Cmd::Auth {
            action: AuthCmd::CheckToken { config, token },
        } => check_token(config.as_deref(), &token),
        Cmd::Doctor { config, json } => doctor(config.as_deref(), json),
        Cmd::Demo { json } => demo::run(json),
        Cmd::Init {
            profiles,
            jail,
            output,
        } => init::run(&profiles, jail.as_deref(), output.as_deref()),
    }
}

fn serve_terminal(config: Option<&Path>, http: Option<&str>) -> ExitCode {
    let policy = match load(config, Section::Terminal) {
        Ok(p) => p,
        Err(e) => return fatal(e),
    };
    let listen = match http
        .map(|a| http::Listen::parse(a, policy.http.oauth.is_some()))
        .transpose()
    {
        Ok(l) => l,
        Err(e) => return fatal(e),
    };
    let service = TerminalService::with_egress(&policy, |network, trail| {
        Some(Arc::new(safe_mcp_proxy::Proxy::new(network.clone(), trail)))
    });
    let service = match service {
        Ok(s) => Arc::new(s),
        Err(e) => return fatal(e),
    };
    if let Err(e) = start_shipping(&policy, service.audit(), "terminal") {
        return fatal(e);
    }
    if let Err(e) = service.hold_protected() {
        return fatal(e);
    }
    let terminal = service.policy();
    let executor = match LocalExecutor::new(&service.confinement_spec()) {
        Ok(x) => x,
        Err(e @ safe_mcp_exec::ConfineError::Namespaces(_)) => {
            return fatal(format!(
                "{e} (set [terminal.sandbox] namespaces = \"auto\" to fall back to the host's view)"
            ));
        }
        Err(e) => {
            return fatal(format!(
                "{e}; sandbox mode is \"{}\" (set [terminal.sandbox] mode = \"best-effort\" to run less confined)",
                terminal.sandbox.mode.as_str()
            ));
        }
    };
    if terminal.sandbox.mode == SandboxMode::Off {
        eprintln!(
            "safe-mcp: WARNING: [terminal.sandbox] mode = \"off\": commands are confined by path checks only, not by the kernel"
        );
    }
    for p in safe_mcp_core::preflight::access_problems(&policy) {
        eprintln!("safe-mcp: warning: {p}");
    }
    if let Err(e) = service.audit().check() {
        eprintln!(
            "safe-mcp: warning: the audit trail is not writable now ({e}); calls will get AUDIT_UNAVAILABLE until it is"
        );
    }
    // Four workers: an attempt record's group commit blocks its worker for one fsync, and the
    // stdio transport must keep moving meanwhile.
    let runs = terminal_server::Runs::default();
    // The approval page's port is taken now: one in use stops the start, not a call.
    let pages = match &terminal.approvals.url_base {
        Some((base, addr)) => match http::page::Pages::bind(base, *addr) {
            Ok(pages) => Some(pages),
            Err(e) => {
                return fatal(format!(
                    "[terminal.approvals] url_base = {base:?}: cannot listen on {addr}: {e}"
                ));
            }
        },
        None => None,
    };
    let executor: Arc<dyn safe_mcp_core::terminal::Executor> = Arc::new(executor);
    let make = {
        let (service, executor, runs) = (Arc::clone(&service), executor, Arc::clone(&runs));
        move |calls| {
            terminal_server::TerminalServer::new(
                Arc::clone(&service),
                Arc::clone(&executor),
                Arc::clone(&runs),
                pages.clone(),
                calls,
            )
        }
    };
    // When the client goes, so do the sessions: each is killed, and its run writes the start
    // call's outcome record ("server-exit") before the process ends.
    let record: http::limits::Recorder = {
        let service = Arc::clone(&service);
        Arc::new(move |r: &safe_mcp_core::audit::HttpRefusal| {
            service.record_event("http", r, false)
        })
    };
    let end = async move {
        let _ = service.stop_all("server-exit");
        let tasks: Vec<_> = runs
            .lock()
            .map(|mut r| r.drain(..).collect())
            .unwrap_or_default();
        let all = async {
            for task in tasks {
                let _ = task.await;
            }
        };
        if tokio::time::timeout(std::time::Duration::from_secs(5), all)
            .await
            .is_err()
        {
            eprintln!(
                "safe-mcp: warning: a session did not end within 5 seconds of the server's exit"
            );
        }
    };
    match listen {
        // Each HTTP client session gets a tool server of its own (its own session handles).
        Some(listen) => http::serve(
            &listen,
            move |calls| Ok(make(Some(calls))),
            policy.http.clone(),
            record,
            4,
            end,
        )
        .map_or_else(fatal, |()| ExitCode::SUCCESS),
        None => serve_stdio(make(None), 4, end),
    }
}

fn serve_files(config: Option<&Path>, http: Option<&str>) -> ExitCode {
    let policy = match load(config, Section::Files) {
        Ok(p) => p,
        Err(e) => return fatal(e),
    };
    let listen = match http
        .map(|a| http::Listen::parse(a, policy.http.oauth.is_some()))
        .transpose()
    {
        Ok(l) => l,
        Err(e) => return fatal(e),
    };
    let (service, notes) = match safe_mcp_organizer::FilesService::start(&policy) {
        Ok(s) => s,
        Err(e) => return fatal(e),
    };
    for note in notes {
        eprintln!("safe-mcp: files: {note}");
    }
    if let Err(e) = start_shipping(&policy, service.audit(), "files") {
        return fatal(e);
    }
    for p in safe_mcp_core::preflight::access_problems(&policy) {
        eprintln!("safe-mcp: warning: {p}");
    }
    if let Err(e) = service.audit().check() {
        eprintln!(
            "safe-mcp: warning: the audit trail is not writable now ({e}); actions will get AUDIT_UNAVAILABLE until it is"
        );
    }
    let service = Arc::new(service);
    let record: http::limits::Recorder = {
        let service = Arc::clone(&service);
        Arc::new(move |r: &safe_mcp_core::audit::HttpRefusal| {
            service.record_event("http", r, false)
        })
    };
    match listen {
        Some(listen) => http::serve(
            &listen,
            move |calls| {
                Ok(files_server::FilesServer::new(
                    Arc::clone(&service),
                    Some(calls),
                ))
            },
            policy.http.clone(),
            record,
            2,
            async {},
        )
        .map_or_else(fatal, |()| ExitCode::SUCCESS),
        None => serve_stdio(files_server::FilesServer::new(service, None), 2, async {}),
    }
}

/// Starts `[audit.ship]`'s sinks for `log`, when the policy names any.
fn start_shipping(
    policy: &safe_mcp_core::config::Policy,
    log: &safe_mcp_core::audit::AuditLog,
    server: &str,
) -> Result<(), String> {
    let Some(ship) = &policy.audit.ship else {
        return Ok(());
    };
    let shipper = safe_mcp_core::audit::ship::Shipper::start(ship, server).map_err(|e| {
        format!(
            "[audit.ship]: cannot start shipping (spool_dir {}): {e}",
            ship.spool_dir.display()
        )
    })?;
    log.ship_to(shipper);
    Ok(())
}

/// Serves `server` over stdio until the client closes the session.
fn serve_stdio<S: rmcp::ServerHandler>(
    server: S,
    workers: usize,
    on_end: impl std::future::Future<Output = ()>,
) -> ExitCode {
    let runtime = match runtime::build(workers) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let result = runtime.block_on(async move {
        let running = match stdio::pipes() {
            Some((r, w)) => server.serve(stdio::LineTransport::new(r, w)).await?,
            None => {
                let transport = stdio::LineTransport::new(tokio::io::stdin(), tokio::io::stdout());
                server.serve(transport).await?
            }
        };
        let waited = running.waiting().await;
        on_end.await;
        waited?;
        Ok::<_, Box<dyn std::error::Error>>(())
    });
    // Work still on a blocking thread (a session that would not die) does not hold the
    // process past this.
    runtime.shutdown_timeout(std::time::Duration::from_secs(2));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fatal(format!("the MCP session failed: {e}")),
    }
}

fn explain(config: Option<&Path>, cwd: Option<&str>, command: String) -> ExitCode {
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
    let result = service.explain(&CommandInput::Line(command), cwd, &confinement);
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
fn plural(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

fn policy_check(config: Option<&Path>) -> ExitCode {
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

fn redact(config: Option<&Path>) -> ExitCode {
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

fn check_token(config: Option<&Path>, token: &str) -> ExitCode {
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

/// doctor's first line: what a server run by this user would enforce here, in one line.
fn verdict(kernel: &safe_mcp_contract::KernelReport) -> String {
    let mut parts = Vec::new();
    if kernel.landlock_abi > 0 {
        parts.push(format!("Landlock {}", kernel.landlock_abi));
    }
    if kernel.seccomp_filter {
        parts.push("seccomp".to_owned());
    }
    parts.push(
        if kernel.private_view {
            "private view"
        } else {
            "host view only"
        }
        .to_owned(),
    );
    let tier = kernel
        .egress_tier
        .split_whitespace()
        .next()
        .unwrap_or("unavailable");
    parts.push(format!("egress {tier} tier"));
    let level = match (
        kernel.landlock_abi,
        kernel.seccomp_filter,
        kernel.private_view,
    ) {
        (abi, true, true) if abi >= 6 => "full",
        (0, _, _) | (_, false, _) => "none: under mode = \"enforce\" no command runs",
        _ => "partial",
    };
    format!("enforce: {level} ({})", parts.join(", "))
}

fn doctor(config: Option<&Path>, json: bool) -> ExitCode {
    let kernel = safe_mcp_exec::kernel_report();
    let line = verdict(&kernel);
    let mut report = serde_json::json!({ "verdict": line, "kernel": kernel });
    if config.is_some() {
        let policy = match load(config, Section::Terminal) {
            Ok(p) => p,
            Err(e) => return fatal(e),
        };
        if let Some(t) = &policy.terminal {
            report["policy_confinement"] =
                serde_json::to_value(planned_report(&confinement_spec(t))).unwrap_or_default();
        }
    }
    if !json {
        say!("{line}");
        let k = &report["kernel"];
        for (what, key) in [
            ("Landlock", "landlock"),
            ("commands keep", "command_capabilities"),
            ("egress", "egress_tier"),
            ("x32 syscalls", "x32_abi"),
        ] {
            say!("  {what}: {}", k[key].as_str().unwrap_or_default());
        }
        say!("  euid: {}", k["euid"]);
        if let Some(view) = report["policy_confinement"]["view"].as_object() {
            say!(
                "  the policy: view {} ({})",
                view.get("view")
                    .and_then(|v| v.as_str())
                    .unwrap_or_default(),
                view.get("setting")
                    .and_then(|v| v.as_str())
                    .unwrap_or_default()
            );
        }
        say!("(safe-mcp doctor --json for the whole report)");
        return ExitCode::SUCCESS;
    }
    match serde_json::to_string_pretty(&report) {
        Ok(text) => say!("{text}"),
        Err(e) => return fatal(e),
    }
    ExitCode::SUCCESS
}
