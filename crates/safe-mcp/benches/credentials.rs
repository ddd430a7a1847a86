//! Credential-host benchmark: `cargo bench -p safe-mcp --bench credentials [-- ROUNDS]`.
//!
//! An HTTPS origin in this process on 127.0.0.1 (rustls and hyper, its own test CA) serves
//! 100 MB (and a 2-byte body) under two names, both pinned to loopback on one terminal
//! server with `mode = "allowlist"`: `tunnel.bench.test`, a host without credentials (an
//! end-to-end CONNECT tunnel, the kernel splicing bytes), and `cred.bench.test`, a
//! credential host (the proxy terminates TLS, adds the token, relays through hyper and masks
//! the answer). curl runs in the sandbox over a real MCP session, alternating the two in
//! each round. It prints each one's throughput (curl's `speed_download`) and their ratio,
//! and the time to first byte of the 2-byte body (`time_starttransfer`: connect, the
//! proxy's judgement, its durable `open` record, both TLS handshakes, and for the credential
//! host the `request` record) as p50/p99 of 50 fetches each way, and the p50 split at the
//! point TLS is up (`time_appconnect`). Both curls read a bundle
//! of the system roots and one CA, and the origin sets `TCP_NODELAY` as servers in the field
//! do; without the two, the comparison measured OpenSSL reading roots and a delayed ACK.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use common::call;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use serde_json::json;

const BIG: u64 = 100 << 20;
const CHUNK: usize = 1 << 20;
const SETUP_SAMPLES: usize = 50;

/// `left` bytes of zeroes, a megabyte at a time.
struct Zeroes {
    left: u64,
    chunk: Bytes,
}

impl Body for Zeroes {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        if self.left == 0 {
            return Poll::Ready(None);
        }
        let n = self.left.min(CHUNK as u64);
        self.left -= n;
        Poll::Ready(Some(Ok(Frame::data(self.chunk.slice(..n as usize)))))
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.left)
    }
}

