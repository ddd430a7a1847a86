//! Approval tickets (issue 34, item 2): approving a command for a client that cannot ask.
//!
//! Claude Desktop and claude.ai declare no elicitation, and a session on MCP 2026-07-28
//! forbids a server's requests to the client. There a command that needs approval is refused
//! with a ticket (`detail.approval.ticket`): the model tells the person, the person approves
//! it with something the model has never seen (`safe-mcp approvals approve TICKET`, which
//! reaches the running server over an owner-only socket beside the audit trail with a key
//! no command can read), and the model repeats the same call with `approval_ticket`.
//!
//! Owns what a ticket binds and when it is spent. A ticket is bound to the caller (`sub`),
//! the MCP session that asked, the tool and the exact command: a digest of every stage's
//! argv as it would run (not the redacted form, under which two different secrets read the
//! same) and the cwd. It can be redeemed once, only once approved, only before it expires,
//! only by that caller in that session for that command; anything else is refused and
//! says why. At most [`MAX_WAITING`] tickets wait at once (a model cannot fill memory with
//! them). A ticket names the server that issued it (`<random>@<server id>`, as a process
//! handle does): in a fleet, a ticket that reaches another replica is refused there naming
//! its owner. Holds no runtime and no socket: the binary serves the desk.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::Serialize;
use sha2::Digest;

/// Tickets waiting (or approved and not yet used) at once.
pub const MAX_WAITING: usize = 64;

/// Of those, one caller's (its `sub`; without one, its session's): one caller cannot fill
/// the desk for everyone.
pub const MAX_WAITING_PER_CALLER: usize = 16;

/// How long a ticket can be approved and then redeemed, by default.
pub const DEFAULT_TTL: Duration = Duration::from_secs(600);

/// What a ticket is for, as the person reads it and as the redeeming call must match it.
#[derive(Debug, Clone)]
pub struct TicketRequest {
    /// The tool (`run_command`, `start_process`).
    pub tool: &'static str,
    /// Each stage's argv as the person reads it (redacted).
    pub shown: Vec<Vec<String>>,
    /// The command as written (redacted).
    pub command: String,
    /// The working directory.
    pub cwd: String,
    /// Why approval is needed.
    pub reasons: Vec<String>,
    /// The digest of the exact command ([`digest`]).
    pub digest: [u8; 32],
    /// Who asked (`sub`; empty over stdio).
    pub caller: String,
    /// The MCP session that asked.
    pub session: String,
    /// The call as a scope sees it, for a person who approves it with a scope.
    pub scoped: Option<crate::scopes::OwnedCall>,
    /// What each scope would cover, as the person reads it (redacted).
    pub preview: Option<String>,
}

/// The digest that binds a ticket to one exact command: the tool, every stage's exact argv
/// and the cwd, each length-prefixed so that no two commands share one.
pub fn digest(tool: &str, stages: &[Vec<String>], cwd: &str) -> [u8; 32] {
    let mut h = sha2::Sha256::new();
    let mut part = |s: &str| {
        h.update((s.len() as u64).to_le_bytes());
        h.update(s.as_bytes());
    };
    part(tool);
    part(cwd);
    for argv in stages {
        part("|");
        for arg in argv {
            part(arg);
        }
    }
    h.finalize().into()
}

/// Where a ticket stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase", tag = "state")]
pub enum State {
    /// Waiting for a person.
    Pending,
    /// Approved by the user with this uid.
    Approved {
        /// The uid of the `safe-mcp approvals` process that approved it.
        by: u32,
    },
    /// Denied by the user with this uid.
    Denied {
        /// The uid that denied it.
        by: u32,
    },
}

/// A ticket as `safe-mcp approvals list` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct TicketView {
    /// The ticket.
    pub ticket: String,
    /// The tool.
    pub tool: &'static str,
    /// Each stage as it would run (redacted).
    pub stages: Vec<Vec<String>>,
    /// The command as written (redacted).
    pub command: String,
    /// The working directory.
    pub cwd: String,
    /// Why approval is needed.
    pub reasons: Vec<String>,
    /// Who asked (`sub`), empty over stdio.
    pub caller: String,
    /// When it expires, in seconds since the epoch.
    pub expires_at: u64,
    /// What each scope would cover (`approvals show`), when one can take it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preview: Option<String>,
    /// Where it stands.
    #[serde(flatten)]
    pub state: State,
}

