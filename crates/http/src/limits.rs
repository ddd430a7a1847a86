//! How much of one `--http` server a caller may take (`[http] max_mcp_sessions`,
//! `max_requests` and their `_per_caller` forms), and whose an MCP session is.
//!
//! Runs after [`super::oauth`] has named the caller (or, without `[http.auth]`, for nobody:
//! then only the totals apply, since there is no one to count per):
//! - an MCP session id belongs to the caller that opened it; another caller presenting it
//!   gets 403;
//! - opening a session (a POST without `Mcp-Session-Id`) past the open sessions allowed, in
//!   all or for this caller, gets 429; a session counts until it is closed or rmcp drops it
//!   idle, which the session manager's own table tells;
//! - a POST past the requests being answered at once, in all or for this caller, gets 429.
//!   A request counts until its whole reply has been sent (a tool call's reply is a stream
//!   that ends with the result); and since a client that hangs up ends its request but not
//!   the call (rmcp runs it to its end), tool calls are counted again where they run
//!   ([`Calls`], against the same limits).
//!
//! A 429 carries `Retry-After` and says which limit. Each refusal here (429, and the 403 for
//! another caller's session) is an `http` record in the trail, naming the caller: these
//! requests carry a valid token (or come over loopback without auth), so a flood of them is
//! bounded by who may connect at all. Process sessions are limited apart, by
//! `[terminal.sessions]`, in all and per caller.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderValue, Method, Request, Response, StatusCode, header};
use axum::middleware::Next;
use futures_util::StreamExt;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use safe_mcp_core::audit::{Caller, HttpRefusal, HttpRefused};
use safe_mcp_core::config::HttpLimits;
use serde_json::json;

/// Writes an `http` record (a refusal by the transport) to the server's trail.
pub type Recorder =
    Arc<dyn Fn(&HttpRefusal) -> Result<(), safe_mcp_core::audit::AuditError> + Send + Sync>;

/// The shared counts, for every request of one server.
pub struct Limits {
    settings: HttpLimits,
    /// rmcp's sessions: the ones alive are the ones it still has.
    manager: Arc<LocalSessionManager>,
    state: Mutex<Counts>,
    /// Where refusals are recorded.
    record: Recorder,
}

#[derive(Default)]
struct Counts {
    /// `Mcp-Session-Id` → the caller that opened it (`""` for nobody).
    owners: HashMap<String, String>,
    /// Sessions being opened (an initialize in flight), per caller.
    opening: Tally,
    /// Requests being answered, per caller.
    in_flight: Tally,
}

/// How many of one thing (requests being answered, sessions being opened, tool calls
/// running) each caller has; `""` is nobody (no authentication).
#[derive(Default)]
struct Tally(HashMap<String, usize>);

/// Which limit one more would pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Over {
    Total,
    Caller,
}

impl Tally {
    fn total(&self) -> usize {
        self.0.values().sum()
    }

    fn of(&self, caller: &str) -> usize {
        self.0.get(caller).copied().unwrap_or(0)
    }

    /// Whether one more of `caller` stays within `total` in all and `per` for the caller
    /// (counting `all` and `theirs` more that this tally does not hold).
    fn room(
        &self,
        caller: &str,
        (total, per): (usize, usize),
        (all, theirs): (usize, usize),
    ) -> Result<(), Over> {
        if self.total() + all >= total {
            Err(Over::Total)
        } else if !caller.is_empty() && self.of(caller) + theirs >= per {
            // Per caller needs a caller: without authentication only the totals count.
            Err(Over::Caller)
        } else {
            Ok(())
        }
    }

    fn add(&mut self, caller: &str) {
        *self.0.entry(caller.to_owned()).or_default() += 1;
    }

    fn remove(&mut self, caller: &str) {
        if let Some(n) = self.0.get_mut(caller) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.0.remove(caller);
            }
        }
    }
}

/// Which limit a request met.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Full {
    Sessions,
    SessionsForCaller,
    Requests,
    RequestsForCaller,
}

impl Full {
    fn reason(self, settings: &HttpLimits) -> String {
        match self {
            Full::Sessions => format!(
                "{} MCP sessions are open, the most this server allows ([http] max_mcp_sessions); close one or try later",
                settings.max_mcp_sessions
            ),
            Full::SessionsForCaller => format!(
                "you have {} MCP sessions open, the most this server allows one caller ([http] max_mcp_sessions_per_caller); close one (DELETE /mcp) or let one idle out",
                settings.max_mcp_sessions_per_caller
            ),
            Full::Requests => format!(
                "{} requests are being answered, the most this server allows at once ([http] max_requests); try again shortly",
                settings.max_requests
            ),
            Full::RequestsForCaller => format!(
                "you have {} requests being answered, the most this server allows one caller at once ([http] max_requests_per_caller); wait for one to finish",
                settings.max_requests_per_caller
            ),
        }
    }
}

/// One of a caller's requests being answered (counted until the reply's last byte), or
/// sessions being opened (until the initialize is answered): counted in the tally `of`
/// picks until dropped.
struct Counted {
    limits: Arc<Limits>,
    caller: String,
    of: fn(&mut Counts) -> &mut Tally,
}

