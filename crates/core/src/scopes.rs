//! The live approval scopes of a server (issue 53): what a person granted beyond one call,
//! how many times each was used, and the approvals file that keeps the rules.
//!
//! A scope is made only from a person's answer (a form, the page, an MRTR answer, the
//! ticket CLI) by [`Scopes::grant`], which the approval ladder calls after recording it;
//! nothing the model sends (arguments, files, the environment) reaches it. What a scope
//! covers is [`safe_mcp_rules::scopes::Shape`]'s decision. A session scope is bound to its
//! caller and MCP session (over stateless HTTP, to its caller alone) and ends with the
//! session or its expiry; a rule is bound to its caller and kept in the approvals file
//! beside the policy (0600, outside the jail and every write path: the loader checks it),
//! until revoked or expired. Expiry is checked here, at every use. Each scope names the
//! server that made it (`<random>@<server id>`, as a ticket does): another replica neither
//! applies it nor revokes it, and says whose it is.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

pub use safe_mcp_rules::scopes::{
    Call, Example, Lifetimes, Preview, ScopeKind, Shape, ShapeError, in_words, is_plain_name,
};

/// A call as its scope sees it, owned: a ticket keeps it until a person decides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OwnedCall {
    /// A command: its tool, each stage's resolved program and argv, the canonical cwd.
    Command {
        tool: String,
        stages: Vec<(PathBuf, Vec<String>)>,
        cwd: PathBuf,
    },
    /// A file tool's write: its tool and the path in the jail.
    Write { tool: String, path: PathBuf },
}

impl OwnedCall {
    /// `decision`'s call as `tool` would make it: each stage's resolved program and its argv
    /// as the model wrote it (the hardening the server adds is the same for every call of
    /// the shape), and the canonical cwd; `None` when a stage or the cwd did not resolve.
    pub fn of_decision(tool: &str, decision: &crate::policy::Decision) -> Option<OwnedCall> {
        let stages = decision
            .stages
            .iter()
            .map(|s| Some((s.program.clone()?, s.argv.clone())))
            .collect::<Option<Vec<_>>>()?;
        Some(OwnedCall::Command {
            tool: tool.to_owned(),
            stages,
            cwd: decision.cwd.clone()?,
        })
    }

    /// The call, borrowed.
    pub fn as_call(&self) -> Call<'_> {
        match self {
            OwnedCall::Command { tool, stages, cwd } => Call::Command { tool, stages, cwd },
            OwnedCall::Write { tool, path } => Call::Write { tool, path },
        }
    }
}

/// One scope a person granted.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Scope {
    /// `<random>@<server id>`.
    pub id: String,
    /// Session or rule (`once` never becomes a scope).
    pub kind: ScopeKind,
    /// What it covers.
    pub shape: Shape,
    /// The shape in a line, redacted, as the person was shown it.
    pub described: String,
    /// The caller (`sub`) it is bound to; empty for nobody (stdio, or no authentication).
    pub caller: String,
    /// A session scope's MCP session; empty over stateless HTTP and for a rule.
    #[serde(default)]
    pub session: String,
    /// When it was granted and when it expires, in seconds since the epoch.
    pub granted_at: u64,
    pub expires_at: u64,
    /// How the person said yes: `form`, `url`, `mrtr`, `ticket-cli`.
    pub via: String,
    /// The uid of the person, where the channel knows it (the ticket CLI).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approver_uid: Option<u32>,
    /// How often it approved a call since this server started.
    #[serde(default)]
    pub uses: u64,
}

/// What a grant needs besides the call: who asked, where, and how the person answered.
#[derive(Debug, Clone)]
pub struct Grant<'a> {
    pub kind: ScopeKind,
    /// The places marked free (1-based; a write: non-empty for its directory's files).
    pub free: &'a [usize],
    pub caller: &'a str,
    pub session: &'a str,
    pub via: &'a str,
    pub approver_uid: Option<u32>,
}

