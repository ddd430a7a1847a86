//! The file tools as the terminal server calls them: judged ([`super::FileTools`]), then
//! recorded like a command. A read is a read-only call (attempt and outcome together); a
//! write's attempt record (path, sizes, the old content's SHA-256) is durable before the
//! file is touched, and under fail-closed an unwritable trail means nothing is written; its
//! outcome names the new content's SHA-256.

use std::time::Instant;

use serde_json::{Value, json};

use super::{EDIT, Edit, FileAsking, FileTools, Prepared, READ, WRITE};
use crate::audit::Caller;
use crate::envelope::{OperationResult, ResultCode};
use crate::terminal::Question;
use crate::terminal::TerminalService;

/// The file tools as calls of the terminal server: judged by [`FileTools`], recorded in the
/// server's trail, written after its approval ladder where a rule asks for one.
#[derive(Clone, Copy)]
pub struct FileCalls<'a>(&'a TerminalService);

impl<'a> FileCalls<'a> {
    pub fn new(service: &'a TerminalService) -> FileCalls<'a> {
        FileCalls(service)
    }

    fn file_tools(&self) -> FileTools<'_> {
        FileTools::new(self.0.policy(), self.0.jail(), self.0.redactor())
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
        let max = self.0.policy().limits.max_output_bytes;
        let result = self
            .file_tools()
            .read(path, offset, limit, max)
            .with_duration(started.elapsed());
        let mut attempt = self
            .0
            .attempt_for(READ, &format!("read_file {path}"), caller);
        attempt.args = Some(json!({"path": path, "offset": offset, "limit": limit}));
        self.0.gate().record(attempt, &result);
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
        let Some(reason) = self.file_tools().needs_approval(path) else {
            return Ok(None);
        };
        let started = Instant::now();
        let jail = self.0.policy().jail_root.display().to_string();
        let content_hash = {
            use sha2::Digest;
            let hash: [u8; 32] = sha2::Sha256::digest(content).into();
            hash.iter().map(|b| format!("{b:02x}")).collect::<String>()
        };
        let bound = vec![vec![tool.to_owned(), path.to_owned(), content_hash]];
        let question = Question {
            tool,
            call: self.0.gate().begin(),
            shown: vec![vec![tool.to_owned(), path.to_owned()]],
            command: format!("{tool} {path}"),
            digest: crate::tickets::digest(tool, &bound, &jail),
            cwd: jail,
            confinement: "the file tools (no command runs)".into(),
            reasons: vec![reason],
            caller,
            session: asking.session,
            ticket: asking.ticket,
            approver: asking.approver,
            nested: false,
            nothing: "nothing was written",
            subject: "this write",
            scoped: Some(crate::scopes::OwnedCall::Write {
                tool: tool.to_owned(),
                path: safe_mcp_rules::paths::lexical_normalize(
                    &self.0.policy().jail_root.join(path),
                ),
            }),
        };
        let not = match self.0.approvals().ask_person(&question).await {
            Ok(record) => return Ok(Some(record)),
            Err(not) => not,
        };
        let (result, record) = not.into_result(tool, &question.reasons);
        let mut attempt = self.0.attempt_for(tool, &question.command, caller);
        attempt.args = Some(json!({ "path": path }));
        attempt.approval = Some(record);
        let result = result.with_duration(started.elapsed());
        self.0.gate().record(attempt, &result);
        Err(result)
    }

    /// `write_file(path, content, create_only?)`; `approval`, what
    /// [`FileCalls::approve_file_write`] gave.
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
        result.reason = self.0.redactor().redact(&result.reason);
        let mut attempt = self.0.attempt_for(tool, &format!("{tool} {path}"), caller);
        attempt.args = Some(json!({ "path": path }));
        self.0.gate().record(attempt, &result);
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
        let mut attempt = self.0.attempt_for(tool, &format!("{tool} {path}"), caller);
        attempt.args = Some(prepared.record.clone());
        attempt.approval = approval;
        // As before a command: what a session made goes first, and a sweep that still cannot
        // finish refuses the write (one that now finishes lifts the refusal).
        self.0.sweep_protected(&attempt.call);
        if let Some(why) = self.0.held_refusal() {
            let result = OperationResult::new(tool, ResultCode::SandboxUnavailable, why)
                .with_duration(started.elapsed());
            self.0.gate().record(attempt, &result);
            return result;
        }
        if let Err(refused) = self.0.gate().admit(&attempt) {
            let result = refused.result(tool).with_duration(started.elapsed());
            self.0
                .gate()
                .outcome(&attempt.call, caller, &result, |_| {});
            return result;
        }
        let (result, file) = prepared.commit();
        // A file can complete a git directory's shape (a bare repository's `HEAD`, a hook):
        // the sweep holds it as it holds what commands make.
        self.0.sweep_protected(&attempt.call);
        let result = result.with_duration(started.elapsed());
        self.0.gate().outcome(&attempt.call, caller, &result, |o| {
            o.file = (!file.is_null()).then_some(file);
        });
        result
    }
}
