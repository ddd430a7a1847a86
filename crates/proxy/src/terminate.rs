//! A CONNECT to a credential host, terminated: the one place the proxy reads what goes
//! through a tunnel.
//!
//! In order, for the connection: the command's TLS ClientHello must name the CONNECT host
//! (SNI); it gets a leaf of the proxy's CA for that host; the proxy opens its own TLS to the
//! checked address, verifying the host's certificate. Then, for each HTTP/1.1 request
//! (hyper reads them; keep-alive works): the `Host` header (and an absolute URL's host)
//! must name the CONNECT host; the method and path must pass the host's rules; no other
//! credential's placeholder may be in the head or the first [`PEEK`] bytes of the body; a
//! `request` record is appended; the credential header gets the real value
//! ([`Vault::authorization`]); `Accept-Encoding` is dropped, so that the answer comes back
//! uncompressed and any real value in it is masked ([`Vault::mask`]) before the command
//! sees it. Every refusal is a response with `X-Safe-Mcp-Refusal` and a `refused` record.

use std::convert::Infallible;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::{Context as TaskContext, Poll};

use bytes::{Bytes, BytesMut};
use http::header::{HOST, HeaderName, HeaderValue};
use http::{Request as HttpRequest, Response, StatusCode, Uri};
use http_body_util::BodyExt;
use http_body_util::combinators::BoxBody;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper_util::rt::{TokioIo, TokioTimer};
use safe_mcp_core::audit::{NetworkEvent, NetworkRecord};
use safe_mcp_core::credentials::hosts::OVERRIDES;
use safe_mcp_core::credentials::{Authorization, Entry, Vault};
use safe_mcp_core::egress::{Refusal, RefusalRule};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;

use crate::context::{
    CONNECT_TIMEOUT, Context, HEAD_TIMEOUT, MAX_REASON_CHARS, MAX_REQUESTS_PER_CALL, capped,
};
use crate::relay::Moved;
use crate::request::{Refused, Request};
use crate::tls::Tls;

/// How much of a request body is looked at for placeholders before it is relayed.
pub(crate) const PEEK: usize = 64 * 1024;

type Error = Box<dyn std::error::Error + Send + Sync>;
type Answer = BoxBody<Bytes, Error>;

/// Serves one terminated CONNECT to its end.
pub(crate) async fn serve(
    ctx: Arc<Context>,
    tls: Arc<Tls>,
    mut client: TcpStream,
    upstream: TcpStream,
    request: Request,
    (host, rule): (String, String),
    moved: Arc<Moved>,
) {
    let refused = |rule: RefusalRule, reason: String| Refused {
        status: "403 Forbidden",
        refusal: Refusal { rule, reason },
        method: "CONNECT".into(),
        host: host.clone(),
        port: request.port,
    };
    if client
        .write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n")
        .await
        .is_err()
    {
        return;
    }
    let io = Counted {
        inner: client,
        first: request.rest.clone(),
        moved: Arc::clone(&moved),
    };
    let acceptor = tokio_rustls::LazyConfigAcceptor::new(rustls::server::Acceptor::default(), io);
    let start = match tokio::time::timeout(HEAD_TIMEOUT, acceptor).await {
        Ok(Ok(start)) => start,
        Ok(Err(e)) => {
            let why = format!("no TLS ClientHello came for {host}: {e}");
            return ctx.register(refused(RefusalRule::Tls, why), None).await;
        }
        Err(_) => return,
    };
    let sni = start
        .client_hello()
        .server_name()
        .map(|s| safe_mcp_core::egress::normalize(s).unwrap_or_else(|_| s.to_owned()));
    if sni.as_deref() != Some(host.as_str()) {
        let why = format!(
            "the TLS ClientHello names {} but the CONNECT named {host}; they must agree",
            sni.as_deref().unwrap_or("no host (no SNI)")
        );
        return ctx
            .register(refused(RefusalRule::SniMismatch, why), None)
            .await;
    }
    let config = match tls.server_for(&host) {
        Ok(c) => c,
        Err(e) => {
            let why = format!("no certificate could be made for {host}: {e}");
            return ctx.register(refused(RefusalRule::Tls, why), None).await;
        }
    };
    let stream = match start.into_stream(config).await {
        Ok(s) => s,
        Err(e) => {
            let why = format!(
                "TLS with the command failed ({e}): it must trust the CA bundle the server gives it in SSL_CERT_FILE"
            );
            return ctx.register(refused(RefusalRule::Tls, why), None).await;
        }
    };
    let address = upstream.peer_addr().ok();
    let session = Arc::new(Session {
        ctx,
        tls,
        host,
        port: request.port,
        rule,
        sender: tokio::sync::Mutex::new(Upstream::Fresh(Some(upstream))),
        address,
    });
    let service = hyper::service::service_fn(move |req| {
        let session = Arc::clone(&session);
        async move { Ok::<_, Infallible>(session.exchange(req).await) }
    });
    let _ = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEAD_TIMEOUT)
        .serve_connection(TokioIo::new(stream), service)
        .await;
}

