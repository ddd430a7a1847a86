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

use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use safe_mcp_core::approval::{ApprovalRequest, Choice, render_argv, render_text};
use tokio::net::TcpListener;
use tokio::sync::oneshot;

/// The longest request body read (a form of two tokens and a word).
const MAX_BODY: usize = 16 * 1024;
/// How long a request head may take to arrive.
const HEAD_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

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
    /// The scope choices inside the form (none when only this call can be approved).
    choices: String,
    expires: Instant,
    answer: oneshot::Sender<PageAnswer>,
}

/// What a person answered on the page: yes or no, and with a yes the scope chosen (or why
/// the choice could not be read, which then approves nothing).
#[derive(Debug)]
pub struct PageAnswer {
    pub approve: bool,
    pub choice: Result<Choice, String>,
}

/// An approval waiting for its page's answer.
pub struct Opened {
    pub url: String,
    pub token: String,
    pub answer: oneshot::Receiver<PageAnswer>,
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

    /// Starts serving, once (in the runtime, which exists by the first approval).
    fn serve_pages(self: &Arc<Self>) {
        let Some(listener) = self.listener.lock().ok().and_then(|mut l| l.take()) else {
            return;
        };
        let Ok(listener) = TcpListener::from_std(listener) else {
            return;
        };
        let router = axum::Router::new()
            .route(
                "/approve/{token}",
                axum::routing::get(show).post(answer).fallback(|| async {
                    reply(StatusCode::METHOD_NOT_ALLOWED, "<p>GET or POST only.</p>")
                }),
            )
            .fallback(|| async { reply(StatusCode::NOT_FOUND, "<p>No such page.</p>") })
            .layer(DefaultBodyLimit::max(MAX_BODY))
            .layer(axum::middleware::from_fn_with_state(
                Arc::clone(self),
                own_address,
            ))
            .with_state(Arc::clone(self));
        // hyper's own connection loop rather than `axum::serve`: a page answers a browser,
        // so its header names are written in Title-Case, and a head must arrive in time.
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let service = hyper_util::service::TowerToHyperService::new(router.clone());
                tokio::spawn(async move {
                    let _ = hyper::server::conn::http1::Builder::new()
                        .title_case_headers(true)
                        .timer(hyper_util::rt::TokioTimer::new())
                        .header_read_timeout(HEAD_TIMEOUT)
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                        .await;
                });
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
            choices: choices_html(request),
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
}

/// Every request first: its `Host` must name the page's own address, so that a rebinding
/// DNS name cannot reach it from a browser.
async fn own_address(State(pages): State<Arc<Pages>>, request: Request, next: Next) -> Response {
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or_default();
    if !host.trim().eq_ignore_ascii_case(&pages.authority) {
        return reply(
            StatusCode::MISDIRECTED_REQUEST,
            "<p>This page answers only at its own address.</p>",
        );
    }
    next.run(request).await
}

fn gone() -> Response {
    reply(
        StatusCode::GONE,
        "<h1>This link has been used or has expired</h1><p>It approves nothing now. If the command is still wanted, ask for it again.</p>",
    )
}

impl Pages {
    /// The pending approval of `token`, if it is still live (an expired or abandoned one is
    /// forgotten here).
    fn live(&self, token: &str) -> Option<std::sync::MutexGuard<'_, HashMap<String, Pending>>> {
        let mut map = self.pending.lock().ok()?;
        let live = map
            .get(token)
            .is_some_and(|p| p.expires > Instant::now() && !p.answer.is_closed());
        if !live {
            map.remove(token);
            return None;
        }
        Some(map)
    }
}

/// GET: the page of one approval.
async fn show(State(pages): State<Arc<Pages>>, Path(token): Path<String>) -> Response {
    let Some(map) = pages.live(&token) else {
        return gone();
    };
    match map.get(&token) {
        Some(p) => reply(StatusCode::OK, &page_html(&token, p)),
        None => gone(),
    }
}

/// POST: the answer, from this page (its `Origin`, when sent, and its form token).
async fn answer(
    State(pages): State<Arc<Pages>>,
    Path(token): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let Some(mut map) = pages.live(&token) else {
        return gone();
    };
    let origin = headers
        .get(header::ORIGIN)
        .map(|o| o.to_str().unwrap_or("?"));
    if origin.is_some_and(|o| o.trim() != pages.base) {
        return reply(
            StatusCode::FORBIDDEN,
            "<p>An answer must come from this page.</p>",
        );
    }
    let free: Vec<serde_json::Value> = url::form_urlencoded::parse(&body)
        .filter(|(k, _)| k == "free")
        .map(|(_, v)| serde_json::Value::String(v.into_owned()))
        .collect();
    let form = parse_form(&body);
    let given = form.get("form_token").map(String::as_str).unwrap_or("");
    let Some(p) = map.get(&token) else {
        return gone();
    };
    if !same(given, &p.form_token) {
        return reply(
            StatusCode::FORBIDDEN,
            "<p>This answer did not come from this page.</p>",
        );
    }
    let approve = match form.get("decision").map(String::as_str) {
        Some("approve") => true,
        Some("deny") => false,
        _ => return reply(StatusCode::BAD_REQUEST, "<p>Choose Approve or Deny.</p>"),
    };
    let Some(p) = map.remove(&token) else {
        return gone();
    };
    let scope = form.get("scope").cloned().map(serde_json::Value::String);
    let choice = Choice::from_answer(scope.as_ref(), Some(&serde_json::Value::Array(free)));
    let _ = p.answer.send(PageAnswer { approve, choice });
    if approve {
        reply(
            StatusCode::OK,
            "<h1>Approved</h1><p>The command runs now, once. You can close this page.</p>",
        )
    } else {
        reply(
            StatusCode::OK,
            "<h1>Denied</h1><p>Nothing ran. You can close this page.</p>",
        )
    }
}

