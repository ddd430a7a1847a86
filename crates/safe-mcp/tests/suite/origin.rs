//! Real servers the credential tests reach through the proxy: a test CA and its
//! certificates (rcgen), an HTTPS origin on loopback (rustls and hyper) that serves git's
//! smart HTTP by running the real `git http-backend` as CGI and requires a token for it,
//! echoes what it was sent elsewhere, and can require a client certificate (which only a
//! client's own, unterminated handshake can present); and a DNS listener on loopback that
//! answers A queries and remembers every name it was asked.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use base64::Engine;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response};
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// A CA, a server certificate for `names`, a client certificate, all as PEM files in `dir`.
pub(super) struct Pki {
    pub(super) ca_pem: PathBuf,
    pub(super) client_pem: PathBuf,
    pub(super) client_key: PathBuf,
    ca: CertificateDer<'static>,
    server: (Vec<CertificateDer<'static>>, Vec<u8>),
}

impl Pki {
    pub(super) fn make(dir: &Path, names: &[&str]) -> Pki {
        let ca_key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name = named("test origin CA");
        let ca = params.self_signed(&ca_key).unwrap();
        let issuer = Issuer::new(params, ca_key);
        let key = KeyPair::generate().unwrap();
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let mut leaf = CertificateParams::new(names).unwrap();
        leaf.distinguished_name = named("test origin");
        let leaf = leaf.signed_by(&key, &issuer).unwrap();
        let client_key = KeyPair::generate().unwrap();
        let mut client_params = CertificateParams::new(vec!["client.test".to_owned()]).unwrap();
        client_params.distinguished_name = named("test client");
        client_params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
        let client = client_params.signed_by(&client_key, &issuer).unwrap();
        let write = |name: &str, text: String| {
            let p = dir.join(name);
            std::fs::write(&p, text).unwrap();
            p
        };
        Pki {
            ca_pem: write("origin-ca.pem", ca.pem()),
            client_pem: write("client.pem", client.pem()),
            client_key: write("client.key", client_key.serialize_pem()),
            ca: ca.der().clone(),
            server: (
                vec![leaf.der().clone(), ca.der().clone()],
                key.serialize_der(),
            ),
        }
    }

    fn server_config(&self, client_auth: bool) -> Arc<rustls::ServerConfig> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ServerConfig::builder_with_provider(Arc::clone(&provider))
            .with_safe_default_protocol_versions()
            .unwrap();
        let builder = if client_auth {
            let mut roots = rustls::RootCertStore::empty();
            roots.add(self.ca.clone()).unwrap();
            let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                Arc::new(roots),
                provider,
            )
            .build()
            .unwrap();
            builder.with_client_cert_verifier(verifier)
        } else {
            builder.with_no_client_auth()
        };
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.server.1.clone()));
        let mut config = builder
            .with_single_cert(self.server.0.clone(), key)
            .unwrap();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Arc::new(config)
    }
}

fn named(cn: &str) -> rcgen::DistinguishedName {
    let mut name = rcgen::DistinguishedName::new();
    name.push(rcgen::DnType::CommonName, cn);
    name
}

/// What the origin saw of one request.
#[derive(Debug, Clone)]
pub(super) struct Seen {
    pub(super) sni: Option<String>,
    pub(super) client_cert: bool,
    pub(super) method: String,
    pub(super) path: String,
    pub(super) authorization: Option<String>,
}

/// An HTTPS origin on 127.0.0.1.
pub(super) struct Origin {
    pub(super) port: u16,
    seen: Arc<Mutex<Vec<Seen>>>,
    /// The token git's paths require, as `Basic base64(user:token)`'s token.
    pub(super) token: Arc<Mutex<String>>,
}

impl Origin {
    /// Serves `repos` (bare repositories under it) to requests that carry `token` as the
    /// password of a Basic pair, and echoes every other request's Authorization header.
    pub(super) async fn start(
        pki: &Pki,
        client_auth: bool,
        repos: Option<PathBuf>,
        token: &str,
    ) -> Origin {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let token = Arc::new(Mutex::new(token.to_owned()));
        let config = pki.server_config(client_auth);
        let (log, want) = (Arc::clone(&seen), Arc::clone(&token));
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let acceptor = tokio_rustls::TlsAcceptor::from(Arc::clone(&config));
                let (log, want, repos) = (Arc::clone(&log), Arc::clone(&want), repos.clone());
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let (_, conn) = tls.get_ref();
                    let sni = conn.server_name().map(str::to_owned);
                    let client_cert = conn.peer_certificates().is_some_and(|c| !c.is_empty());
                    let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                        let (log, want, repos, sni) = (
                            Arc::clone(&log),
                            Arc::clone(&want),
                            repos.clone(),
                            sni.clone(),
                        );
                        async move {
                            let authorization = req
                                .headers()
                                .get("authorization")
                                .map(|v| v.to_str().unwrap_or_default().to_owned());
                            log.lock().unwrap().push(Seen {
                                sni,
                                client_cert,
                                method: req.method().to_string(),
                                path: req.uri().path().to_owned(),
                                authorization: authorization.clone(),
                            });
                            let token = want.lock().unwrap().clone();
                            Ok::<_, std::convert::Infallible>(match repos {
                                Some(root) => git(req, &root, authorization, &token).await,
                                None => text(
                                    200,
                                    format!(
                                        "authorization: {}\n",
                                        authorization.unwrap_or_default()
                                    ),
                                ),
                            })
                        }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(tls), service)
                        .await;
                });
            }
        });
        Origin { port, seen, token }
    }

    pub(super) fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

