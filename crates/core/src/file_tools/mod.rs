//! The file tools of the terminal server: `read_file`, `write_file`, `edit_file`, on the
//! same jail, write paths and protected paths as commands.
//!
//! Owns what each tool may touch and what it does: a path is judged on paper (inside the
//! jail or a write path; for a read, also a read path the operator named; never a protected
//! path for a write), then opened beneath its root with `openat2` so that no symlink is ever
//! followed (`io`); only regular files, at most `max_file_bytes`, never one with a second
//! hard link for a write. Reads are redacted like command output. A file whose content the
//! redactor masks cannot be replaced by `write_file` (the model never saw what it would
//! wipe), and an edit or a content that holds a redaction marker is refused. Writes are
//! atomic. It decides and performs; the audit records around each write are the service's
//! ([`crate::terminal`]), which writes the attempt, durable, before [`Prepared::commit`].

mod io;
pub mod service;

use std::path::{Component, Path, PathBuf};

use serde_json::{Value, json};

pub use crate::config::FileToolSettings;
use crate::config::TerminalPolicy;
use crate::envelope::{OperationResult, ResultCode};
use crate::jail::{JailRoot, Place};
use crate::paths::lexical_normalize;
use crate::redact::Redactor;

/// The tools' names.
pub const READ: &str = "read_file";
/// See [`READ`].
pub const WRITE: &str = "write_file";
/// See [`READ`].
pub const EDIT: &str = "edit_file";

/// One edit of `edit_file`.
#[derive(Debug, Clone)]
pub struct Edit {
    /// Text that must occur exactly once (or, with `replace_all`, at least once).
    pub old_text: String,
    /// What replaces it.
    pub new_text: String,
    /// Replace every occurrence.
    pub replace_all: bool,
}

/// Where a path lands: its root, the folder beneath it, the file's name.
#[derive(Debug)]
struct Target {
    root: PathBuf,
    dir: PathBuf,
    name: PathBuf,
    /// The absolute path, for the reports.
    path: PathBuf,
}

/// A write judged and ready: performing it is [`Prepared::commit`].
#[derive(Debug)]
pub struct Prepared {
    target: Target,
    content: String,
    old: Option<io::Existing>,
    create_only: bool,
    /// The result to give once committed.
    pub result: OperationResult,
    /// What the attempt record says of it: path, sizes, the old content's SHA-256.
    pub record: Value,
}

/// SHA-256 of `bytes`, hex.
fn sha256(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(bytes))
}

/// The file tools over one policy and redactor.
pub struct FileTools<'a> {
    policy: &'a TerminalPolicy,
    jail: &'a JailRoot,
    redactor: &'a Redactor,
}

fn refuse(tool: &str, code: ResultCode, reason: impl Into<String>) -> OperationResult {
    OperationResult::new(tool, code, reason)
}

