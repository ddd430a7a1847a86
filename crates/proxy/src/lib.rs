//! The egress proxy (DESIGN §9): the one way a command's bytes leave the machine under
//! `[terminal.network] mode = "allowlist"`.
//!
//! It serves HTTP CONNECT (what HTTPS, git and every package manager use through a proxy)
//! and plain-HTTP forwarding, on listeners the executor hands it, each belonging to one call
//! (see `safe_mcp_exec::egress`). For every request, in order:
//! 1. the host is judged by the core ([`NetworkPolicy::judge`]): deny list, then allow
//!    list, IP literals refused;
//! 2. the proxy resolves the name itself (or takes `[terminal.network.hosts]`), and every
//!    answer is checked ([`NetworkPolicy::check_addresses`]);
//! 3. an `open` record is appended and made durable before a byte flows (a refusal's
//!    record is appended at once), naming the call, host, port, rule and address;
//! 4. it connects to an address it checked (never resolving again, so a rebinding resolver
//!    cannot swap the answer) and relays; a `close` record carries the byte counts.
//!
//! Plain HTTP carries one request per connection: the `Host` header must name the host of
//! the request line, the request goes upstream with `Connection: close`, and nothing the
//! client sends after its body is relayed, so a second request cannot reach another host
//! unchecked. Request bodies must have a `Content-Length` (chunked uploads over plain HTTP
//! are refused; through CONNECT anything goes).

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use safe_mcp_core::audit::{AuditError, CallId, Gate, NetworkRecord};
use safe_mcp_core::egress::{NetworkPolicy, Refusal};
use safe_mcp_core::terminal::EgressProvider;
use safe_mcp_core::terminal::{Egress, EgressGate};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

pub mod ingress;
mod relay;
mod request;
mod splice;

use relay::{Moved, relay};
use request::{Refused, Request, read_request};

/// How long a client may take to send its request head.
const HEAD_TIMEOUT: Duration = Duration::from_secs(15);
/// How long a name may take to resolve.
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one connect may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);
/// How long the end of a call waits for its connections' last records.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(2);

/// Where a proxy's `network` records go: the server's audit trail ([`Gate`]), or in a test
/// a list.
pub trait Recorder: Send + Sync + std::fmt::Debug {
    /// Appends `record`; made durable first when `durable` (an `open`, before a byte flows).
    fn record(&self, record: &NetworkRecord, durable: bool) -> Result<(), AuditError>;
}

impl Recorder for Gate {
    fn record(&self, record: &NetworkRecord, durable: bool) -> Result<(), AuditError> {
        self.append("network", record, durable)
    }
}

/// The proxy of one terminal server: its policy, and the trail its records go to.
#[derive(Debug)]
pub struct Proxy {
    policy: Arc<NetworkPolicy>,
    recorder: Arc<dyn Recorder>,
}

impl Proxy {
    /// A proxy judging by `policy` and writing its records to `recorder`.
    pub fn new(policy: NetworkPolicy, recorder: Arc<dyn Recorder>) -> Proxy {
        Proxy {
            policy: Arc::new(policy),
            recorder,
        }
    }
}

impl EgressProvider for Proxy {
    fn for_call(&self, call: &CallId) -> Egress {
        Egress(Arc::new(CallProxy(Arc::new(Context {
            policy: Arc::clone(&self.policy),
            recorder: Arc::clone(&self.recorder),
            call: call.to_string(),
            refused: std::sync::Mutex::default(),
            records: AtomicUsize::new(0),
            unrecorded: AtomicUsize::new(0),
            live: AtomicUsize::new(0),
            idle: tokio::sync::Notify::new(),
        }))))
    }
}

/// The proxy as one call sees it: what its connections share.
struct CallProxy(Arc<Context>);

/// The refusals a call's result lists; the trail has every one up to its bound.
const MAX_REFUSALS: usize = 20;

/// The network records one call may write (an allowed connection takes two, its `open` and
/// its `close`). Code in the sandbox decides how many requests it makes: unbounded, its
/// refusals would rotate earlier records out of the trail. Past the bound, refusals are
/// counted and written as one summary record when the call ends, and a new connection is
/// refused (it could not be recorded).
const MAX_RECORDS_PER_CALL: usize = 256;

