//! The read-only tools: `list_files` and `plan_organize`. A plan changes nothing, not even
//! folders; it is stored (the newest few) for `apply_plan` to re-check and perform.

use std::sync::atomic::Ordering;
use std::time::Instant;

use safe_mcp_core::{OperationResult, ResultCode};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use safe_mcp_core::audit::Caller;
use safe_mcp_core::config::SkipLayer;

use super::state::{FilesService, MAX_PLANS, PlannedMove, StoredPlan, fs_error, now_ns};
use crate::fsroot::{EntryInfo, Kind};
use crate::journal::Move;
use crate::rules::Skip;

/// The files server's planner facet: see the module docs.
pub(super) struct Planner<'a>(pub(super) &'a FilesService);

impl Planner<'_> {
    fn entry_json(
        &self,
        rel: &str,
        e: &EntryInfo,
        verdict: Option<&Skip>,
        destination: Option<&str>,
    ) -> Value {
        json!({
            "name": e.name,
            "path": rel,
            "kind": e.kind,
            "size": e.size,
            "category": if e.kind == Kind::File { self.0.rules.category(&e.name) } else { None },
            "would_move": verdict.is_none() && destination.is_some(),
            "destination": destination,
            "skip": verdict,
        })
    }

    /// The verdict of `plan_organize` for one top-level entry: a destination or a skip.
    fn plan_entry(&self, e: &EntryInfo, now: i128) -> Result<String, Skip> {
        if let Some(skip) = self.0.rules.classify(e, now) {
            return Err(skip);
        }
        let Some(category) = self.0.rules.category(&e.name) else {
            return Err(Skip {
                layer: SkipLayer::Restraint,
                code: ResultCode::NeedsExplicitRequest,
                rule: "uncategorized".into(),
                reason: "no category matches this file's extension".into(),
            });
        };
        let dst = format!("{category}/{}", e.name);
        match self.0.ws.stat(&dst) {
            Ok(None) => Ok(dst),
            Ok(Some(_)) => Err(Skip {
                layer: SkipLayer::Protection,
                code: ResultCode::Conflict,
                rule: "occupied-target".into(),
                reason: format!(
                    "{dst} already exists and is never overwritten; move it under another name with move_file"
                ),
            }),
            Err(e) => Err(Skip {
                layer: SkipLayer::Protection,
                code: ResultCode::PathEscape,
                rule: "escape".into(),
                reason: e.to_string(),
            }),
        }
    }

    /// `list_files(subdir?)`.
    pub(super) fn list_files(&self, subdir: Option<&str>, caller: &Caller) -> OperationResult {
        let result = self.list(subdir);
        self.0
            .record_call("list_files", json!({"subdir": subdir}), result, caller)
    }

    fn list(&self, subdir: Option<&str>) -> OperationResult {
        const A: &str = "list_files";
        let started = Instant::now();
        let rel = match subdir.filter(|s| !s.is_empty() && *s != ".") {
            Some(s) => match self.0.relative(s) {
                Ok(r) => r,
                Err(e) => return fs_error(A, &e),
            },
            None => String::new(),
        };
        let entries = match self.0.ws.list(&rel) {
            Ok(e) => e,
            Err(e) => return fs_error(A, &e),
        };
        let now = now_ns();
        let items: Vec<Value> = entries
            .iter()
            .map(|e| {
                let path = if rel.is_empty() {
                    e.name.clone()
                } else {
                    format!("{rel}/{}", e.name)
                };
                if rel.is_empty() {
                    match self.plan_entry(e, now) {
                        Ok(dst) => self.entry_json(&path, e, None, Some(&dst)),
                        Err(skip) => self.entry_json(&path, e, Some(&skip), None),
                    }
                } else {
                    let skip = self.0.rules.protection(e, now).unwrap_or(Skip {
                        layer: SkipLayer::Restraint,
                        code: ResultCode::NeedsExplicitRequest,
                        rule: "top-level-only".into(),
                        reason: "plan_organize tidies only the top level of the workspace; move deeper files with move_file".into(),
                    });
                    self.entry_json(&path, e, Some(&skip), None)
                }
            })
            .collect();
        OperationResult::new(A, ResultCode::Ok, format!("{} entries", items.len()))
            .with_detail(json!({"dir": rel, "entries": items}))
            .with_duration(started.elapsed())
    }

    /// `plan_organize()`: changes nothing, not even folders.
    pub(super) fn plan_organize(&self, caller: &Caller) -> OperationResult {
        let result = self.plan(caller);
        self.0
            .record_call("plan_organize", json!({}), result, caller)
    }

    fn plan(&self, caller: &Caller) -> OperationResult {
        const A: &str = "plan_organize";
        let started = Instant::now();
        let entries = match self.0.ws.list("") {
            Ok(e) => e,
            Err(e) => return fs_error(A, &e),
        };
        let now = now_ns();
        let mut moves: Vec<PlannedMove> = Vec::new();
        let mut skips: Vec<Value> = Vec::new();
        let mut truncated = 0usize;
        for e in entries {
            match self.plan_entry(&e, now) {
                Ok(dst) if moves.len() < self.0.max_moves => {
                    moves.push(PlannedMove { mv: Move { src: e.name.clone(), dst, dev: e.dev, ino: e.ino }, info: e });
                }
                Ok(_) => truncated += 1,
                Err(skip) => skips.push(json!({"path": e.name, "code": skip.code, "layer": skip.layer, "rule": skip.rule, "reason": skip.reason})),
            }
        }
        let n = self.0.counter.fetch_add(1, Ordering::Relaxed);
        let id_source = format!("{}:{n}:{}", std::process::id(), now);
        let plan_id = hex::encode(&Sha256::digest(id_source.as_bytes())[..12]);
        // In a fleet the id names this replica, so that another can say whose it is.
        let plan_id = safe_mcp_core::fleet::owned(&plan_id, &self.0.gate().log().server_id());
        let move_list: Vec<Value> = moves
            .iter()
            .map(|m| json!({"src": m.mv.src, "dst": m.mv.dst}))
            .collect();
        let detail = json!({
            "plan_id": plan_id,
            "moves": move_list,
            "skips": skips,
            "move_count": moves.len(),
            "skip_count": skips.len(),
            "truncated": truncated > 0,
            "not_planned_over_limit": truncated,
            "max_plan_moves": self.0.max_moves,
        });
        let recent = skips.iter().filter(|s| s["rule"] == "recent").count();
        let reason = if moves.is_empty() && recent > 0 {
            format!(
                "nothing to move yet: {recent} file(s) changed in the last two minutes and may still be in use; plan again in 2 minutes"
            )
        } else {
            format!(
                "{} moves planned, {} entries skipped; nothing has changed yet",
                moves.len(),
                skips.len()
            )
        };
        if let Ok(mut plans) = self.0.plans.lock() {
            // Keep the newest few plans only: planning in a loop must not grow memory.
            while plans.len() >= MAX_PLANS {
                let Some(oldest) = plans
                    .iter()
                    .min_by_key(|(_, p)| p.serial)
                    .map(|(id, _)| id.clone())
                else {
                    break;
                };
                plans.remove(&oldest);
            }
            plans.insert(
                plan_id,
                StoredPlan {
                    serial: n,
                    moves,
                    owner: caller.sub.clone(),
                },
            );
        }
        OperationResult::new(A, ResultCode::Ok, reason)
            .with_detail(detail)
            .with_duration(started.elapsed())
    }
}