impl<'a> FileTools<'a> {
    /// The tools for `policy` and its `jail`, redacting with `redactor`.
    pub fn new(
        policy: &'a TerminalPolicy,
        jail: &'a JailRoot,
        redactor: &'a Redactor,
    ) -> FileTools<'a> {
        FileTools {
            policy,
            jail,
            redactor,
        }
    }

    fn settings(&self) -> &FileToolSettings {
        &self.policy.files
    }

    /// Why a write to `given` needs a person's approval, when it does (`confirm_paths`).
    pub fn needs_approval(&self, given: &str) -> Option<String> {
        let jail = &self.policy.jail_root;
        let path = lexical_normalize(&jail.join(given));
        let rel = path.strip_prefix(jail).ok()?;
        let parts: Vec<String> = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        self.settings()
            .confirm_paths
            .iter()
            .find(|p| crate::protected::path_glob(&p.split('/').collect::<Vec<_>>(), &parts))
            .map(|p| {
                format!("a write to {} needs a person's approval ([terminal.files] confirm_paths: {p:?})", rel.display())
            })
    }

    /// Whether `tool` may answer at all under the policy.
    fn allowed(&self, tool: &str) -> Result<(), OperationResult> {
        let s = self.settings();
        if !s.enabled {
            return Err(refuse(
                tool,
                ResultCode::PolicyDenied,
                "the file tools are off ([terminal.files] enabled = false); run a command instead, or ask the operator to turn them on",
            ));
        }
        if tool != READ && s.read_only {
            return Err(refuse(
                tool,
                ResultCode::PolicyDenied,
                "the file tools may only read here ([terminal.files] read_only = true); ask the operator to allow writes",
            ));
        }
        Ok(())
    }

    /// Where `given` lands, judged on paper: beneath the jail or a write path (or, to read,
    /// a read path the operator named); never a protected path for a write.
    fn resolve(&self, tool: &str, given: &str, write: bool) -> Result<Target, OperationResult> {
        let escape = |why: &str| {
            refuse(
                tool,
                ResultCode::PathEscape,
                format!(
                    "{given:?} {why}; name a file inside the jail {} (relative to it, or absolute)",
                    self.policy.jail_root.display()
                ),
            )
        };
        if given.is_empty() || given.contains('\0') {
            return Err(refuse(
                tool,
                ResultCode::InvalidRequest,
                "path is empty or holds a NUL byte; give the file's path, relative to the jail",
            ));
        }
        let jail = &self.policy.jail_root;
        let (path, at) = self.jail.locate(given);
        let (root, place) =
            at.ok_or_else(|| escape("lies outside the jail and every write path"))?;
        let root = root.to_path_buf();
        if write && place != Place::Jail && self.jail.in_read_path(&path) {
            return Err(escape(
                "lies in a read path, which commands and the file tools may read, not write",
            ));
        }
        if write
            && let Some(entry) = self.policy.protected.covering(jail, &path)
            && entry.source != crate::protected::Source::Confirm
        {
            return Err(refuse(
                tool,
                ResultCode::PolicyDenied,
                crate::protected::reason(&entry.path),
            ));
        }
        if write && let Some(why) = self.never_written(&path) {
            return Err(refuse(tool, ResultCode::PolicyDenied, why));
        }
        let rel = path.strip_prefix(&root).unwrap_or(Path::new(""));
        let Some(Component::Normal(name)) = rel.components().next_back() else {
            return Err(refuse(
                tool,
                ResultCode::InvalidRequest,
                format!(
                    "{given:?} names a folder, not a file; name a file in it (`ls` lists them)"
                ),
            ));
        };
        Ok(Target {
            dir: rel.parent().unwrap_or(Path::new("")).to_path_buf(),
            name: PathBuf::from(name),
            root,
            path,
        })
    }

    /// Why the file tools never write `path`, whatever the lists say: git's own files (any
    /// path through a `.git` entry, at any depth: git writes them, and the model's edits
    /// there are how a hook or a configuration would reach the operator's git), and the
    /// profile caches' read-only placeholders (`pip.conf`, cargo's `config.toml`, `.npmrc`:
    /// a write here would replace the inode commands see read-only).
    fn never_written(&self, path: &Path) -> Option<String> {
        if path.components().any(|c| c.as_os_str() == ".git") {
            return Some(format!(
                "{} lies in a git directory: the file tools never write git's own files (a hook or a setting there would run as the operator, outside the sandbox); use git itself (`git commit`, `git checkout`), or ask the operator",
                path.display()
            ));
        }
        self.policy.sandbox.read_only_files.iter().find(|f| path == f.as_path()).map(|f| {
            format!(
                "{} is a profile cache's read-only placeholder (it keeps the tool's configuration, and so what it runs, the operator's): it is never written; ask the operator to change it in the policy",
                f.display()
            )
        })
    }

    /// Why the file system refused, as a result.
    fn io_refusal(&self, tool: &str, t: &Target, r: io::IoRefusal) -> OperationResult {
        let shown = t.path.display();
        let max = self.settings().max_file_bytes;
        match r {
            io::IoRefusal::Missing => refuse(
                tool,
                ResultCode::OperationFailed,
                format!("{shown} does not exist; write_file creates a file"),
            ),
            io::IoRefusal::Symlink => refuse(
                tool,
                ResultCode::PathEscape,
                format!(
                    "{shown} is, or passes through, a symlink, which the file tools never follow; name the file it points at"
                ),
            ),
            io::IoRefusal::NotRegular(what) => refuse(
                tool,
                ResultCode::PolicyDenied,
                format!(
                    "{shown} is {what}: the file tools read and write regular files only; read it with a command instead"
                ),
            ),
            io::IoRefusal::HardLinked(n) => refuse(
                tool,
                ResultCode::PolicyDenied,
                format!(
                    "{shown} has {n} hard links: a write would change the other names too; copy it to a file of its own first"
                ),
            ),
            io::IoRefusal::TooBig(n) => refuse(
                tool,
                ResultCode::PolicyDenied,
                format!(
                    "{shown} is {n} bytes, over [terminal.files] max_file_bytes = {max}; read it in parts with a command (head, tail, grep)"
                ),
            ),
            io::IoRefusal::Exists => refuse(
                tool,
                ResultCode::Conflict,
                format!(
                    "{shown} exists and create_only is true; nothing was written. To replace it, call write_file without create_only; to change it, edit_file"
                ),
            ),
            io::IoRefusal::Failed(why) => {
                refuse(tool, ResultCode::OperationFailed, format!("{shown}: {why}"))
            }
        }
    }

    fn open_dir(
        &self,
        tool: &str,
        t: &Target,
        make: bool,
    ) -> Result<std::os::fd::OwnedFd, OperationResult> {
        let root = io::open_root(&t.root).map_err(|r| self.io_refusal(tool, t, r))?;
        io::open_dir(&root, &t.dir, make).map_err(|r| self.io_refusal(tool, t, r))
    }

    /// `read_file`: lines `offset..` (1-based), at most `limit` of them and at most
    /// `max_bytes` in all, redacted.
    pub fn read(
        &self,
        given: &str,
        offset: Option<u64>,
        limit: Option<u64>,
        max_bytes: usize,
    ) -> OperationResult {
        if let Err(r) = self.allowed(READ) {
            return r;
        }
        let t = match self.resolve(READ, given, false) {
            Ok(t) => t,
            Err(r) => return r,
        };
        let existing = match self.open_dir(READ, &t, false).and_then(|d| {
            io::read(&d, &t.name, self.settings().max_file_bytes)
                .map_err(|r| self.io_refusal(READ, &t, r))
        }) {
            Ok(e) => e,
            Err(r) => return r,
        };
        let bytes = existing.bytes.len();
        let text = match String::from_utf8(existing.bytes) {
            Ok(t) if !t.contains('\0') => t,
            _ => {
                return OperationResult::new(
                    READ,
                    ResultCode::Ok,
                    format!(
                        "{} is a binary file of {bytes} bytes: not shown",
                        t.path.display()
                    ),
                )
                .with_detail(json!({"path": t.path, "binary": true, "bytes": bytes}));
            }
        };
        let redacted = self.redactor.redact(&text);
        let all: Vec<&str> = redacted.split_inclusive('\n').collect();
        let first = offset.unwrap_or(1).max(1) as usize;
        let mut content = String::new();
        let mut returned = 0usize;
        let mut truncated = false;
        for line in all.iter().skip(first - 1) {
            if limit.is_some_and(|l| returned as u64 >= l) {
                break;
            }
            if content.len() + line.len() > max_bytes {
                truncated = true;
                break;
            }
            content.push_str(line);
            returned += 1;
        }
        let total = all.len();
        let more = truncated || first - 1 + returned < total;
        let reason = if returned == 0 && total > 0 && first > total {
            format!(
                "{} has {total} lines; offset {first} is past its end",
                t.path.display()
            )
        } else if more {
            format!(
                "lines {first}–{} of {total}; read on with offset {}",
                first + returned.saturating_sub(1),
                first + returned
            )
        } else {
            format!("{total} lines, {bytes} bytes")
        };
        OperationResult::new(READ, ResultCode::Ok, reason).with_detail(json!({
            "path": t.path,
            "content": content,
            "first_line": first,
            "lines": returned,
            "total_lines": total,
            "truncated": truncated,
        }))
    }

    /// The old file for a write: none, or a regular file with one link and within the cap.
    fn existing(
        &self,
        tool: &str,
        t: &Target,
        dir: &std::os::fd::OwnedFd,
    ) -> Result<Option<io::Existing>, OperationResult> {
        match io::links(dir, &t.name).map_err(|r| self.io_refusal(tool, t, r))? {
            None => Ok(None),
            Some(n) if n > 1 => Err(self.io_refusal(tool, t, io::IoRefusal::HardLinked(n))),
            Some(_) => io::read(dir, &t.name, self.settings().max_file_bytes)
                .map(Some)
                .map_err(|r| self.io_refusal(tool, t, r)),
        }
    }

    /// Refuses content that holds a redaction marker: written as is, it would wipe the
    /// secret it stands for.
    fn no_marker(&self, tool: &str, what: &str, text: &str) -> Result<(), OperationResult> {
        if text.contains("[REDACTED:") {
            return Err(refuse(
                tool,
                ResultCode::PolicyDenied,
                format!(
                    "{what} holds a redaction marker ([REDACTED:…]), which stands for a secret you were not shown; edit around it (old_text that leaves the masked part out)"
                ),
            ));
        }
        Ok(())
    }

    /// `write_file`, judged and ready to commit (parents made inside the root).
    pub fn prepare_write(
        &self,
        given: &str,
        content: String,
        create_only: bool,
    ) -> Result<Prepared, OperationResult> {
        self.allowed(WRITE)?;
        let t = self.resolve(WRITE, given, true)?;
        self.no_marker(WRITE, "the content", &content)?;
        let max = self.settings().max_file_bytes;
        if content.len() as u64 > max {
            return Err(self.io_refusal(WRITE, &t, io::IoRefusal::TooBig(content.len() as u64)));
        }
        let dir = self.open_dir(WRITE, &t, true)?;
        let old = self.existing(WRITE, &t, &dir)?;
        if create_only && old.is_some() {
            return Err(self.io_refusal(WRITE, &t, io::IoRefusal::Exists));
        }
        if let Some(o) = &old {
            let text = String::from_utf8_lossy(&o.bytes);
            if self.redactor.redact(&text) != text {
                return Err(refuse(
                    WRITE,
                    ResultCode::PolicyDenied,
                    format!(
                        "{} holds what the redactor masks (a secret you were not shown), so write_file will not replace it; change it with edit_file around the masked parts, or ask the operator",
                        t.path.display()
                    ),
                ));
            }
        }
        let summary = old
            .as_ref()
            .map(|o| diff_counts(&String::from_utf8_lossy(&o.bytes), &content));
        let reason = match (&old, &summary) {
            (Some(_), Some((added, removed))) => format!(
                "replaced {} ({} bytes; +{added} -{removed} lines)",
                t.path.display(),
                content.len()
            ),
            _ => format!("created {} ({} bytes)", t.path.display(), content.len()),
        };
        let record = json!({
            "path": t.path,
            "bytes": content.len(),
            "sha256_before": old.as_ref().map(|o| sha256(&o.bytes)),
        });
        let result = OperationResult::new(WRITE, ResultCode::Ok, reason).with_detail(json!({
            "path": t.path,
            "bytes_written": content.len(),
            "created": old.is_none(),
            "lines_added": summary.map(|s| s.0),
            "lines_removed": summary.map(|s| s.1),
        }));
        Ok(Prepared {
            target: t,
            content,
            old,
            create_only,
            result,
            record,
        })
    }

    /// `edit_file`: every edit in order, all or nothing; the unified diff (redacted). With
    /// `dry_run` the result is final and nothing is written (`Ok(Err(result))`).
    pub fn prepare_edit(
        &self,
        given: &str,
        edits: &[Edit],
        dry_run: bool,
    ) -> Result<Result<Prepared, OperationResult>, OperationResult> {
        self.allowed(if dry_run { READ } else { EDIT })
            .map_err(|mut r| {
                r.action = EDIT.into();
                r
            })?;
        if edits.is_empty() {
            return Err(refuse(
                EDIT,
                ResultCode::InvalidRequest,
                "edits is empty: give at least one {old_text, new_text}",
            ));
        }
        let t = self.resolve(EDIT, given, true)?;
        let dir = self.open_dir(EDIT, &t, false)?;
        let old = self
            .existing(EDIT, &t, &dir)?
            .ok_or_else(|| self.io_refusal(EDIT, &t, io::IoRefusal::Missing))?;
        let before = String::from_utf8(old.bytes.clone()).map_err(|_| {
            refuse(
                EDIT,
                ResultCode::PolicyDenied,
                format!(
                    "{} is not UTF-8 text; edit_file changes text files",
                    t.path.display()
                ),
            )
        })?;
        let mut text = before.clone();
        for (i, e) in edits.iter().enumerate() {
            let n = i + 1;
            if e.old_text.is_empty() {
                return Err(refuse(
                    EDIT,
                    ResultCode::InvalidRequest,
                    format!("edit {n}: old_text is empty; to write a whole file use write_file"),
                ));
            }
            self.no_marker(EDIT, &format!("edit {n}'s old_text"), &e.old_text)?;
            self.no_marker(EDIT, &format!("edit {n}'s new_text"), &e.new_text)?;
            let count = text.matches(e.old_text.as_str()).count();
            match (count, e.replace_all) {
                (0, _) => {
                    return Err(refuse(
                        EDIT,
                        ResultCode::Conflict,
                        format!(
                            "edit {n}: old_text does not occur in {} (after the edits before it); nothing was changed. The nearest lines: {}",
                            t.path.display(),
                            self.nearest(&text, &e.old_text)
                        ),
                    ));
                }
                (1, _) | (_, true) => text = text.replace(e.old_text.as_str(), &e.new_text),
                (c, false) => {
                    return Err(refuse(
                        EDIT,
                        ResultCode::Conflict,
                        format!(
                            "edit {n}: old_text occurs {c} times in {}; add lines around it to make it unique, or set replace_all; nothing was changed",
                            t.path.display()
                        ),
                    ));
                }
            }
        }
        if text.len() as u64 > self.settings().max_file_bytes {
            return Err(self.io_refusal(EDIT, &t, io::IoRefusal::TooBig(text.len() as u64)));
        }
        let shown = t.path.display().to_string();
        let diff = similar::TextDiff::from_lines(&before, &text)
            .unified_diff()
            .context_radius(3)
            .header(&shown, &shown)
            .to_string();
        let diff = self.redactor.redact(&diff);
        let (added, removed) = diff_counts(&before, &text);
        let detail = json!({"path": t.path, "diff": diff, "lines_added": added, "lines_removed": removed, "dry_run": dry_run});
        if dry_run {
            return Ok(Err(OperationResult::new(EDIT, ResultCode::Ok, format!("would change {shown} (+{added} -{removed} lines); nothing was written (dry_run)")).with_detail(detail)));
        }
        let record = json!({"path": t.path, "bytes": text.len(), "sha256_before": sha256(&old.bytes), "edits": edits.len()});
        let result = OperationResult::new(
            EDIT,
            ResultCode::Ok,
            format!("changed {shown} (+{added} -{removed} lines)"),
        )
        .with_detail(detail);
        Ok(Ok(Prepared {
            target: t,
            content: text,
            old: Some(old),
            create_only: false,
            result,
            record,
        }))
    }

    /// Up to three lines of `text` most like the first line of `wanted`, numbered, redacted.
    fn nearest(&self, text: &str, wanted: &str) -> String {
        let first = wanted
            .lines()
            .find(|l| !l.trim().is_empty())
            .unwrap_or(wanted)
            .trim();
        let lines: Vec<&str> = text.lines().collect();
        let best = lines
            .iter()
            .enumerate()
            .map(|(i, l)| (i, similar::TextDiff::from_chars(l.trim(), first).ratio()))
            .max_by(|a, b| a.1.total_cmp(&b.1));
        match best {
            Some((i, _)) => {
                let from = i.saturating_sub(1);
                let shown: Vec<String> = lines[from..(i + 2).min(lines.len())]
                    .iter()
                    .enumerate()
                    .map(|(k, l)| format!("{}: {}", from + k + 1, l))
                    .collect();
                self.redactor.redact(&shown.join(" | "))
            }
            None => "(the file is empty)".into(),
        }
    }
}