/// The longest host, method and reason a network record keeps (a name is at most 253
/// characters; a reason quotes at most a short part of the request).
const MAX_HOST_CHARS: usize = 253;
const MAX_METHOD_CHARS: usize = 16;
const MAX_REASON_CHARS: usize = 300;

/// `s` cut to `max` characters, with a marker when it was longer.
fn capped(mut s: String, max: usize) -> String {
    if let Some((at, _)) = s.char_indices().nth(max) {
        s.truncate(at);
        s.push_str("…[cut]");
    }
    s
}

/// Stops a call's proxy when dropped: its listener closes and open relays end (each then
/// writes its `close` record).
struct Serving(CancellationToken);

/// A connection being handled, counted in its call's [`Context::live`] until dropped.
struct Live(Arc<Context>);

impl Live {
    fn enter(ctx: &Arc<Context>) -> Live {
        ctx.live.fetch_add(1, Ordering::AcqRel);
        Live(Arc::clone(ctx))
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        if self.0.live.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.idle.notify_waiters();
        }
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

impl EgressGate for CallProxy {
    fn serve(&self, listener: std::net::TcpListener) -> Box<dyn Send> {
        let stop = CancellationToken::new();
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            eprintln!(
                "safe-mcp: warning: the egress proxy has no runtime; the call has no way out"
            );
            return Box::new(Serving(stop));
        };
        let listener = listener.set_nonblocking(true).and_then(|()| {
            let _entered = runtime.enter();
            TcpListener::from_std(listener)
        });
        let listener = match listener {
            Ok(l) => l,
            Err(e) => {
                eprintln!("safe-mcp: warning: the egress proxy cannot listen: {e}");
                return Box::new(Serving(stop));
            }
        };
        let ctx = Arc::clone(&self.0);
        let token = stop.clone();
        runtime.spawn(async move {
            loop {
                let accepted = tokio::select! {
                    () = token.cancelled() => return,
                    accepted = listener.accept() => accepted,
                };
                let Ok((stream, _)) = accepted else { continue };
                let live = Live::enter(&ctx);
                let token = token.clone();
                tokio::spawn(async move {
                    live.0.handle(stream, &token).await;
                    drop(live);
                });
            }
        });
        Box::new(Serving(stop))
    }

    fn finish(&self) -> std::pin::Pin<Box<dyn Future<Output = Vec<String>> + Send + '_>> {
        Box::pin(async move {
            let ctx = &self.0;
            let deadline = tokio::time::Instant::now() + SETTLE_TIMEOUT;
            loop {
                // Made before the count is read, so a last connection ending in between
                // still wakes it.
                let idle = ctx.idle.notified();
                if ctx.live.load(Ordering::Acquire) == 0
                    || tokio::time::timeout_at(deadline, idle).await.is_err()
                {
                    break;
                }
            }
            let unrecorded = ctx.unrecorded.load(Ordering::Acquire);
            if unrecorded > 0 {
                let summary = NetworkRecord {
                    call: ctx.call.clone(),
                    event: "refused",
                    method: String::new(),
                    host: String::new(),
                    port: 0,
                    rule: "record-limit".into(),
                    reason: Some(format!(
                        "{unrecorded} more refusals of this call were not recorded one by one: a call writes at most {MAX_RECORDS_PER_CALL} network records"
                    )),
                    address: None,
                    bytes_up: None,
                    bytes_down: None,
                };
                ctx.append(&summary, false).await;
            }
            ctx.refused.lock().map(|r| r.clone()).unwrap_or_default()
        })
    }
}

/// What every connection of a call's proxy shares.
struct Context {
    policy: Arc<NetworkPolicy>,
    recorder: Arc<dyn Recorder>,
    call: String,
    /// What was refused, a line each, for the call's result (at most [`MAX_REFUSALS`]).
    refused: std::sync::Mutex<Vec<String>>,
    /// Network records this call has written or reserved (at most [`MAX_RECORDS_PER_CALL`]).
    records: AtomicUsize,
    /// Refusals past that bound, for the summary record.
    unrecorded: AtomicUsize,
    /// Connections being handled, and the signal that the last has ended.
    live: AtomicUsize,
    idle: tokio::sync::Notify,
}

