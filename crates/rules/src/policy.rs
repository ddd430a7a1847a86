//! Evaluation: may this command list run, and exactly what would run?
//!
//! Owns the verdict for each simple command: deny by default, the denylist always wins,
//! names are exact and case-sensitive, a program containing `/` is refused, `deny_args` match
//! after normalisation, the built-in tool knowledge ([`crate::tools`]) refuses escapes and
//! interpreters unless the operator opted that exact one in, every cwd and path argument
//! stays in the jail, and the program resolves to an absolute path through the scrubbed PATH
//! only (never the cwd). The strictest stage verdict decides the whole list. It must never
//! consult the model's environment, the cwd or anything outside the policy to say yes.
//!
//! What it asks of the machine (where a program is on `PATH`, the real file of one, a
//! `.git` file) it asks the jail's [`crate::jail::Resolver`]; it reads nothing itself.

use std::path::{Path, PathBuf};

use serde::Serialize;

use safe_mcp_contract::ExecStage;

use crate::args::NormalizedArgs;
use crate::config::{ArgRule, TerminalPolicy};
use crate::envelope::ResultCode;
use crate::jail::{JailError, JailRoot};
use crate::syntax::{self, CommandList, Sequence};
use crate::tools::{self, PathCheck};

/// The verdict for one simple command.
#[derive(Debug, Clone, Serialize)]
pub struct StageVerdict {
    /// The argv as parsed (program first).
    pub argv: Vec<String>,
    /// The absolute program that would run, when it resolved.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub program: Option<PathBuf>,
    /// The argv that would really run, hardening included.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_argv: Option<Vec<String>>,
    /// Environment added for this program (hardening).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<(String, String)>,
    /// OK, POLICY_DENIED, PATH_ESCAPE or OPERATION_FAILED.
    pub code: ResultCode,
    /// Which rule decided: `allowlist`, `denylist`, `not-allowlisted`, `rules[2]`,
    /// `escape:-exec`, `interpreter`, `jail`, ...
    pub rule: String,
    /// Why, in one sentence.
    pub reason: String,
    /// Why this stage needs a person's approval (a rule's `confirm_args` matched).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approval: Option<String>,
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
    /// How many stages each pipeline has (left out for one simple command: it says nothing).
    #[serde(skip_serializing_if = "is_one_stage")]
    pub pipeline_lengths: Vec<usize>,
    /// The joins between pipelines (`;`, `&&`, `||`); left out when there are none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub joins: Vec<&'static str>,
    #[serde(skip)]
    join_kinds: Vec<Sequence>,
    /// Whether an allowed command runs only with a person's approval (any stage's rule
    /// has `confirm_args` that match). Deny wins: a refused command needs none.
    pub needs_approval: bool,
}

fn is_one_stage(lengths: &[usize]) -> bool {
    lengths == [1]
}

impl Decision {
    /// The joins between pipelines.
    pub fn sequences(&self) -> &[Sequence] {
        &self.join_kinds
    }

    /// The decision as the executor's terms, when it allows running: every stage with its
    /// program, the cwd resolved. `None` when it does not allow running, and `None` too if
    /// an allowed decision lacked a program or the cwd (a bug: nothing runs, no stage is
    /// silently dropped).
    pub fn approve(&self) -> Option<Approved> {
        if self.code != ResultCode::Ok {
            return None;
        }
        let cwd = self.cwd.clone()?;
        let mut stages = self.stages.iter();
        let mut pipelines = Vec::with_capacity(self.pipeline_lengths.len());
        for &n in &self.pipeline_lengths {
            let mut pipeline = Vec::with_capacity(n);
            for s in stages.by_ref().take(n) {
                pipeline.push(ExecStage {
                    program: s.program.clone()?,
                    argv: s.run_argv.clone().unwrap_or_else(|| s.argv.clone()),
                    env: s.env.clone(),
                });
            }
            if pipeline.len() != n {
                return None;
            }
            pipelines.push(pipeline);
        }
        Some(Approved {
            pipelines,
            joins: self.join_kinds.clone(),
            cwd,
        })
    }
}

