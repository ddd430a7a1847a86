//! The terminal service itself: its parts (policy, jail, redactor, trail, HOME, sessions,
//! egress), how it is built from a policy, and what the transports read of it. The request
//! flow that uses them is in the sibling modules.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::audit::{Attempt, AuditLog, CallId, Caller, Gate, Server};
use crate::config::{Policy, TerminalPolicy};
use crate::envelope::OperationResult;
use crate::home::PrivateHome;
use crate::jail::JailRoot;
use crate::redact::{PatternError, Redactor};
use crate::sessions::SessionTable;
use crate::syntax::{self, CommandList, SyntaxError};

/// Extra raw bytes read past the cap, so a secret straddling the cap is redacted whole.
pub const REDACTION_SLACK_BYTES: usize = 16 * 1024;

/// The longest `stdin` a call may carry; like the command's own cap, an input bound.
pub const MAX_STDIN_BYTES: usize = 1024 * 1024;

/// `command`: a string split without a shell, or an argv array (one simple command).
#[derive(Debug, Clone)]
pub enum CommandInput {
    /// POSIX-quoted text.
    Line(String),
    /// One simple command, taken literally.
    Argv(Vec<String>),
}

impl CommandInput {
    pub(super) fn parse(&self) -> Result<CommandList, SyntaxError> {
        match self {
            CommandInput::Line(s) => syntax::parse(s),
            CommandInput::Argv(v) => CommandList::from_argv(v.clone()),
        }
    }

    pub(super) fn display(&self) -> String {
        match self {
            CommandInput::Line(s) => s.clone(),
            CommandInput::Argv(v) => v.join(" "),
        }
    }
}

/// A `run_command` call.
#[derive(Debug, Clone)]
pub struct RunRequest {
    /// What to run.
    pub command: CommandInput,
    /// Relative to the jail root, or absolute inside it.
    pub cwd: Option<String>,
    /// Text fed to the first stage.
    pub stdin: Option<String>,
    /// May lower, never raise, the policy's limit.
    pub timeout_seconds: Option<u64>,
    /// Told of the output as it comes, for progress notifications.
    pub observer: Option<Observer>,
    /// Asks a person when the command needs approval; `None`: this transport cannot.
    pub approver: Option<crate::approval::AskPerson>,
    /// Who asked (an authenticated HTTP caller); empty over stdio.
    pub caller: crate::audit::Caller,
    /// The MCP session (connection) that asked: a ticket is bound to it.
    pub session: String,
    /// A ticket a person approved for this exact call (`safe-mcp approvals approve`).
    pub approval_ticket: Option<String>,
    /// A nested call: the call whose command asked for it, and that command's standard
    /// descriptors, which its stages use.
    pub parent: Option<NestedParent>,
}

use safe_mcp_contract::{ConfinementSpec, Observer, ProcessLimits};

/// The confinement `policy` asks for, in the executor's terms.
pub fn confinement_spec(policy: &TerminalPolicy) -> ConfinementSpec {
    let sandbox = &policy.sandbox;
    let l = &policy.limits;
    ConfinementSpec {
        jail_root: policy.jail_root.clone(),
        mode: sandbox.mode,
        network: sandbox.network,
        egress: policy.network.mode == crate::egress::NetworkMode::Allowlist,
        unix_sockets: sandbox.unix_sockets,
        listen_ports: policy.network.listen_ports.clone(),
        read_paths: sandbox.read_paths.clone(),
        executables: super::executables::executables(policy),
        write_paths: policy.write_paths.clone(),
        read_only_files: sandbox.read_only_files.clone(),
        pinned_dirs: Vec::new(),
        exec_in_jail: sandbox.exec_in_jail,
        exec_log: policy.exec_log,
        namespaces: sandbox.namespaces,
        home: None,
        limits: ProcessLimits {
            cpu_seconds: l.cpu_seconds,
            memory_bytes: l.memory_bytes,
            file_size_bytes: l.file_size_bytes,
            open_files: l.open_files,
            processes: l.processes,
        },
    }
}

