//! `safe-mcp`: the binary. Parses flags and dispatches: [`cli`] has the commands (serving
//! among them), [`mcp`] the two servers' tools as rmcp handlers. The services that decide
//! live in libraries: `safe_mcp_core`, `safe_mcp_exec`, `safe_mcp_proxy`, `safe_mcp_http`,
//! `safe_mcp_organizer`.
//!
//! Every startup failure prints `fatal: <reason>` on stderr and exits non-zero. Nothing here
//! decides what may run; that is `safe_mcp_core`.

#![forbid(unsafe_code)]

mod cli;
mod exit;
mod gateway;
mod logging;
mod mcp;
mod runtime;
mod shim;
mod ssh_agent;
mod ssh_bind;
mod ssh_keys;
mod ssh_login;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

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

/// `--config`, declared once: the policy file, else the environment's.
#[derive(clap::Args)]
struct PolicyFile {
    /// The policy file.
    #[arg(long = "config", env = safe_mcp_core::config::ENV_POLICY_FILE, value_name = "FILE")]
    path: Option<PathBuf>,
}

impl PolicyFile {
    /// The path given, if any (an empty value counts as none, as the loader reads it).
    fn get(&self) -> Option<&Path> {
        self.path.as_deref().filter(|p| !p.as_os_str().is_empty())
    }
}