impl Prepared {
    /// Performs the write (after its attempt record is durable). The result, with the new
    /// content's SHA-256 for the outcome record.
    pub fn commit(self) -> (OperationResult, Value) {
        let Prepared {
            target,
            content,
            old,
            create_only,
            result,
            ..
        } = self;
        let tool = result.action.clone();
        let done = io::open_root(&target.root)
            .and_then(|root| io::open_dir(&root, &target.dir, true))
            .and_then(|dir| {
                io::write_atomic(
                    &dir,
                    &target.name,
                    content.as_bytes(),
                    old.as_ref(),
                    create_only || old.is_none(),
                )
            });
        match done {
            Ok(()) => {
                // The outcome record: the new content's hash and size, and the diff's.
                let file = json!({
                    "sha256_after": sha256(content.as_bytes()),
                    "bytes": content.len(),
                    "lines_added": result.detail.get("lines_added"),
                    "lines_removed": result.detail.get("lines_removed"),
                });
                (result, file)
            }
            Err(r) => (commit_refusal(&tool, &target.path, r), Value::Null),
        }
    }
}

/// The refusal of a commit that failed at the file system.
fn commit_refusal(tool: &str, path: &Path, r: io::IoRefusal) -> OperationResult {
    let shown = path.display();
    let why = match r {
        io::IoRefusal::Exists => {
            return refuse(
                tool,
                ResultCode::Conflict,
                format!(
                    "{shown} appeared while it was written; nothing was replaced. Read it, then write again"
                ),
            );
        }
        io::IoRefusal::Symlink => "a symlink took its place".to_owned(),
        io::IoRefusal::Failed(why) => why,
        other => format!("{other:?}"),
    };
    refuse(
        tool,
        ResultCode::OperationFailed,
        format!("{shown} could not be written ({why}); the old file, if any, is unchanged"),
    )
}

