//! The terminal server's file tools over MCP: `read_file`, `write_file`, `edit_file`. Only
//! schemas and wiring: what each may touch and do is the core's
//! ([`safe_mcp_core::file_tools`]). The work runs on a blocking thread, off the async
//! workers, since it touches the disk.

use rmcp::model::{CallToolResult, JsonObject};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{tool, tool_router};
use safe_mcp_core::OperationResult;
use safe_mcp_core::file_tools::Edit;
use safe_mcp_core::file_tools::service::FileCalls;
use schemars::JsonSchema;
use serde::Deserialize;

use crate::mcp::call::{arguments, blocking, envelope_schema, input, integral, to_result, tool_of};
use crate::mcp::terminal::TerminalServer;

/// Arguments of `read_file`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadFileArgs {
    /// The file: relative to the jail root, or absolute inside it (or a write path).
    pub path: String,
    /// The first line to return, 1-based (default 1).
    #[serde(default, deserialize_with = "integral")]
    pub offset: Option<u64>,
    /// At most this many lines (default: as many as fit in the output cap).
    #[serde(default, deserialize_with = "integral")]
    pub limit: Option<u64>,
}

/// Arguments of `write_file`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteFileArgs {
    /// The file: relative to the jail root, or absolute inside it (or a write path).
    pub path: String,
    /// The whole new content.
    pub content: String,
    /// Refuse (CONFLICT) when the file exists.
    #[serde(default)]
    pub create_only: bool,
    /// The ticket a refusal gave (detail.approval.ticket), once the person approved it.
    #[serde(default)]
    pub approval_ticket: Option<String>,
}

/// One edit.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EditArg {
    /// Text that occurs exactly once in the file (or, with replace_all, at least once).
    pub old_text: String,
    /// Its replacement.
    pub new_text: String,
    /// Replace every occurrence.
    #[serde(default)]
    pub replace_all: bool,
}

/// Arguments of `edit_file`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EditFileArgs {
    /// The file: relative to the jail root, or absolute inside it (or a write path).
    pub path: String,
    /// Applied in order, all or nothing.
    pub edits: Vec<EditArg>,
    /// Return the diff and change nothing.
    #[serde(default)]
    pub dry_run: bool,
    /// The ticket a refusal gave (detail.approval.ticket), once the person approved it.
    #[serde(default)]
    pub approval_ticket: Option<String>,
}

/// A read's tool result: its text block for a reader, the lines numbered as `cat -n` shows
/// them (`structuredContent` keeps the envelope).
fn read_result(envelope: OperationResult) -> CallToolResult {
    let text = safe_mcp_core::file_tools::numbered_text(&envelope);
    let mut result = to_result(envelope);
    if let Some(text) = text {
        result.content = vec![rmcp::model::ContentBlock::text(text)];
    }
    result
}

impl TerminalServer {
    /// Asks this request's client (or the approval page) before a write to a path of
    /// `[terminal.files] confirm_paths`: the approval for the attempt record, or the
    /// refusal to answer with.
    async fn approval(
        &self,
        tool: &'static str,
        path: &str,
        content: &[u8],
        ticket: Option<&str>,
        context: &RequestContext<RoleServer>,
        caller: &safe_mcp_core::audit::Caller,
    ) -> Result<Option<serde_json::Value>, CallToolResult> {
        let approver = self.approver(context);
        let session = self.session_for(context);
        let asking = safe_mcp_core::file_tools::FileAsking {
            approver: Some(&approver),
            session: &session,
            ticket,
        };
        FileCalls::new(self.service())
            .approve_file_write(tool, path, content, asking, caller)
            .await
            .map_err(to_result)
    }
}