/// The command's side of the connection, counting bytes each way and reading first what
/// came with the CONNECT.
struct Counted {
    inner: TcpStream,
    first: Vec<u8>,
    moved: Arc<Moved>,
}

impl AsyncRead for Counted {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if !self.first.is_empty() {
            let n = self.first.len().min(buf.remaining());
            buf.put_slice(&self.first[..n]);
            self.first.drain(..n);
            self.moved.up.fetch_add(n as u64, Ordering::Relaxed);
            return Poll::Ready(Ok(()));
        }
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        let n = buf.filled().len() - before;
        self.moved.up.fetch_add(n as u64, Ordering::Relaxed);
        polled
    }
}

impl AsyncWrite for Counted {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = &polled {
            self.moved.down.fetch_add(*n as u64, Ordering::Relaxed);
        }
        polled
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// The proxy's side to the real host: the connection the CONNECT opened, then a live
/// sender, then (when the host closed it) a new connection to the same checked address.
enum Upstream {
    Fresh(Option<TcpStream>),
    Open(hyper::client::conn::http1::SendRequest<Outgoing>),
}

/// One terminated connection's state.
struct Session {
    ctx: Arc<Context>,
    tls: Arc<Tls>,
    host: String,
    port: u16,
    /// The allow entry that let the CONNECT through.
    rule: String,
    sender: tokio::sync::Mutex<Upstream>,
    address: Option<std::net::SocketAddr>,
}

/// A refusal on a terminated connection: the status and the rule, and why.
struct Refuse(StatusCode, RefusalRule, String);

impl Session {
    /// One request, answered: relayed, or refused.
    async fn exchange(&self, req: HttpRequest<Incoming>) -> Response<Answer> {
        let method = req.method().as_str().to_owned();
        let target = req
            .uri()
            .path_and_query()
            .map(|p| p.as_str().to_owned())
            .unwrap_or_else(|| "/".into());
        match self.forward(req, &method, &target).await {
            Ok(response) => response,
            Err(Refuse(status, rule, reason)) => {
                let refused = Refused {
                    status: status.canonical_reason().unwrap_or("Refused"),
                    refusal: Refusal {
                        rule: rule.clone(),
                        reason: reason.clone(),
                    },
                    method,
                    host: self.host.clone(),
                    port: self.port,
                };
                let path = target.split('?').next().map(str::to_owned);
                self.ctx.register(refused, path).await;
                let body = format!("safe-mcp egress refused: {reason}\n");
                let mut response = Response::new(
                    http_body_util::Full::new(Bytes::from(body))
                        .map_err(|e| match e {})
                        .boxed(),
                );
                *response.status_mut() = status;
                if let Ok(v) = HeaderValue::from_str(rule.as_str()) {
                    response.headers_mut().insert("x-safe-mcp-refusal", v);
                }
                response.headers_mut().insert(
                    "content-type",
                    HeaderValue::from_static("text/plain; charset=utf-8"),
                );
                response
            }
        }
    }