/// Why a scope could not be granted, revoked or kept.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScopeError {
    /// The call has no shape a scope can take.
    #[error("{0}")]
    Shape(#[from] ShapeError),
    /// `once` is not a scope.
    #[error("once approves this call only; it makes no scope")]
    Once,
    /// No such scope here.
    #[error("there is no scope {0}: it was never granted, it expired, or it was revoked")]
    Unknown(String),
    /// Made by another server of a fleet.
    #[error("scope {id} belongs to server {owner}, and this is server {here}: revoke it there")]
    Elsewhere {
        id: String,
        owner: String,
        here: String,
    },
    /// The approvals file could not be written: the rule is not kept.
    #[error("the approvals file {0}")]
    File(String),
    /// No randomness for an id.
    #[error("no randomness for a scope's id: {0}")]
    Random(String),
}

/// The server's scopes.
pub struct Scopes {
    server: String,
    jail: PathBuf,
    file: Option<PathBuf>,
    life: Lifetimes,
    live: Mutex<Vec<Scope>>,
}

impl std::fmt::Debug for Scopes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scopes")
            .field("file", &self.file)
            .field("live", &lock(&self.live).len())
            .finish()
    }
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Scopes {
    /// The scopes of server `server` over `jail`, with the rules kept in `file` (none kept
    /// without one). A file that cannot be read as scopes is refused: the server says why
    /// and does not start, rather than drop rules a person made.
    pub fn load(
        server: &str,
        jail: &Path,
        file: Option<&Path>,
        life: Lifetimes,
    ) -> Result<Scopes, String> {
        let rules = match file {
            Some(path) => match std::fs::read_to_string(path) {
                Ok(text) if text.trim().is_empty() => Vec::new(),
                Ok(text) => serde_json::from_str::<Vec<Scope>>(&text).map_err(|e| {
                    format!(
                        "the approvals file {} is not a list of scopes ({e}); move it aside to start without its rules",
                        path.display()
                    )
                })?,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
                Err(e) => return Err(format!("the approvals file {}: {e}", path.display())),
            },
            None => Vec::new(),
        };
        let now = now();
        Ok(Scopes {
            server: server.to_owned(),
            jail: jail.to_path_buf(),
            file: file.map(Path::to_path_buf),
            life,
            live: Mutex::new(
                rules
                    .into_iter()
                    .filter(|s| s.kind == ScopeKind::Rule && s.expires_at > now)
                    .collect(),
            ),
        })
    }

    /// The preview of `call`'s choices, for the person; `None` when no scope can take it.
    pub fn preview(&self, call: &OwnedCall) -> Option<Preview> {
        Preview::of(&call.as_call(), &self.jail, self.life).ok()
    }

    /// The scope of this server that covers `call` for `caller` in `session`, its use
    /// counted; the oldest first.
    pub fn covering(&self, call: &OwnedCall, caller: &str, session: &str) -> Option<Scope> {
        let now = now();
        let mut live = lock(&self.live);
        live.retain(|s| s.expires_at > now);
        let found = live
            .iter_mut()
            .find(|s| self.usable_by(s, caller, session) && s.shape.covers(&call.as_call()))?;
        found.uses += 1;
        Some(found.clone())
    }

    /// The scope that would cover `call` for `caller` in `session`, its use not counted
    /// (`explain_command`).
    pub fn would_cover(&self, call: &OwnedCall, caller: &str, session: &str) -> Option<Scope> {
        let now = now();
        lock(&self.live)
            .iter()
            .find(|s| {
                s.expires_at > now
                    && self.usable_by(s, caller, session)
                    && s.shape.covers(&call.as_call())
            })
            .cloned()
    }

    /// A scope of another server that would cover `call`, for a refusal that names it.
    pub fn elsewhere_covering(&self, call: &OwnedCall, caller: &str) -> Option<Scope> {
        let now = now();
        lock(&self.live)
            .iter()
            .find(|s| {
                !self.mine(&s.id)
                    && s.expires_at > now
                    && s.caller == caller
                    && s.kind == ScopeKind::Rule
                    && s.shape.covers(&call.as_call())
            })
            .cloned()
    }

    fn mine(&self, id: &str) -> bool {
        crate::fleet::elsewhere(id, &self.server).is_none()
    }

    /// Whether `caller` in `session` may use scope `s` here: this server's, the caller's,
    /// and a rule or a scope of that session.
    fn usable_by(&self, s: &Scope, caller: &str, session: &str) -> bool {
        self.mine(&s.id)
            && s.caller == caller
            && (s.kind == ScopeKind::Rule || s.session == session)
    }

    /// Makes the scope a person chose for `call`; a rule is kept in the approvals file
    /// before it is returned. `redact` shows the shape as the trail may keep it.
    pub fn grant(
        &self,
        call: &OwnedCall,
        grant: &Grant<'_>,
        redact: impl Fn(&str) -> String,
    ) -> Result<Scope, ScopeError> {
        if grant.kind == ScopeKind::Once {
            return Err(ScopeError::Once);
        }
        let shape = Shape::of(&call.as_call(), grant.free)?;
        let id = crate::random::hex(12).map_err(|e| ScopeError::Random(e.to_string()))?;
        let now = now();
        let lasts = match grant.kind {
            ScopeKind::Rule => self.life.rule_seconds,
            _ => self.life.session_seconds,
        };
        let scope = Scope {
            id: crate::fleet::owned(&id, &self.server),
            kind: grant.kind,
            described: redact(&shape.describe(&self.jail)),
            shape,
            caller: grant.caller.to_owned(),
            session: if grant.kind == ScopeKind::Session {
                grant.session.to_owned()
            } else {
                String::new()
            },
            granted_at: now,
            expires_at: now + lasts,
            via: grant.via.to_owned(),
            approver_uid: grant.approver_uid,
            uses: 0,
        };
        let mut live = lock(&self.live);
        live.push(scope.clone());
        if scope.kind == ScopeKind::Rule
            && let Err(e) = self.keep(&live)
        {
            live.retain(|s| s.id != scope.id);
            return Err(e);
        }
        Ok(scope)
    }

    /// Ends scope `id` at once (a call it approved already runs on; the next one asks).
    pub fn revoke(&self, id: &str) -> Result<Scope, ScopeError> {
        if let Some(owner) = crate::fleet::elsewhere(id, &self.server) {
            return Err(ScopeError::Elsewhere {
                id: id.to_owned(),
                owner: owner.to_owned(),
                here: self.server.clone(),
            });
        }
        let mut live = lock(&self.live);
        let at = live
            .iter()
            .position(|s| s.id == id)
            .ok_or_else(|| ScopeError::Unknown(id.to_owned()))?;
        let gone = live.remove(at);
        if gone.kind == ScopeKind::Rule
            && let Err(e) = self.keep(&live)
        {
            live.insert(at, gone);
            return Err(e);
        }
        Ok(gone)
    }

    /// Every live scope, oldest first.
    pub fn list(&self) -> Vec<Scope> {
        let now = now();
        let mut live = lock(&self.live);
        live.retain(|s| s.expires_at > now);
        live.clone()
    }

    /// The live scopes of this server that `caller` in `session` may use.
    pub fn of(&self, caller: &str, session: &str) -> Vec<Scope> {
        self.list()
            .into_iter()
            .filter(|s| self.usable_by(s, caller, session))
            .collect()
    }

    /// Ends the session scopes of `session` (its MCP session closed).
    pub fn end_session(&self, session: &str) {
        lock(&self.live).retain(|s| !(s.kind == ScopeKind::Session && s.session == session));
    }

    /// Writes the rules among `live` to the approvals file: a fresh file beside it
    /// (0600), synced, then renamed over it.
    fn keep(&self, live: &[Scope]) -> Result<(), ScopeError> {
        let Some(path) = &self.file else {
            return Err(ScopeError::File(
                "is not set ([terminal.approvals] scopes_file), so no rule can be kept".into(),
            ));
        };
        let fail = |e: std::io::Error| ScopeError::File(format!("{}: {e}", path.display()));
        let rules: Vec<&Scope> = live.iter().filter(|s| s.kind == ScopeKind::Rule).collect();
        let text =
            serde_json::to_string_pretty(&rules).map_err(|e| ScopeError::File(e.to_string()))?;
        let mut fresh = path.as_os_str().to_owned();
        fresh.push(".new");
        let fresh = PathBuf::from(fresh);
        {
            use std::io::Write;
            use std::os::unix::fs::OpenOptionsExt;
            let _ = std::fs::remove_file(&fresh);
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&fresh)
                .map_err(fail)?;
            file.write_all(text.as_bytes()).map_err(fail)?;
            file.sync_all().map_err(fail)?;
        }
        std::fs::rename(&fresh, path).map_err(fail)
    }
}

#[cfg(test)]
mod tests;