struct Ticket {
    request: TicketRequest,
    expires: Instant,
    expires_at: u64,
    state: State,
}

impl Ticket {
    fn view(&self, id: &str) -> TicketView {
        TicketView {
            ticket: id.to_owned(),
            tool: self.request.tool,
            stages: self.request.shown.clone(),
            command: self.request.command.clone(),
            cwd: self.request.cwd.clone(),
            reasons: self.request.reasons.clone(),
            caller: self.request.caller.clone(),
            expires_at: self.expires_at,
            preview: self.request.preview.clone(),
            state: self.state,
        }
    }
}

/// Why a ticket could not be issued, decided or redeemed: a sentence for the model or the
/// person.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TicketError {
    /// No ticket by that name (never issued, expired, or used).
    #[error("there is no ticket {0} waiting: it was never issued, it expired, or it was used")]
    Unknown(String),
    /// Not approved (yet).
    #[error(
        "ticket {0} has not been approved yet: the person approves it with `safe-mcp approvals approve {0}` on the server's machine; then repeat this call"
    )]
    NotApproved(String),
    /// A person denied it.
    #[error("ticket {0} was denied; nothing ran")]
    Denied(String),
    /// Another caller, session or command than it was issued for.
    #[error(
        "ticket {0} was issued for another command, cwd, caller or session; it approves only the exact call that asked for it"
    )]
    Mismatch(String),
    /// Too many waiting.
    #[error("{MAX_WAITING} tickets are waiting already; approve, deny or let them expire first")]
    Full,
    /// Too many of this caller's waiting.
    #[error(
        "{MAX_WAITING_PER_CALLER} of your tickets are waiting already; ask the person to approve or deny them (safe-mcp approvals list), or let them expire, first"
    )]
    CallerFull,
    /// The server has no desk (its socket could not be opened).
    #[error(
        "this server has no approval desk (its socket beside the audit trail could not be opened), so no ticket can be approved"
    )]
    NoDesk,
    /// The ticket was already decided.
    #[error("ticket {0} was already decided")]
    Decided(String),
    /// Issued by another server of a fleet: the call or the approval reached the wrong
    /// replica.
    #[error(
        "ticket {ticket} belongs to server {owner}, and this is server {here}: approve it and repeat the call on the replica that issued it (route each MCP session, or each caller, to one replica; docs/FLEET.md)"
    )]
    Elsewhere {
        /// The ticket.
        ticket: String,
        /// The server that issued it.
        owner: String,
        /// This server.
        here: String,
    },
}

impl TicketError {
    /// The result code of a call refused for this: INVALID_REQUEST for a ticket of another
    /// replica (the request went to the wrong place), POLICY_DENIED for the rest.
    pub fn code(&self) -> crate::envelope::ResultCode {
        match self {
            TicketError::Elsewhere { .. } => crate::envelope::ResultCode::InvalidRequest,
            _ => crate::envelope::ResultCode::PolicyDenied,
        }
    }
}

/// The server's tickets.
pub struct Tickets {
    waiting: Mutex<HashMap<String, Ticket>>,
    ttl: Duration,
    desk: AtomicBool,
    server: String,
}

impl std::fmt::Debug for Tickets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Tickets")
    }
}

/// A ticket just issued.
#[derive(Debug, Clone, Serialize)]
pub struct Issued {
    /// Its name, which the model repeats as `approval_ticket`.
    pub ticket: String,
    /// When it expires, in seconds since the epoch.
    pub expires_at: u64,
}

impl Tickets {
    /// Tickets that live `ttl`, issued by the server named `server` (they say so); none
    /// can be issued until the desk is open.
    pub fn new(ttl: Duration, server: String) -> Tickets {
        Tickets {
            waiting: Mutex::new(HashMap::new()),
            ttl,
            desk: AtomicBool::new(false),
            server,
        }
    }