    /// One request through the tunnel: judged ([`Self::judge_head`]), its first bytes
    /// looked at, the credential added, recorded durably, sent; the answer masked.
    async fn forward(
        &self,
        req: HttpRequest<Incoming>,
        method: &str,
        target: &str,
    ) -> Result<Response<Answer>, Refuse> {
        let forbidden = |rule, why| Refuse(StatusCode::FORBIDDEN, rule, why);
        let vault: &Vault = &self.ctx.vault;
        let (entry, ruled) = self.judge_head(&req, method, target)?;
        let mut head = format!("{method} {target}\r\n").into_bytes();
        for (name, value) in req.headers() {
            head.extend_from_slice(name.as_str().as_bytes());
            head.extend_from_slice(b": ");
            head.extend_from_slice(value.as_bytes());
            head.extend_from_slice(b"\r\n");
        }
        let (mut parts, body) = req.into_parts();
        let first = First::read(body).await?;
        let form = parts
            .headers
            .get(http::header::CONTENT_TYPE)
            .is_some_and(|v| {
                v.as_bytes()
                    .starts_with(b"application/x-www-form-urlencoded")
            });
        if ruled
            && form
            && first.bytes[..]
                .split(|b| *b == b'&')
                .any(|p| p.to_ascii_lowercase().starts_with(b"_method="))
        {
            return Err(forbidden(
                RefusalRule::MethodPath,
                format!(
                    "a _method field overrides the method {}'s rules judged",
                    self.host
                ),
            ));
        }
        head.extend_from_slice(&first.bytes);
        if let Some(name) = vault.foreign(&self.host, &head) {
            return Err(forbidden(
                RefusalRule::CredentialHost,
                format!(
                    "the request carries the placeholder of {name}, which is not bound to {}; a credential goes only to its own hosts",
                    self.host
                ),
            ));
        }
        let added = add_credential(vault, entry, &mut parts.headers)?;
        strip_headers(&mut parts.headers, ruled);
        parts.uri = target.parse::<Uri>().map_err(|e| {
            Refuse(
                StatusCode::BAD_REQUEST,
                RefusalRule::BadRequest,
                e.to_string(),
            )
        })?;
        self.record_request(method, target, added.then(|| entry.name.clone()))
            .await?;
        let outgoing = Outgoing {
            first: (!first.bytes.is_empty()).then(|| first.bytes.freeze()),
            held: first.held,
            rest: first.rest,
        };
        let response = self
            .send(HttpRequest::from_parts(parts, outgoing))
            .await
            .map_err(|why| Refuse(StatusCode::BAD_GATEWAY, RefusalRule::Upstream, why))?;
        self.masked(response)
    }

    /// The request's head against the tunnel: no method that echoes or reaches past the
    /// proxy, the host's credential, the URL's and the one Host header's host the tunnel's,
    /// the method and path within the host's rules, no header overriding them. The
    /// credential's entry, and whether the host has rules.
    fn judge_head(
        &self,
        req: &HttpRequest<Incoming>,
        method: &str,
        target: &str,
    ) -> Result<(&Entry, bool), Refuse> {
        let forbidden = |rule, why| Refuse(StatusCode::FORBIDDEN, rule, why);
        let vault: &Vault = &self.ctx.vault;
        // An answer that echoes the request (TRACE) would carry the real value back; a
        // CONNECT inside the tunnel would reach past the proxy's view.
        if matches!(method, "TRACE" | "TRACK" | "CONNECT") {
            return Err(forbidden(
                RefusalRule::MethodPath,
                format!("{method} is refused on a host the proxy adds a credential for"),
            ));
        }
        let entry = vault.bound(&self.host).ok_or_else(|| {
            forbidden(
                RefusalRule::CredentialHost,
                format!("{} has no credential", self.host),
            )
        })?;
        // The host asked for is the host judged: the URL's, and the Host header's.
        let names_host = |text: &str| {
            crate::request::authority(text).is_some_and(|(h, p)| {
                safe_mcp_core::egress::normalize(&h).is_ok_and(|h| h == self.host)
                    && p.unwrap_or(443) == self.port
            })
        };
        if let Some(a) = req.uri().authority()
            && !names_host(a.as_str())
        {
            return Err(forbidden(
                RefusalRule::BadRequest,
                format!("the URL names {a}, not {}", self.host),
            ));
        }
        let hosts: Vec<&HeaderValue> = req.headers().get_all(HOST).iter().collect();
        let host_header = match hosts.as_slice() {
            [one] => one.to_str().unwrap_or_default(),
            _ => {
                return Err(forbidden(
                    RefusalRule::BadRequest,
                    format!("the request has {} Host headers; send one", hosts.len()),
                ));
            }
        };
        if !names_host(host_header) {
            return Err(forbidden(
                RefusalRule::BadRequest,
                format!(
                    "the Host header {host_header:?} does not name {}:{}, the host the tunnel was opened to",
                    self.host, self.port
                ),
            ));
        }
        vault
            .allows(&self.host, method, target)
            .map_err(|why| forbidden(RefusalRule::MethodPath, why))?;
        let ruled = vault.ruled(&self.host);
        if ruled && let Some(h) = OVERRIDES.iter().find(|h| req.headers().contains_key(**h)) {
            return Err(forbidden(
                RefusalRule::MethodPath,
                format!(
                    "the {h} header overrides the method or path {}'s rules judged; send the request as it is meant",
                    self.host
                ),
            ));
        }
        Ok((entry, ruled))
    }