/// The origin: a CA (written to `dir/origin-ca.pem`) and a server for both names.
async fn origin(dir: &std::path::Path) -> u16 {
    use rcgen::{
        BasicConstraints, CertificateParams, DistinguishedName, DnType, IsCa, Issuer, KeyPair,
    };
    let named = |cn: &str| {
        let mut n = DistinguishedName::new();
        n.push(DnType::CommonName, cn);
        n
    };
    let ca_key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name = named("bench origin CA");
    let ca = params.self_signed(&ca_key).unwrap();
    std::fs::write(dir.join("origin-ca.pem"), ca.pem()).unwrap();
    // The tunnel's curl trusts a bundle as big as the one the server gives commands for the
    // credential host (the system roots and a CA): OpenSSL takes tens of milliseconds to
    // read two hundred roots, and that cost belongs to neither path.
    let system = std::fs::read_to_string("/etc/ssl/certs/ca-certificates.crt").unwrap_or_default();
    std::fs::write(dir.join("jail/origin-ca.pem"), system + &ca.pem()).unwrap();
    let issuer = Issuer::new(params, ca_key);
    let key = KeyPair::generate().unwrap();
    let mut leaf =
        CertificateParams::new(vec!["tunnel.bench.test".into(), "cred.bench.test".into()]).unwrap();
    leaf.distinguished_name = named("bench origin");
    let leaf = leaf.signed_by(&key, &issuer).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![leaf.der().clone(), ca.der().clone()],
            rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
        )
        .unwrap();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let chunk = Bytes::from(vec![0u8; CHUNK]);
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            // As servers in the field do (nginx, Go's net/http, hyper users): without it, an
            // answer written right after the TLS session ticket waits out the reader's
            // delayed ACK, 40 ms, whenever the reader is the proxy.
            tcp.set_nodelay(true).unwrap();
            let (acceptor, chunk) = (acceptor.clone(), chunk.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let service = hyper::service::service_fn(move |req: hyper::Request<Incoming>| {
                    let left = if req.uri().path() == "/big" { BIG } else { 2 };
                    let chunk = chunk.clone();
                    async move {
                        Ok::<_, std::convert::Infallible>(hyper::Response::new(Zeroes {
                            left,
                            chunk,
                        }))
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    port
}

fn policy(dir: &std::path::Path) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let token = dir.join("token");
    std::fs::write(&token, "ghp_BenchToken0123456789abcdefghijklmnopq\n").unwrap();
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).unwrap();
    let p = dir.join("policy.toml");
    std::fs::write(
        &p,
        format!(
            r#"audit_log = "audit.jsonl"
[terminal]
jail_root = "jail"
path = ["/usr/bin", "/bin"]
[terminal.limits]
timeout_seconds = 120
[terminal.allowlist]
commands = ["curl", "sh", "seq"]
[[terminal.rules]]
command = "sh"
allow_interpreter = true
[terminal.network]
mode = "allowlist"
allow_domains = ["*.bench.test"]
allow_private = true
hosts = {{ "tunnel.bench.test" = ["127.0.0.1"], "cred.bench.test" = ["127.0.0.1"] }}
upstream_ca_file = "{ca}"
[[terminal.credentials]]
name = "GH_TOKEN"
from = "file:{token}"
hosts = ["cred.bench.test"]
inject = {{ header = "Authorization", format = "Bearer {{}}" }}
"#,
            ca = dir.join("origin-ca.pem").display(),
            token = token.display()
        ),
    )
    .unwrap();
    p
}

/// curl `times` times: the tunnel trusts the system roots and the origin's CA itself, the
/// credential host the server's bundle (SSL_CERT_FILE: the system roots and its own CA).
fn curl_script(url: &str, format: &str, times: usize) -> String {
    let trust = if url.contains("tunnel.") {
        "--cacert origin-ca.pem"
    } else {
        ""
    };
    format!("for i in $(seq {times}); do curl -s {trust} -o /dev/null -w '{format}\\n' {url}; done")
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let rounds = common::count_arg(3);
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("jail")).unwrap();
    let port = origin(dir.path()).await;
    let server = common::start_terminal(&policy(dir.path())).await;
    let run = |script: String| {
        let server = &server;
        async move {
            let r = call(
                server,
                "run_command",
                json!({"command": ["sh", "-c", script]}),
            )
            .await;
            assert_eq!(r["code"], "OK", "{r}");
            assert_eq!(r["detail"]["exit_code"], 0, "{r}");
            r["detail"]["stdout"].as_str().unwrap().to_owned()
        }
    };
    let url = |host: &str, path: &str| format!("https://{host}.bench.test:{port}/{path}");

    println!(
        "safe-mcp credential-host benchmark: {rounds} rounds of 100 MB each way, alternating\n"
    );
    let (mut tunnel, mut terminated) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        tunnel.extend(common::numbers(
            &run(curl_script(&url("tunnel", "big"), "%{speed_download}", 1)).await,
        ));
        terminated.extend(common::numbers(
            &run(curl_script(&url("cred", "big"), "%{speed_download}", 1)).await,
        ));
    }
    let (t, c) = (common::median_mb(&tunnel), common::median_mb(&terminated));
    println!(
        "100 MB over HTTPS, median MB/s   tunnel (no credential) {t:.0}   terminated (credential host) {c:.0}   terminated / tunnel {:.2}",
        c / t
    );
    let setup = |host: &'static str| {
        let script = curl_script(
            &url(host, "small"),
            "%{time_appconnect} %{time_starttransfer}",
            SETUP_SAMPLES,
        );
        let run = &run;
        async move { common::numbers(&run(script).await) }
    };
    // Each sample: until TLS with the proxy (tunnel: with the origin) is up, and until the
    // first byte of the answer.
    let summary = |v: Vec<f64>| {
        let ms = |i: usize| v.chunks(2).map(|c| c[i] * 1e3).collect::<Vec<_>>();
        let after: Vec<f64> = v.chunks(2).map(|c| (c[1] - c[0]) * 1e3).collect();
        let (p50, p99) = common::p50_p99(ms(1));
        let (tls, _) = common::p50_p99(ms(0));
        let (rest, _) = common::p50_p99(after);
        format!("p50 {p50:.3} ms p99 {p99:.3} ms (p50 to TLS up {tls:.3}, then {rest:.3})")
    };
    let t_setup = summary(setup("tunnel").await);
    let c_setup = summary(setup("cred").await);
    println!(
        "first byte of a 2-byte body ({SETUP_SAMPLES} each)\n  tunnel      {t_setup}\n  terminated  {c_setup}"
    );
    server.cancel().await.unwrap();
}