/// A nested call's parent: the call whose command asked, that command's standard
/// descriptors, how deep the call is, and its place among the parent's running ones.
#[derive(Debug, Clone)]
pub struct NestedParent {
    /// The parent's call id.
    pub call: String,
    /// The asking command's stdin, stdout and stderr.
    pub stdio: safe_mcp_contract::GivenStdio,
    /// 1 for a call a top-level call's command made, 2 for one its nested call's made, …
    pub depth: u8,
    /// Held while the nested call runs: the parent's count of running ones.
    pub(super) slot: Arc<NestedSlot>,
}

/// One running nested call of a parent; dropping it frees the place.
#[derive(Debug)]
pub struct NestedSlot(pub(super) Arc<std::sync::atomic::AtomicUsize>);

impl Drop for NestedSlot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
    }
}

// The nested calls' tokens ([`super::nested_calls`]) are kept here, with the service that
// holds them.

/// Who a token's nested calls are for: the call whose command asks, and how it was asked.
#[derive(Clone)]
pub(super) struct NestedCaller {
    pub(super) parent: String,
    /// How deep the token's call is (0: a top-level call).
    pub(super) depth: u8,
    /// Its nested calls running now.
    pub(super) running: Arc<std::sync::atomic::AtomicUsize>,
    pub(super) caller: crate::audit::Caller,
    pub(super) session: String,
    pub(super) approver: Option<crate::approval::AskPerson>,
}

/// The tokens of the calls now running.
#[derive(Default)]
pub(super) struct NestedCalls(pub(super) Arc<Mutex<HashMap<String, NestedCaller>>>);

impl std::fmt::Debug for NestedCalls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("NestedCalls")
    }
}

/// A registered token; dropping it ends the route.
pub(super) struct Route {
    pub(super) calls: Arc<Mutex<HashMap<String, NestedCaller>>>,
    pub(super) token: String,
}

impl Drop for Route {
    fn drop(&mut self) {
        if let Ok(mut calls) = self.calls.lock() {
            calls.remove(&self.token);
        }
    }
}

/// The shims of the programs with argument rules, beneath the server's temporary directory,
/// linking to this binary (`None` when no program is ruled).
fn nested_shims(
    policy: &TerminalPolicy,
) -> Result<Option<crate::nested::NestedShims>, crate::nested::ShimError> {
    let names = super::executables::ruled(policy);
    if names.is_empty() {
        return Ok(None);
    }
    let tmp = std::env::temp_dir();
    let exe = std::env::current_exe().map_err(|e| crate::nested::ShimError {
        parent: tmp.clone(),
        message: format!("this server's own binary: {e}"),
    })?;
    let writable: Vec<&std::path::Path> = std::iter::once(policy.jail_root.as_path())
        .chain(policy.write_paths.iter().map(std::path::PathBuf::as_path))
        .collect();
    crate::nested::NestedShims::create(&tmp, &exe, &names, &writable).map(Some)
}