    /// The `request` record, durable before the request goes: a request that carried the
    /// real value is on the record even if the server dies while it is in flight.
    async fn record_request(
        &self,
        method: &str,
        target: &str,
        credential: Option<String>,
    ) -> Result<(), Refuse> {
        let record = NetworkRecord {
            call: self.ctx.call.clone(),
            event: NetworkEvent::Request,
            method: method.to_owned(),
            host: self.host.clone(),
            port: self.port,
            rule: self.rule.clone(),
            address: self.address.map(|a| a.to_string()),
            path: Some(capped(
                target.split('?').next().unwrap_or_default().to_owned(),
                MAX_REASON_CHARS,
            )),
            credential,
            ..Default::default()
        };
        if !self.ctx.reserve_request() {
            return Err(Refuse(
                StatusCode::TOO_MANY_REQUESTS,
                RefusalRule::RecordLimit,
                format!(
                    "this call has made as many requests with a credential as its trail may hold ({}); make further requests in another call",
                    MAX_REQUESTS_PER_CALL
                ),
            ));
        }
        if !self.ctx.append(&record, true).await {
            return Err(Refuse(
                StatusCode::SERVICE_UNAVAILABLE,
                RefusalRule::Audit,
                "the audit trail is unavailable, so no request is made".into(),
            ));
        }
        Ok(())
    }

    /// The host's answer, its headers and body masked; a compressed one is not relayed (the
    /// proxy could not look through it for the credential).
    fn masked(&self, response: Response<Incoming>) -> Result<Response<Answer>, Refuse> {
        let (mut parts, body) = response.into_parts();
        let encoded = parts
            .headers
            .get(http::header::CONTENT_ENCODING)
            .is_some_and(|v| !v.as_bytes().eq_ignore_ascii_case(b"identity"));
        if encoded {
            return Err(Refuse(
                StatusCode::BAD_GATEWAY,
                RefusalRule::Upstream,
                format!(
                    "{} sent a compressed answer though none was asked for; the proxy cannot look through it for the credential, so it is not relayed",
                    self.host
                ),
            ));
        }
        mask_headers(&self.ctx.vault, &mut parts.headers);
        let masked = Masked {
            inner: body,
            vault: Arc::clone(&self.ctx.vault),
            carry: Vec::new(),
            held: None,
            done: false,
        };
        Ok(Response::from_parts(parts, masked.boxed()))
    }

