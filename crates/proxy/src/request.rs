//! Reading a request head and finding where it goes: the host the proxy judges is the host
//! it connects to, so both come from one parse (`http`'s [`Uri`] and [`Authority`]) of the
//! request line, and a plain-HTTP `Host` header must name that same host and port.

use http::Uri;
use http::uri::Authority;
use safe_mcp_core::egress::{Refusal, RefusalRule};
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

/// The longest request head read (request line and headers).
const MAX_HEAD: usize = 16 * 1024;

/// A request as the proxy reads it.
pub(crate) struct Request {
    pub(crate) method: String,
    pub(crate) host: String,
    pub(crate) port: u16,
    /// Plain HTTP: the head to send upstream (origin-form, hop-by-hop headers dropped,
    /// `Connection: close`), and the body length that follows it.
    pub(crate) forward: Option<(Vec<u8>, u64)>,
    /// Bytes the client sent after the head.
    pub(crate) rest: Vec<u8>,
    /// The head as it came (looked through for placeholders).
    pub(crate) head: Vec<u8>,
    /// Plain HTTP: the path and query.
    pub(crate) path: Option<String>,
}

/// Why a request was refused, and the status it gets.
pub(crate) struct Refused {
    pub(crate) status: &'static str,
    pub(crate) refusal: Refusal,
    pub(crate) method: String,
    pub(crate) host: String,
    pub(crate) port: u16,
}

/// Reads and checks the request head.
pub(crate) async fn read_request(client: &mut TcpStream) -> Result<Request, Refused> {
    let bad = |reason: String| Refused {
        status: "400 Bad Request",
        refusal: Refusal {
            rule: RefusalRule::BadRequest,
            reason,
        },
        method: String::new(),
        host: String::new(),
        port: 0,
    };
    let mut head = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    loop {
        let n = client
            .read(&mut chunk)
            .await
            .map_err(|e| bad(format!("reading the request: {e}")))?;
        if n == 0 {
            return Err(bad("the connection closed before a request arrived".into()));
        }
        head.extend_from_slice(&chunk[..n]);
        let mut headers = [httparse::EMPTY_HEADER; 64];
        let mut parsed = httparse::Request::new(&mut headers);
        match parsed.parse(&head) {
            Ok(httparse::Status::Complete(len)) => {
                return check_request(&parsed, &head, len).map_err(|(status, reason)| Refused {
                    status,
                    refusal: Refusal {
                        rule: RefusalRule::BadRequest,
                        reason,
                    },
                    method: parsed.method.unwrap_or_default().to_owned(),
                    host: String::new(),
                    port: 0,
                });
            }
            Ok(httparse::Status::Partial) if head.len() < MAX_HEAD => continue,
            Ok(httparse::Status::Partial) => {
                return Err(bad(format!(
                    "the request head is longer than {MAX_HEAD} bytes"
                )));
            }
            Err(e) => {
                return Err(bad(format!(
                    "not an HTTP proxy request ({e}); the proxy speaks HTTP CONNECT and plain HTTP"
                )));
            }
        }
    }
}

/// Headers that say where a request goes or where it ends; each may appear once.
const ROUTING_HEADERS: &[&str] = &[
    "host",
    "content-length",
    "transfer-encoding",
    "x-forwarded-host",
    "forwarded",
];

/// The parts of a parsed head the proxy acts on, or why it is refused.
fn check_request(
    r: &httparse::Request<'_, '_>,
    bytes: &[u8],
    len: usize,
) -> Result<Request, (&'static str, String)> {
    let (head, rest) = (bytes[..len].to_vec(), bytes[len..].to_vec());
    let method = r.method.unwrap_or_default().to_owned();
    let target = r.path.unwrap_or_default();
    let header = |name: &str| {
        r.headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case(name))
            .map(|h| String::from_utf8_lossy(h.value).trim().to_owned())
    };
    // One value per routing header: a second `Host` (or a second length) is a request one
    // hop reads one way and the next another, and only the first was judged.
    for name in ROUTING_HEADERS {
        let count = r
            .headers
            .iter()
            .filter(|h| h.name.eq_ignore_ascii_case(name))
            .count();
        if count > 1 {
            return Err((
                "400 Bad Request",
                format!("the request has {count} {name} headers; send one"),
            ));
        }
    }
    if method == "CONNECT" {
        let (host, port) = connect_target(target).map_err(|why| ("400 Bad Request", why))?;
        return Ok(Request {
            method,
            host,
            port,
            forward: None,
            rest,
            head,
            path: None,
        });
    }
    let (host, port, path) =
        absolute_target(&method, target).map_err(|why| ("400 Bad Request", why))?;
    // The Host header must name the host the request line names (and so the one judged):
    // a server routing by Host must not be sent somewhere else than what was checked.
    let host_header = header("host").ok_or_else(|| {
        (
            "400 Bad Request",
            "the request has no Host header".to_owned(),
        )
    })?;
    let same = authority(&host_header).is_some_and(|(h, p)| {
        h.trim_end_matches('.')
            .eq_ignore_ascii_case(host.trim_end_matches('.'))
            && p.unwrap_or(80) == port
    });
    if !same {
        return Err((
            "403 Forbidden",
            format!(
                "the Host header {host_header:?} does not name the request's host {host}:{port}"
            ),
        ));
    }
    if header("transfer-encoding").is_some() {
        return Err((
            "501 Not Implemented",
            "a chunked request body over plain HTTP is not relayed; send a Content-Length, or use HTTPS".into(),
        ));
    }
    let length = match header("content-length") {
        None => 0,
        Some(v) => v.parse::<u64>().map_err(|_| {
            (
                "400 Bad Request",
                format!("Content-Length {v:?} is not a number"),
            )
        })?,
    };
    let mut upstream = format!("{method} {path} HTTP/1.1\r\n").into_bytes();
    const HOP_BY_HOP: &[&str] = &[
        "connection",
        "keep-alive",
        "proxy-connection",
        "proxy-authorization",
        "proxy-authenticate",
        "te",
        "trailer",
        "upgrade",
    ];
    for h in r.headers.iter() {
        if HOP_BY_HOP.iter().any(|n| h.name.eq_ignore_ascii_case(n)) {
            continue;
        }
        upstream.extend_from_slice(h.name.as_bytes());
        upstream.extend_from_slice(b": ");
        upstream.extend_from_slice(h.value);
        upstream.extend_from_slice(b"\r\n");
    }
    upstream.extend_from_slice(b"Connection: close\r\n\r\n");
    Ok(Request {
        method,
        host,
        port,
        forward: Some((upstream, length)),
        rest,
        head,
        path: Some(path),
    })
}