/// Why the service could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServiceError {
    /// The policy has no terminal section.
    #[error("the policy has no [terminal] section")]
    NoTerminal,
    /// The policy has no audit log.
    #[error("the policy sets no audit_log")]
    NoAudit,
    /// A redaction pattern failed to compile.
    #[error(transparent)]
    Pattern(#[from] PatternError),
    /// The commands' HOME could not be made.
    #[error(transparent)]
    Home(#[from] crate::home::HomeError),
    /// The nested-call shims could not be made.
    #[error(transparent)]
    Shims(#[from] crate::nested::ShimError),
    /// The credentials' placeholders, or the proxy that adds the credentials, could not be
    /// made.
    #[error("credentials: {0}")]
    Credentials(String),
}

/// The terminal server's core: every rule, no transport.
#[derive(Debug)]
pub struct TerminalService {
    pub(super) policy: TerminalPolicy,
    pub(super) jail: JailRoot,
    pub(super) redactor: Redactor,
    pub(super) gate: std::sync::Arc<Gate>,
    pub(super) env: Vec<(String, String)>,
    /// Every command's HOME: empty, outside the jail, read-only to commands.
    pub(super) home: PrivateHome,
    /// The process sessions (see [`super::process`]).
    pub(super) sessions: SessionTable,
    /// Ports exposed at once ([`TerminalService::reserve_exposure`]).
    pub(super) exposed: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    /// `jail_bytes`: what the jail and the write paths hold, measured after calls.
    pub(super) usage: crate::usage::JailUsage,
    /// How the protected paths and every git directory's trust surface are held, once the
    /// server holds them ([`Self::hold_protected`]).
    pub(super) held: std::sync::OnceLock<crate::held::Holder>,
    /// Egress: the proxy that serves each call's connections ([`Self::with_egress`]).
    pub(super) egress: Option<std::sync::Arc<dyn EgressProvider>>,
    /// Approval tickets for clients that cannot be asked ([`crate::tickets`]).
    pub(super) tickets: std::sync::Arc<crate::tickets::Tickets>,
    /// Where the programs with argument rules are reached from inside a command's tree,
    /// when there are any ([`crate::nested`]).
    pub(super) nested: Option<crate::nested::NestedShims>,
    /// The tokens of the running calls whose commands may make nested calls.
    pub(super) nested_calls: NestedCalls,
    /// The credentials' placeholders and real values, which the proxy adds.
    pub(super) vault: std::sync::Arc<crate::credentials::Vault>,
    /// The CA bundle commands trust (the system's roots and the proxy's CA), when the proxy
    /// terminates TLS for credential hosts.
    pub(super) ca_bundle: Option<std::path::PathBuf>,
}

/// Makes the proxy of one call (egress, DESIGN §9): the proxy of `safe_mcp_proxy`, which
/// knows the network policy and writes the call's `network` records.
pub trait EgressProvider: Send + Sync + std::fmt::Debug {
    /// The proxy for the call `call`.
    fn for_call(&self, call: &CallId) -> safe_mcp_contract::Egress;

    /// The certificate bundle commands must trust for the hosts whose TLS the proxy
    /// terminates (the system's roots and the proxy's own CA), if it terminates any.
    fn ca_bundle(&self) -> Option<&std::path::Path> {
        None
    }
}

/// The variables the TLS clients commands run read their trusted roots from: each gets the
/// proxy's bundle.
pub const CA_VARIABLES: &[&str] = &[
    "SSL_CERT_FILE",
    "GIT_SSL_CAINFO",
    "CURL_CA_BUNDLE",
    "REQUESTS_CA_BUNDLE",
    "NODE_EXTRA_CA_CERTS",
    "CARGO_HTTP_CAINFO",
    "PIP_CERT",
];

/// The environment every command starts from: PATH (the nested calls' shims first), a
/// private HOME, UTF-8 text, git pinned to no system config and no prompt, then
/// `[terminal.env]` (named variables of the server's own environment, then fixed values;
/// the names were checked at load: never PATH, HOME, TMPDIR or LD_*).
fn command_env(
    terminal: &TerminalPolicy,
    path: String,
    home: &PrivateHome,
) -> Vec<(String, String)> {
    let mut env = vec![
        ("PATH".to_owned(), path),
        // Not the jail: an rc file the model writes there must not configure the next
        // command (see `home`).
        (
            "HOME".to_owned(),
            home.path().to_string_lossy().into_owned(),
        ),
        // UTF-8 text for every program, by the one category that decides it: the others
        // of C.UTF-8 are C's, and `LANG` would make each program that calls setlocale
        // load a dozen locale files to learn so (0.14 ms of every `echo`, measured).
        ("LC_CTYPE".to_owned(), "C.UTF-8".to_owned()),
        // Pins: no system git config, no credential prompts waiting on a terminal.
        ("GIT_CONFIG_NOSYSTEM".to_owned(), "1".to_owned()),
        ("GIT_TERMINAL_PROMPT".to_owned(), "0".to_owned()),
    ];
    // `[terminal.env]`: named variables of the server's own environment, then fixed
    // values; the names were checked at load (never PATH, HOME, TMPDIR or LD_*).
    let passed = terminal
        .env
        .pass
        .iter()
        .filter_map(|name| std::env::var(name).ok().map(|v| (name.clone(), v)));
    for (name, value) in passed.chain(terminal.env.set.iter().cloned()) {
        // An operator's locale is theirs whole: ours gives way to it.
        if matches!(name.as_str(), "LANG" | "LC_ALL") {
            env.retain(|(n, _)| n != "LC_CTYPE");
        }
        env.retain(|(n, _)| *n != name);
        env.push((name, value));
    }
    env
}

impl TerminalService {
    /// Builds the service from a validated policy, without egress: under
    /// `[terminal.network] mode = "allowlist"` its commands then have no way out (the
    /// executor refuses them); [`Self::with_egress`] gives them the proxy.
    pub fn new(policy: &Policy) -> Result<Self, ServiceError> {
        Self::with_egress(policy, |_, _, _| Ok(None))
    }

    /// Builds the service, and under `mode = "allowlist"` its proxy: `egress` is handed the
    /// network policy, the trail the proxy's `network` records go to and the credentials,
    /// and returns the proxy (or `None`). It is not called in any other mode.
    pub fn with_egress(
        policy: &Policy,
        egress: impl FnOnce(
            &crate::egress::NetworkPolicy,
            std::sync::Arc<Gate>,
            std::sync::Arc<crate::credentials::Vault>,
        ) -> Result<Option<std::sync::Arc<dyn EgressProvider>>, String>,
    ) -> Result<Self, ServiceError> {
        let terminal = policy.terminal.clone().ok_or(ServiceError::NoTerminal)?;
        let log = policy.audit.log.as_deref().ok_or(ServiceError::NoAudit)?;
        let vault = crate::credentials::Vault::new(&terminal.credentials)
            .map_err(|e| ServiceError::Credentials(format!("no placeholder could be made: {e}")))?;
        let vault = std::sync::Arc::new(vault);
        let redactor = Redactor::new(&policy.redaction)?;
        // The real values are redacted from results and the trail whatever they look like: a
        // second wall behind the proxy, which keeps them out of the view.
        for form in vault.forms() {
            redactor.add_literal(&form);
        }
        let jail = crate::policy::jail_of(&terminal);
        let path = terminal
            .path
            .iter()
            .map(|p| p.to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join(":");
        let home = PrivateHome::create(&std::env::temp_dir(), &terminal.jail_root)?;
        let nested = nested_shims(&terminal)?;
        // The shims first: a command that starts a ruled program by name reaches the server.
        let path = match &nested {
            Some(shims) => format!("{}:{path}", shims.bin().display()),
            None => path,
        };
        let mut env = command_env(&terminal, path, &home);
        // Each credential's variable holds its placeholder, never the value.
        env.extend(vault.env());
        let usage = crate::usage::JailUsage::new(
            terminal.limits.jail_bytes,
            std::iter::once(terminal.jail_root.clone())
                .chain(terminal.write_paths.iter().cloned())
                .collect(),
        );
        let gate = std::sync::Arc::new(Gate::new(
            AuditLog::open(log, policy.audit_options()),
            Server::Terminal,
        ));
        let egress = match terminal.network.mode {
            crate::egress::NetworkMode::Allowlist => egress(
                &terminal.network,
                std::sync::Arc::clone(&gate),
                std::sync::Arc::clone(&vault),
            )
            .map_err(ServiceError::Credentials)?,
            _ => None,
        };
        if !vault.is_empty() && egress.is_none() {
            return Err(ServiceError::Credentials(
                "credentials need the egress proxy, and this server has none".into(),
            ));
        }
        let ca_bundle = egress
            .as_ref()
            .and_then(|e| e.ca_bundle())
            .map(std::path::Path::to_path_buf);
        if let Some(bundle) = &ca_bundle {
            let bundle = bundle.to_string_lossy();
            for name in CA_VARIABLES {
                env.retain(|(n, _)| n != name);
                env.push(((*name).to_owned(), bundle.clone().into_owned()));
            }
        }
        let terminal_ticket_ttl = terminal.approvals.ticket_ttl;
        let server = gate.log().server_id();
        let sessions = SessionTable::for_server(server.clone());
        Ok(TerminalService {
            gate,
            policy: terminal,
            jail,
            redactor,
            env,
            home,
            sessions,
            exposed: Default::default(),
            usage,
            held: std::sync::OnceLock::new(),
            egress,
            tickets: std::sync::Arc::new(crate::tickets::Tickets::new(terminal_ticket_ttl, server)),
            nested,
            nested_calls: Default::default(),
            vault,
            ca_bundle,
        })
    }

    /// Refuses `env:` credentials where commands run in the host's view (`view`, as the
    /// executor made it): `/proc/<server>/environ` would show them the real values.
    pub fn credentials_fit(&self, view: safe_mcp_contract::ViewKind) -> Result<(), ServiceError> {
        let from_env: Vec<&str> = self
            .policy
            .credentials
            .specs
            .iter()
            .filter(|s| matches!(s.source, crate::credentials::Source::Env(_)))
            .map(|s| s.name.as_str())
            .collect();
        if from_env.is_empty() || view == safe_mcp_contract::ViewKind::Private {
            return Ok(());
        }
        Err(ServiceError::Credentials(format!(
            "[[terminal.credentials]] {} come from the server's environment, and commands here run in the host's view, where /proc shows them that environment; use from = \"file:PATH\" (a file of mode 0600 outside every root), or a private view ([terminal.sandbox] namespaces = \"required\")",
            from_env.join(", ")
        )))
    }

    /// Reads the `file:` credentials again (on SIGHUP): a line for each that changed or
    /// could not be read.
    pub fn reload_credentials(&self) -> Vec<String> {
        let said = self.vault.reload();
        for form in self.vault.forms() {
            self.redactor.add_literal(&form);
        }
        said
    }

    /// The credentials' placeholders and values.
    pub fn vault(&self) -> &std::sync::Arc<crate::credentials::Vault> {
        &self.vault
    }

    /// The nested-call shims, when some allowlisted program has argument rules.
    pub fn nested_shims(&self) -> Option<&crate::nested::NestedShims> {
        self.nested.as_ref()
    }

    /// The confinement this server's commands get: the policy's, plus read access to
    /// their HOME.
    pub fn confinement_spec(&self) -> ConfinementSpec {
        let mut spec = confinement_spec(&self.policy);
        spec.home = Some(self.home.path().to_path_buf());
        // The shims are read and executed like a program of the list: their directory is
        // in the view, the binary they link to executable by every stage.
        if let Some(shims) = &self.nested {
            spec.read_paths.push(shims.dir().to_path_buf());
            spec.read_paths.push(shims.exe().to_path_buf());
            if let Some(list) = spec.executables.as_mut() {
                list.every.push(shims.exe().to_path_buf());
            }
        }
        if let Some(bundle) = &self.ca_bundle {
            spec.read_paths.push(bundle.clone());
        }
        if let Some(plan) = self.held.get().map(crate::held::Holder::plan) {
            spec.read_only_files.extend(plan.read_only.iter().cloned());
            spec.pinned_dirs.extend(plan.pinned.iter().cloned());
        }
        spec
    }

    /// What a starting server makes on disk before its confinement is built, once: the
    /// profiles' caches with their placeholders, and what holding the protected paths and
    /// git's trust surface needs ([`crate::held`]), then the first sweep. `explain`, `policy
    /// check` and the reports never call it, so they change nothing on disk. Returns lines
    /// for the server's log.
    pub fn hold_protected(&self) -> Result<Vec<String>, String> {
        if self.held.get().is_some() {
            return Ok(Vec::new());
        }
        let gone = crate::config::make_caches(&self.policy.caches, &self.policy.jail_root)?;
        let area = crate::held::area_for(self.gate.log().path());
        let (holder, notes) = crate::held::Holder::start(
            &self.policy.jail_root,
            &self.policy.protected,
            &self.policy.write_paths,
            area,
        )
        .map_err(|e| format!("[terminal] protected_paths: {e}"))?;
        let _ = self.held.set(holder);
        self.sweep_protected(&CallId::new("start"));
        let mut notes = notes;
        notes.extend(gone.iter().map(|dir| {
            format!(
                "removed the profile caches of a jail that is gone: {}",
                dir.display()
            )
        }));
        Ok(notes)
    }

    /// At exit: the last sweep, and what the server made to hold paths removed.
    pub fn release_protected(&self) {
        if let Some(holder) = self.held.get() {
            let swept = holder.release();
            self.record_swept(&CallId::new("exit"), &swept);
        }
    }

    /// Counts `root` (the executor's scratch root: the calls' TMPDIRs) in `jail_bytes`.
    pub fn count_in_jail_bytes(&self, root: std::path::PathBuf) {
        self.usage.add_root(root);
    }

    /// Sweeps the jail ([`crate::held::Holder::sweep`]): records each change and returns a
    /// line for each (for the result).
    pub(crate) fn sweep_protected(&self, call: &CallId) -> Vec<String> {
        let Some(holder) = self.held.get() else {
            return Vec::new();
        };
        let swept = holder.sweep();
        self.record_swept(call, &swept)
    }

    /// Why calls are refused now: a sweep that could not finish.
    pub(crate) fn held_refusal(&self) -> Option<String> {
        self.held.get().and_then(crate::held::Holder::refusal)
    }

    fn record_swept(&self, call: &CallId, swept: &crate::held::Swept) -> Vec<String> {
        let mut lines = Vec::new();
        for change in &swept.changes {
            let record = crate::audit::ProtectedRecord::of(call, change);
            if let Err(e) = self.record_event("protected", &record, false) {
                eprintln!("safe-mcp: warning: a protected-path record was not written: {e}");
            }
            lines.push(change.to_string());
        }
        if let Some(why) = &swept.breach {
            let record = crate::audit::ProtectedRecord::breach(call, why);
            if let Err(e) = self.record_event("protected", &record, true) {
                eprintln!("safe-mcp: warning: a protected-path record was not written: {e}");
            }
        }
        lines
    }

    /// The approval tickets, for the binary's desk (`safe-mcp approvals`).
    pub fn tickets(&self) -> &std::sync::Arc<crate::tickets::Tickets> {
        &self.tickets
    }

    /// The terminal policy in force.
    pub fn policy(&self) -> &TerminalPolicy {
        &self.policy
    }

    /// The audit trail.
    pub fn audit(&self) -> &AuditLog {
        self.gate.log()
    }

    /// Appends a record of `kind` (the transport's `http` records, the protected sweep's) to
    /// the trail.
    pub fn record_event(
        &self,
        kind: &str,
        record: &impl serde::Serialize,
        durable: bool,
    ) -> Result<(), crate::audit::AuditError> {
        self.gate.append(kind, record, durable)
    }

    /// The audit gate, for the file tools' records ([`crate::file_tools`]).
    pub(crate) fn gate(&self) -> &Gate {
        &self.gate
    }

    /// The redactor (shared with the CLI's `redact`).
    pub fn redactor(&self) -> &Redactor {
        &self.redactor
    }

    /// Records a call refused before the core saw it (arguments that do not parse).
    /// `request` is what was asked, rendered; it is redacted.
    pub fn record_refusal(
        &self,
        tool: &'static str,
        request: &str,
        result: &OperationResult,
        caller: &Caller,
    ) {
        let attempt = self.attempt_for(tool, request, caller);
        self.gate.record(attempt, &self.redacted(result.clone()));
    }

    pub(crate) fn attempt_for(
        &self,
        tool: &'static str,
        request: &str,
        caller: &Caller,
    ) -> Attempt {
        let mut attempt = Attempt::new(&self.gate.begin(), tool, self.redactor.redact(request));
        attempt.caller = caller.clone();
        attempt
    }
}
