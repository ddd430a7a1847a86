//! The file tools as the terminal server calls them: judged ([`super::FileTools`]), then
//! recorded like a command. A read is a read-only call (attempt and outcome together); a
//! write's attempt record (path, sizes, the old content's SHA-256) is durable before the
//! file is touched, and under fail-closed an unwritable trail means nothing is written; its
//! outcome names the new content's SHA-256.

use std::time::Instant;

use serde_json::{Value, json};

use super::{EDIT, Edit, FileAsking, FileTools, Prepared, READ, WRITE};
use crate::approval::{ApprovalMode, ApprovalRequest};
use crate::audit::{ApprovalAsked, Caller, Outcome};
use crate::envelope::{OperationResult, ResultCode};
use crate::terminal::TerminalService;

impl TerminalService {
    fn file_tools(&self) -> FileTools<'_> {
        FileTools::new(self.policy(), self.redactor())
    }

    /// `read_file(path, offset?, limit?)`.
    pub fn read_file(
        &self,
        path: &str,
        offset: Option<u64>,
        limit: Option<u64>,
        caller: &Caller,
    ) -> OperationResult {
        let started = Instant::now();
        let max = self.policy().limits.max_output_bytes;
        let result = self
            .file_tools()
            .read(path, offset, limit, max)
            .with_duration(started.elapsed());
        let mut attempt = self.attempt_for(READ, &format!("read_file {path}"), caller);
        attempt.args = Some(json!({"path": path, "offset": offset, "limit": limit}));
        self.gate().record(attempt, &result);
        result
    }

    /// Asks a person before a write to a path of `[terminal.files] confirm_paths`, through
    /// the approval machinery commands use: `Ok(None)`, no approval needed; `Ok(Some)`, the
    /// approval for the attempt record; `Err`, the refusal (recorded). `content` is what the
    /// write would put there (the content, or the edits): an MRTR state or a ticket is bound
    /// to it as to the path.
    pub async fn approve_file_write(
        &self,
        tool: &'static str,
        path: &str,
        content: &[u8],
        asking: FileAsking<'_>,
        caller: &Caller,
    ) -> Result<Option<Value>, OperationResult> {
        let FileAsking {
            approver,
            session,
            ticket,
        } = asking;
        let Some(reason) = self.file_tools().needs_approval(path) else {
            return Ok(None);
        };
        let reasons = vec![reason];
        let settings = &self.policy().approvals;
        let started = Instant::now();
        let refuse_as = |code: ResultCode, why: String, approval: Value, ticket: Option<Value>| {
            let mut detail = json!({"needs_approval": true, "approval_reasons": reasons});
            if let Some(ticket) = ticket {
                detail["approval"] = ticket;
            }
            let result = OperationResult::new(tool, code, why).with_detail(detail);
            let mut attempt = self.attempt_for(tool, &format!("{tool} {path}"), caller);
            attempt.args = Some(json!({ "path": path }));
            attempt.approval = Some(approval);
            let result = result.with_duration(started.elapsed());
            self.gate().record(attempt, &result);
            result
        };
        let refuse_with =
            |why, approval, ticket| refuse_as(ResultCode::PolicyDenied, why, approval, ticket);
        let refuse = |why: String, approval: Value| refuse_with(why, approval, None);
        let jail = self.policy().jail_root.display().to_string();
        let shown = vec![vec![tool.to_owned(), path.to_owned()]];
        let content_hash = {
            use sha2::Digest;
            let hash: [u8; 32] = sha2::Sha256::digest(content).into();
            hash.iter().map(|b| format!("{b:02x}")).collect::<String>()
        };
        let bound = vec![vec![tool.to_owned(), path.to_owned(), content_hash]];
        let digest = crate::tickets::digest(tool, &bound, &jail);
        let who = caller.sub.clone().unwrap_or_default();
        if let Some(id) = ticket {
            return match self.redeem_ticket(id, &who, session, &digest, &reasons) {
                Ok(record) => Ok(Some(record)),
                Err((record, why)) => Err(refuse_as(
                    why.code(),
                    format!("{why}; nothing was written"),
                    record,
                    None,
                )),
            };
        }
        let give_ticket = |why: &str| {
            let request = crate::tickets::TicketRequest {
                tool,
                shown: shown.clone(),
                command: format!("{tool} {path}"),
                cwd: jail.clone(),
                reasons: reasons.clone(),
                digest,
                caller: who.clone(),
                session: session.to_owned(),
            };
            let given = self.ticket_refusal(request, why, "nothing was written");
            Err(refuse_with(given.reason, given.record, given.detail))
        };
        let not_asked =
            |decision: &str| json!({"required": reasons, "decision": decision, "via": "none"});
        if settings.mode == ApprovalMode::Deny {
            return Err(refuse(
                format!(
                    "{}; [terminal.approvals] mode = \"deny\" refuses it without asking; nothing was written",
                    reasons[0]
                ),
                not_asked("denied-by-mode"),
            ));
        }
        if settings.mode == ApprovalMode::Ticket {
            return give_ticket(
                "[terminal.approvals] mode = \"ticket\" approves through tickets only",
            );
        }
        let Some(approver) = approver else {
            if settings.mode == ApprovalMode::Auto {
                return give_ticket("this transport cannot ask a person");
            }
            return Err(refuse(
                format!(
                    "{}; this server cannot ask a person here, so nothing was written",
                    reasons[0]
                ),
                not_asked("no-transport"),
            ));
        };
        let request = ApprovalRequest {
            call: format!("{tool} {path}"),
            tool,
            stages: shown.clone(),
            command: format!("{tool} {path}"),
            cwd: jail.clone(),
            confinement: "the file tools (no command runs)".into(),
            reasons: reasons.clone(),
            timeout: settings.timeout,
            digest,
        };
        let asked = ApprovalAsked {
            call: self.gate().begin(),
            event: "asked",
            tool,
            argv: request.stages.clone(),
            required: reasons.clone(),
            caller: caller.clone(),
        };
        if let Err(e) = self.gate().append("approval", &asked, false) {
            eprintln!("safe-mcp: warning: an approval request was not recorded: {e}");
        }
        let outcome = approver.0.ask(&request).await;
        let record = outcome.record(&reasons);
        if let crate::approval::Answer::NoCapability(why) = &outcome.answer
            && settings.mode == ApprovalMode::Auto
        {
            return give_ticket(why);
        }
        if outcome.approved() {
            Ok(Some(record))
        } else {
            let why = outcome
                .refusal(settings.timeout)
                .replace("this command", "this write")
                .replace("nothing ran", "nothing was written");
            Err(refuse(why, record))
        }
    }

    /// `write_file(path, content, create_only?)`; `approval`, what
    /// [`TerminalService::approve_file_write`] gave.
    pub fn write_file(
        &self,
        path: &str,
        content: String,
        create_only: bool,
        approval: Option<Value>,
        caller: &Caller,
    ) -> OperationResult {
        let started = Instant::now();
        match self.file_tools().prepare_write(path, content, create_only) {
            Ok(prepared) => self.commit(WRITE, path, prepared, approval, caller, started),
            Err(result) => self.refused(WRITE, path, result, caller, started),
        }
    }

    /// `edit_file(path, edits, dry_run?)`.
    pub fn edit_file(
        &self,
        path: &str,
        edits: &[Edit],
        dry_run: bool,
        approval: Option<Value>,
        caller: &Caller,
    ) -> OperationResult {
        let started = Instant::now();
        match self.file_tools().prepare_edit(path, edits, dry_run) {
            Ok(Ok(prepared)) => self.commit(EDIT, path, prepared, approval, caller, started),
            // A dry run changes nothing: recorded as a read.
            Ok(Err(result)) | Err(result) => self.refused(EDIT, path, result, caller, started),
        }
    }

    /// A call that wrote nothing: its attempt and outcome together.
    fn refused(
        &self,
        tool: &'static str,
        path: &str,
        result: OperationResult,
        caller: &Caller,
        started: Instant,
    ) -> OperationResult {
        // A refusal may echo the path the model gave: redacted, as every reason is.
        let mut result = result.with_duration(started.elapsed());
        result.reason = self.redactor().redact(&result.reason);
        let mut attempt = self.attempt_for(tool, &format!("{tool} {path}"), caller);
        attempt.args = Some(json!({ "path": path }));
        self.gate().record(attempt, &result);
        result
    }

    /// Records the attempt (durable), writes, records the outcome.
    fn commit(
        &self,
        tool: &'static str,
        path: &str,
        prepared: Prepared,
        approval: Option<Value>,
        caller: &Caller,
        started: Instant,
    ) -> OperationResult {
        let mut attempt = self.attempt_for(tool, &format!("{tool} {path}"), caller);
        attempt.args = Some(prepared.record.clone());
        attempt.approval = approval;
        // As before a command: what a session made goes first, and a sweep that still cannot
        // finish refuses the write (one that now finishes lifts the refusal).
        self.sweep_protected(&attempt.call);
        if let Some(why) = self.held_refusal() {
            let result = OperationResult::new(tool, ResultCode::SandboxUnavailable, why)
                .with_duration(started.elapsed());
            self.gate().record(attempt, &result);
            return result;
        }
        if let Err(refused) = self.gate().admit(&attempt) {
            let result = refused.result(tool).with_duration(started.elapsed());
            let mut outcome = Outcome::of(&attempt.call, &result);
            outcome.caller = caller.clone();
            self.gate().finish(&outcome);
            return result;
        }
        let (result, file) = prepared.commit();
        // A file can complete a git directory's shape (a bare repository's `HEAD`, a hook):
        // the sweep holds it as it holds what commands make.
        self.sweep_protected(&attempt.call);
        let result = result.with_duration(started.elapsed());
        let mut outcome = Outcome::of(&attempt.call, &result);
        outcome.caller = caller.clone();
        outcome.file = (!file.is_null()).then_some(file);
        self.gate().finish(&outcome);
        result
    }
}
