//! The out-of-band approval page (DESIGN §10, `url_base`): a one-time page on loopback,
//! served by this process, where a person approves or denies exactly one call.
//!
//! Each pending approval has a URL token (32 random bytes, the only way to reach its page)
//! and a separate form token the page embeds; an answer is a POST carrying both, from a
//! request whose `Host` names the page's own address (so a rebinding DNS name cannot
//! reach it) and whose `Origin`, when sent, is the page's own. The first answer wins and
//! removes the approval: a used or expired URL shows that it is, and approves nothing.
//! The page is plain server-rendered HTML with a Content-Security-Policy that allows no
//! script and no resource from anywhere, and it must not be framed.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use safe_mcp_core::approval::{ApprovalRequest, render_argv, render_text};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;

/// The longest request head and body read.
const MAX_REQUEST: usize = 16 * 1024;

/// The pages of one server.
pub struct Pages {
    /// `http://127.0.0.1:PORT`, as links name it.
    base: String,
    /// `127.0.0.1:PORT`: the only `Host` the page answers to.
    authority: String,
    pending: Mutex<HashMap<String, Pending>>,
    /// The bound listener, until the accept loop takes it.
    listener: Mutex<Option<std::net::TcpListener>>,
}

struct Pending {
    form_token: String,
    html: String,
    expires: Instant,
    answer: oneshot::Sender<bool>,
}

/// An approval waiting for its page's answer.
pub struct Opened {
    pub url: String,
    pub token: String,
    pub answer: oneshot::Receiver<bool>,
}

impl Pages {
    /// Binds `addr` now (a port in use stops the start), and serves the pages from the
    /// first approval on.
    pub fn bind(base: &str, addr: SocketAddr) -> std::io::Result<Arc<Pages>> {
        let listener = std::net::TcpListener::bind(addr)?;
        listener.set_nonblocking(true)?;
        Ok(Arc::new(Pages {
            base: base.to_owned(),
            authority: base.trim_start_matches("http://").to_owned(),
            pending: Mutex::new(HashMap::new()),
            listener: Mutex::new(Some(listener)),
        }))
    }

    /// Starts the accept loop, once (in the runtime, which exists by the first approval).
    fn serve_pages(self: &Arc<Self>) {
        let Some(listener) = self.listener.lock().ok().and_then(|mut l| l.take()) else {
            return;
        };
        let Ok(listener) = TcpListener::from_std(listener) else {
            return;
        };
        let pages = Arc::clone(self);
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let pages = Arc::clone(&pages);
                tokio::spawn(async move { pages.serve(stream).await });
            }
        });
    }

    /// A page for `request`, valid until its timeout.
    pub fn open(self: &Arc<Self>, request: &ApprovalRequest) -> std::io::Result<Opened> {
        self.serve_pages();
        let token = safe_mcp_core::random::hex(32)?;
        let form_token = safe_mcp_core::random::hex(32)?;
        let (tx, rx) = oneshot::channel();
        let pending = Pending {
            form_token,
            html: summary_html(request),
            expires: Instant::now() + request.timeout,
            answer: tx,
        };
        if let Ok(mut map) = self.pending.lock() {
            map.retain(|_, p| p.expires > Instant::now() && !p.answer.is_closed());
            map.insert(token.clone(), pending);
        }
        Ok(Opened {
            url: format!("{}/approve/{token}", self.base),
            token,
            answer: rx,
        })
    }

    /// Forgets an approval (its call stopped waiting).
    pub fn close(&self, token: &str) {
        if let Ok(mut map) = self.pending.lock() {
            map.remove(token);
        }
    }

    async fn serve(&self, mut stream: TcpStream) {
        let response = match read_request(&mut stream).await {
            Some(request) => self.answer(&request),
            None => reply(
                "400 Bad Request",
                "<p>Not a request this page understands.</p>",
            ),
        };
        let _ = stream.write_all(response.as_bytes()).await;
        let _ = stream.shutdown().await;
    }

    fn answer(&self, r: &Request) -> String {
        if !r.host.eq_ignore_ascii_case(&self.authority) {
            return reply(
                "421 Misdirected Request",
                "<p>This page answers only at its own address.</p>",
            );
        }
        let Some(token) = r.path.strip_prefix("/approve/") else {
            return reply("404 Not Found", "<p>No such page.</p>");
        };
        let gone = || {
            reply(
                "410 Gone",
                "<h1>This link has been used or has expired</h1><p>It approves nothing now. If the command is still wanted, ask for it again.</p>",
            )
        };
        let Ok(mut map) = self.pending.lock() else {
            return gone();
        };
        let live = map
            .get(token)
            .is_some_and(|p| p.expires > Instant::now() && !p.answer.is_closed());
        if !live {
            map.remove(token);
            return gone();
        }
        match r.method.as_str() {
            "GET" => {
                let Some(p) = map.get(token) else {
                    return gone();
                };
                reply("200 OK", &page_html(token, p))
            }
            "POST" => {
                if r.origin.as_deref().is_some_and(|o| o != self.base) {
                    return reply(
                        "403 Forbidden",
                        "<p>An answer must come from this page.</p>",
                    );
                }
                let form = parse_form(&r.body);
                let given = form.get("form_token").map(String::as_str).unwrap_or("");
                let Some(p) = map.get(token) else {
                    return gone();
                };
                if !same(given, &p.form_token) {
                    return reply(
                        "403 Forbidden",
                        "<p>This answer did not come from this page.</p>",
                    );
                }
                let approve = match form.get("decision").map(String::as_str) {
                    Some("approve") => true,
                    Some("deny") => false,
                    _ => return reply("400 Bad Request", "<p>Choose Approve or Deny.</p>"),
                };
                let Some(p) = map.remove(token) else {
                    return gone();
                };
                let _ = p.answer.send(approve);
                if approve {
                    reply(
                        "200 OK",
                        "<h1>Approved</h1><p>The command runs now, once. You can close this page.</p>",
                    )
                } else {
                    reply(
                        "200 OK",
                        "<h1>Denied</h1><p>Nothing ran. You can close this page.</p>",
                    )
                }
            }
            _ => reply("405 Method Not Allowed", "<p>GET or POST only.</p>"),
        }
    }
}