/// An allowed decision in the executor's terms; made only by [`Decision::approve`].
#[derive(Debug, Clone)]
pub struct Approved {
    /// Pipelines of stages, each with its resolved program.
    pub pipelines: Vec<Vec<ExecStage>>,
    /// `joins[i]` joins pipeline i to i + 1.
    pub joins: Vec<Sequence>,
    /// The canonical cwd inside the jail.
    pub cwd: PathBuf,
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
    let stages: Vec<StageVerdict> = list
        .stages()
        .map(|argv| judge_stage(policy, jail, argv, resolved_cwd.as_deref().ok()))
        .collect();

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
            "empty command: nothing to run. Send the command itself".to_owned(),
        ),
    };
    if code == ResultCode::Ok {
        reason = if stages.len() == 1 {
            // The program, not a `NAME=value` prefix before it.
            let program = stages[0]
                .argv
                .iter()
                .find(|w| !crate::syntax::is_assignment(w))
                .unwrap_or(&stages[0].argv[0]);
            format!("`{program}` is allowlisted")
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
                format!(
                    "cwd {err}; the jail is {}: give the cwd relative to it (for example \"src\"), or absolute beneath it",
                    jail.path().display()
                ),
            ),
            _ => (
                ResultCode::InvalidRequest,
                "cwd".to_owned(),
                err.to_string(),
            ),
        };
    }
    let needs_approval = code == ResultCode::Ok && stages.iter().any(|s| s.approval.is_some());
    Decision {
        needs_approval,
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

/// Programs that only read the paths they are given: a protected path may be an argument of
/// theirs. Any other program could write it (`cp x .git/config`, `touch .mcp.json`).
const READERS: &[&str] = &[
    "cat",
    "head",
    "tail",
    "less",
    "more",
    "wc",
    "grep",
    "egrep",
    "fgrep",
    "rg",
    "ls",
    "stat",
    "file",
    "diff",
    "cmp",
    "sha256sum",
    "sha1sum",
    "md5sum",
    "b2sum",
    "du",
    "nl",
    "od",
    "xxd",
    "hexdump",
    "jq",
    "realpath",
    "readlink",
    "basename",
    "dirname",
];

/// Programs a model reaches for to change a file: their refusal points at the file tools.
const FILE_WRITERS: &[&str] = &[
    "sed", "tee", "dd", "truncate", "patch", "ed", "ex", "vi", "vim", "nano", "perl", "awk",
];

/// git subcommands whose path operands are only read (pathspecs of what to show or stage).
const GIT_READERS: &[&str] = &[
    "add",
    "diff",
    "log",
    "show",
    "blame",
    "annotate",
    "status",
    "ls-files",
    "grep",
    "shortlog",
    "whatchanged",
];

/// Whether `argv` only reads the paths it names.
fn reads_only(argv: &[String]) -> bool {
    let name = argv[0].as_str();
    if name == "git" {
        let sub = argv[1..].iter().find(|a| !a.starts_with('-'));
        return sub.is_some_and(|s| GIT_READERS.contains(&s.as_str()));
    }
    READERS.contains(&name)
}

/// The reason a write through a protected path is refused: what, why, what to do instead.
pub fn protected_refusal(program: &str, value: &str, entry: &crate::protected::Entry) -> String {
    if entry.source == crate::protected::Source::Confirm {
        return format!(
            "`{program}` may not be given {value}: `{}` is a confirm path ([terminal.files] confirm_paths): commands never write it; write it with write_file or edit_file, which ask a person first",
            entry.path
        );
    }
    format!(
        "`{program}` may not be given {value}: {} (with cat, head or grep, say; git's identity is set in [terminal.env])",
        crate::protected::reason(&entry.path)
    )
}

fn verdict(argv: &[String], code: ResultCode, rule: &str, reason: String) -> StageVerdict {
    StageVerdict {
        argv: argv.to_vec(),
        program: None,
        run_argv: None,
        env: Vec::new(),
        code,
        rule: rule.to_owned(),
        reason,
        approval: None,
    }
}

/// A stage with `NAME=value` prefixes: each judged ([`crate::env_prefix`]), then the command
/// after them as any stage; the accepted ones go to the command's environment, under the
/// catalog's hardening (which wins). The verdict names the whole stage.
fn judge_stage(
    policy: &TerminalPolicy,
    jail: &JailRoot,
    argv: &[String],
    cwd: Option<&Path>,
) -> StageVerdict {
    let n = argv
        .iter()
        .take_while(|w| crate::syntax::is_assignment(w))
        .count();
    if n == 0 {
        return judge_command(policy, jail, argv, cwd);
    }
    let mut env = Vec::with_capacity(n);
    for word in &argv[..n] {
        let (name, value) = word.split_once('=').unwrap_or((word.as_str(), ""));
        if let Err(why) = crate::env_prefix::judge(name, &policy.env.prefix_allow) {
            return verdict(argv, ResultCode::PolicyDenied, "env-prefix", why);
        }
        env.push((name.to_owned(), value.to_owned()));
    }
    let mut v = judge_command(policy, jail, &argv[n..], cwd);
    v.argv = argv.to_vec();
    if v.code == ResultCode::Ok {
        env.append(&mut v.env);
        v.env = env;
    }
    v
}

/// The catalog's inspection of `argv`. The catalog reads no file: where its checks depend on
/// the implementation it is handed the program's real file, resolved here (an `awk` that is
/// gawk gets `--sandbox`); no other call pays for resolving it.
fn inspect(
    jail: &JailRoot,
    name: &str,
    argv: &[String],
    program: Option<&Path>,
) -> tools::Inspection {
    match program {
        Some(p) if tools::reads_program(name) => {
            tools::inspect(argv, jail.resolver().canonicalize(p).as_deref())
        }
        _ => tools::inspect(argv, program),
    }
}

fn judge_command(
    policy: &TerminalPolicy,
    jail: &JailRoot,
    argv: &[String],
    cwd: Option<&Path>,
) -> StageVerdict {
    let v = judge_program(policy, argv);
    if v.code != ResultCode::Ok {
        return v;
    }
    let name = argv[0].as_str();
    let program = jail.resolver().find_program(&policy.path, name);
    let insp = inspect(jail, name, argv, program.as_deref());
    let rules: Vec<&ArgRule> = policy.rules.iter().filter(|r| r.command == name).collect();
    if let Some(why) = &insp.interpreter
        && !rules.iter().any(|r| r.allow_interpreter)
    {
        let also = insp
            .escapes
            .first()
            .map(|e| format!("; besides, {}", e.reason))
            .unwrap_or_default();
        return verdict(
            argv,
            ResultCode::PolicyDenied,
            "interpreter",
            format!(
                "`{name}` is refused outright: {why} (an operator can set allow_interpreter = true for it){also}"
            ),
        );
    }
    if let Some(esc) = insp.escapes.iter().find(|e| {
        !rules
            .iter()
            .any(|r| r.allow_escapes.iter().any(|a| a == &e.id))
    }) {
        return verdict(
            argv,
            ResultCode::PolicyDenied,
            &format!("escape:{}", esc.id),
            format!(
                "{}; refused. If the task needs it, the operator can allow this one escape for `{name}`: [[terminal.rules]] command = \"{name}\", allow_escapes = [\"{}\"]",
                esc.reason, esc.id
            ),
        );
    }
    if let Some(dir) = cwd {
        for check in &insp.paths {
            let result = match check {
                PathCheck::Path(p) => jail.check_path(p, dir),
                PathCheck::Generic(a) => jail.check_argument(a, dir),
            };
            match result {
                Ok(()) => {}
                // A read path may be an argument of a program that only reads it.
                Err(JailError::ReadOnly { .. }) if reads_only(argv) => {}
                Err(err) => return verdict(argv, ResultCode::PathEscape, "jail", err.to_string()),
            }
        }
        if !reads_only(argv) {
            for check in &insp.paths {
                let value = match check {
                    PathCheck::Path(p) => p.as_str(),
                    PathCheck::Generic(a) => {
                        match a.strip_prefix("--").and_then(|a| a.split_once('=')) {
                            Some((_, v)) => v,
                            None => a.as_str(),
                        }
                    }
                };
                if value.is_empty() || value == "-" {
                    continue;
                }
                let landing = jail.landing(value, dir);
                if let Some(entry) = policy.protected.covering(jail.path(), &landing) {
                    return verdict(
                        argv,
                        ResultCode::PolicyDenied,
                        "protected-path",
                        protected_refusal(name, value, entry),
                    );
                }
            }
        }
        if name == "git"
            && let Err(why) =
                crate::gitdir::check(jail.resolver(), argv, dir, jail.path(), &policy.write_paths)
        {
            return verdict(argv, ResultCode::PathEscape, "git-dir", why);
        }
    }
    let Some(program) = program else {
        return verdict(
            argv,
            ResultCode::OperationFailed,
            "path-lookup",
            format!("`{name}` is allowlisted but was not found on the server's PATH"),
        );
    };
    let mut run_argv = Vec::with_capacity(argv.len() + insp.inject_args.len());
    run_argv.push(argv[0].clone());
    run_argv.extend(insp.inject_args.iter().cloned());
    for (i, arg) in argv[1..].iter().enumerate() {
        run_argv.push(arg.clone());
        for (_, extra) in insp.inject_after.iter().filter(|(at, _)| *at == i) {
            run_argv.extend(extra.iter().cloned());
        }
    }
    StageVerdict {
        program: Some(program),
        run_argv: Some(run_argv),
        env: insp.inject_env,
        ..v
    }
}

fn judge_program(policy: &TerminalPolicy, argv: &[String]) -> StageVerdict {
    let name = argv.first().map(String::as_str).unwrap_or("");
    if name.is_empty() {
        return verdict(
            argv,
            ResultCode::PolicyDenied,
            "syntax",
            "empty command: nothing to run. Send the command itself".into(),
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
            format!(
                "`{name}` is on the denylist: it does not run here, whatever its arguments. If the task needs it, ask the operator (the key is [terminal.denylist] commands)"
            ),
        );
    }
    if !policy.allow.contains(name) {
        return verdict(
            argv,
            ResultCode::PolicyDenied,
            "not-allowlisted",
            format!(
                "`{name}` is not on the allowlist (deny by default). {}",
                if FILE_WRITERS.contains(&name) {
                    "To change a file use edit_file, to create or replace one write_file"
                } else {
                    "describe_policy lists what runs; if the task needs it, ask the operator to add it to [terminal.allowlist] commands"
                }
            ),
        );
    }
    let mut args = NormalizedArgs::new(&argv[1..]);
    for option in tools::implied_options(argv) {
        args.imply_long(option);
    }
    let mut approval = None;
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
                format!(
                    "`{name}` with `{pattern}` is denied: {why}. Run it without `{pattern}`, or, if the task needs it, ask the operator (the policy's [[terminal.rules]] for `{name}`)"
                ),
            );
        }
        if approval.is_none()
            && let Some(pattern) = rule.confirm_args.iter().find(|p| args.contains_all(p))
        {
            approval = Some(match &rule.reason {
                Some(why) => format!("`{name}` with `{pattern}` needs a person's approval: {why}"),
                None => format!(
                    "`{name}` with `{pattern}` needs a person's approval (rules[{i}] confirm_args)"
                ),
            });
        }
    }
    StageVerdict {
        approval,
        ..verdict(
            argv,
            ResultCode::Ok,
            "allowlist",
            format!("`{name}` is allowlisted"),
        )
    }
}