#[derive(Subcommand)]
enum Cmd {
    /// Serve the terminal tools over MCP on stdio.
    Terminal {
        #[command(flatten)]
        config: PolicyFile,
        /// Serve the project directory DIR with the policy `init` writes for it (written on
        /// the first start, at its default place), instead of --config.
        #[arg(long, value_name = "DIR")]
        jail: Option<PathBuf>,
        /// Serve MCP Streamable HTTP at /mcp on ADDR (a loopback ADDRESS:PORT, or
        /// unix:PATH) instead of stdio.
        #[arg(long, value_name = "ADDR")]
        http: Option<String>,
    },
    /// Serve the files tools (the safe organizer) over MCP on stdio.
    Files {
        #[command(flatten)]
        config: PolicyFile,
        /// Serve MCP Streamable HTTP at /mcp on ADDR (a loopback ADDRESS:PORT, or
        /// unix:PATH) instead of stdio.
        #[arg(long, value_name = "ADDR")]
        http: Option<String>,
    },
    /// Print the verdict for a command as JSON; exit 0 allow, 1 deny, 2 error.
    Explain {
        #[command(flatten)]
        config: PolicyFile,
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
    /// Approve or deny the tickets a running terminal server gave for commands that need a
    /// person's approval (its clients could not ask); exit 0 done, 1 refused, 2 no server.
    Approvals {
        #[command(subcommand)]
        action: ApprovalsCmd,
    },
    /// Redact secrets from stdin to stdout.
    Redact {
        #[command(flatten)]
        config: PolicyFile,
    },
    /// Report what this kernel can enforce.
    Doctor {
        #[command(flatten)]
        config: PolicyFile,
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
        /// Where to write the policy (default: $XDG_CONFIG_HOME/safe-mcp/PROJECT.toml).
        #[arg(long)]
        output: Option<PathBuf>,
    },
    /// The MCP servers the terminal server runs confined and serves the tools of
    /// ([[gateway.servers]]): add one to a policy, or list them.
    Gateway {
        #[command(subcommand)]
        action: GatewayCmd,
    },
    /// Print shell completions (bash, zsh, fish) for safe-mcp on stdout.
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Write the man pages (safe-mcp.1, and one per subcommand) into DIR.
    Man {
        /// Where to write them (made if missing), such as ~/.local/share/man/man1.
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
    },
    /// Seed a temporary sandbox, start the real server, drive it with a real MCP client.
    Demo {
        /// Print every envelope in full, as the client receives it.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand)]
enum GatewayCmd {
    /// Append a [[gateway.servers]] entry for an installed MCP server to the policy (its
    /// read paths inferred from its files; its tools denied until --allow names them), and
    /// check that the policy loads; a policy that does not is left as it was.
    Add {
        #[command(flatten)]
        config: PolicyFile,
        /// The server's name: 1 to 24 of a-z, 0-9 and '-'; its tools are NAME__TOOL.
        name: String,
        /// A profile whose programs and read paths it gets (node, python); repeatable.
        #[arg(long = "profile", value_name = "NAME")]
        profiles: Vec<String>,
        /// A tool the model may call ("*" for all); repeatable.
        #[arg(long = "allow", value_name = "TOOL")]
        allow: Vec<String>,
        /// A domain it may reach through the proxy; repeatable (none: no network).
        #[arg(long = "domain", value_name = "NAME")]
        domains: Vec<String>,
        /// Its command: the program (a bare name on PATH, or an absolute path) and its
        /// arguments, files by absolute path.
        #[arg(last = true, required = true)]
        command: Vec<String>,
    },
    /// Show each server of the policy: its command, tools policy and confinement.
    List {
        #[command(flatten)]
        config: PolicyFile,
    },
}

#[derive(Subcommand)]
enum AuditCmd {
    /// Recompute the chain; print OK with the record count, or the first broken record.
    /// Exit 0 intact, 1 broken, 2 error.
    Verify {
        #[command(flatten)]
        config: PolicyFile,
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
    /// Write the policy's trail as one self-contained HTML page: the chain, calls over time,
    /// per tool, code and caller, refusals, network, approvals, sessions, the slowest calls.
    Report {
        #[command(flatten)]
        config: PolicyFile,
        /// Only records at or after this time (RFC 3339, or a prefix: 2026-12-02T06).
        #[arg(long, value_name = "TIME")]
        since: Option<String>,
        /// Write the page here instead of printing it.
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
        /// Report on the lines a receiver stored (one server's or a fleet's, as `audit
        /// verify --received` reads them) instead of the policy's trail; `-` or no file
        /// reads stdin. The policy, if given, only supplies the HMAC key.
        #[arg(long)]
        received: bool,
        /// The HMAC key file, when the received trails are keyed (with --received).
        #[arg(long, requires = "received")]
        key_file: Option<PathBuf>,
        /// The received files, with --received.
        #[arg(requires = "received")]
        files: Vec<PathBuf>,
    },
    /// One readable line per call and per network or approval record; coloured on a
    /// terminal.
    Tail {
        /// Keep reading as the trail grows (and across rotation).
        #[arg(short, long)]
        follow: bool,
        /// Print the records themselves (JSON Lines) instead of a line per call.
        #[arg(long)]
        json: bool,
        /// The trail.
        file: PathBuf,
    },
}

#[derive(Subcommand)]
enum ApprovalsCmd {
    /// The tickets waiting, and what each would run; the live scopes and their uses.
    List {
        #[command(flatten)]
        config: PolicyFile,
    },
    /// One ticket: every stage's argv, the cwd, why it needs approval, and what each scope
    /// would cover.
    Show {
        #[command(flatten)]
        config: PolicyFile,
        /// The ticket.
        ticket: String,
    },
    /// Approve it: the model's repeat of that exact call then runs, once; with `--scope
    /// session` or `--scope rule`, later calls of its shape (`show` previews it) run without
    /// asking too.
    Approve {
        #[command(flatten)]
        config: PolicyFile,
        /// The ticket.
        ticket: String,
        /// How long the yes lasts: once (the default), session, rule.
        #[arg(long, default_value = "once")]
        scope: String,
        /// A place (as `show` numbers them) whose word may vary; repeat for more.
        #[arg(long = "free")]
        free: Vec<usize>,
    },
    /// End a scope at once: a call it approved runs on, the next one asks.
    Revoke {
        #[command(flatten)]
        config: PolicyFile,
        /// The scope (`approvals list` shows them).
        scope: String,
    },
    /// Deny it: nothing runs.
    Deny {
        #[command(flatten)]
        config: PolicyFile,
        /// The ticket.
        ticket: String,
    },
}

#[derive(Subcommand)]
enum AuthCmd {
    /// Say whether `--http` would accept TOKEN, and if not, why (aud, iss, exp, kid, scope);
    /// exit 0 accepted, 1 refused, 2 error. The token is never printed.
    CheckToken {
        #[command(flatten)]
        config: PolicyFile,
        /// The token (a JWT; `-` reads it from stdin).
        token: String,
    },
}

#[derive(Subcommand)]
enum PolicyCmd {
    /// Load and validate; print a summary.
    Check {
        #[command(flatten)]
        config: PolicyFile,
    },
}

fn main() -> ExitCode {
    // Started from the ssh agent's directory as `ssh` or `proxy-shell`: an SSH login
    // (checked first: under those names it is never a ruled program's shim).
    if let Some(code) = ssh_login::run_if_login() {
        return code;
    }
    // Started inside a command's tree under a ruled program's name: the shim.
    if let Some(code) = shim::run_if_shim() {
        return code;
    }
    logging::install();
    let cli = Cli::parse();
    match cli.command {
        Cmd::Terminal { config, jail, http } => match (config.get(), jail) {
            (Some(_), Some(_)) => exit::fatal(
                "--jail and a policy file (--config or SAFE_MCP_POLICY_FILE) were both given; give one",
            ),
            (None, Some(jail)) => match cli::init::policy_for_jail(&jail) {
                Ok(policy) => cli::serve::serve_terminal(Some(&policy), http.as_deref()),
                Err(e) => exit::fatal(e),
            },
            (config, None) => cli::serve::serve_terminal(config, http.as_deref()),
        },
        Cmd::Files { config, http } => cli::serve::serve_files(config.get(), http.as_deref()),
        Cmd::Explain {
            config,
            cwd,
            command,
        } => cli::policy::explain(config.get(), cwd.as_deref(), command.join(" ")),
        Cmd::Policy {
            action: PolicyCmd::Check { config },
        } => cli::policy::policy_check(config.get()),
        Cmd::Audit {
            action:
                AuditCmd::Verify {
                    config,
                    key_file,
                    received,
                    files,
                },
        } if received => cli::audit::verify_received_cmd(config.get(), key_file.as_deref(), &files),
        Cmd::Audit {
            action:
                AuditCmd::Verify {
                    config,
                    key_file,
                    files,
                    ..
                },
        } => cli::audit::verify_cmd(config.get(), key_file.as_deref(), &files),
        Cmd::Audit {
            action:
                AuditCmd::Report {
                    config,
                    since,
                    out,
                    received,
                    key_file,
                    files,
                },
        } => {
            let source = if received {
                cli::report::Source::Received {
                    config: config.get(),
                    key_file: key_file.as_deref(),
                    files: &files,
                }
            } else {
                cli::report::Source::Policy(config.get())
            };
            cli::report::report_cmd(source, since.as_deref(), out.as_deref())
        }
        Cmd::Audit {
            action: AuditCmd::Tail { follow, json, file },
        } => cli::tail::tail_cmd(&file, follow, cli::tail::Style::for_stdout(json)),
        Cmd::Approvals { action } => match action {
            ApprovalsCmd::List { config } => cli::approvals::run(config.get(), "list", None, None),
            ApprovalsCmd::Show { config, ticket } => {
                cli::approvals::run(config.get(), "show", Some(&ticket), None)
            }
            ApprovalsCmd::Approve {
                config,
                ticket,
                scope,
                free,
            } => {
                let chosen = serde_json::json!({"scope": scope, "free": free});
                cli::approvals::run(config.get(), "approve", Some(&ticket), Some(chosen))
            }
            ApprovalsCmd::Deny { config, ticket } => {
                cli::approvals::run(config.get(), "deny", Some(&ticket), None)
            }
            ApprovalsCmd::Revoke { config, scope } => {
                cli::approvals::run(config.get(), "revoke", Some(&scope), None)
            }
        },
        Cmd::Redact { config } => cli::policy::redact(config.get()),
        Cmd::Auth {
            action: AuthCmd::CheckToken { config, token },
        } => cli::policy::check_token(config.get(), &token),
        Cmd::Doctor { config, json } => cli::doctor::doctor(config.get(), json),
        Cmd::Demo { json } => cli::demo::run(json),
        Cmd::Gateway { action } => gateway(action),
        Cmd::Completions { shell } => completions(shell),
        Cmd::Man { out } => man_pages(&out),
        Cmd::Init {
            profiles,
            jail,
            output,
        } => cli::init::run(&profiles, jail.as_deref(), output.as_deref()),
    }
}

/// `safe-mcp gateway ...`.
fn gateway(action: GatewayCmd) -> ExitCode {
    match action {
        GatewayCmd::Add {
            config,
            name,
            profiles,
            allow,
            domains,
            command,
        } => cli::gateway::add(
            config.get(),
            &cli::gateway::Add {
                name: &name,
                command: &command,
                profiles: &profiles,
                allow: &allow,
                domains: &domains,
            },
        ),
        GatewayCmd::List { config } => cli::gateway::show(config.get()),
    }
}

/// `safe-mcp completions SHELL`: into memory first, since clap_complete panics on a failed
/// write (a closed pipe).
fn completions(shell: clap_complete::Shell) -> ExitCode {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "safe-mcp", &mut script);
    match std::io::Write::write_all(&mut std::io::stdout(), &script) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => exit::fatal(e),
        _ => ExitCode::SUCCESS,
    }
}

/// `safe-mcp man --out DIR`: the pages, and which root makes `man safe-mcp` find them (man
/// looks in `<root>/man1`).
fn man_pages(out: &std::path::Path) -> ExitCode {
    let written =
        std::fs::create_dir_all(out).and_then(|()| clap_mangen::generate_to(Cli::command(), out));
    if let Err(e) = written {
        return exit::fatal(format!("{}: {e}", out.display()));
    }
    let in_man1 = out.file_name().and_then(|n| n.to_str()) == Some("man1");
    let root = if in_man1 {
        out.parent().unwrap_or(out)
    } else {
        out
    };
    println!("wrote the man pages to {}", out.display());
    if !in_man1 {
        println!(
            "note: man finds pages in a directory named man1; use --out {}/man1",
            out.display()
        );
    }
    println!(
        "read them with: MANPATH={}: man safe-mcp   (or put {} on MANPATH; ~/.local/share/man is searched when ~/.local/bin is on PATH)",
        root.display(),
        root.display()
    );
    ExitCode::SUCCESS
}
