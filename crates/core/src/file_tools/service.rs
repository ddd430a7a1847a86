//! The file tools as the terminal server calls them: judged ([`super::FileTools`]), then
//! recorded like a command. A read is a read-only call (attempt and outcome together); a
//! write's attempt record (path, sizes, the old content's SHA-256) is durable before the
//! file is touched, and under fail-closed an unwritable trail means nothing is written; its
//! outcome names the new content's SHA-256.

use std::time::Instant;

use serde_json::json;

use super::{EDIT, Edit, FileTools, Prepared, READ, WRITE};
use crate::audit::{Caller, Outcome};
use crate::envelope::OperationResult;
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

    /// `write_file(path, content, create_only?)`.
    pub fn write_file(
        &self,
        path: &str,
        content: String,
        create_only: bool,
        caller: &Caller,
    ) -> OperationResult {
        let started = Instant::now();
        match self.file_tools().prepare_write(path, content, create_only) {
            Ok(prepared) => self.commit(WRITE, path, prepared, caller, started),
            Err(result) => self.refused(WRITE, path, result, caller, started),
        }
    }

    /// `edit_file(path, edits, dry_run?)`.
    pub fn edit_file(
        &self,
        path: &str,
        edits: &[Edit],
        dry_run: bool,
        caller: &Caller,
    ) -> OperationResult {
        let started = Instant::now();
        match self.file_tools().prepare_edit(path, edits, dry_run) {
            Ok(Ok(prepared)) => self.commit(EDIT, path, prepared, caller, started),
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
        caller: &Caller,
        started: Instant,
    ) -> OperationResult {
        let mut attempt = self.attempt_for(tool, &format!("{tool} {path}"), caller);
        attempt.args = Some(prepared.record.clone());
        if let Err(refused) = self.gate().admit(&attempt) {
            let result = refused.result(tool).with_duration(started.elapsed());
            let mut outcome = Outcome::of(&attempt.call, &result);
            outcome.caller = caller.clone();
            self.gate().finish(&outcome);
            return result;
        }
        let (result, file) = prepared.commit();
        let result = result.with_duration(started.elapsed());
        let mut outcome = Outcome::of(&attempt.call, &result);
        outcome.caller = caller.clone();
        outcome.file = (!file.is_null()).then_some(file);
        self.gate().finish(&outcome);
        result
    }
}
