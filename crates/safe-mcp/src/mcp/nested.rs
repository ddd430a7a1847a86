//! The server's end of nested calls (issue 35, item 2): the socket in the shim directory
//! where a command's shim ([`crate::shim`]) asks for a ruled program.
//!
//! One task of the server's runtime accepts; each connection is one call: a JSON line
//! (`token`, `argv`, `cwd`) with the shim's three standard descriptors attached, answered
//! with one line once the call has ended (`exit_code`, or `code` and `reason` for a
//! refusal). The call itself is the core's: judged as a top-level `run_command` of the
//! caller whose call holds the token, approved only through that call's client, recorded
//! with its `parent`. A connection that closes before the answer (the shim was killed)
//! cancels the call. The task holds the service and the executor weakly, so that both end
//! with the server.

use std::mem::MaybeUninit;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::{Arc, Weak};

use rustix::net::{RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags};
use safe_mcp_core::terminal::{Executor, NestedAsk, TerminalService};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

/// The longest request line.
const MAX_REQUEST: usize = 256 << 10;

/// Connections served at once (each a nested call, or a client still sending one).
const MAX_CONNECTIONS: usize = 64;

/// How long a client may take to send its request.
const REQUEST_DEADLINE: std::time::Duration = std::time::Duration::from_secs(5);

/// The listener on the shim directory's socket, when the service has one: a task for the
/// server's runtime. A socket that cannot be made leaves nested calls unanswered (the shims
/// say so), with a warning.
pub(crate) fn listener(
    service: &Arc<TerminalService>,
    executor: &Arc<dyn Executor>,
) -> Option<impl std::future::Future<Output = ()> + Send + 'static> {
    let socket = service.nested_shims()?.socket();
    let (service, executor) = (Arc::downgrade(service), Arc::downgrade(executor));
    Some(async move {
        let listener = match tokio::net::UnixListener::bind(&socket) {
            Ok(l) => l,
            Err(e) => {
                return eprintln!(
                    "safe-mcp: warning: no nested calls at {}: {e}; programs with argument rules cannot be started by commands",
                    socket.display()
                );
            }
        };
        let room = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
        loop {
            let stream = match listener.accept().await {
                Ok((stream, _)) => stream,
                Err(e) => {
                    // Out of descriptors, say: wait, and keep serving.
                    eprintln!("safe-mcp: warning: nested calls: accept: {e}");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                    continue;
                }
            };
            // Past the bound a connection is closed at once (its shim says so).
            let Ok(place) = Arc::clone(&room).try_acquire_owned() else {
                continue;
            };
            let (service, executor) = (Weak::clone(&service), Weak::clone(&executor));
            tokio::spawn(async move {
                let _ = serve(stream, service, executor).await;
                drop(place);
            });
        }
    })
}

/// One connection: one nested call.
async fn serve(
    stream: UnixStream,
    service: Weak<TerminalService>,
    executor: Weak<dyn Executor>,
) -> std::io::Result<()> {
    let (line, fds) = tokio::time::timeout(REQUEST_DEADLINE, receive(&stream))
        .await
        .map_err(|_| std::io::Error::other("the request took too long"))??;
    let (read, mut write) = stream.into_split();
    let answer = match (service.upgrade(), executor.upgrade()) {
        (Some(service), Some(executor)) => answer(&service, &*executor, read, line, fds).await,
        _ => json!({"code": "INTERNAL", "reason": "the server is ending"}),
    };
    let mut out = answer.to_string();
    out.push('\n');
    write.write_all(out.as_bytes()).await
}