/// Compares two tokens in time independent of where they differ.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

struct Request {
    method: String,
    path: String,
    host: String,
    origin: Option<String>,
    body: Vec<u8>,
}

async fn read_request(stream: &mut TcpStream) -> Option<Request> {
    let mut buf = Vec::with_capacity(2048);
    let mut chunk = [0u8; 4096];
    loop {
        let n = tokio::time::timeout(std::time::Duration::from_secs(10), stream.read(&mut chunk))
            .await
            .ok()?
            .ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        if buf.len() > MAX_REQUEST {
            return None;
        }
        let mut headers = [httparse::EMPTY_HEADER; 32];
        let mut parsed = httparse::Request::new(&mut headers);
        let Ok(httparse::Status::Complete(head)) = parsed.parse(&buf) else {
            continue;
        };
        let header = |name: &str| {
            parsed
                .headers
                .iter()
                .find(|h| h.name.eq_ignore_ascii_case(name))
                .map(|h| String::from_utf8_lossy(h.value).trim().to_owned())
        };
        let length: usize = header("content-length")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        if head + length > MAX_REQUEST {
            return None;
        }
        if buf.len() < head + length {
            continue;
        }
        return Some(Request {
            method: parsed.method?.to_owned(),
            path: parsed.path?.to_owned(),
            host: header("host")?,
            origin: header("origin"),
            body: buf[head..head + length].to_vec(),
        });
    }
}

/// `application/x-www-form-urlencoded`, decoded.
fn parse_form(body: &[u8]) -> HashMap<String, String> {
    let text = String::from_utf8_lossy(body);
    text.split('&')
        .filter_map(|pair| pair.split_once('='))
        .map(|(k, v)| (decode(k), decode(v)))
        .collect()
}