    /// Sends `request` on a live connection to the host, opening one when there is none.
    async fn send(&self, request: HttpRequest<Outgoing>) -> Result<Response<Incoming>, String> {
        let mut upstream = self.sender.lock().await;
        let stale = match &*upstream {
            Upstream::Open(sender) => sender.is_closed(),
            Upstream::Fresh(_) => true,
        };
        if stale {
            let tcp = match &mut *upstream {
                Upstream::Fresh(tcp) => tcp.take(),
                Upstream::Open(_) => None,
            };
            let tcp = match tcp {
                Some(tcp) => tcp,
                None => {
                    let address = self.address.ok_or("the host's address is unknown")?;
                    tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(address))
                        .await
                        .map_err(|_| format!("{address} did not answer in time"))?
                        .map_err(|e| format!("{address}: {e}"))?
                }
            };
            let _ = tcp.set_nodelay(true);
            let name = rustls::pki_types::ServerName::try_from(self.host.clone())
                .map_err(|e| format!("{}: {e}", self.host))?;
            let tls = tokio::time::timeout(CONNECT_TIMEOUT, self.tls.upstream().connect(name, tcp))
                .await
                .map_err(|_| format!("TLS with {} timed out", self.host))?
                .map_err(|e| format!("TLS with {} failed: {e}", self.host))?;
            let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
                .await
                .map_err(|e| format!("HTTP with {}: {e}", self.host))?;
            tokio::spawn(async move {
                let _ = connection.await;
            });
            *upstream = Upstream::Open(sender);
        }
        let Upstream::Open(sender) = &mut *upstream else {
            return Err("no connection to the host".into());
        };
        sender
            .ready()
            .await
            .map_err(|e| format!("{}: {e}", self.host))?;
        let answer = sender.send_request(request);
        // The next request may be sent once this one's answer has begun.
        drop(upstream);
        answer.await.map_err(|e| format!("{}: {e}", self.host))
    }
}

/// Masks each real value in the values of `headers` (an answer's, or its trailers).
fn mask_headers(vault: &Vault, headers: &mut http::HeaderMap) {
    for value in headers.values_mut() {
        let mut bytes = value.as_bytes().to_vec();
        if vault.mask(&mut bytes) > 0
            && let Ok(masked) = HeaderValue::from_bytes(&bytes)
        {
            *value = masked;
        }
    }
}

/// A request body relayed: the part already read, then the rest.
struct Outgoing {
    first: Option<Bytes>,
    held: Option<Frame<Bytes>>,
    rest: Option<Incoming>,
}

impl Body for Outgoing {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        if let Some(first) = self.first.take() {
            return Poll::Ready(Some(Ok(Frame::data(first))));
        }
        if let Some(held) = self.held.take() {
            return Poll::Ready(Some(Ok(held)));
        }
        match self.rest.as_mut() {
            Some(rest) => Pin::new(rest).poll_frame(cx),
            None => Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.first.is_none()
            && self.held.is_none()
            && self.rest.as_ref().is_none_or(Body::is_end_stream)
    }

    fn size_hint(&self) -> SizeHint {
        let first = self.first.as_ref().map_or(0, |b| b.len() as u64);
        let rest = self
            .rest
            .as_ref()
            .map(Body::size_hint)
            .unwrap_or_else(|| SizeHint::with_exact(0));
        plus(&rest, first)
    }
}

/// A response body with each real value masked, holding back the bytes a value split
/// between two pieces could begin with.
struct Masked {
    inner: Incoming,
    vault: Arc<Vault>,
    carry: Vec<u8>,
    held: Option<Frame<Bytes>>,
    done: bool,
}