/// A connection [`Context::reach`] made: the upstream, its address, the request, the host
/// as judged and the rule that allowed it.
type Reached = (TcpStream, SocketAddr, Request, String, String);

impl Context {
    /// One connection, to its end: refused, or opened, relayed and closed, each on the
    /// record. Once `stop` (the call is over) nothing new is opened, and a relay still
    /// running ends with its `close` record.
    async fn handle(&self, mut client: TcpStream, stop: &CancellationToken) {
        let reached = tokio::select! {
            () = stop.cancelled() => return,
            reached = self.reach(&mut client) => reached,
        };
        let Some((upstream, address, request, host, rule)) = reached else {
            return;
        };
        let mut record = NetworkRecord {
            call: self.call.clone(),
            event: "open",
            method: request.method.clone(),
            host,
            port: request.port,
            rule,
            reason: None,
            address: Some(address.to_string()),
            bytes_up: None,
            bytes_down: None,
        };
        if !self.reserve(2) {
            let refusal = Refusal {
                rule: "record-limit".into(),
                reason: format!(
                    "this call has made as many connections as its {MAX_RECORDS_PER_CALL} network records can hold; make further requests in another call"
                ),
            };
            let refused = Refused {
                status: "429 Too Many Requests",
                refusal,
                method: request.method,
                host: request.host,
                port: request.port,
            };
            return self.refuse(&mut client, refused).await;
        }
        // Durable before a byte flows, as an attempt record is before a command runs.
        if !self.append(&record, true).await {
            let refusal = Refusal {
                rule: "audit".into(),
                reason: "the audit trail is unavailable, so no connection is made".into(),
            };
            let refused = Refused {
                status: "503 Service Unavailable",
                refusal,
                method: request.method,
                host: request.host,
                port: request.port,
            };
            return self.refuse(&mut client, refused).await;
        }
        let moved = Moved::default();
        tokio::select! {
            () = relay(client, upstream, request, &moved) => {}
            // The call's processes are gone: what is still open ends here.
            () = stop.cancelled() => {}
        }
        record.event = "close";
        record.bytes_up = Some(moved.up.load(Ordering::Relaxed));
        record.bytes_down = Some(moved.down.load(Ordering::Relaxed));
        self.append(&record, false).await;
    }

    /// Reads and judges the request, resolves and connects: the upstream, its address, the
    /// request, the host as judged and the rule that allowed it; or `None`, refused (the
    /// refusal answered and recorded).
    async fn reach(&self, client: &mut TcpStream) -> Option<Reached> {
        let _ = client.set_nodelay(true);
        let request = match tokio::time::timeout(HEAD_TIMEOUT, read_request(client)).await {
            Ok(Ok(r)) => r,
            Ok(Err(refused)) => return self.refusing(client, refused).await,
            Err(_) => {
                let refused = Refused {
                    status: "408 Request Timeout",
                    refusal: Refusal {
                        rule: "bad-request".into(),
                        reason: "no complete request head arrived in time".into(),
                    },
                    method: String::new(),
                    host: String::new(),
                    port: 0,
                };
                return self.refusing(client, refused).await;
            }
        };
        let refused = |status, refusal: Refusal, r: &Request| Refused {
            status,
            refusal,
            method: r.method.clone(),
            host: r.host.clone(),
            port: r.port,
        };
        let (host, rule) = match self.policy.judge(&request.host) {
            Ok(v) => v,
            Err(refusal) => {
                return self
                    .refusing(client, refused("403 Forbidden", refusal, &request))
                    .await;
            }
        };
        let addresses = match self.resolve(&host, request.port).await {
            Ok(a) => a,
            Err(refusal) => {
                return self
                    .refusing(client, refused("502 Bad Gateway", refusal, &request))
                    .await;
            }
        };
        let ips: Vec<IpAddr> = addresses.iter().map(SocketAddr::ip).collect();
        if let Err(refusal) = self.policy.check_addresses(&host, &ips) {
            return self
                .refusing(client, refused("403 Forbidden", refusal, &request))
                .await;
        }
        let Some((upstream, address)) = connect(&addresses).await else {
            let refusal = Refusal {
                rule: rule.clone(),
                reason: format!("{host}:{} could not be reached", request.port),
            };
            return self
                .refusing(client, refused("502 Bad Gateway", refusal, &request))
                .await;
        };
        Some((upstream, address, request, host, rule))
    }