fn text(status: u16, body: String) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = hyper::StatusCode::from_u16(status).unwrap();
    r
}

/// git's smart HTTP, by the real `git http-backend` (CGI), for a request with the token.
async fn git(
    req: Request<Incoming>,
    root: &Path,
    authorization: Option<String>,
    token: &str,
) -> Response<Full<Bytes>> {
    let pair = authorization
        .as_deref()
        .and_then(|a| a.strip_prefix("Basic "))
        .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
        .map(|p| String::from_utf8_lossy(&p).into_owned());
    let user = match pair.as_deref().and_then(|p| p.split_once(':')) {
        Some((user, pass)) if pass == token => user.to_owned(),
        _ => {
            let mut r = text(401, "a token is required\n".into());
            r.headers_mut()
                .insert("www-authenticate", "Basic realm=\"git\"".parse().unwrap());
            return r;
        }
    };
    let method = req.method().to_string();
    let path = req.uri().path().to_owned();
    let query = req.uri().query().unwrap_or_default().to_owned();
    let headers: HashMap<String, String> = req
        .headers()
        .iter()
        .map(|(k, v)| {
            (
                k.as_str().to_owned(),
                v.to_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    let body = req.into_body().collect().await.unwrap().to_bytes();
    let mut cgi = tokio::process::Command::new("git");
    cgi.arg("http-backend")
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("GIT_PROJECT_ROOT", root)
        .env("GIT_HTTP_EXPORT_ALL", "1")
        .env("REMOTE_USER", user)
        .env("REMOTE_ADDR", "127.0.0.1")
        .env("REQUEST_METHOD", method)
        .env("PATH_INFO", path)
        .env("QUERY_STRING", query)
        .env("CONTENT_LENGTH", body.len().to_string())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped());
    if let Some(t) = headers.get("content-type") {
        cgi.env("CONTENT_TYPE", t);
    }
    if let Some(e) = headers.get("content-encoding") {
        cgi.env("HTTP_CONTENT_ENCODING", e);
    }
    if let Some(p) = headers.get("git-protocol") {
        cgi.env("GIT_PROTOCOL", p);
    }
    let mut child = cgi.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    tokio::spawn(async move {
        use tokio::io::AsyncWriteExt;
        let _ = stdin.write_all(&body).await;
    });
    let out = child.wait_with_output().await.unwrap();
    let split = out
        .stdout
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| (i, 4))
        .or_else(|| {
            out.stdout
                .windows(2)
                .position(|w| w == b"\n\n")
                .map(|i| (i, 2))
        });
    let Some((at, sep)) = split else {
        return text(500, "git http-backend gave no headers\n".into());
    };
    let head = String::from_utf8_lossy(&out.stdout[..at]).into_owned();
    let mut response = Response::new(Full::new(Bytes::copy_from_slice(&out.stdout[at + sep..])));
    for line in head.lines() {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        let v = v.trim();
        if k.eq_ignore_ascii_case("status") {
            let code = v
                .split(' ')
                .next()
                .and_then(|c| c.parse().ok())
                .unwrap_or(500);
            *response.status_mut() = hyper::StatusCode::from_u16(code).unwrap();
        } else if let (Ok(k), Ok(v)) = (
            hyper::header::HeaderName::from_bytes(k.trim().as_bytes()),
            hyper::header::HeaderValue::from_str(v),
        ) {
            response.headers_mut().insert(k, v);
        }
    }
    response
}

/// A DNS listener on `address` (UDP) that answers A queries for `names` with 127.0.0.1,
/// others with NXDOMAIN, and keeps every name asked.
pub(super) struct Dns {
    pub(super) asked: Arc<Mutex<Vec<String>>>,
}

impl Dns {
    pub(super) async fn start(address: SocketAddr, names: &[&str]) -> Dns {
        let socket = tokio::net::UdpSocket::bind(address).await.unwrap();
        let asked = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&asked);
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        tokio::spawn(async move {
            let mut buf = [0u8; 1500];
            while let Ok((n, from)) = socket.recv_from(&mut buf).await {
                let query = &buf[..n];
                let Some((name, end)) = question(query) else {
                    continue;
                };
                let qtype = u16::from_be_bytes([query[end], query[end + 1]]);
                log.lock().unwrap().push(name.clone());
                let known = names.contains(&name);
                let mut reply = query[..end + 4].to_vec();
                reply[2] = 0x81 | (query[2] & 0x01); // response, recursion desired echoed
                reply[3] = if known { 0x80 } else { 0x83 }; // RA; NOERROR or NXDOMAIN
                reply[6..12].copy_from_slice(&[0, 0, 0, 0, 0, 0]);
                if known && qtype == 1 {
                    reply[7] = 1;
                    reply.extend_from_slice(&[
                        0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 30, 0, 4, 127, 0, 0, 1,
                    ]);
                }
                let _ = socket.send_to(&reply, from).await;
            }
        });
        Dns { asked }
    }

    pub(super) fn asked(&self) -> Vec<String> {
        self.asked.lock().unwrap().clone()
    }
}

/// The question's name (lower case) and where its type begins.
fn question(query: &[u8]) -> Option<(String, usize)> {
    let mut at = 12;
    let mut labels = Vec::new();
    loop {
        let len = usize::from(*query.get(at)?);
        if len == 0 {
            at += 1;
            break;
        }
        labels.push(String::from_utf8_lossy(query.get(at + 1..at + 1 + len)?).to_lowercase());
        at += 1 + len;
    }
    (query.len() >= at + 4).then(|| (labels.join("."), at))
}