    /// Refuses `id` when another server issued it.
    fn here(&self, id: &str) -> Result<(), TicketError> {
        match crate::fleet::elsewhere(id, &self.server) {
            Some(owner) => Err(TicketError::Elsewhere {
                ticket: id.to_owned(),
                owner: owner.to_owned(),
                here: self.server.clone(),
            }),
            None => Ok(()),
        }
    }

    /// The binary's desk (its socket) is open: tickets can be approved, so they are issued.
    pub fn open_desk(&self) {
        self.desk.store(true, Ordering::Release);
    }

    /// Whether tickets can be approved here.
    pub fn has_desk(&self) -> bool {
        self.desk.load(Ordering::Acquire)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Ticket>> {
        let mut waiting = self.waiting.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        waiting.retain(|_, t| t.expires > now);
        waiting
    }

    /// Issues a ticket for `request`.
    pub fn issue(&self, request: TicketRequest) -> Result<Issued, TicketError> {
        if !self.has_desk() {
            return Err(TicketError::NoDesk);
        }
        let mut waiting = self.lock();
        if waiting.len() >= MAX_WAITING {
            return Err(TicketError::Full);
        }
        let same_caller = |t: &&Ticket| {
            if request.caller.is_empty() {
                t.request.caller.is_empty() && t.request.session == request.session
            } else {
                t.request.caller == request.caller
            }
        };
        if waiting.values().filter(same_caller).count() >= MAX_WAITING_PER_CALLER {
            return Err(TicketError::CallerFull);
        }
        let id = crate::random::hex(8).map_err(|_| TicketError::NoDesk)?;
        let id = crate::fleet::owned(&id, &self.server);
        let expires_at = SystemTime::now()
            .checked_add(self.ttl)
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_secs());
        waiting.insert(
            id.clone(),
            Ticket {
                request,
                expires: Instant::now() + self.ttl,
                expires_at,
                state: State::Pending,
            },
        );
        Ok(Issued {
            ticket: id,
            expires_at,
        })
    }

    /// Every ticket not expired or used, oldest expiry first.
    pub fn list(&self) -> Vec<TicketView> {
        let waiting = self.lock();
        let mut all: Vec<TicketView> = waiting.iter().map(|(id, t)| t.view(id)).collect();
        all.sort_by_key(|t| t.expires_at);
        all
    }

    /// One ticket.
    pub fn show(&self, id: &str) -> Result<TicketView, TicketError> {
        self.here(id)?;
        let waiting = self.lock();
        waiting
            .get(id)
            .map(|t| t.view(id))
            .ok_or_else(|| TicketError::Unknown(id.to_owned()))
    }

    /// What a scope granted with ticket `id` is made from: its call, caller and session.
    pub fn scoped(&self, id: &str) -> Option<(crate::scopes::OwnedCall, String, String)> {
        let waiting = self.lock();
        let t = waiting.get(id)?;
        let call = t.request.scoped.clone()?;
        Some((call, t.request.caller.clone(), t.request.session.clone()))
    }

    /// A person's decision on a pending ticket, by the user `by`.
    pub fn decide(&self, id: &str, approve: bool, by: u32) -> Result<TicketView, TicketError> {
        self.here(id)?;
        let mut waiting = self.lock();
        let ticket = waiting
            .get_mut(id)
            .ok_or_else(|| TicketError::Unknown(id.to_owned()))?;
        if ticket.state != State::Pending {
            return Err(TicketError::Decided(id.to_owned()));
        }
        ticket.state = if approve {
            State::Approved { by }
        } else {
            State::Denied { by }
        };
        Ok(ticket.view(id))
    }