impl Counted {
    /// Counts one more for `caller` in `of`'s tally.
    fn take(
        limits: &Arc<Limits>,
        counts: &mut Counts,
        caller: &str,
        of: fn(&mut Counts) -> &mut Tally,
    ) -> Counted {
        of(counts).add(caller);
        Counted {
            limits: Arc::clone(limits),
            caller: caller.to_owned(),
            of,
        }
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        (self.of)(&mut self.limits.state()).remove(&self.caller);
    }
}

fn in_flight(counts: &mut Counts) -> &mut Tally {
    &mut counts.in_flight
}

fn opening(counts: &mut Counts) -> &mut Tally {
    &mut counts.opening
}

impl Limits {
    pub fn new(
        settings: HttpLimits,
        manager: Arc<LocalSessionManager>,
        record: Recorder,
    ) -> Arc<Limits> {
        Arc::new(Limits {
            settings,
            manager,
            state: Mutex::new(Counts::default()),
            record,
        })
    }

    /// Answers `status` with `reason`, after putting the refusal in the trail (off the
    /// async workers: the append takes the trail's lock).
    async fn refuse(
        self: &Arc<Self>,
        caller: &Caller,
        event: HttpRefused,
        status: StatusCode,
        reason: String,
    ) -> Response<Body> {
        let record = HttpRefusal {
            event,
            status: status.as_u16(),
            caller: caller.clone(),
            reason: reason.clone(),
        };
        let me = Arc::clone(self);
        let written = tokio::task::spawn_blocking(move || (me.record)(&record)).await;
        if !matches!(written, Ok(Ok(()))) {
            tracing::warn!("a refused HTTP request could not be recorded");
        }
        refuse(status, &reason)
    }

    fn state(&self) -> MutexGuard<'_, Counts> {
        // The counts stay consistent under every panic-free path; a poisoned lock only
        // means another request panicked, and refusing everyone after that helps no one.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn begin_request(self: &Arc<Self>, caller: &str) -> Result<Counted, Full> {
        let s = &self.settings;
        let mut state = self.state();
        match state
            .in_flight
            .room(caller, (s.max_requests, s.max_requests_per_caller), (0, 0))
        {
            Err(Over::Total) => Err(Full::Requests),
            Err(Over::Caller) => Err(Full::RequestsForCaller),
            Ok(()) => Ok(Counted::take(self, &mut state, caller, in_flight)),
        }
    }

    async fn begin_session(self: &Arc<Self>, caller: &str) -> Result<Counted, Full> {
        let alive = self.manager.sessions.read().await;
        let s = &self.settings;
        let mut state = self.state();
        state.owners.retain(|id, _| alive.contains_key(id.as_str()));
        drop(alive);
        // Open sessions, beside those being opened.
        let open = (
            state.owners.len(),
            state.owners.values().filter(|o| *o == caller).count(),
        );
        match state.opening.room(
            caller,
            (s.max_mcp_sessions, s.max_mcp_sessions_per_caller),
            open,
        ) {
            Err(Over::Total) => Err(Full::Sessions),
            Err(Over::Caller) => Err(Full::SessionsForCaller),
            Ok(()) => Ok(Counted::take(self, &mut state, caller, opening)),
        }
    }

    fn owner_of(&self, session: &str) -> Option<String> {
        self.state().owners.get(session).cloned()
    }

    fn opened(&self, session: &str, caller: &str) {
        self.state()
            .owners
            .insert(session.to_owned(), caller.to_owned());
    }
}

/// Tool calls running at once, counted where they run, in all and per caller (the same
/// `max_requests` limits): a client that drops a call's reply stream ends the request the
/// transport counts, but not the call, which rmcp runs to its end; so the transport's count
/// alone could be walked around with long commands.
pub struct Calls {
    settings: HttpLimits,
    running: Mutex<Tally>,
}

/// One running tool call of a caller, counted until dropped.
pub struct CallSlot {
    calls: Arc<Calls>,
    caller: String,
}

impl Drop for CallSlot {
    fn drop(&mut self) {
        self.calls.lock().remove(&self.caller);
    }
}

