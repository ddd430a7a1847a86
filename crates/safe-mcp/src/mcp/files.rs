//! MCP wiring of the files server: six tools, tool schemas only, no rules.
//!
//! Owns translating `tools/call` arguments into organizer calls and envelopes into tool
//! results; every decision is in `safe_mcp_organizer`. Arguments are deserialized here
//! (through [`super::call`]) so a bad argument is an INVALID_REQUEST envelope that matches the
//! declared `outputSchema`.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use rmcp::model::{CallToolResult, Implementation, JsonObject, ServerCapabilities, ServerConfig};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ServerHandler, tool, tool_handler, tool_router};
use safe_mcp_organizer::{FilesService, Watch};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::mcp::call::{
    RecordRefusal, arguments, blocking, envelope_schema, input, to_result, tool_of,
};
use crate::mcp::progress::Ticker;

/// Arguments of `list_files`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListArgs {
    /// A folder inside the workspace (default: the workspace itself).
    #[serde(default)]
    pub subdir: Option<String>,
}

/// Arguments of `apply_plan`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ApplyArgs {
    /// The plan_id that plan_organize returned (single use).
    pub plan_id: String,
}

/// Arguments of `move_file`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MoveArgs {
    /// The file or folder to move, relative to the workspace.
    pub src: String,
    /// Its full new path, relative to the workspace (never overwritten).
    pub dest: String,
}

/// No arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoArgs {}

impl RecordRefusal for FilesService {
    fn record_refusal(
        &self,
        tool: &'static str,
        args: &JsonObject,
        result: &safe_mcp_core::OperationResult,
        caller: &safe_mcp_core::audit::Caller,
    ) {
        self.record_call(
            tool,
            serde_json::Value::Object(args.clone()),
            result.clone(),
            caller,
        );
    }
}

/// The files MCP server.
#[derive(Clone)]
pub struct FilesServer {
    service: Arc<FilesService>,
    /// Tool calls running at once, shared by every client of an `--http` server.
    calls: Option<Arc<safe_mcp_http::limits::Calls>>,
}

#[tool_router]
impl FilesServer {
    /// Builds the server over the organizer.
    pub fn new(
        service: Arc<FilesService>,
        calls: Option<Arc<safe_mcp_http::limits::Calls>>,
    ) -> Self {
        FilesServer { service, calls }
    }

