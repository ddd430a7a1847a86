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

#![forbid(unsafe_code)]

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use safe_mcp_core::audit::{CallId, NetworkEvent, NetworkRecord};
use safe_mcp_core::credentials::Vault;
use safe_mcp_core::egress::{NetworkPolicy, Refusal, RefusalRule};
use safe_mcp_core::terminal::EgressProvider;
use safe_mcp_core::terminal::{Egress, EgressGate};
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

mod context;
pub mod ingress;
mod relay;
mod request;
mod splice;
mod terminate;
mod tls;

pub use context::Recorder;
use context::{CONNECT_TIMEOUT, Context, HEAD_TIMEOUT, MAX_RECORDS_PER_CALL};
use relay::{Moved, relay};
use request::{Refused, Request, read_request};

/// How long a name may take to resolve.
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the end of a call waits for its connections' last records.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(2);

/// The proxy of one terminal server: its policy, the trail its records go to, and the
/// credentials it adds (with the TLS it terminates for their hosts).
#[derive(Debug)]
pub struct Proxy {
    policy: Arc<NetworkPolicy>,
    recorder: Arc<dyn Recorder>,
    vault: Arc<Vault>,
    tls: Option<Arc<tls::Tls>>,
}

impl Proxy {
    /// A proxy judging by `policy` and writing its records to `recorder`, with no
    /// credentials.
    pub fn new(policy: NetworkPolicy, recorder: Arc<dyn Recorder>) -> Proxy {
        Proxy {
            policy: Arc::new(policy),
            recorder,
            vault: Arc::default(),
            tls: None,
        }
    }

    /// A proxy that also adds the credentials of `vault` on their hosts, terminating TLS
    /// to those hosts (and only those) with a CA made now.
    pub fn with_credentials(
        policy: NetworkPolicy,
        recorder: Arc<dyn Recorder>,
        vault: Arc<Vault>,
    ) -> Result<Proxy, String> {
        let tls = match vault.is_empty() {
            true => None,
            false => Some(Arc::new(tls::Tls::new(&vault)?)),
        };
        Ok(Proxy {
            policy: Arc::new(policy),
            recorder,
            vault,
            tls,
        })
    }
}

impl EgressProvider for Proxy {
    fn ca_bundle(&self) -> Option<&std::path::Path> {
        self.tls.as_deref().map(tls::Tls::bundle)
    }