fn decode(s: &str) -> String {
    let hex = |b: u8| (b as char).to_digit(16).map(|d| d as u8);
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        let escaped = (b == b'%')
            .then(|| Some((hex(*bytes.get(i + 1)?)?, hex(*bytes.get(i + 2)?)?)))
            .flatten();
        match (b, escaped) {
            (_, Some((hi, lo))) => {
                out.push(hi << 4 | lo);
                i += 2;
            }
            (b'+', _) => out.push(b' '),
            (b, _) => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

/// What will run, as the page shows it.
fn summary_html(r: &ApprovalRequest) -> String {
    let stages: String = r
        .stages
        .iter()
        .map(|argv| format!("<li><code>{}</code></li>", escape(&render_argv(argv))))
        .collect();
    let reasons: String = r
        .reasons
        .iter()
        .map(|why| format!("<li>{}</li>", escape(why)))
        .collect();
    let note = r
        .hidden_note()
        .map(|n| format!("<p class=\"warn\"><strong>{}</strong></p>", escape(n)))
        .unwrap_or_default();
    format!(
        "{note}<dl><dt>Command ({tool})</dt><dd><ol>{stages}</ol></dd><dt>As asked</dt><dd><code>{command}</code></dd><dt>Working directory</dt><dd><code>{cwd}</code></dd><dt>Confinement</dt><dd>{confinement}</dd><dt>Why approval is needed</dt><dd><ul>{reasons}</ul></dd><dt>Call</dt><dd><code>{call}</code></dd></dl>",
        tool = escape(r.tool),
        command = escape(&render_text(&r.command)),
        cwd = escape(&render_text(&r.cwd)),
        confinement = escape(&r.confinement),
        call = escape(&r.call),
    )
}

fn page_html(token: &str, p: &Pending) -> String {
    let left = p
        .expires
        .saturating_duration_since(Instant::now())
        .as_secs();
    format!(
        "<h1>Approve this command?</h1><p>An AI model asked safe-mcp to run the command below. It runs only if you approve it here, once; this link then stops working. It expires in {left} s.</p>{summary}<form method=\"post\" action=\"/approve/{token}\"><input type=\"hidden\" name=\"form_token\" value=\"{form}\"><button type=\"submit\" name=\"decision\" value=\"approve\" class=\"approve\">Approve</button> <button type=\"submit\" name=\"decision\" value=\"deny\" class=\"deny\">Deny</button></form>",
        summary = p.html,
        form = escape(&p.form_token),
    )
}

const STYLE: &str = "body{font-family:system-ui,sans-serif;max-width:46rem;margin:2rem auto;padding:0 1rem;color:#1b1b1b}code{background:#f2f2f2;padding:.1rem .3rem;border-radius:3px;word-break:break-all}dt{font-weight:600;margin-top:.8rem}dd{margin-left:1rem}button{font-size:1.1rem;padding:.5rem 1.4rem;margin:1.2rem .6rem 0 0;border-radius:6px;border:1px solid #555;cursor:pointer}.approve{background:#1f7a35;color:#fff}.deny{background:#fff;color:#8a1c1c;border-color:#8a1c1c}";

fn reply(status: &str, body: &str) -> String {
    let html = format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width\"><title>safe-mcp approval</title><style>{STYLE}</style></head><body>{body}</body></html>"
    );
    format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\nContent-Security-Policy: default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'\r\nX-Frame-Options: DENY\r\nX-Content-Type-Options: nosniff\r\nReferrer-Policy: no-referrer\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n{html}",
        html.len()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms_decode_and_html_escapes() {
        let f = parse_form(b"form_token=ab%2Fc&decision=approve&x=a+b%zz");
        assert_eq!(f["form_token"], "ab/c");
        assert_eq!(f["decision"], "approve");
        assert_eq!(f["x"], "a b%zz");
        assert_eq!(
            escape("<a href='x'>&\""),
            "&lt;a href=&#39;x&#39;&gt;&amp;&quot;"
        );
        assert!(same("abc", "abc") && !same("abc", "abd") && !same("abc", "ab"));
    }

    #[test]
    fn the_page_shows_hidden_characters_escaped_and_warns() {
        let request = |word: &str| ApprovalRequest {
            call: "c".into(),
            tool: "run_command",
            stages: vec![vec!["git".into(), "push".into(), word.into()]],
            command: format!("git push {word}"),
            cwd: "/jail".into(),
            confinement: "Landlock".into(),
            reasons: vec!["git push needs approval".into()],
            timeout: std::time::Duration::from_secs(1),
        };
        let html = summary_html(&request("\u{202e}nur-yrd--"));
        assert!(!html.contains('\u{202e}'), "{html}");
        assert!(html.contains("\\u{202e}nur-yrd--"), "{html}");
        assert!(
            html.contains("Warning: the command holds invisible"),
            "{html}"
        );
        assert!(!summary_html(&request("origin")).contains("Warning"));
    }
}
