//! `start_process(…, expose_port)` (issue 33, item 2): the session's server, listening on the
//! commands' network, reached from the host through a port the server opens.
//!
//! Owns the order: the port is reserved (at most `[terminal.sessions] max_exposed` at once,
//! for the whole server) and the host listener opened *before* the session starts, so a
//! refusal runs nothing; once the session runs, an `expose` network record names the call,
//! the host address and the session's port, and the relays start
//! ([`safe_mcp_proxy::ingress`]); when the session ends, the listener and its relays close
//! and the reservation is given back.

use std::sync::Arc;
use std::time::Duration;

use safe_mcp_core::audit::{AuditError, Caller, NetworkEvent, NetworkRecord};
use safe_mcp_core::sessions::Session;
use safe_mcp_core::terminal::process::ExposureSlot;
use safe_mcp_core::terminal::{Executor, TerminalService, process};
use safe_mcp_core::{OperationResult, ResultCode};
use safe_mcp_proxy::ingress::{self, Opened};
use serde_json::json;

/// The ports exposed at once by one server, shared by every connection of it.
pub type Exposed = Arc<Exposures>;

/// The open exposures by session handle (the count of reserved ports is the service's:
/// [`TerminalService::reserve_exposure`]).
#[derive(Default)]
pub struct Exposures {
    open: std::sync::Mutex<std::collections::HashMap<String, (ingress::Exposure, ExposureSlot)>>,
}

impl Exposures {
    /// Closes the exposure of session `handle`, if it has one (its session has ended).
    pub(crate) fn close(&self, handle: &str) {
        if let Ok(mut open) = self.open.lock() {
            open.remove(handle);
        }
    }
}

/// One port reserved and its listener open, for a session about to start.
pub(crate) struct Reserved {
    opened: Opened,
    inner_port: u16,
    slot: ExposureSlot,
    exposures: Exposed,
}

/// The trail, as the ingress relays write to it.
#[derive(Debug)]
struct Trail(Arc<TerminalService>);

impl safe_mcp_proxy::Recorder for Trail {
    fn record(&self, record: &NetworkRecord, durable: bool) -> Result<(), AuditError> {
        self.0.gate().append("network", record, durable)
    }
}

/// Reserves a port and opens the host listener for `inner_port`; or the refusal, recorded
/// (`request` is the call as asked).
pub(crate) async fn reserve(
    service: &TerminalService,
    executor: &dyn Executor,
    exposed: &Exposed,
    inner_port: u16,
    request: &str,
    caller: &Caller,
) -> Result<Reserved, OperationResult> {
    let settings = service.policy().sessions;
    let slot = service.reserve_exposure(inner_port, request, caller)?;
    let ports = settings.expose_ports.map(|[first, last]| (first, last));
    match ingress::open(settings.expose_bind, ports, executor).await {
        Ok(opened) => Ok(Reserved {
            opened,
            inner_port,
            slot,
            exposures: Arc::clone(exposed),
        }),
        Err(why) => {
            let result = OperationResult::new(
                process::START,
                ResultCode::OperationFailed,
                format!("nothing started: the port cannot be exposed: {why}"),
            );
            service.record_refusal(process::START, request, &result, caller);
            Err(result)
        }
    }
}

/// Starts relaying for the session that just started, says where in `result`, and closes
/// it all when the session ends.
pub(crate) fn serve(
    reserved: Reserved,
    session: &Arc<Session>,
    service: &Arc<TerminalService>,
    executor: Arc<dyn Executor>,
    result: &mut OperationResult,
) {
    let Reserved {
        opened,
        inner_port,
        slot,
        exposures: exposed,
    } = reserved;
    let address = opened.address;
    let call = session.call.to_string();
    let trail = Arc::new(Trail(Arc::clone(service)));
    let record = NetworkRecord::exposure(
        call.clone(),
        NetworkEvent::Expose,
        address.ip(),
        inner_port,
        address,
    );
    if let Err(e) = service.gate().append("network", &record, true) {
        // Nothing is exposed that the trail does not hold.
        result.reason = format!(
            "{}; the port was not exposed: its record could not be written ({e})",
            result.reason
        );
        return;
    }
    let exposure = ingress::serve(opened, inner_port, call, executor, trail);
    let url = format!("http://{address}/");
    result.reason = format!("{}; port {inner_port} is exposed at {url}", result.reason);
    result.detail.insert(
        "exposed".into(),
        json!({"url": url, "address": address.to_string(), "port": inner_port}),
    );
    if let Ok(mut open) = exposed.open.lock() {
        open.insert(session.handle.clone(), (exposure, slot));
    }
    // stop_process closes it at once; a session that ends by itself, within 200 ms.
    let watched = Arc::clone(session);
    tokio::spawn(async move {
        while watched.running() {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        exposed.close(&watched.handle);
    });
}