/// Compares two tokens in time independent of where they differ.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

/// `application/x-www-form-urlencoded`, decoded.
fn parse_form(body: &[u8]) -> HashMap<String, String> {
    url::form_urlencoded::parse(body).into_owned().collect()
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

/// The scope choices, inside the form: how long the yes lasts (once checked), the places
/// that may vary, and the preview of what each covers.
fn choices_html(r: &ApprovalRequest) -> String {
    let Some(p) = &r.preview else {
        return String::new();
    };
    let kinds: String = p
        .kinds
        .iter()
        .map(|(kind, words)| {
            let checked = if kind.as_str() == "once" {
                " checked"
            } else {
                ""
            };
            format!(
                "<label><input type=\"radio\" name=\"scope\" value=\"{}\"{checked}> {}</label><br>",
                kind.as_str(),
                escape(words)
            )
        })
        .collect();
    let examples = |list: &[safe_mcp_core::scopes::Example]| {
        let line = |covered: bool| {
            list.iter()
                .filter(|e| e.covered == covered)
                .map(|e| format!("<code>{}</code>", escape(&render_text(&e.text))))
                .collect::<Vec<_>>()
                .join(", ")
        };
        format!("covers {}; never {}", line(true), line(false))
    };
    let free: String = p
        .free
        .iter()
        .map(|f| {
            format!(
                "<label><input type=\"checkbox\" name=\"free\" value=\"{}\"> let place {} (<code>{}</code>) vary: {}</label><br><small>{}</small><br>",
                f.place,
                f.place,
                escape(&render_text(&f.word)),
                escape(&render_text(&f.shape)),
                examples(&f.examples)
            )
        })
        .collect();
    format!(
        "<fieldset><legend>How long this yes lasts</legend>{kinds}<p>With nothing marked to vary: {} &mdash; <small>{}</small></p>{free}</fieldset>",
        escape(&render_text(&p.exact)),
        examples(&p.exact_examples)
    )
}

fn page_html(token: &str, p: &Pending) -> String {
    let left = p
        .expires
        .saturating_duration_since(Instant::now())
        .as_secs();
    format!(
        "<h1>Approve this command?</h1><p>An AI model asked safe-mcp to run the command below. It runs only if you approve it here (once, unless you choose a scope below); this link then stops working. It expires in {left} s.</p>{summary}<form method=\"post\" action=\"/approve/{token}\"><input type=\"hidden\" name=\"form_token\" value=\"{form}\">{choices}<button type=\"submit\" name=\"decision\" value=\"approve\" class=\"approve\">Approve</button> <button type=\"submit\" name=\"decision\" value=\"deny\" class=\"deny\">Deny</button></form>",
        summary = p.html,
        choices = p.choices,
        form = escape(&p.form_token),
    )
}

const STYLE: &str = "body{font-family:system-ui,sans-serif;max-width:46rem;margin:2rem auto;padding:0 1rem;color:#1b1b1b}code{background:#f2f2f2;padding:.1rem .3rem;border-radius:3px;word-break:break-all}dt{font-weight:600;margin-top:.8rem}dd{margin-left:1rem}button{font-size:1.1rem;padding:.5rem 1.4rem;margin:1.2rem .6rem 0 0;border-radius:6px;border:1px solid #555;cursor:pointer}.approve{background:#1f7a35;color:#fff}.deny{background:#fff;color:#8a1c1c;border-color:#8a1c1c}";

fn reply(status: StatusCode, body: &str) -> Response {
    let html = format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width\"><title>safe-mcp approval</title><style>{STYLE}</style></head><body>{body}</body></html>"
    );
    let headers = [
        (header::CONTENT_TYPE, "text/html; charset=utf-8"),
        (
            header::CONTENT_SECURITY_POLICY,
            "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
        ),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::REFERRER_POLICY, "no-referrer"),
        (header::CACHE_CONTROL, "no-store"),
    ];
    (status, headers, html).into_response()
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
            digest: safe_mcp_core::approval::UNBOUND,
            preview: None,
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