/// A `host[:port]` authority (`[v6]` literals keep their brackets), or `None` when it is not
/// one: empty, with credentials, or malformed.
pub(crate) fn authority(text: &str) -> Option<(String, Option<u16>)> {
    let parsed: Authority = text.parse().ok()?;
    let (host, port) = (parsed.host(), parsed.port_u16());
    // Exactly `host` or `host:port`: no credentials, no port that is not a number.
    let exact = match port {
        Some(port) => parsed.as_str() == format!("{host}:{port}"),
        None => parsed.as_str() == host,
    };
    (exact && !host.is_empty()).then(|| (host.to_owned(), port))
}

/// Where a CONNECT goes: `host:port`, the port required.
fn connect_target(target: &str) -> Result<(String, u16), String> {
    let (host, port) =
        authority(target).ok_or_else(|| format!("CONNECT {target:?} names no host:port"))?;
    let port = port.ok_or_else(|| "CONNECT needs a port".to_owned())?;
    Ok((host, port))
}

/// Where a plain-HTTP request goes: the host, the port (80 unless named) and the
/// origin-form path sent upstream.
fn absolute_target(method: &str, target: &str) -> Result<(String, u16, String), String> {
    let not_absolute = || {
        format!(
            "{method} {target}: a proxy request names its URL in full (http://host/path); HTTPS goes through CONNECT"
        )
    };
    let uri: Uri = target.parse().map_err(|_| not_absolute())?;
    if uri.scheme_str() != Some("http") {
        return Err(not_absolute());
    }
    let raw = uri.authority().map(Authority::as_str).unwrap_or_default();
    if raw.contains('@') {
        return Err("credentials in the URL are refused".into());
    }
    let (host, port) = authority(raw).ok_or_else(|| format!("{target:?} names no host"))?;
    let path = match uri.path_and_query().map(|p| p.as_str()) {
        None | Some("") => "/".to_owned(),
        Some(p) => p.to_owned(),
    };
    Ok((host, port.unwrap_or(80), path))
}

#[cfg(test)]
mod tests {
    use super::{absolute_target, authority, connect_target};

    #[test]
    fn authorities_split_into_host_and_port() {
        assert_eq!(
            authority("example.com:443"),
            Some(("example.com".into(), Some(443)))
        );
        assert_eq!(authority("example.com"), Some(("example.com".into(), None)));
        assert_eq!(authority("[::1]:80"), Some(("[::1]".into(), Some(80))));
        assert_eq!(authority("[::1]"), Some(("[::1]".into(), None)));
        assert_eq!(authority("::1"), None);
        assert_eq!(authority("host:notaport"), None);
        assert_eq!(authority(""), None);
        assert_eq!(authority("user@example.com:443"), None);
    }

    #[test]
    fn a_connect_names_host_and_port() {
        assert_eq!(
            connect_target("example.com:443"),
            Ok(("example.com".into(), 443))
        );
        assert!(connect_target("example.com").is_err());
        assert!(connect_target("user:pw@example.com:443").is_err());
        assert!(connect_target("http://example.com:443").is_err());
    }

    #[test]
    fn a_plain_request_names_its_url_in_full() {
        assert_eq!(
            absolute_target("GET", "http://example.com/a?b=c"),
            Ok(("example.com".into(), 80, "/a?b=c".into()))
        );
        assert_eq!(
            absolute_target("GET", "http://example.com:8080"),
            Ok(("example.com".into(), 8080, "/".into()))
        );
        // The host judged is the one the line names, whatever a path or query says.
        assert_eq!(
            absolute_target("GET", "http://good.example/@evil.example"),
            Ok(("good.example".into(), 80, "/@evil.example".into()))
        );
        for bad in [
            "/relative",
            "https://example.com/",
            "http://user@example.com/",
            "http:///nohost",
            "http://exa mple.com/",
        ] {
            assert!(absolute_target("GET", bad).is_err(), "{bad}");
        }
    }
}
