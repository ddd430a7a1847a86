//! Ingress (issue 33, item 2): a port on the host that reaches a server a session started
//! on the commands' network, the private view's own loopback.
//!
//! `start_process(…, expose_port)` opens a listener on `[terminal.sessions] expose_bind`
//! (loopback unless the operator names another address) at a port from `expose_ports`, or
//! one the kernel picks. Each connection accepted there is recorded (a `network` record,
//! `event: NetworkEvent::Ingress`, made durable before a byte flows), then relayed to the session's port
//! through a socket made in the commands' namespace ([`Executor::inner_socket`]): IPv4
//! loopback first, then IPv6 (a server that bound `localhost` may have taken `::1`). Its end
//! is recorded with the bytes moved (`event: NetworkEvent::Close`). The listener and every relay close
//! when the [`Exposure`] is dropped: when the session ends.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use safe_mcp_contract::Executor;
use safe_mcp_core::audit::{NetworkEvent, NetworkRecord};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio_util::sync::CancellationToken;

use crate::context::{Recorder, append};

/// Connections one exposed port relays at once; more wait in the listen queue.
const MAX_LIVE: usize = 64;
/// How long the connect to the session's server may take.
const INNER_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// What an exposed connection goes to.
#[derive(Debug, Clone)]
struct Expose {
    /// The session's port on the commands' network.
    inner_port: u16,
    /// The session's start call, which its records name.
    call: String,
}

/// A listener opened for an exposure, before the session it belongs to has started: a
/// refusal (no shared network, every port taken) comes before anything runs.
#[derive(Debug)]
pub struct Opened {
    listener: TcpListener,
    /// Where it listens.
    pub address: SocketAddr,
}

/// An open exposure: its host address; closed (listener and relays) when dropped.
#[derive(Debug)]
pub struct Exposure {
    /// Where the host reaches the session's server.
    pub address: SocketAddr,
    stop: CancellationToken,
}

impl Drop for Exposure {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// Opens a listener on `bind` at the first free port of `ports` (inclusive; `None`: the
/// kernel picks), once the commands' network has shown it can give a socket.
pub async fn open(
    bind: IpAddr,
    ports: Option<(u16, u16)>,
    executor: &dyn Executor,
) -> Result<Opened, String> {
    drop(executor.inner_socket(false)?);
    let listener = listen(bind, ports).await?;
    let address = listener
        .local_addr()
        .map_err(|e| format!("the exposed listener: {e}"))?;
    Ok(Opened { listener, address })
}

/// Starts relaying what `opened` accepts to `inner_port` of the commands' network, naming
/// the session's start `call` in every record.
pub fn serve(
    opened: Opened,
    inner_port: u16,
    call: String,
    executor: Arc<dyn Executor>,
    recorder: Arc<dyn Recorder>,
) -> Exposure {
    let Opened { listener, address } = opened;
    let spec = Expose { inner_port, call };
    let stop = CancellationToken::new();
    let token = stop.clone();
    let live = Arc::new(AtomicUsize::new(0));
    tokio::spawn(async move {
        loop {
            let accepted = tokio::select! {
                () = token.cancelled() => return,
                accepted = listener.accept() => accepted,
            };
            let Ok((client, peer)) = accepted else {
                continue;
            };
            if live.fetch_add(1, Ordering::AcqRel) >= MAX_LIVE {
                live.fetch_sub(1, Ordering::AcqRel);
                continue;
            }
            let (spec, executor, recorder) =
                (spec.clone(), Arc::clone(&executor), Arc::clone(&recorder));
            let (token, live) = (token.clone(), Arc::clone(&live));
            tokio::spawn(async move {
                tokio::select! {
                    () = token.cancelled() => {}
                    () = relay(client, peer, address, &spec, executor.as_ref(), recorder) => {}
                }
                live.fetch_sub(1, Ordering::AcqRel);
            });
        }
    });
    Exposure { address, stop }
}

/// A listener on `bind`, at the first free port of `ports` (or one the kernel picks).
async fn listen(bind: IpAddr, ports: Option<(u16, u16)>) -> Result<TcpListener, String> {
    let Some((first, last)) = ports else {
        return TcpListener::bind((bind, 0))
            .await
            .map_err(|e| format!("cannot listen on {bind}: {e}"));
    };
    for port in first..=last {
        if let Ok(listener) = TcpListener::bind((bind, port)).await {
            return Ok(listener);
        }
    }
    Err(format!(
        "every port of [terminal.sessions] expose_ports ({first}-{last}) on {bind} is taken"
    ))
}

/// One connection: recorded, connected to the session's port, relayed, recorded again.
async fn relay(
    client: TcpStream,
    peer: SocketAddr,
    address: SocketAddr,
    spec: &Expose,
    executor: &dyn Executor,
    recorder: Arc<dyn Recorder>,
) {
    let mut record = NetworkRecord::exposure(
        spec.call.clone(),
        NetworkEvent::Ingress,
        peer.ip(),
        spec.inner_port,
        address,
    );
    // No byte flows before the trail holds the connection.
    if !append(&recorder, &record, true).await {
        return;
    }
    let inner = match connect_inner(executor, spec.inner_port).await {
        Ok(inner) => inner,
        Err(why) => {
            record.event = NetworkEvent::Close;
            record.reason = Some(why);
            append(&recorder, &record, false).await;
            return;
        }
    };
    let (up, down) = (AtomicU64::new(0), AtomicU64::new(0));
    let Ok(pipes) = crate::splice::Pipe::pair() else {
        record.event = NetworkEvent::Close;
        record.reason = Some("no pipe for the relay could be made".into());
        append(&recorder, &record, false).await;
        return;
    };
    crate::splice::both_ways((&client, &inner), (&pipes.0, &pipes.1), &up, &down).await;
    record.event = NetworkEvent::Close;
    record.bytes_up = Some(up.into_inner());
    record.bytes_down = Some(down.into_inner());
    append(&recorder, &record, false).await;
}

/// A connection to the session's server: loopback IPv4, else IPv6.
async fn connect_inner(executor: &dyn Executor, port: u16) -> Result<TcpStream, String> {
    let mut last = String::new();
    for ip in [
        IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(Ipv6Addr::LOCALHOST),
    ] {
        let fd = executor.inner_socket(ip.is_ipv6())?;
        let socket = socket_of(fd).map_err(|e| format!("the relay's socket: {e}"))?;
        match tokio::time::timeout(INNER_CONNECT_TIMEOUT, socket.connect((ip, port).into())).await {
            Ok(Ok(stream)) => return Ok(stream),
            Ok(Err(e)) => {
                last = format!("nothing answers at port {port} of the commands' loopback: {e}")
            }
            Err(_) => {
                last = format!("port {port} of the commands' loopback did not answer in time")
            }
        }
    }
    Err(last)
}

/// `fd` (an unconnected TCP socket) as tokio's, non-blocking.
fn socket_of(fd: OwnedFd) -> std::io::Result<TcpSocket> {
    let stream = std::net::TcpStream::from(fd);
    stream.set_nonblocking(true)?;
    Ok(TcpSocket::from_std_stream(stream))
}