    /// Spends an approved ticket for the exact call it was issued for; the approver's uid.
    /// A denied ticket is spent too; any other mismatch leaves it for the right call.
    pub fn redeem(
        &self,
        id: &str,
        caller: &str,
        session: &str,
        digest: &[u8; 32],
    ) -> Result<u32, TicketError> {
        self.here(id)?;
        let mut waiting = self.lock();
        let ticket = waiting
            .get(id)
            .ok_or_else(|| TicketError::Unknown(id.to_owned()))?;
        let r = &ticket.request;
        if r.caller != caller || r.session != session || &r.digest != digest {
            return Err(TicketError::Mismatch(id.to_owned()));
        }
        match ticket.state {
            State::Pending => Err(TicketError::NotApproved(id.to_owned())),
            State::Denied { .. } => {
                waiting.remove(id);
                Err(TicketError::Denied(id.to_owned()))
            }
            State::Approved { by } => {
                waiting.remove(id);
                Ok(by)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(argv: &[&str]) -> TicketRequest {
        let stages = vec![argv.iter().map(|s| s.to_string()).collect::<Vec<_>>()];
        TicketRequest {
            tool: "run_command",
            shown: stages.clone(),
            command: argv.join(" "),
            cwd: "/jail".into(),
            reasons: vec!["push".into()],
            digest: digest("run_command", &stages, "/jail"),
            caller: "alice".into(),
            session: "s1".into(),
            scoped: None,
            preview: None,
        }
    }

    #[test]
    fn a_ticket_runs_its_exact_call_once_after_approval() {
        let t = Tickets::new(DEFAULT_TTL, "replica-a".into());
        assert_eq!(
            t.issue(request(&["git", "push"])).unwrap_err(),
            TicketError::NoDesk
        );
        t.open_desk();
        let issued = t.issue(request(&["git", "push"])).unwrap();
        let d = request(&["git", "push"]).digest;
        let other = request(&["git", "push", "--force"]).digest;
        let id = issued.ticket.as_str();
        assert!(matches!(
            t.redeem(id, "alice", "s1", &d),
            Err(TicketError::NotApproved(_))
        ));
        t.decide(id, true, 1000).unwrap();
        assert!(matches!(
            t.redeem(id, "alice", "s1", &other),
            Err(TicketError::Mismatch(_))
        ));
        assert!(matches!(
            t.redeem(id, "bob", "s1", &d),
            Err(TicketError::Mismatch(_))
        ));
        assert!(matches!(
            t.redeem(id, "alice", "s2", &d),
            Err(TicketError::Mismatch(_))
        ));
        assert!(id.ends_with("@replica-a"), "{id}");
        let (random, _) = id.split_once('@').unwrap();
        let at_b = format!("{random}@replica-b");
        for refused in [
            t.redeem(&at_b, "alice", "s1", &d).unwrap_err(),
            t.decide(&at_b, true, 0).unwrap_err(),
            t.show(&at_b).unwrap_err(),
        ] {
            assert_eq!(
                refused.to_string().split(':').next(),
                Some(&*format!(
                    "ticket {at_b} belongs to server replica-b, and this is server replica-a"
                )),
                "a ticket of another replica names its owner"
            );
        }
        assert_eq!(t.redeem(id, "alice", "s1", &d), Ok(1000));
        assert!(matches!(
            t.redeem(id, "alice", "s1", &d),
            Err(TicketError::Unknown(_))
        ));
    }

    #[test]
    fn denied_and_expired_tickets_run_nothing() {
        let t = Tickets::new(Duration::from_millis(50), String::new());
        t.open_desk();
        let d = request(&["git", "push"]).digest;
        let denied = t.issue(request(&["git", "push"])).unwrap().ticket;
        t.decide(&denied, false, 0).unwrap();
        assert!(matches!(
            t.decide(&denied, true, 0),
            Err(TicketError::Decided(_))
        ));
        assert!(matches!(
            t.redeem(&denied, "alice", "s1", &d),
            Err(TicketError::Denied(_))
        ));
        let late = t.issue(request(&["git", "push"])).unwrap().ticket;
        t.decide(&late, true, 0).unwrap();
        std::thread::sleep(Duration::from_millis(80));
        assert!(matches!(
            t.redeem(&late, "alice", "s1", &d),
            Err(TicketError::Unknown(_))
        ));
    }

    #[test]
    fn digests_tell_commands_apart() {
        let one = |v: &[&[&str]]| {
            let stages: Vec<Vec<String>> = v
                .iter()
                .map(|a| a.iter().map(|s| s.to_string()).collect())
                .collect();
            digest("run_command", &stages, "/j")
        };
        assert_ne!(one(&[&["ab", "c"]]), one(&[&["a", "bc"]]));
        assert_ne!(one(&[&["a"], &["b"]]), one(&[&["a", "b"]]));
    }
}
