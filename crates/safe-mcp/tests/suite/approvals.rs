//! Approvals a model cannot click for itself (issue 19), over real MCP sessions: an rmcp
//! client that declares elicitation and answers as each test says, and, for the
//! out-of-band page, a test that fetches the page over HTTP and submits it as a person would.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult, ElicitationAction,
    Implementation, ProtocolVersion,
};
use rmcp::service::{RequestContext, RoleClient, RunningService};
use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
use rmcp::{ClientHandler, ErrorData, ServiceExt};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::support::{BIN, Sandbox, envelope_of, free_port, reason_of};

/// How the test's client answers an elicitation.
#[derive(Clone, Copy, PartialEq)]
pub(super) enum Reply {
    /// Accept, with this `approve`.
    Accept(bool),
    Decline,
    Cancel,
    /// Never answer.
    Silence,
    /// URL mode: accept at once without visiting the page (a client that auto-accepts).
    AcceptOnly,
    /// URL mode: accept, and submit the page with this decision.
    Visit(&'static str),
    /// Accept with approve = true, choosing this scope and these free places (issue 53).
    Scope(&'static str, &'static [&'static str]),
    /// URL mode: accept, and approve on the page with this scope and these free places.
    VisitScope(&'static str, &'static [&'static str]),
}

/// What the page answered a visit: GET, POST, the same POST replayed, GET again.
type Visit = (u16, u16, u16, u16);

#[derive(Clone)]
pub(super) struct Person {
    reply: Reply,
    /// Declares form elicitation (and URL mode too when `url`).
    elicitation: bool,
    url: bool,
    /// The protocol it speaks.
    version: ProtocolVersion,
    asked: Arc<Mutex<Vec<ElicitRequestParams>>>,
    /// What the page answered, per visit (GET status, POST status, replayed POST status).
    visits: Arc<Mutex<Vec<Visit>>>,
}

impl ClientHandler for Person {
    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        self.asked.lock().unwrap().push(request.clone());
        match self.reply {
            Reply::Accept(approve) => Ok(ElicitResult::new(ElicitationAction::Accept)
                .with_content(json!({ "approve": approve }))),
            Reply::Decline => Ok(ElicitResult::new(ElicitationAction::Decline)),
            Reply::Cancel => Ok(ElicitResult::new(ElicitationAction::Cancel)),
            Reply::Silence => {
                tokio::time::sleep(Duration::from_secs(60)).await;
                Ok(ElicitResult::new(ElicitationAction::Cancel))
            }
            Reply::AcceptOnly => Ok(ElicitResult::new(ElicitationAction::Accept)),
            Reply::Scope(scope, free) => Ok(ElicitResult::new(ElicitationAction::Accept)
                .with_content(json!({ "approve": true, "scope": scope, "free": free }))),
            Reply::VisitScope(scope, free) => {
                let ElicitRequestParams::UrlElicitationParams { url, .. } = &request else {
                    return Ok(ElicitResult::new(ElicitationAction::Decline));
                };
                let mut answer = format!("decision=approve&scope={scope}");
                for place in free {
                    answer.push_str(&format!("&free={place}"));
                }
                let (url, visits) = (url.clone(), Arc::clone(&self.visits));
                tokio::spawn(async move {
                    let got = visit_with(&url, &answer).await;
                    visits.lock().unwrap().push(got);
                });
                Ok(ElicitResult::new(ElicitationAction::Accept))
            }
            Reply::Visit(decision) => {
                let ElicitRequestParams::UrlElicitationParams { url, .. } = &request else {
                    return Ok(ElicitResult::new(ElicitationAction::Decline));
                };
                let (url, visits) = (url.clone(), Arc::clone(&self.visits));
                tokio::spawn(async move {
                    let got = visit(&url, decision).await;
                    visits.lock().unwrap().push(got);
                });
                Ok(ElicitResult::new(ElicitationAction::Accept))
            }
        }
    }

    fn get_info(&self) -> ClientConfig {
        let caps = match (self.elicitation, self.url) {
            (false, _) => json!({}),
            (true, false) => json!({"elicitation": {"form": {}}}),
            (true, true) => json!({"elicitation": {"form": {}, "url": {}}}),
        };
        let caps: ClientCapabilities = serde_json::from_value(caps).unwrap();
        ClientConfig::new(caps, Implementation::new("approval-test", "1"))
            .with_protocol_version(self.version.clone())
    }
}

/// One HTTP/1.1 exchange with the page; returns the status and the body.
async fn http(url: &str, method: &str, body: &str) -> (u16, String) {
    let rest = url.strip_prefix("http://").unwrap();
    let (authority, path) = rest.split_at(rest.find('/').unwrap());
    let mut stream = tokio::net::TcpStream::connect(authority).await.unwrap();
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {authority}\r\nOrigin: http://{authority}\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    let status = response[9..12].parse().unwrap();
    (status, response)
}

/// What a person does: open the page, read its form token, press a button; then what a
/// replay of the same answer and of the page itself get.
async fn visit(url: &str, decision: &str) -> Visit {
    visit_with(url, &format!("decision={decision}")).await
}

/// [`visit`], answering the form with `answer` (its fields, URL-encoded, after the token).
async fn visit_with(url: &str, answer: &str) -> Visit {
    let (get, page) = http(url, "GET", "").await;
    let token = page
        .split("name=\"form_token\" value=\"")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .unwrap_or_default()
        .to_owned();
    let form = format!("form_token={token}&{answer}");
    let (post, _) = http(url, "POST", &form).await;
    let (replay, _) = http(url, "POST", &form).await;
    let (again, _) = http(url, "GET", "").await;
    (get, post, replay, again)
}

/// `touch` needs approval with `needs-ok` and is denied with `forbidden`.
pub(super) const TOUCH_RULE: &str = r#"[[terminal.rules]]
command = "touch"
confirm_args = ["needs-ok"]
deny_args = ["forbidden"]
reason = "touching forbidden is refused""#;

/// A sandbox where `touch` needs approval with `needs-ok` and is denied with `forbidden`.
pub(super) fn sandbox(approvals: &str) -> Sandbox {
    Sandbox::builder()
        .extra(TOUCH_RULE)
        .extra(&format!("[terminal.approvals]\n{approvals}"))
        .build()
}

pub(super) struct Client {
    service: RunningService<RoleClient, Person>,
    person: Person,
}

impl Client {
    pub(super) async fn start(sb: &Sandbox, reply: Reply, elicitation: bool, url: bool) -> Client {
        Client::start_speaking(sb, reply, elicitation, url, ProtocolVersion::V_2025_11_25).await
    }

    /// A client of MCP 2026-07-28 (no initialize), declaring form elicitation or not.
    pub(super) async fn start_newer(sb: &Sandbox, reply: Reply, elicitation: bool) -> Client {
        Client::start_speaking(sb, reply, elicitation, false, ProtocolVersion::V_2026_07_28).await
    }

    /// A client of a server that names itself `id` (`SAFE_MCP_SERVER_ID`: a fleet's
    /// replica, with its trail `audit-<id>.jsonl` beside the policy), declaring form
    /// elicitation.
    pub(super) async fn start_replica(sb: &Sandbox, reply: Reply, id: &str) -> Client {
        Client::start_with(
            sb,
            reply,
            (true, false),
            ProtocolVersion::V_2025_11_25,
            Some(id),
        )
        .await
    }

    /// A client that speaks `version`.
    pub(super) async fn start_speaking(
        sb: &Sandbox,
        reply: Reply,
        elicitation: bool,
        url: bool,
        version: ProtocolVersion,
    ) -> Client {
        Client::start_with(sb, reply, (elicitation, url), version, None).await
    }

    async fn start_with(
        sb: &Sandbox,
        reply: Reply,
        (elicitation, url): (bool, bool),
        version: ProtocolVersion,
        server_id: Option<&str>,
    ) -> Client {
        let person = Person {
            reply,
            elicitation,
            url,
            version,
            asked: Arc::default(),
            visits: Arc::default(),
        };
        let policy = sb.policy.clone();
        let cmd = tokio::process::Command::new(BIN).configure(|c| {
            c.arg("terminal").arg("--config").arg(&policy).env_clear();
            // A replica of a fleet: a name and a trail of its own (a trail's records name
            // one server).
            if let Some(id) = server_id {
                let trail = policy.with_file_name(format!("audit-{id}.jsonl"));
                c.env("SAFE_MCP_SERVER_ID", id)
                    .env("SAFE_MCP_AUDIT_LOG", trail);
            }
        });
        let transport = TokioChildProcess::new(cmd).unwrap();
        // 2026-07-28 has no initialize: the client discovers the server and sends its
        // capabilities with every request.
        let service = if person.version >= ProtocolVersion::V_2026_07_28 {
            use rmcp::service::{ClientLifecycleMode, ClientServiceExt};
            let lifecycle = ClientLifecycleMode::Discover {
                preferred_versions: vec![person.version.clone()],
            };
            person
                .clone()
                .serve_with_lifecycle(transport, lifecycle)
                .await
                .unwrap()
        } else {
            person.clone().serve(transport).await.unwrap()
        };
        Client { service, person }
    }

    /// Ends the session and waits for the server to exit (its desk then closes).
    pub(super) async fn stop(self) {
        let _ = self.service.cancel().await;
        tokio::time::sleep(Duration::from_millis(300)).await;
    }

    /// The session, for calls that drive MRTR rounds themselves.
    pub(super) fn service(&self) -> &RunningService<RoleClient, Person> {
        &self.service
    }

    /// A default sandbox, and a client of it that answers `reply` (an URL it cannot take).
    pub(super) async fn fresh(reply: Reply, elicitation: bool) -> (Sandbox, Client) {
        let sb = sandbox("");
        let c = Client::start(&sb, reply, elicitation, false).await;
        (sb, c)
    }

    /// `write_file` of `content` to `path`.
    pub(super) async fn write_file(&self, path: &str, content: &str) -> Value {
        self.call("write_file", json!({"path": path, "content": content}))
            .await
    }

    pub(super) async fn call(&self, tool: &str, args: Value) -> Value {
        let Value::Object(args) = args else { panic!() };
        let call = self.service.call_tool(
            rmcp::model::CallToolRequestParams::new(tool.to_owned()).with_arguments(args),
        );
        let result = tokio::time::timeout(Duration::from_secs(60), call)
            .await
            .expect("call timed out")
            .unwrap();
        envelope_of(&result)
    }

    pub(super) async fn run(&self, command: &str) -> Value {
        self.run_with(json!({ "command": command })).await
    }

    /// `explain_command` of the command line `command`.
    pub(super) async fn explain(&self, command: &str) -> Value {
        self.call("explain_command", json!({"command": command}))
            .await
    }

    /// `run_command` with the arguments `args` (a JSON object).
    pub(super) async fn run_with(&self, args: Value) -> Value {
        self.call("run_command", args).await
    }

    /// `run_command` of `python3 -c program`.
    pub(super) async fn py(&self, program: impl AsRef<str>) -> Value {
        self.run_with(super::support::py_call(program.as_ref()))
            .await
    }

    pub(super) fn asked(&self) -> Vec<ElicitRequestParams> {
        self.person.asked.lock().unwrap().clone()
    }
}

/// The approval ticket a refused call was given (which must be there).
pub(super) fn ticket_of(r: &Value) -> String {
    r["detail"]["approval"]["ticket"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// Checks that a call the person declined was refused saying so, and that nothing ran.
pub(super) fn assert_declined(sb: &Sandbox, r: &Value) {
    assert!(refused(sb, r).contains("declined"), "{r}");
}

/// Checks that `r` was refused and `needs-ok` not touched; returns the reason.
pub(super) fn refused<'a>(sb: &Sandbox, r: &'a Value) -> &'a str {
    assert_eq!(r["code"], "POLICY_DENIED", "{r}");
    assert!(!sb.jail.join("needs-ok").exists(), "a refused command ran");
    reason_of(r)
}

/// The message of a form the client was asked to fill.
fn form_message(asked: &ElicitRequestParams) -> String {
    let ElicitRequestParams::FormElicitationParams { message, .. } = asked else {
        panic!("not a form: {asked:?}");
    };
    message.clone()
}

/// A sandbox whose approvals go through a page on `port`, with `more` lines.
fn url_sandbox(port: u16, more: &str) -> Sandbox {
    sandbox(&format!("url_base = \"http://127.0.0.1:{port}\"\n{more}"))
}

pub(super) fn approval_of(sb: &Sandbox) -> Value {
    sb.audit_records()
        .into_iter()
        .rfind(|r| r["kind"] == "attempt" && r["tool"] == "run_command")
        .map(|r| r["approval"].clone())
        .unwrap_or(Value::Null)
}

#[tokio::test(flavor = "multi_thread")]
async fn explain_says_approval_is_needed_and_never_asks() {
    let (sb, c) = Client::fresh(Reply::Accept(true), true).await;
    let r = c.explain("touch needs-ok").await;
    assert_eq!(r["code"], "OK", "{r}");
    assert_eq!(r["detail"]["needs_approval"], true, "{r}");
    let plain = c.explain("touch other").await;
    assert_eq!(plain["detail"]["needs_approval"], false, "{plain}");
    // Deny wins over confirm: a denied command needs no approval and is never asked about.
    let r = c.run("touch needs-ok forbidden").await;
    refused(&sb, &r);
    assert!(c.asked().is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn an_accepted_form_with_approve_true_runs_the_command() {
    let (sb, c) = Client::fresh(Reply::Accept(true), true).await;
    let r = c.run("touch needs-ok").await;
    assert_eq!(r["code"], "OK", "{r}");
    assert!(sb.jail.join("needs-ok").exists());
    let asked = c.asked();
    assert_eq!(asked.len(), 1);
    let ElicitRequestParams::FormElicitationParams {
        message,
        requested_schema,
        ..
    } = &asked[0]
    else {
        panic!("not a form: {:?}", asked[0]);
    };
    // The exact argv, the cwd and the confinement; no secrets asked for.
    assert!(message.contains("touch needs-ok"), "{message}");
    assert!(
        message.contains(&sb.jail.display().to_string()),
        "{message}"
    );
    assert!(message.contains("Landlock"), "{message}");
    let schema = serde_json::to_value(requested_schema).unwrap();
    assert_eq!(
        schema["properties"]["approve"]["type"], "boolean",
        "{schema}"
    );
    // Besides the boolean, only the scope's choices (issue 53): enums with the server's
    // own values, `once` by default; nothing a person could type a secret into.
    let properties = schema["properties"].as_object().unwrap();
    assert!(
        properties
            .keys()
            .all(|k| ["approve", "scope", "free"].contains(&k.as_str())),
        "{schema}"
    );
    assert_eq!(schema["properties"]["scope"]["default"], "once", "{schema}");
    assert!(
        properties.values().all(|p| p["type"] == "boolean"
            || p.get("oneOf").is_some()
            || p["items"].get("anyOf").is_some()),
        "{schema}"
    );
    let approval = approval_of(&sb);
    assert_eq!(approval["decision"], "approved", "{approval}");
    assert_eq!(approval["via"], "form");
    assert!(approval["waited_ms"].is_u64());
    assert!(
        sb.has_record(|r| r["kind"] == "approval" && r["event"] == "asked"),
        "the request itself is in the trail"
    );
    // A command that needs no approval is not asked about.
    let r = c.run("touch other").await;
    assert_eq!(r["code"], "OK", "{r}");
    assert_eq!(c.asked().len(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn every_other_answer_refuses_and_nothing_runs() {
    let cases = [
        (Reply::Decline, true, "declined", "declined"),
        (Reply::Cancel, true, "cancelled", "cancelled"),
        (
            Reply::Accept(false),
            true,
            "approve = false",
            "approve-false",
        ),
        (
            Reply::Accept(true),
            false,
            "did not declare",
            "no-capability",
        ),
    ];
    for (reply, elicitation, words, decision) in cases {
        // A client that cannot be asked gets a ticket under the default mode ("auto", see
        // approval_tickets); "elicit" refuses it outright.
        let sb = sandbox(if elicitation { "" } else { "mode = \"elicit\"" });
        let c = Client::start(&sb, reply, elicitation, false).await;
        let r = c.run("touch needs-ok").await;
        assert_eq!(r["code"], "POLICY_DENIED", "{words}: {r}");
        assert!(reason_of(&r).contains(words), "{words}: {r}");
        assert_eq!(r["detail"]["needs_approval"], true, "{r}");
        assert!(!sb.jail.join("needs-ok").exists(), "{words}: it ran");
        assert_eq!(approval_of(&sb)["decision"], decision, "{words}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn no_answer_in_time_refuses() {
    let sb = sandbox("timeout_seconds = 1");
    let c = Client::start(&sb, Reply::Silence, true, false).await;
    let r = c.run("touch needs-ok").await;
    assert!(refused(&sb, &r).contains("within 1 s"), "{r}");
    assert_eq!(approval_of(&sb)["decision"], "timeout");
}

#[tokio::test(flavor = "multi_thread")]
async fn deny_mode_refuses_without_asking() {
    let sb = sandbox("mode = \"deny\"");
    let c = Client::start(&sb, Reply::Accept(true), true, false).await;
    let r = c.run("touch needs-ok").await;
    assert!(refused(&sb, &r).contains("mode = \"deny\""), "{r}");
    assert!(c.asked().is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stage_needing_approval_inside_a_pipeline_asks_for_the_whole_line() {
    let (sb, c) = Client::fresh(Reply::Decline, true).await;
    let r = c.run("echo hi | touch needs-ok && touch after").await;
    refused(&sb, &r);
    assert!(!sb.jail.join("after").exists(), "no stage of the line ran");
    let message = form_message(&c.asked()[0]);
    for stage in ["echo hi", "touch needs-ok", "touch after"] {
        assert!(message.contains(stage), "{stage}: {message}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn start_process_needs_the_same_approval() {
    let (sb, c) = Client::fresh(Reply::Decline, true).await;
    let r = c
        .call("start_process", json!({"command": "touch needs-ok"}))
        .await;
    refused(&sb, &r);
    assert_eq!(c.asked().len(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_page_decides_and_a_used_url_approves_nothing() {
    let port = free_port();
    let sb = url_sandbox(port, "");
    let c = Client::start(&sb, Reply::Visit("approve"), true, true).await;
    let r = c.run("touch needs-ok").await;
    assert_eq!(r["code"], "OK", "{r}");
    assert!(sb.jail.join("needs-ok").exists());
    let asked = c.asked();
    let ElicitRequestParams::UrlElicitationParams { url, .. } = &asked[0] else {
        panic!("not URL mode: {:?}", asked[0]);
    };
    assert!(
        url.starts_with(&format!("http://127.0.0.1:{port}/approve/")),
        "{url}"
    );
    // The token is 32 random bytes: nothing to guess.
    assert_eq!(url.rsplit('/').next().unwrap().len(), 64, "{url}");
    let visits = loop {
        let v = c.person.visits.lock().unwrap().clone();
        if !v.is_empty() {
            break v;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(
        visits[0],
        (200, 200, 410, 410),
        "GET, POST, replayed POST, GET again"
    );
    let approval = approval_of(&sb);
    assert_eq!(approval["decision"], "approved");
    assert_eq!(approval["via"], "url");

    // A wrong form token, a foreign Origin and a foreign Host approve nothing either.
    let (status, _) = http(url, "POST", "form_token=0&decision=approve").await;
    assert_eq!(status, 410, "a used URL stays used");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_client_that_accepts_on_its_own_cannot_approve() {
    let sb = url_sandbox(free_port(), "timeout_seconds = 2");
    let c = Client::start(&sb, Reply::AcceptOnly, true, true).await;
    let r = c.run("touch needs-ok").await;
    assert!(refused(&sb, &r).contains("within 2 s"), "{r}");
    // A person who says no on the page.
    let sb = url_sandbox(free_port(), "");
    let c = Client::start(&sb, Reply::Visit("deny"), true, true).await;
    let r = c.run("touch needs-ok").await;
    assert_declined(&sb, &r);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_page_refuses_forged_answers() {
    let port = free_port();
    let sb = url_sandbox(port, "timeout_seconds = 5");
    let c = Client::start(&sb, Reply::AcceptOnly, true, true).await;
    let run = c.run("touch needs-ok");
    let forge = async {
        let url = loop {
            if let Some(ElicitRequestParams::UrlElicitationParams { url, .. }) =
                c.asked().first().cloned()
            {
                break url;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        // Without the page's form token.
        let (status, _) = http(&url, "POST", "form_token=guess&decision=approve").await;
        assert_eq!(status, 403);
        // From another Host (a rebinding name).
        let rest = url.strip_prefix("http://").unwrap();
        let path = &rest[rest.find('/').unwrap()..];
        let mut s = tokio::net::TcpStream::connect(format!("127.0.0.1:{port}"))
            .await
            .unwrap();
        let req = format!(
            "GET {path} HTTP/1.1\r\nHost: evil.example:{port}\r\nConnection: close\r\n\r\n"
        );
        s.write_all(req.as_bytes()).await.unwrap();
        let mut response = String::new();
        s.read_to_string(&mut response).await.unwrap();
        assert!(response.starts_with("HTTP/1.1 421"), "{response}");
        // The page itself: no script, not frameable.
        let (status, page) = http(&url, "GET", "").await;
        assert_eq!(status, 200);
        assert!(
            page.contains("Content-Security-Policy: default-src 'none'"),
            "{page}"
        );
        assert!(page.contains("X-Frame-Options: DENY"));
        assert!(!page.to_lowercase().contains("<script"));
        assert!(
            page.contains("touch needs-ok"),
            "the page shows what will run"
        );
    };
    let (r, ()) = tokio::join!(run, forge);
    refused(&sb, &r);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_client_that_cannot_be_asked_is_refused_with_the_reason() {
    // rmcp's default client: no elicitation capability, the newest protocol.
    let sb = sandbox("");
    let s = sb.session().await;
    let r = s.run("touch needs-ok").await;
    let reason = refused(&sb, &r);
    assert!(
        reason.contains("did not declare") || reason.contains("2026-07-28"),
        "{reason}"
    );
}

/// Round 3, item 11: a bidi override in an argument (`U+202E` makes a push read as
/// `--dry-run`) is shown escaped in the prompt, which says the command holds one; nothing
/// raw reaches the person.
#[tokio::test(flavor = "multi_thread")]
async fn hidden_characters_are_shown_escaped_and_named() {
    let (sb, c) = Client::fresh(Reply::Decline, true).await;
    let r = c
        .run_with(
            json!({"command": ["touch", "needs-ok", "\u{202e}nur-yrd--", "zero\u{200b}width"]}),
        )
        .await;
    assert_eq!(r["code"], "POLICY_DENIED", "{r}");
    let message = form_message(&c.asked()[0]);
    assert!(
        !message.contains('\u{202e}') && !message.contains('\u{200b}'),
        "{message:?}"
    );
    assert!(message.contains("'\\u{202e}nur-yrd--'"), "{message}");
    assert!(message.contains("'zero\\u{200b}width'"), "{message}");
    assert!(
        message.contains("Warning: the command holds invisible"),
        "{message}"
    );
    // A plain command has no such warning.
    let c = Client::start(&sb, Reply::Decline, true, false).await;
    c.run("touch needs-ok").await;
    let message = form_message(&c.asked()[0]);
    assert!(!message.contains("Warning"), "{message}");
}

/// Issue 31: `[terminal.files] confirm_paths` asks a person before a write of the file
/// tools to those paths, through the same machinery as commands; only a yes writes, a dry
/// run asks no one, and other paths are not asked about.
#[tokio::test(flavor = "multi_thread")]
async fn file_writes_to_confirm_paths_wait_for_a_person() {
    let sb = sandbox("");
    sb.append_policy("[terminal.files]\nconfirm_paths = [\"Cargo.toml\", \".github/**\"]");
    let yes = Client::start(&sb, Reply::Accept(true), true, false).await;
    let r = yes.write_file("Cargo.toml", "[package]\n").await;
    assert_eq!(r["code"], "OK", "{r}");
    assert_eq!(
        std::fs::read_to_string(sb.jail.join("Cargo.toml")).unwrap(),
        "[package]\n"
    );
    let asked = yes.asked();
    assert_eq!(asked.len(), 1);
    let message = form_message(&asked[0]);
    assert!(message.contains("write_file Cargo.toml"), "{message}");
    assert!(message.contains("confirm_paths"), "{message}");
    let r = yes.write_file("free.txt", "x").await;
    assert_eq!(r["code"], "OK", "{r}");
    assert_eq!(
        yes.asked().len(),
        1,
        "a path outside confirm_paths is not asked about"
    );
    let approval = sb
        .audit_records()
        .into_iter()
        .rfind(|r| {
            r["kind"] == "attempt"
                && r["tool"] == "write_file"
                && r["args"]["path"]
                    .as_str()
                    .unwrap_or("")
                    .ends_with("Cargo.toml")
        })
        .map(|r| r["approval"].clone())
        .unwrap();
    assert_eq!(approval["decision"], "approved", "{approval}");

    let no = Client::start(&sb, Reply::Decline, true, false).await;
    let r = no
        .write_file(".github/workflows/ci.yml", "on: push\n")
        .await;
    assert_eq!(r["code"], "POLICY_DENIED", "{r}");
    assert!(reason_of(&r).contains("the person declined"), "{r}");
    assert!(!sb.jail.join(".github/workflows/ci.yml").exists());
    let r = no
        .call("edit_file", json!({"path": "Cargo.toml", "edits": [{"old_text": "[package]", "new_text": "[workspace]"}], "dry_run": true}))
        .await;
    assert_eq!(r["code"], "OK", "{r}");
    assert_eq!(no.asked().len(), 1, "a dry run asks no one");
    let r = no
        .call("edit_file", json!({"path": "Cargo.toml", "edits": [{"old_text": "[package]", "new_text": "[workspace]"}]}))
        .await;
    assert_eq!(r["code"], "POLICY_DENIED", "{r}");
    assert_eq!(
        std::fs::read_to_string(sb.jail.join("Cargo.toml")).unwrap(),
        "[package]\n"
    );
}