    /// The checked name's addresses: pinned by the policy, or from the system resolver.
    async fn resolve(&self, host: &str, port: u16) -> Result<Vec<SocketAddr>, Refusal> {
        if let Some(pinned) = self.policy.pinned(host) {
            return Ok(pinned.iter().map(|ip| SocketAddr::new(*ip, port)).collect());
        }
        let failed = |why: String| Refusal {
            rule: "no-address".into(),
            reason: format!("{host} could not be resolved: {why}"),
        };
        match tokio::time::timeout(RESOLVE_TIMEOUT, tokio::net::lookup_host((host, port))).await {
            Ok(Ok(found)) => {
                let mut all: Vec<SocketAddr> = Vec::new();
                for a in found {
                    if !all.contains(&a) {
                        all.push(a);
                    }
                }
                Ok(all)
            }
            Ok(Err(e)) => Err(failed(e.to_string())),
            Err(_) => Err(failed("timed out".into())),
        }
    }

    /// [`Self::refuse`], for [`Self::reach`].
    async fn refusing(&self, client: &mut TcpStream, refused: Refused) -> Option<Reached> {
        self.refuse(client, refused).await;
        None
    }

    async fn refuse(&self, client: &mut TcpStream, refused: Refused) {
        let body = format!("safe-mcp egress refused: {}\n", refused.refusal.reason);
        let response = format!(
            "HTTP/1.1 {}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\nX-Safe-Mcp-Refusal: {}\r\n\r\n{body}",
            refused.status,
            body.len(),
            refused.refusal.rule,
        );
        let record = NetworkRecord {
            call: self.call.clone(),
            event: "refused",
            method: capped(refused.method, MAX_METHOD_CHARS),
            host: capped(refused.host, MAX_HOST_CHARS),
            port: refused.port,
            rule: refused.refusal.rule,
            reason: Some(capped(refused.refusal.reason, MAX_REASON_CHARS)),
            address: None,
            bytes_up: None,
            bytes_down: None,
        };
        if let Ok(mut refused) = self.refused.lock()
            && refused.len() < MAX_REFUSALS
        {
            let target = if record.host.is_empty() {
                String::new()
            } else {
                format!(" {}:{}", record.host, record.port)
            };
            refused.push(format!(
                "{}{target}: {}",
                if record.method.is_empty() {
                    "request"
                } else {
                    &record.method
                },
                record.reason.as_deref().unwrap_or_default()
            ));
        }
        if self.reserve(1) {
            self.append(&record, false).await;
        } else {
            self.unrecorded.fetch_add(1, Ordering::AcqRel);
        }
        let _ = client.write_all(response.as_bytes()).await;
        let _ = client.shutdown().await;
    }

    /// Takes `n` of the call's network records, if that many are left.
    fn reserve(&self, n: usize) -> bool {
        self.records
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                (used + n <= MAX_RECORDS_PER_CALL).then_some(used + n)
            })
            .is_ok()
    }

    /// Appends `record` to the trail (on a blocking thread: an fsync when `durable`).
    async fn append(&self, record: &NetworkRecord, durable: bool) -> bool {
        append(&self.recorder, record, durable).await
    }
}

/// Appends `record` to `recorder` on a blocking thread (a durable append waits for the
/// disk); false when it was not written, which is said on stderr.
pub(crate) async fn append(
    recorder: &Arc<dyn Recorder>,
    record: &NetworkRecord,
    durable: bool,
) -> bool {
    let (recorder, record) = (Arc::clone(recorder), record.clone());
    match tokio::task::spawn_blocking(move || recorder.record(&record, durable)).await {
        Ok(Ok(())) => true,
        Ok(Err(e)) => {
            eprintln!("safe-mcp: warning: a network record was not written: {e}");
            false
        }
        Err(_) => false,
    }
}

/// Connects to the first of `addresses` that answers.
async fn connect(addresses: &[SocketAddr]) -> Option<(TcpStream, SocketAddr)> {
    for address in addresses {
        if let Ok(Ok(stream)) =
            tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(address)).await
        {
            let _ = stream.set_nodelay(true);
            return Some((stream, *address));
        }
    }
    None
}
