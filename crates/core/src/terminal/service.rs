//! The terminal service itself: its parts (policy, jail, redactor, trail, HOME, sessions,
//! egress), how it is built from a policy, and what the transports read of it. The request
//! flow that uses them is in the sibling modules.

use super::approval::Approvals;
use super::call::Begun;
use super::nested_calls::Nested;
use super::request::RunRequest;
use super::result::Results;
use super::state::{EgressProvider, TerminalService};
use crate::audit::{Attempt, AuditLog, CallId, Caller, Gate, Server};
use crate::config::{Policy, TerminalPolicy};
use crate::envelope::OperationResult;
use crate::home::PrivateHome;
use crate::redact::{PatternError, Redactor};
use crate::sessions::SessionTable;

use safe_mcp_contract::{ConfinementSpec, ProcessLimits};

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
    /// The approvals file could not be read.
    #[error("{0}")]
    Scopes(String),
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

/// The server's SSH agent's directory, when the policy holds an ssh key: `SSH_AUTH_SOCK`
/// for commands, and for logins the pinned hosts, the config and the links that git runs
/// (`GIT_SSH_COMMAND`), added to `env`.
fn agent_dir(
    terminal: &crate::config::TerminalPolicy,
    env: &mut Vec<(String, String)>,
) -> Result<Option<crate::agent_dir::AgentDir>, ServiceError> {
    if terminal.credentials.ssh.is_empty() {
        return Ok(None);
    }
    let writable: Vec<&std::path::Path> = std::iter::once(terminal.jail_root.as_path())
        .chain(terminal.write_paths.iter().map(std::path::PathBuf::as_path))
        .collect();
    let mut dir = crate::agent_dir::AgentDir::create(&std::env::temp_dir(), &writable)
        .map_err(ServiceError::Credentials)?;
    let socket = dir.socket().to_string_lossy().into_owned();
    env.push((crate::agent_dir::AGENT_VARIABLE.to_owned(), socket));
    if terminal.credentials.ssh.iter().any(|k| !k.hosts.is_empty()) {
        let exe = std::env::current_exe()
            .map_err(|e| ServiceError::Credentials(format!("the server's binary: {e}")))?;
        if writable.iter().any(|w| exe.starts_with(w)) {
            return Err(ServiceError::Credentials(format!(
                "the server's binary {} lies inside the jail or a write path, where a command could replace what SSH runs; install it elsewhere",
                exe.display()
            )));
        }
        let pinned: Vec<String> = terminal
            .credentials
            .ssh
            .iter()
            .flat_map(|k| k.known_hosts.iter().cloned())
            .collect();
        dir.prepare_logins(&exe, &pinned)
            .map_err(ServiceError::Credentials)?;
        let text = |p: &std::path::Path| p.to_string_lossy().into_owned();
        env.push((crate::agent_dir::DIR_VARIABLE.to_owned(), text(dir.dir())));
        env.push((
            crate::agent_dir::GIT_SSH_VARIABLE.to_owned(),
            text(&dir.dir().join("ssh")),
        ));
    }
    Ok(Some(dir))
}

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
        Self::with_egress_on(policy, None, egress)
    }

    /// [`Self::with_egress`], for a gateway server's narrowed policy when the terminal's
    /// service is given as `shared`: it records on the terminal's own trail (one chain), and holds the protected
    /// paths with the terminal's holder (one jail, one sweep).
    pub fn with_egress_on(
        policy: &Policy,
        shared: Option<&TerminalService>,
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
        let nested = Nested::new(&terminal)?;
        // The shims first: a command that starts a ruled program by name reaches the server.
        let path = match nested.shims() {
            Some(shims) => format!("{}:{path}", shims.bin().display()),
            None => path,
        };
        let mut env = command_env(&terminal, path, &home);
        // Each credential's variable holds its placeholder, never the value.
        env.extend(vault.env());
        // An ssh key is used through the server's agent, whose socket commands are told.
        let agent = agent_dir(&terminal, &mut env)?;
        let usage = crate::usage::JailUsage::new(
            terminal.limits.jail_bytes,
            std::iter::once(terminal.jail_root.clone())
                .chain(terminal.write_paths.iter().cloned())
                .collect(),
        );
        let gate = shared.map(|t| std::sync::Arc::clone(&t.gate));
        let gate = gate.unwrap_or_else(|| {
            std::sync::Arc::new(Gate::new(
                AuditLog::open(log, crate::load::audit_options(policy)),
                Server::Terminal,
            ))
        });
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
        let scopes = crate::scopes::Scopes::load(
            &server,
            &terminal.jail_root,
            terminal.approvals.scopes_file.as_deref(),
            crate::scopes::Lifetimes {
                session_seconds: terminal.approvals.session_scope_seconds,
                rule_seconds: terminal.approvals.rule_scope_seconds,
            },
        )
        .map_err(ServiceError::Scopes)?;
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
            held: shared.map_or_else(Default::default, |t| std::sync::Arc::clone(&t.held)),
            egress,
            tickets: std::sync::Arc::new(crate::tickets::Tickets::new(terminal_ticket_ttl, server)),
            scopes: std::sync::Arc::new(scopes),
            agent,
            nested,
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

    /// Runs a request end to end. Every path out of here is an envelope, and every call
    /// leaves an attempt and an outcome record, refusals included.
    pub async fn run(
        &self,
        req: RunRequest,
        executor: &dyn safe_mcp_contract::Executor,
        cancel: safe_mcp_contract::Cancel,
    ) -> OperationResult {
        let caller = req.caller.clone();
        let judged = match Begun::new(self, super::result::RUN).judge(req, executor) {
            Ok(judged) => judged,
            Err(refused) => return refused.record(),
        };
        match judged.approve().await {
            Ok(approved) => approved.run(executor, cancel, caller).await.record(),
            Err(refused) => refused.record(),
        }
    }

    /// The approval ladder ([`Approvals`]), the one commands and file writes climb.
    pub(crate) fn approvals(&self) -> Approvals<'_> {
        Approvals {
            settings: &self.policy.approvals,
            gate: &self.gate,
            tickets: &self.tickets,
            scopes: &self.scopes,
            redactor: &self.redactor,
        }
    }

    /// What turns an outcome into the envelope ([`Results`]).
    pub(super) fn results(&self) -> Results<'_> {
        Results {
            policy: &self.policy,
            redactor: &self.redactor,
        }
    }

    /// A verdict as the client and the trail see it ([`Results::redacted`]).
    pub(super) fn redacted(&self, result: OperationResult) -> OperationResult {
        self.results().redacted(result)
    }

    /// Raw bytes the executor keeps per stream (the cap, and the slack a secret straddling it needs to be recognised whole).
    pub fn capture_limit(&self) -> usize {
        self.results().capture_limit()
    }

    /// The nested-call shims, when some allowlisted program has argument rules.
    pub fn nested_shims(&self) -> Option<&crate::nested::NestedShims> {
        self.nested.shims()
    }

    /// The request a nested call makes (judged as that call's caller's, refused with the reason for a token no running call holds).
    pub fn nested_request(
        &self,
        ask: super::nested_calls::NestedAsk,
    ) -> Result<RunRequest, String> {
        self.nested.request(ask)
    }

    /// The confinement this server's commands get: the policy's, plus read access to
    /// their HOME.
    pub fn confinement_spec(&self) -> ConfinementSpec {
        let mut spec = confinement_spec(&self.policy);
        spec.home = Some(self.home.path().to_path_buf());
        // The shims are read and executed like a program of the list: their directory is
        // in the view, the binary they link to executable by every stage.
        if let Some(shims) = self.nested.shims() {
            spec.read_paths.push(shims.dir().to_path_buf());
            spec.read_paths.push(shims.exe().to_path_buf());
            if let Some(list) = spec.executables.as_mut() {
                list.every.push(shims.exe().to_path_buf());
            }
        }
        if let Some(bundle) = &self.ca_bundle {
            spec.read_paths.push(bundle.clone());
        }
        // The agent's socket (and, for logins, the config, the pinned keys and the links to
        // the server's binary, which every stage may execute).
        if let Some(agent) = &self.agent {
            spec.read_paths.push(agent.dir().to_path_buf());
            if let Some(exe) = agent.login_binary() {
                spec.read_paths.push(exe.to_path_buf());
                if let Some(list) = spec.executables.as_mut() {
                    list.every.push(exe.to_path_buf());
                }
            }
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
            if let Err(e) = self.gate.append("protected", &record, false) {
                tracing::warn!("a protected-path record was not written: {e}");
            }
            lines.push(change.to_string());
        }
        if let Some(why) = &swept.breach {
            let record = crate::audit::ProtectedRecord::breach(call, why);
            if let Err(e) = self.gate.append("protected", &record, true) {
                tracing::warn!("a protected-path record was not written: {e}");
            }
        }
        lines
    }

    /// A scope a person granted outside a call (with a ticket, at the desk), made and
    /// recorded as one granted in a call is; `asked_in` names what the grant answered.
    pub fn grant_scope(
        &self,
        call: &crate::scopes::OwnedCall,
        grant: &crate::scopes::Grant<'_>,
        asked_in: &str,
    ) -> Result<crate::scopes::Scope, String> {
        let preview = self.scopes.preview(call);
        self.approvals()
            .grant_scope(call, grant, preview.as_ref(), asked_in)
    }

    /// Where the server's SSH agent listens, when the policy holds an ssh key.
    pub fn ssh_agent(&self) -> Option<&crate::agent_dir::AgentDir> {
        self.agent.as_ref()
    }

    /// The ssh keys the agent holds.
    pub fn ssh_keys(&self) -> &[crate::credentials::SshKeySpec] {
        &self.policy.credentials.ssh
    }

    /// Redacts `literal` from every result and record from now on (an ssh key's public
    /// half: the agent's identity list stays out of what the model reads).
    pub fn redact_also(&self, literal: &str) {
        self.redactor.add_literal(literal);
    }

    /// The approval scopes, for the binary's desk (`safe-mcp approvals list|revoke`).
    pub fn scopes(&self) -> &std::sync::Arc<crate::scopes::Scopes> {
        &self.scopes
    }

    /// The approval tickets, for the binary's desk (`safe-mcp approvals`).
    pub fn tickets(&self) -> &std::sync::Arc<crate::tickets::Tickets> {
        &self.tickets
    }

    /// The jail, with the write and read paths a path may also name.
    pub fn jail(&self) -> &crate::jail::JailRoot {
        &self.jail
    }

    /// The terminal policy in force.
    pub fn policy(&self) -> &TerminalPolicy {
        &self.policy
    }

    /// The audit gate: the trail ([`Gate::log`]) and its records ([`Gate::append`]) for the
    /// file tools, the transport's `http` records and the protected sweep's.
    pub fn gate(&self) -> &Gate {
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
