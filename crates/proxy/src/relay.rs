//! Relaying an opened connection: a tunnel both ways in the kernel, or one plain-HTTP
//! request up (its head rewritten, its body bounded by its length) and the answer back.
//!
//! When the call is over (its processes are gone) a relay stops; but what the command sent
//! before it ended has arrived by then, followed by end-of-file, so the upward direction
//! first runs on to that end ([`DRAIN`] at most, for a host that takes nothing): the host
//! gets those bytes, and the `close` record counts them.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;

use crate::request::Request;
use crate::splice::{self, Pipe};

/// How long the upward direction may run on once the call is over.
const DRAIN: Duration = Duration::from_secs(2);

/// Bytes relayed each way, counted as they go.
#[derive(Default)]
pub(crate) struct Moved {
    pub(crate) up: AtomicU64,
    pub(crate) down: AtomicU64,
}

/// Relays between the command and the host, counting the bytes each way in `moved`, until
/// both ends are done or `stop` (then what the command sent is passed on first).
pub(crate) async fn relay(
    mut client: TcpStream,
    mut upstream: TcpStream,
    request: Request,
    moved: &Moved,
    stop: &CancellationToken,
) {
    match request.forward {
        None => {
            if client
                .write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n")
                .await
                .is_err()
                || upstream.write_all(&request.rest).await.is_err()
            {
                return;
            }
            moved
                .up
                .fetch_add(request.rest.len() as u64, Ordering::Relaxed);
            let Ok((up, down)) = Pipe::pair() else {
                return;
            };
            let ends = (&client, &upstream);
            tokio::select! {
                () = splice::both_ways(ends, (&up, &down), &moved.up, &moved.down) => {}
                () = stop.cancelled() => {
                    let rest = splice::one_way(&client, &upstream, &up, &moved.up);
                    let _ = tokio::time::timeout(DRAIN, rest).await;
                }
            }
        }
        Some((head, length)) => {
            let (mut client_r, client_w) = client.split();
            let (upstream_r, mut upstream_w) = upstream.split();
            let send = async {
                upstream_w.write_all(&head).await?;
                let first = request
                    .rest
                    .len()
                    .min(usize::try_from(length).unwrap_or(usize::MAX));
                upstream_w.write_all(&request.rest[..first]).await?;
                moved
                    .up
                    .fetch_add((head.len() + first) as u64, Ordering::Relaxed);
                let remaining = length - first as u64;
                copy_counted(&mut client_r, &mut upstream_w, remaining, &moved.up).await
            };
            let Ok(down) = Pipe::new() else {
                return;
            };
            // The answer moves in the kernel, like a tunnel's bytes.
            let receive =
                splice::one_way(upstream_r.as_ref(), client_w.as_ref(), &down, &moved.down);
            tokio::pin!(send, receive);
            let (mut sent, mut received) = (false, false);
            while !(sent && received) {
                tokio::select! {
                    _ = &mut send, if !sent => sent = true,
                    _ = &mut receive, if !received => received = true,
                    () = stop.cancelled() => {
                        if !sent {
                            let _ = tokio::time::timeout(DRAIN, &mut send).await;
                        }
                        break;
                    }
                }
            }
        }
    }
}

/// Copies `n` bytes (or until end of file) from `from` to `to`, counting them in `moved`.
async fn copy_counted<R, W>(
    from: &mut R,
    to: &mut W,
    mut n: u64,
    moved: &AtomicU64,
) -> std::io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut buf = vec![0u8; 64 * 1024];
    while n > 0 {
        let want = buf.len().min(usize::try_from(n).unwrap_or(usize::MAX));
        let got = from.read(&mut buf[..want]).await?;
        if got == 0 {
            break;
        }
        to.write_all(&buf[..got]).await?;
        moved.fetch_add(got as u64, Ordering::Relaxed);
        n -= got as u64;
    }
    Ok(())
}