/// The text block of a `read_file` that returned lines: the verdict, then each line
/// numbered as `cat -n` does (`structuredContent` keeps the envelope). `None` for any other
/// result, whose text block stays the envelope.
pub fn numbered_text(result: &OperationResult) -> Option<String> {
    if result.action != READ || result.code != ResultCode::Ok {
        return None;
    }
    let content = result.detail.get("content")?.as_str()?;
    let first = result.detail.get("first_line")?.as_u64()?;
    let path = result.detail.get("path")?.as_str().unwrap_or_default();
    let mut text = format!("OK: {} ({path})\n", result.reason);
    for (i, line) in content.split_inclusive('\n').enumerate() {
        text.push_str(&format!("{:>6}\t{line}", first + i as u64));
    }
    if !text.ends_with('\n') {
        text.push('\n');
    }
    Some(text)
}

/// Lines added and removed from `old` to `new`.
fn diff_counts(old: &str, new: &str) -> (usize, usize) {
    let diff = similar::TextDiff::from_lines(old, new);
    let mut added = 0;
    let mut removed = 0;
    for change in diff.iter_all_changes() {
        match change.tag() {
            similar::ChangeTag::Insert => added += 1,
            similar::ChangeTag::Delete => removed += 1,
            similar::ChangeTag::Equal => {}
        }
    }
    (added, removed)
}

/// How a file write may be approved: through the client (`approver`), or with a ticket
/// bound to the MCP `session` that asked.
#[derive(Clone, Copy)]
pub struct FileAsking<'a> {
    /// Asks a person through the client; `None`: this transport cannot.
    pub approver: Option<&'a crate::approval::AskPerson>,
    /// The MCP session (connection) that asked.
    pub session: &'a str,
    /// A ticket a person approved for this exact write.
    pub ticket: Option<&'a str>,
}