    /// List a folder of the workspace: each entry's name, size, category, and whether the
    /// organizer would move it (and if not, why).
    #[tool(
        input_schema = input::<ListArgs>(),
        output_schema = envelope_schema(),
        annotations(title = "List files", read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn list_files(
        &self,
        args: JsonObject,
        context: RequestContext<RoleServer>,
    ) -> CallToolResult {
        let (caller, args): (_, ListArgs) = arguments!(args, context, self.service.as_ref());
        let s = Arc::clone(&self.service);
        to_result(
            blocking(tool_of(&context), move || {
                s.list_files(args.subdir.as_deref(), &caller)
            })
            .await,
        )
    }

    /// Plan how to tidy the workspace's top level into category folders. Changes nothing,
    /// not even folders; returns a single-use plan_id for apply_plan.
    #[tool(
        input_schema = input::<NoArgs>(),
        output_schema = envelope_schema(),
        annotations(title = "Plan an organisation", read_only_hint = true, destructive_hint = false, idempotent_hint = false, open_world_hint = false)
    )]
    async fn plan_organize(
        &self,
        args: JsonObject,
        context: RequestContext<RoleServer>,
    ) -> CallToolResult {
        let (caller, NoArgs {}) = arguments!(args, context, self.service.as_ref());
        let s = Arc::clone(&self.service);
        to_result(blocking(tool_of(&context), move || s.plan_organize(&caller)).await)
    }

    /// Apply a plan: every file is re-checked first, and if anything changed nothing moves.
    /// Never overwrites, never deletes; undo_last_action restores it.
    #[tool(
        input_schema = input::<ApplyArgs>(),
        output_schema = envelope_schema(),
        annotations(title = "Apply a plan", read_only_hint = false, destructive_hint = false, idempotent_hint = false, open_world_hint = false)
    )]
    async fn apply_plan(
        &self,
        args: JsonObject,
        context: RequestContext<RoleServer>,
    ) -> CallToolResult {
        let (caller, args): (_, ApplyArgs) = arguments!(args, context, self.service.as_ref());
        // Moves done of how many, for progress; the request's cancellation stops it between
        // two moves.
        let counts = Arc::new((AtomicUsize::new(0), AtomicUsize::new(0)));
        let ticker = {
            let counts = Arc::clone(&counts);
            Ticker::start(&context, move || {
                let (done, total) = (
                    counts.0.load(Ordering::Acquire),
                    counts.1.load(Ordering::Acquire),
                );
                (total > 0).then(|| {
                    (
                        done as f64,
                        Some(total as f64),
                        Some(format!("moved {done} of {total}")),
                    )
                })
            })
        };
        let (s, ct) = (Arc::clone(&self.service), context.ct.clone());
        let result = blocking(tool_of(&context), move || {
            let moved = |done: usize, total: usize| {
                counts.1.store(total, Ordering::Release);
                counts.0.store(done, Ordering::Release);
            };
            let stop = || ct.is_cancelled();
            s.apply_plan_watched(
                &args.plan_id,
                &Watch {
                    stop: &stop,
                    moved: &moved,
                },
                &caller,
            )
        })
        .await;
        ticker.stop().await;
        to_result(result)
    }

    /// Move one named file or folder to a full destination path. Never overwrites and never
    /// renames around a conflict (CONFLICT instead).
    #[tool(
        input_schema = input::<MoveArgs>(),
        output_schema = envelope_schema(),
        annotations(title = "Move a file", read_only_hint = false, destructive_hint = false, idempotent_hint = false, open_world_hint = false)
    )]
    async fn move_file(
        &self,
        args: JsonObject,
        context: RequestContext<RoleServer>,
    ) -> CallToolResult {
        let (caller, args): (_, MoveArgs) = arguments!(args, context, self.service.as_ref());
        let s = Arc::clone(&self.service);
        to_result(
            blocking(tool_of(&context), move || {
                s.move_file(&args.src, &args.dest, &caller)
            })
            .await,
        )
    }

    /// Undo the last move or applied plan, as one action. Never overwrites.
    #[tool(
        input_schema = input::<NoArgs>(),
        output_schema = envelope_schema(),
        annotations(title = "Undo", read_only_hint = false, destructive_hint = false, idempotent_hint = false, open_world_hint = false)
    )]
    async fn undo_last_action(
        &self,
        args: JsonObject,
        context: RequestContext<RoleServer>,
    ) -> CallToolResult {
        let (caller, NoArgs {}) = arguments!(args, context, self.service.as_ref());
        let s = Arc::clone(&self.service);
        to_result(blocking(tool_of(&context), move || s.undo_last_action(&caller)).await)
    }

    /// Redo the last undone action. New work clears redo.
    #[tool(
        input_schema = input::<NoArgs>(),
        output_schema = envelope_schema(),
        annotations(title = "Redo", read_only_hint = false, destructive_hint = false, idempotent_hint = false, open_world_hint = false)
    )]
    async fn redo_last_action(
        &self,
        args: JsonObject,
        context: RequestContext<RoleServer>,
    ) -> CallToolResult {
        let (caller, NoArgs {}) = arguments!(args, context, self.service.as_ref());
        let s = Arc::clone(&self.service);
        to_result(blocking(tool_of(&context), move || s.redo_last_action(&caller)).await)
    }
}

crate::mcp::call::built_once_router!(FilesServer);

#[tool_handler(router = router())]
impl ServerHandler for FilesServer {
    async fn call_tool(
        &self,
        request: rmcp::model::CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::CallToolResponse, rmcp::ErrorData> {
        let audit = self.service.as_ref();
        crate::mcp::call::call_counted(self, router(), self.calls.as_ref(), audit, request, context)
            .await
    }

    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new(env!("CARGO_PKG_NAME"), env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "safe-mcp files: tidies one folder. plan_organize shows what would move (and changes \
                 nothing); apply_plan applies it; move_file moves one named file; undo_last_action and \
                 redo_last_action step through history. Nothing is ever deleted or overwritten.",
            )
    }
}