impl Body for Masked {
    type Data = Bytes;
    type Error = Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Error>>> {
        loop {
            if let Some(held) = self.held.take() {
                return Poll::Ready(Some(Ok(held)));
            }
            if self.done {
                return Poll::Ready(None);
            }
            match Pin::new(&mut self.inner).poll_frame(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(e.into()))),
                Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                    Ok(data) => {
                        let mut buf = std::mem::take(&mut self.carry);
                        buf.extend_from_slice(&data);
                        self.vault.mask(&mut buf);
                        let keep = self.vault.longest().saturating_sub(1).min(buf.len());
                        self.carry = buf.split_off(buf.len() - keep);
                        if !buf.is_empty() {
                            return Poll::Ready(Some(Ok(Frame::data(Bytes::from(buf)))));
                        }
                    }
                    Err(mut trailers) => {
                        if let Some(map) = trailers.trailers_mut() {
                            mask_headers(&self.vault, map);
                        }
                        self.held = Some(trailers);
                        let carry = std::mem::take(&mut self.carry);
                        if !carry.is_empty() {
                            return Poll::Ready(Some(Ok(Frame::data(Bytes::from(carry)))));
                        }
                    }
                },
                Poll::Ready(None) => {
                    self.done = true;
                    let carry = std::mem::take(&mut self.carry);
                    if !carry.is_empty() {
                        return Poll::Ready(Some(Ok(Frame::data(Bytes::from(carry)))));
                    }
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.done && self.carry.is_empty() && self.held.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        plus(&self.inner.size_hint(), self.carry.len() as u64)
    }
}

/// `hint` with `n` more bytes (the upper bound raised before the lower, which may not
/// pass it).
fn plus(hint: &SizeHint, n: u64) -> SizeHint {
    let mut out = SizeHint::new();
    if let Some(upper) = hint.upper() {
        out.set_upper(upper.saturating_add(n));
    }
    out.set_lower(hint.lower().saturating_add(n));
    out
}

/// The first [`PEEK`] bytes of a request body, looked at before anything is relayed; a
/// frame that is not data (trailers) where they stopped; what is left of the body.
struct First {
    bytes: BytesMut,
    held: Option<Frame<Bytes>>,
    rest: Option<Incoming>,
}

impl First {
    async fn read(mut body: Incoming) -> Result<First, Refuse> {
        let mut bytes = BytesMut::new();
        let mut held = None;
        let mut ended = false;
        while bytes.len() < PEEK {
            match body.frame().await {
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) => bytes.extend_from_slice(&data),
                    Err(other) => {
                        held = Some(other);
                        break;
                    }
                },
                Some(Err(e)) => {
                    return Err(Refuse(
                        StatusCode::BAD_REQUEST,
                        RefusalRule::BadRequest,
                        format!("reading the request body: {e}"),
                    ));
                }
                None => {
                    ended = true;
                    break;
                }
            }
        }
        Ok(First {
            bytes,
            held,
            rest: (!ended).then_some(body),
        })
    }
}

/// The credential's header with the real value (one such header at most may come from the
/// command); whether the value was added.
fn add_credential(
    vault: &Vault,
    entry: &Entry,
    headers: &mut http::HeaderMap,
) -> Result<bool, Refuse> {
    let forbidden = |rule, why| Refuse(StatusCode::FORBIDDEN, rule, why);
    let header = HeaderName::from_bytes(entry.header().as_bytes())
        .map_err(|e| forbidden(RefusalRule::Credential, e.to_string()))?;
    let sent: Vec<&HeaderValue> = headers.get_all(&header).iter().collect();
    if sent.len() > 1 {
        return Err(forbidden(
            RefusalRule::BadRequest,
            format!("the request has {} {header} headers; send one", sent.len()),
        ));
    }
    let sent = sent.first().map(|v| v.as_bytes().to_vec());
    match vault.authorization(entry, sent.as_deref()) {
        Authorization::Set(value) => {
            let value = HeaderValue::from_bytes(&value)
                .map_err(|e| forbidden(RefusalRule::Credential, format!("{}: {e}", entry.name)))?;
            headers.insert(header, value);
            Ok(true)
        }
        Authorization::Keep => Ok(false),
    }
}

/// Uncompressed answers, so that a real value echoed back can be masked; nothing of the
/// proxy's own; for a host with rules, no header that says where the request came from.
fn strip_headers(headers: &mut http::HeaderMap, ruled: bool) {
    headers.remove(http::header::ACCEPT_ENCODING);
    headers.remove(http::header::TE);
    headers.remove("proxy-authorization");
    headers.remove("proxy-connection");
    if ruled {
        for h in [
            "forwarded",
            "x-forwarded-for",
            "x-forwarded-host",
            "x-forwarded-proto",
            "x-forwarded-prefix",
        ] {
            headers.remove(h);
        }
    }
}