/// Judges and runs the call; the answer line. Refused before it runs when the request is
/// malformed or its token is no running call's.
async fn answer(
    service: &TerminalService,
    executor: &dyn Executor,
    mut read: tokio::net::unix::OwnedReadHalf,
    line: Vec<u8>,
    fds: Vec<OwnedFd>,
) -> Value {
    let refused = |reason: &str| json!({"code": "INVALID_REQUEST", "reason": reason});
    let Ok(request) = serde_json::from_slice::<Value>(&line) else {
        return refused("not a request");
    };
    let Ok([stdin, stdout, stderr]) = <[OwnedFd; 3]>::try_from(fds) else {
        return refused("the call came without its three standard descriptors");
    };
    let argv: Option<Vec<String>> = request["argv"].as_array().and_then(|a| {
        a.iter()
            .map(|v| v.as_str().map(str::to_owned))
            .collect::<Option<Vec<_>>>()
    });
    let (Some(token), Some(argv), Some(cwd)) =
        (request["token"].as_str(), argv, request["cwd"].as_str())
    else {
        return refused("a request names its token, argv and cwd");
    };
    let ask = NestedAsk {
        token: token.to_owned(),
        argv,
        cwd: cwd.to_owned(),
        stdio: safe_mcp_core::terminal::GivenStdio(Arc::new([stdin, stdout, stderr])),
    };
    let req = match service.nested_request(ask) {
        Ok(req) => req,
        Err(why) => return json!({"code": "POLICY_DENIED", "reason": why}),
    };
    // The shim's end closing (it was killed) cancels the call, which then ends as a
    // cancelled one (its tree killed, its outcome recorded).
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let hangup = tokio::spawn(async move {
        let mut byte = [0u8; 1];
        let _ = read.read(&mut byte).await;
        let _ = stop.send(());
    });
    let cancel = Box::pin(async move {
        let _ = stopped.await;
    });
    let result = service.run(req, executor, cancel).await;
    hangup.abort();
    match result.detail.get("exit_code").and_then(Value::as_i64) {
        Some(code) if result.ok => json!({"exit_code": code}),
        _ => {
            // Killed by a signal: as a shell says it.
            let signal = result
                .detail
                .get("stages")
                .and_then(Value::as_array)
                .and_then(|s| s.iter().rev().find_map(|s| s["signal"].as_i64()));
            match signal {
                Some(signal) if result.ok => json!({"exit_code": 128 + signal}),
                _ => json!({"code": result.code.as_str(), "reason": result.reason}),
            }
        }
    }
}

/// The request line and the descriptors that came with it: with its first message only,
/// at most three. Descriptors on any later message end the connection (a client that sends
/// them again and again would use up the server's).
async fn receive(stream: &UnixStream) -> std::io::Result<(Vec<u8>, Vec<OwnedFd>)> {
    let mut line = Vec::new();
    let mut fds = Vec::new();
    let mut first = true;
    loop {
        stream.readable().await?;
        let mut chunk = [0u8; 4096];
        let got = stream.try_io(tokio::io::Interest::READABLE, || {
            let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(3))];
            let mut control = RecvAncillaryBuffer::new(&mut space);
            let mut iov = [std::io::IoSliceMut::new(&mut chunk)];
            let msg = rustix::net::recvmsg(
                stream.as_fd(),
                &mut iov,
                &mut control,
                RecvFlags::DONTWAIT | RecvFlags::CMSG_CLOEXEC,
            )?;
            let mut received = Vec::new();
            for message in control.drain() {
                if let RecvAncillaryMessage::ScmRights(more) = message {
                    received.extend(more);
                }
            }
            Ok((msg.bytes, received))
        });
        let (n, received) = match got {
            Ok(got) => got,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            Err(e) => return Err(e),
        };
        if !received.is_empty() && (!first || received.len() > 3) {
            return Err(std::io::Error::other(
                "descriptors beyond the request's three",
            ));
        }
        if n > 0 {
            first = false;
        }
        fds.extend(received);
        line.extend_from_slice(&chunk[..n]);
        if n == 0 || line.contains(&b'\n') || line.len() > MAX_REQUEST {
            let end = line.iter().position(|b| *b == b'\n').unwrap_or(line.len());
            line.truncate(end);
            return Ok((line, fds));
        }
    }
}