impl Calls {
    pub fn new(settings: HttpLimits) -> Arc<Calls> {
        Arc::new(Calls {
            settings,
            running: Mutex::new(Tally::default()),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Tally> {
        self.running
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A slot for one more call of `caller` (`""`: nobody, counted in all only), or the
    /// sentence that says which limit it met.
    pub fn begin(self: &Arc<Self>, caller: &str) -> Result<CallSlot, String> {
        let s = &self.settings;
        let mut running = self.lock();
        match running.room(caller, (s.max_requests, s.max_requests_per_caller), (0, 0)) {
            Err(Over::Total) => {
                return Err(format!(
                    "{} tool calls are running, the most this server allows at once ([http] max_requests); try again when one has finished",
                    s.max_requests
                ));
            }
            Err(Over::Caller) => {
                return Err(format!(
                    "you have {} tool calls running, the most this server allows one caller at once ([http] max_requests_per_caller); wait for one to finish",
                    s.max_requests_per_caller
                ));
            }
            Ok(()) => running.add(caller),
        }
        Ok(CallSlot {
            calls: Arc::clone(self),
            caller: caller.to_owned(),
        })
    }
}

fn refuse(status: StatusCode, message: &str) -> Response<Body> {
    let mut response = Response::new(Body::from(json!({"error": message}).to_string()));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    if status == StatusCode::TOO_MANY_REQUESTS {
        headers.insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    }
    response
}

/// The middleware: session ownership, then the counts, then the request.
pub async fn admit(
    State(limits): State<Arc<Limits>>,
    request: Request<Body>,
    next: Next,
) -> Response<Body> {
    let who = request
        .extensions()
        .get::<Caller>()
        .cloned()
        .unwrap_or_default();
    let caller = who.sub.clone().unwrap_or_default();
    let session = request
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    if let Some(id) = &session
        && limits.owner_of(id).is_some_and(|owner| owner != caller)
    {
        return limits
            .refuse(
                &who,
                HttpRefused::Session,
                StatusCode::FORBIDDEN,
                "this MCP session belongs to another caller".into(),
            )
            .await;
    }
    if request.method() != Method::POST {
        // GET (the standing stream of a session) and DELETE are bounded by the sessions.
        return next.run(request).await;
    }
    let too_many = |full: Full| {
        let reason = full.reason(&limits.settings);
        limits.refuse(
            &who,
            HttpRefused::Limit,
            StatusCode::TOO_MANY_REQUESTS,
            reason,
        )
    };
    let in_flight = match limits.begin_request(&caller) {
        Ok(f) => f,
        Err(full) => return too_many(full).await,
    };
    let opening = if session.is_none() {
        match limits.begin_session(&caller).await {
            Ok(o) => Some(o),
            Err(full) => {
                drop(in_flight);
                return too_many(full).await;
            }
        }
    } else {
        None
    };
    let response = next.run(request).await;
    if opening.is_some()
        && let Some(id) = response
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
    {
        limits.opened(id, &caller);
    }
    drop(opening);
    // The request counts until its reply's last byte has gone (or the client left).
    let (parts, body) = response.into_parts();
    let body = body.into_data_stream().map(move |chunk| {
        let _counted = &in_flight;
        chunk
    });
    Response::from_parts(parts, Body::from_stream(body))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> Arc<Limits> {
        Limits::new(
            HttpLimits {
                max_mcp_sessions: 3,
                max_mcp_sessions_per_caller: 2,
                max_requests: 3,
                max_requests_per_caller: 2,
            },
            Arc::new(LocalSessionManager::default()),
            Arc::new(|_: &HttpRefusal| Ok(())),
        )
    }

    #[test]
    fn requests_count_in_all_and_per_caller_until_they_end() {
        let limits = limits();
        let a1 = limits.begin_request("alice");
        let a2 = limits.begin_request("alice");
        assert!(a1.is_ok() && a2.is_ok());
        assert_eq!(
            limits.begin_request("alice").err(),
            Some(Full::RequestsForCaller)
        );
        let b = limits.begin_request("bob");
        assert!(b.is_ok());
        assert_eq!(limits.begin_request("carol").err(), Some(Full::Requests));
        drop(a1);
        assert!(limits.begin_request("alice").is_ok());
        // Nobody (no authentication) is counted in the totals only.
        drop((a2, b));
        let n1 = limits.begin_request("");
        let n2 = limits.begin_request("");
        let n3 = limits.begin_request("");
        assert!(n1.is_ok() && n2.is_ok() && n3.is_ok());
        assert_eq!(limits.begin_request("").err(), Some(Full::Requests));
    }

    #[test]
    fn running_calls_count_until_they_end() {
        let calls = Calls::new(HttpLimits {
            max_mcp_sessions: 3,
            max_mcp_sessions_per_caller: 2,
            max_requests: 2,
            max_requests_per_caller: 1,
        });
        let first = calls.begin("alice");
        assert!(first.is_ok());
        let refused = calls.begin("alice").err().unwrap_or_default();
        assert!(refused.contains("max_requests_per_caller"), "{refused}");
        let bob = calls.begin("bob");
        assert!(bob.is_ok());
        drop(first);
        let again = calls.begin("alice");
        assert!(again.is_ok());
        let refused = calls.begin("carol").err().unwrap_or_default();
        assert!(refused.contains("max_requests)"), "{refused}");
    }

    #[tokio::test]
    async fn sessions_being_opened_count_and_dead_ones_do_not() {
        let limits = limits();
        let o1 = limits.begin_session("alice").await;
        let o2 = limits.begin_session("alice").await;
        assert!(o1.is_ok() && o2.is_ok());
        assert_eq!(
            limits.begin_session("alice").await.err(),
            Some(Full::SessionsForCaller)
        );
        drop((o1, o2));
        // Ids the session manager does not have (closed, or idled out) do not count.
        limits.opened("gone-1", "alice");
        limits.opened("gone-2", "alice");
        assert!(limits.begin_session("alice").await.is_ok());
    }
}
