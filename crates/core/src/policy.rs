//! Evaluation: may this command list run, and exactly what would run?
//!
//! Owns the verdict for each simple command: deny by default, the denylist always wins,
//! names are exact and case-sensitive, a program containing `/` is refused, argument rules
//! match after normalisation, every cwd and path-like argument stays in the jail, and the
//! program resolves to an absolute path through the scrubbed PATH only (never the cwd). The
//! strictest stage verdict decides the whole list. It must never consult the model's
//! environment, the cwd or anything outside the policy to say yes.

use std::path::PathBuf;

use serde::Serialize;

use crate::args::NormalizedArgs;
use crate::config::TerminalPolicy;
use crate::envelope::ResultCode;
use crate::jail::{JailError, JailRoot};
use crate::syntax::{CommandList, Sequence};

/// The verdict for one simple command.
#[derive(Debug, Clone, Serialize)]
pub struct StageVerdict {
    /// The argv as parsed (program first).
    pub argv: Vec<String>,
    /// The absolute program that would run, when it resolved.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub program: Option<PathBuf>,
    /// OK, POLICY_DENIED, PATH_ESCAPE or OPERATION_FAILED.
    pub code: ResultCode,
    /// Which rule decided: `allowlist`, `denylist`, `not-allowlisted`, `rules[2]`, `jail`, ...
    pub rule: String,
    /// Why, in one sentence.
    pub reason: String,
}

/// The verdict for a whole command list.
#[derive(Debug, Clone, Serialize)]
pub struct Decision {
    /// The strictest stage code (OK when every stage is allowed).
    pub code: ResultCode,
    /// The rule of the deciding stage.
    pub rule: String,
    /// The reason of the deciding stage.
    pub reason: String,
    /// The canonical working directory, when it resolved.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cwd: Option<PathBuf>,
    /// One verdict per stage, pipelines flattened in order.
    pub stages: Vec<StageVerdict>,
    /// How many stages each pipeline has.
    pub pipeline_lengths: Vec<usize>,
    /// The joins between pipelines (`;`, `&&`, `||`).
    pub joins: Vec<&'static str>,
    #[serde(skip)]
    join_kinds: Vec<Sequence>,
}

impl Decision {
    /// The joins between pipelines.
    pub fn sequences(&self) -> &[Sequence] {
        &self.join_kinds
    }
}

fn strictness(code: ResultCode) -> u8 {
    match code {
        ResultCode::PolicyDenied => 3,
        ResultCode::PathEscape => 2,
        ResultCode::OperationFailed => 1,
        _ => 0,
    }
}

/// Evaluates `list` run from `cwd` under `policy`.
pub fn evaluate(
    policy: &TerminalPolicy,
    jail: &JailRoot,
    list: &CommandList,
    cwd: Option<&str>,
) -> Decision {
    let resolved_cwd = jail.resolve_cwd(cwd);
    let mut stages: Vec<StageVerdict> = Vec::new();
    for argv in list.stages() {
        let mut v = judge_program(policy, argv);
        // A cwd error is reported once, for the whole list, below.
        if let (ResultCode::Ok, Ok(dir)) = (v.code, &resolved_cwd)
            && let Some(err) = argv[1..]
                .iter()
                .find_map(|a| jail.check_argument(a, dir).err())
        {
            v = verdict(argv, ResultCode::PathEscape, "jail", err.to_string());
        }
        if v.code == ResultCode::Ok {
            match resolve_program(&policy.path, &argv[0]) {
                Some(p) => v.program = Some(p),
                None => {
                    v = verdict(
                        argv,
                        ResultCode::OperationFailed,
                        "path-lookup",
                        format!(
                            "`{}` is allowlisted but was not found on the server's PATH",
                            argv[0]
                        ),
                    );
                }
            }
        }
        stages.push(v);
    }

    let worst = stages
        .iter()
        .enumerate()
        .max_by_key(|(i, s)| (strictness(s.code), std::cmp::Reverse(*i)))
        .map(|(_, s)| s);
    let (mut code, mut rule, mut reason) = match worst {
        Some(s) => (s.code, s.rule.clone(), s.reason.clone()),
        None => (
            ResultCode::PolicyDenied,
            "syntax".to_owned(),
            "empty command".to_owned(),
        ),
    };
    if code == ResultCode::Ok {
        reason = if stages.len() == 1 {
            format!("`{}` is allowlisted", stages[0].argv[0])
        } else {
            format!("all {} commands are allowlisted", stages.len())
        };
    }
    if let Err(err) = &resolved_cwd
        && strictness(code) < strictness(ResultCode::PathEscape)
    {
        (code, rule, reason) = match err {
            JailError::Escape { .. } => (
                ResultCode::PathEscape,
                "jail".to_owned(),
                format!("cwd {err}"),
            ),
            _ => (
                ResultCode::InvalidRequest,
                "cwd".to_owned(),
                err.to_string(),
            ),
        };
    }
    Decision {
        code,
        rule,
        reason,
        cwd: resolved_cwd.ok(),
        stages,
        pipeline_lengths: list.pipelines.iter().map(Vec::len).collect(),
        joins: list.joins.iter().map(|j| j.as_str()).collect(),
        join_kinds: list.joins.clone(),
    }
}

fn verdict(argv: &[String], code: ResultCode, rule: &str, reason: String) -> StageVerdict {
    StageVerdict {
        argv: argv.to_vec(),
        program: None,
        code,
        rule: rule.to_owned(),
        reason,
    }
}

fn judge_program(policy: &TerminalPolicy, argv: &[String]) -> StageVerdict {
    let name = argv.first().map(String::as_str).unwrap_or("");
    if name.is_empty() {
        return verdict(
            argv,
            ResultCode::PolicyDenied,
            "syntax",
            "empty command: nothing to run".into(),
        );
    }
    if name.contains('/') {
        return verdict(
            argv,
            ResultCode::PolicyDenied,
            "program-path",
            format!(
                "`{name}` contains `/`: programs are bare names resolved through the server's PATH"
            ),
        );
    }
    if policy.deny.contains(name) {
        return verdict(
            argv,
            ResultCode::PolicyDenied,
            "denylist",
            format!("`{name}` is on the denylist"),
        );
    }
    if !policy.allow.contains(name) {
        return verdict(
            argv,
            ResultCode::PolicyDenied,
            "not-allowlisted",
            format!(
                "`{name}` is not on the allowlist (deny by default); describe_policy lists what is"
            ),
        );
    }
    let args = NormalizedArgs::new(&argv[1..]);
    for (i, rule) in policy.rules.iter().enumerate() {
        if rule.command != name {
            continue;
        }
        if let Some(pattern) = rule.deny_args.iter().find(|p| args.contains_all(p)) {
            let why = rule.reason.as_deref().unwrap_or("the policy denies it");
            return verdict(
                argv,
                ResultCode::PolicyDenied,
                &format!("rules[{i}]"),
                format!("`{name}` with `{pattern}` is denied: {why}"),
            );
        }
    }
    verdict(
        argv,
        ResultCode::Ok,
        "allowlist",
        format!("`{name}` is allowlisted"),
    )
}

/// Finds `name` in the PATH directories: the first regular, executable file wins.
pub fn resolve_program(path: &[PathBuf], name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    path.iter().map(|dir| dir.join(name)).find(|candidate| {
        std::fs::metadata(candidate)
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    })
}