#[tool_router(router = file_tool_router, vis = "pub(crate)")]
impl TerminalServer {
    /// Read a text file in the jail: `detail.content` (redacted like command output), with
    /// `first_line`, `lines` returned, `total_lines` and `truncated`. `offset` and `limit`
    /// count lines (1-based). A binary file is reported by its size. Regular files only;
    /// never through a symlink.
    #[tool(
        input_schema = input::<ReadFileArgs>(),
        output_schema = envelope_schema(),
        annotations(title = "Read a file", read_only_hint = true, destructive_hint = false,
                    idempotent_hint = true, open_world_hint = false)
    )]
    async fn read_file(
        &self,
        args: JsonObject,
        context: RequestContext<RoleServer>,
    ) -> CallToolResult {
        let (caller, args): (_, ReadFileArgs) = arguments!(args, context, self.service().as_ref());
        let service = self.service().clone();
        read_result(
            blocking(tool_of(&context), move || {
                FileCalls::new(&service).read_file(&args.path, args.offset, args.limit, &caller)
            })
            .await,
        )
    }

    /// Create or replace a file in the jail with `content` (atomically: a crash leaves the
    /// old file or the new one). Parent folders are made. `create_only` refuses an existing
    /// file. Not for protected paths (.git/config, .vscode/, ...) or files that hold secrets
    /// (use edit_file around them). To change part of a file, edit_file is cheaper.
    #[tool(
        input_schema = input::<WriteFileArgs>(),
        output_schema = envelope_schema(),
        annotations(title = "Write a file", read_only_hint = false, destructive_hint = true,
                    idempotent_hint = true, open_world_hint = false)
    )]
    async fn write_file(
        &self,
        args: JsonObject,
        context: RequestContext<RoleServer>,
    ) -> CallToolResult {
        let (caller, args): (_, WriteFileArgs) = arguments!(args, context, self.service().as_ref());
        let ticket = args.approval_ticket.as_deref();
        let approval = match self
            .approval(
                "write_file",
                &args.path,
                args.content.as_bytes(),
                ticket,
                &context,
                &caller,
            )
            .await
        {
            Ok(a) => a,
            Err(refused) => return refused,
        };
        let service = self.service().clone();
        to_result(
            blocking(tool_of(&context), move || {
                FileCalls::new(&service).write_file(
                    &args.path,
                    args.content,
                    args.create_only,
                    approval,
                    &caller,
                )
            })
            .await,
        )
    }

    /// Change a text file in the jail: each edit's `old_text` must occur exactly once (or
    /// set `replace_all`), applied in order, all or nothing; returns the unified diff
    /// (`detail.diff`). `dry_run` shows the diff and changes nothing. A miss names the edit
    /// and shows the nearest lines.
    #[tool(
        input_schema = input::<EditFileArgs>(),
        output_schema = envelope_schema(),
        annotations(title = "Edit a file", read_only_hint = false, destructive_hint = true,
                    idempotent_hint = false, open_world_hint = false)
    )]
    async fn edit_file(
        &self,
        args: JsonObject,
        context: RequestContext<RoleServer>,
    ) -> CallToolResult {
        let (caller, args): (_, EditFileArgs) = arguments!(args, context, self.service().as_ref());
        // What an approval is bound to: every edit, in order.
        let bound = serde_json::to_vec(
            &args
                .edits
                .iter()
                .map(|e| (&e.old_text, &e.new_text, e.replace_all))
                .collect::<Vec<_>>(),
        )
        .unwrap_or_default();
        let edits: Vec<Edit> = args
            .edits
            .into_iter()
            .map(|e| Edit {
                old_text: e.old_text,
                new_text: e.new_text,
                replace_all: e.replace_all,
            })
            .collect();
        // A dry run changes nothing: no one is asked.
        let approval = if args.dry_run {
            None
        } else {
            match self
                .approval(
                    "edit_file",
                    &args.path,
                    &bound,
                    args.approval_ticket.as_deref(),
                    &context,
                    &caller,
                )
                .await
            {
                Ok(a) => a,
                Err(refused) => return refused,
            }
        };
        let service = self.service().clone();
        to_result(
            blocking(tool_of(&context), move || {
                FileCalls::new(&service).edit_file(
                    &args.path,
                    &edits,
                    args.dry_run,
                    approval,
                    &caller,
                )
            })
            .await,
        )
    }
}
