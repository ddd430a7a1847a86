//! What every connection of one call's proxy shares ([`Context`]): the policy, the
//! credentials, the trail and the call's bounds on it; and how a refusal is answered and
//! recorded. The connection handling itself is the crate root's (plain and tunnelled) and
//! `terminate`'s (credential hosts).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use safe_mcp_core::audit::{AuditError, Gate, NetworkEvent, NetworkRecord};
use safe_mcp_core::credentials::Vault;
use safe_mcp_core::egress::NetworkPolicy;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use crate::request::Refused;
use crate::tls::Tls;

/// How long a client may take to send its request head.
pub(crate) const HEAD_TIMEOUT: Duration = Duration::from_secs(15);
/// How long one connect may take.
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);
/// The refusals a call's result lists; the trail has every one up to its bound.
pub(crate) const MAX_REFUSALS: usize = 20;

/// The network records one call may write (an allowed connection takes two, its `open` and
/// its `close`). Code in the sandbox decides how many requests it makes: unbounded, its
/// refusals would rotate earlier records out of the trail. Past the bound, refusals are
/// counted and written as one summary record when the call ends, and a new connection is
/// refused (it could not be recorded).
pub(crate) const MAX_RECORDS_PER_CALL: usize = 256;

/// The `request` records (each a request that carried a credential) one call may write:
/// past it, a request with a credential is refused, never made unrecorded.
pub(crate) const MAX_REQUESTS_PER_CALL: usize = 4096;

/// The longest host, method and reason a network record keeps (a name is at most 253
/// characters; a reason quotes at most a short part of the request).
pub(crate) const MAX_HOST_CHARS: usize = 253;
pub(crate) const MAX_METHOD_CHARS: usize = 16;
pub(crate) const MAX_REASON_CHARS: usize = 300;

/// `s` cut to `max` characters, with a marker when it was longer.
pub(crate) fn capped(mut s: String, max: usize) -> String {
    if let Some((at, _)) = s.char_indices().nth(max) {
        s.truncate(at);
        s.push_str("…[cut]");
    }
    s
}

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

/// What every connection of a call's proxy shares.
pub(crate) struct Context {
    pub(crate) policy: Arc<NetworkPolicy>,
    pub(crate) recorder: Arc<dyn Recorder>,
    pub(crate) vault: Arc<Vault>,
    pub(crate) tls: Option<Arc<Tls>>,
    /// `request` records written (at most [`MAX_REQUESTS_PER_CALL`]).
    pub(crate) requests: AtomicUsize,
    pub(crate) call: String,
    /// What was refused, a line each, for the call's result (at most [`MAX_REFUSALS`]).
    pub(crate) refused: std::sync::Mutex<Vec<String>>,
    /// Network records this call has written or reserved (at most [`MAX_RECORDS_PER_CALL`]).
    pub(crate) records: AtomicUsize,
    /// Refusals past that bound, for the summary record.
    pub(crate) unrecorded: AtomicUsize,
    /// Connections being handled, and the signal that the last has ended.
    pub(crate) live: AtomicUsize,
    pub(crate) idle: tokio::sync::Notify,
}

impl Context {
    pub(crate) async fn refuse(&self, client: &mut TcpStream, refused: Refused) {
        let body = format!("safe-mcp egress refused: {}\n", refused.refusal.reason);
        let response = format!(
            "HTTP/1.1 {}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\nX-Safe-Mcp-Refusal: {}\r\n\r\n{body}",
            refused.status,
            body.len(),
            refused.refusal.rule,
        );
        self.register(refused, None).await;
        let _ = client.write_all(response.as_bytes()).await;
        let _ = client.shutdown().await;
    }

    /// Records a refusal (with the request's path, where the proxy saw one) and lists it for
    /// the call's result.
    pub(crate) async fn register(&self, refused: Refused, path: Option<String>) {
        let record = NetworkRecord {
            call: self.call.clone(),
            event: NetworkEvent::Refused,
            method: capped(refused.method, MAX_METHOD_CHARS),
            host: capped(refused.host, MAX_HOST_CHARS),
            port: refused.port,
            rule: refused.refusal.rule.to_string(),
            reason: Some(capped(refused.refusal.reason, MAX_REASON_CHARS)),
            path: path.map(|p| capped(p, MAX_REASON_CHARS)),
            ..Default::default()
        };
        if let Ok(mut refused) = self.refused.lock()
            && refused.len() < MAX_REFUSALS
        {
            let target = if record.host.is_empty() {
                String::new()
            } else {
                format!(
                    " {}:{}{}",
                    record.host,
                    record.port,
                    record.path.as_deref().unwrap_or_default()
                )
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
    }

    /// Takes one of the call's `request` records, if one is left.
    pub(crate) fn reserve_request(&self) -> bool {
        self.requests
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                (used < MAX_REQUESTS_PER_CALL).then_some(used + 1)
            })
            .is_ok()
    }

    /// Takes `n` of the call's network records, if that many are left.
    pub(crate) fn reserve(&self, n: usize) -> bool {
        self.records
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                (used + n <= MAX_RECORDS_PER_CALL).then_some(used + n)
            })
            .is_ok()
    }

    /// Appends `record` to the trail (on a blocking thread: an fsync when `durable`).
    pub(crate) async fn append(&self, record: &NetworkRecord, durable: bool) -> bool {
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
            tracing::warn!("a network record was not written: {e}");
            false
        }
        Err(_) => false,
    }
}