    fn for_call(&self, call: &CallId) -> Egress {
        Egress(Arc::new(CallProxy(Arc::new(Context {
            policy: Arc::clone(&self.policy),
            recorder: Arc::clone(&self.recorder),
            vault: Arc::clone(&self.vault),
            tls: self.tls.clone(),
            requests: AtomicUsize::new(0),
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
            tracing::warn!("the egress proxy has no runtime; the call has no way out");
            return Box::new(Serving(stop));
        };
        let listener = listener.set_nonblocking(true).and_then(|()| {
            let _entered = runtime.enter();
            TcpListener::from_std(listener)
        });
        let listener = match listener {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!("the egress proxy cannot listen: {e}");
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
                    event: NetworkEvent::Refused,
                    method: String::new(),
                    host: String::new(),
                    port: 0,
                    rule: RefusalRule::RecordLimit.to_string(),
                    reason: Some(format!(
                        "{unrecorded} more refusals of this call were not recorded one by one: a call writes at most {MAX_RECORDS_PER_CALL} network records"
                    )),
                    address: None,
                    bytes_up: None,
                    bytes_down: None,
                    ..Default::default()
                };
                ctx.append(&summary, false).await;
            }
            ctx.refused.lock().map(|r| r.clone()).unwrap_or_default()
        })
    }
}

/// A connection [`Context::reach`] made: the upstream, its address, the request, the host
/// as judged and the rule that allowed it.
type Reached = (TcpStream, SocketAddr, Request, String, String);

impl Context {
    /// One connection, to its end: refused, or opened, relayed and closed, each on the
    /// record. Once `stop` (the call is over) nothing new is opened, and a relay still
    /// running ends with its `close` record.
    async fn handle(self: &Arc<Self>, mut client: TcpStream, stop: &CancellationToken) {
        let reached = tokio::select! {
            () = stop.cancelled() => return,
            reached = self.reach(&mut client) => reached,
        };
        let Some((upstream, address, request, host, rule)) = reached else {
            return;
        };
        // A CONNECT to a credential host is terminated; every other stays a tunnel.
        let terminated = match (&self.tls, request.forward.is_none()) {
            (Some(tls), true) => self
                .vault
                .bound(&host)
                .map(|e| (Arc::clone(tls), e.name.clone())),
            _ => None,
        };
        let mut record = NetworkRecord {
            call: self.call.clone(),
            event: NetworkEvent::Open,
            method: request.method.clone(),
            host: host.clone(),
            port: request.port,
            rule: rule.clone(),
            reason: None,
            address: Some(address.to_string()),
            bytes_up: None,
            bytes_down: None,
            credential: terminated.as_ref().map(|(_, name)| name.clone()),
            ..Default::default()
        };
        if !self.reserve(2) {
            let refusal = Refusal {
                rule: RefusalRule::RecordLimit,
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
                rule: RefusalRule::Audit,
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
        let moved = Arc::new(Moved::default());
        match terminated {
            Some((tls, _)) => {
                let ctx = Arc::clone(self);
                let served = terminate::serve(
                    ctx,
                    tls,
                    client,
                    upstream,
                    request,
                    (host, rule),
                    Arc::clone(&moved),
                );
                tokio::select! {
                    () = served => {}
                    () = stop.cancelled() => {}
                }
            }
            // Once the call's processes are gone, what is still open ends here, after what
            // they sent has gone on.
            None => relay(client, upstream, request, &moved, stop).await,
        }
        record.event = NetworkEvent::Close;
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
                        rule: RefusalRule::BadRequest,
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
        let mut request = request;
        if let Err(refusal) = self.credential_checks(client, &mut request, &host).await {
            return self
                .refusing(client, refused("403 Forbidden", refusal, &request))
                .await;
        }
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
            // Allowed, resolved and checked, but no address answered.
            let refusal = Refusal {
                rule: RefusalRule::Upstream,
                reason: format!("{host}:{} could not be reached", request.port),
            };
            return self
                .refusing(client, refused("502 Bad Gateway", refusal, &request))
                .await;
        };
        Some((upstream, address, request, host, rule))
    }

    /// What the credentials ask of a request before it goes anywhere: no placeholder to a
    /// host it is not bound to (in the head, or the first bytes of a plain request's body,
    /// read now), and a plain request to a credential host within the host's rules.
    async fn credential_checks(
        &self,
        client: &mut TcpStream,
        request: &mut Request,
        host: &str,
    ) -> Result<(), Refusal> {
        if self.vault.is_empty() {
            return Ok(());
        }
        let mut seen = request.head.clone();
        if let Some((_, length)) = &request.forward {
            let want = usize::try_from(*length)
                .unwrap_or(usize::MAX)
                .min(terminate::PEEK);
            let mut chunk = vec![0u8; 16 * 1024];
            while request.rest.len() < want {
                let read = tokio::time::timeout(HEAD_TIMEOUT, client.read(&mut chunk)).await;
                match read {
                    Ok(Ok(n)) if n > 0 => request.rest.extend_from_slice(&chunk[..n]),
                    _ => break,
                }
            }
            if let Some(path) = &request.path {
                self.vault
                    .allows(host, &request.method, path)
                    .map_err(|reason| Refusal {
                        rule: RefusalRule::MethodPath,
                        reason,
                    })?;
            }
        }
        seen.extend_from_slice(&request.rest);
        match self.vault.foreign(host, &seen) {
            Some(name) => Err(Refusal {
                rule: RefusalRule::CredentialHost,
                reason: format!(
                    "the request carries the placeholder of {name}, which is not bound to {host}; a credential goes only to its own hosts"
                ),
            }),
            None => Ok(()),
        }
    }

    /// The checked name's addresses: pinned by the policy, or from the system resolver.
    async fn resolve(&self, host: &str, port: u16) -> Result<Vec<SocketAddr>, Refusal> {
        if let Some(pinned) = self.policy.pinned(host) {
            return Ok(pinned.iter().map(|ip| SocketAddr::new(*ip, port)).collect());
        }
        let failed = |why: String| Refusal {
            rule: RefusalRule::NoAddress,
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