/// A policy example that did not get the verdict it names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExampleMismatch {
    /// Where the example is written: `terminal.rules[0] (find)` or `terminal.examples[1]`.
    pub rule: String,
    /// `true` for a `should_allow` example, `false` for a `should_deny` one.
    pub want_allow: bool,
    /// The example command, as written.
    pub command: String,
    /// What it got instead: `CODE: reason`, or the syntax error.
    pub got: String,
}

impl ExampleMismatch {
    /// The key the example was listed under.
    pub fn expected(&self) -> &'static str {
        if self.want_allow {
            "should_allow"
        } else {
            "should_deny"
        }
    }
}

impl std::fmt::Display for ExampleMismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: {} example `{}` got {}",
            self.rule,
            self.expected(),
            self.command,
            self.got
        )
    }
}

impl std::error::Error for ExampleMismatch {}

/// Runs the policy's own examples (`should_allow` / `should_deny` on rules and in
/// `[[terminal.examples]]`), judged in `jail`. The first mismatch names the rule and the
/// example.
pub fn check_examples(policy: &TerminalPolicy, jail: &JailRoot) -> Result<(), ExampleMismatch> {
    let mut cases: Vec<(String, &str, bool)> = Vec::new();
    for (i, rule) in policy.rules.iter().enumerate() {
        let label = format!("terminal.rules[{i}] ({})", rule.command);
        cases.extend(
            rule.should_allow
                .iter()
                .map(|c| (label.clone(), c.as_str(), true)),
        );
        cases.extend(
            rule.should_deny
                .iter()
                .map(|c| (label.clone(), c.as_str(), false)),
        );
    }
    for (i, ex) in policy.examples.iter().enumerate() {
        let label = format!("terminal.examples[{i}]");
        cases.extend(
            ex.should_allow
                .iter()
                .map(|c| (label.clone(), c.as_str(), true)),
        );
        cases.extend(
            ex.should_deny
                .iter()
                .map(|c| (label.clone(), c.as_str(), false)),
        );
    }
    for (label, command, want_allow) in cases {
        let (allowed, why) = match syntax::parse(command) {
            Ok(list) => {
                let d = evaluate(policy, jail, &list, None);
                (
                    d.code == ResultCode::Ok,
                    format!("{}: {}", d.code, d.reason),
                )
            }
            Err(e) => (false, e.to_string()),
        };
        if allowed != want_allow {
            return Err(ExampleMismatch {
                rule: label,
                want_allow,
                command: command.to_owned(),
                got: why,
            });
        }
    }
    Ok(())
}
