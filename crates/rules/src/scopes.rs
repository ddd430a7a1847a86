//! Approval scopes (issue 53): what one yes of a person may cover beyond the call it
//! answered, and the preview that shows it before the yes.
//!
//! A person approving `git push origin main` for the tenth time stops reading; a broad
//! approval ("allow git from now on") runs what nobody saw. So a scope is narrow by
//! construction: the same tool, the same program (its resolved path), the same number of
//! words, each word the same except those the person marked free, the cwd beneath the one
//! approved. A free word varies only over plain names ([`is_plain_name`]: letters, digits,
//! `.`, `_`, `/`, `-`, never starting with `-`, `.` or `/`, no `..`), so an option (`--force`),
//! a force refspec (`+main`) or a path out of the tree never slips into it. The first word
//! after the program (a subcommand) is never free. A file write's scope is a glob over
//! paths: the file itself, or files of its directory with its extension.
//!
//! A scope is only asked after the policy allowed the call (`deny_args`, the jail and every
//! other check come first), so it can only spare a question, never loosen a refusal. The
//! preview's examples are classified by [`Shape::covers`] itself, so what the person reads
//! is what the scope does.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// How long a yes lasts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ScopeKind {
    /// This call only (the default).
    Once,
    /// Calls of the same shape in this MCP session (over stateless HTTP: of this caller),
    /// until it ends or the scope expires.
    Session,
    /// Calls of the same shape by this caller, kept in the approvals file beside the
    /// policy, until revoked or expired.
    Rule,
}

impl ScopeKind {
    /// Every kind, in the order a form offers them.
    pub const ALL: [ScopeKind; 3] = [ScopeKind::Once, ScopeKind::Session, ScopeKind::Rule];

    /// The spelling in forms, pages, the CLI and the trail.
    pub fn as_str(self) -> &'static str {
        match self {
            ScopeKind::Once => "once",
            ScopeKind::Session => "session",
            ScopeKind::Rule => "rule",
        }
    }

    /// The kind spelled `s`, if it is one.
    pub fn parse(s: &str) -> Option<ScopeKind> {
        ScopeKind::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

/// One word of a command's shape.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Word {
    /// Exactly this word.
    Exact(String),
    /// Any plain name ([`is_plain_name`]).
    Free,
}

/// What a scope covers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase", tag = "kind")]
pub enum Shape {
    /// A command of one program.
    Command {
        /// `run_command` or `start_process`.
        tool: String,
        /// The program as resolved.
        program: PathBuf,
        /// Every word after the program.
        words: Vec<Word>,
        /// The cwd the call ran in; a covered call runs there or beneath.
        cwd: PathBuf,
    },
    /// A file tool's write.
    Write {
        /// `write_file` or `edit_file`.
        tool: String,
        /// The directory the path is in.
        dir: PathBuf,
        /// The file's name, or `None` for any name with `extension`.
        name: Option<String>,
        /// With `name = None`: the extension every covered name has (`None`: no extension).
        extension: Option<String>,
    },
}

/// A call as a scope judges it.
#[derive(Debug, Clone, Copy)]
pub enum Call<'a> {
    /// A command: its tool, each stage's resolved program and argv (program first), and the
    /// canonical cwd.
    Command {
        tool: &'a str,
        stages: &'a [(PathBuf, Vec<String>)],
        cwd: &'a Path,
    },
    /// A write: its tool and the path it writes (as resolved in the jail).
    Write { tool: &'a str, path: &'a Path },
}

/// Whether `word` may stand in a free place: a plain name, never an option, a force
/// refspec, an absolute path or a way up.
pub fn is_plain_name(word: &str) -> bool {
    let first_ok = word
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
    first_ok
        && word.len() <= 200
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '/' | '-'))
        && !word.split('/').any(|part| part == "..")
        && !word.ends_with('/')
}

/// Why a shape could not be made from a call and the person's choice.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShapeError {
    /// Only a command of one program, or one write, has a scope.
    #[error(
        "a scope covers one program's command: this call runs {0} programs, so it is approved once"
    )]
    NotOneProgram(usize),
    /// A place that may not be free.
    #[error(
        "word {0} cannot be free: only a plain name after the subcommand can vary (the places offered are {1})"
    )]
    NotFreeable(usize, String),
    /// A write's path with no file name.
    #[error("the path has no file name")]
    NoName,
}

impl Shape {
    /// The places of `call`'s words that a person may mark free (1-based, the program being
    /// 0): plain names after the first word. None for a write: its glob is chosen instead.
    pub fn freeable(call: &Call<'_>) -> Vec<usize> {
        match call {
            Call::Command { stages, .. } if stages.len() == 1 => stages[0]
                .1
                .iter()
                .enumerate()
                .skip(2)
                .filter(|(_, w)| is_plain_name(w))
                .map(|(i, _)| i)
                .collect(),
            _ => Vec::new(),
        }
    }

    /// The shape of `call` with the words at `free` (1-based places) free; for a write,
    /// `free` non-empty means any file of its directory with its extension.
    pub fn of(call: &Call<'_>, free: &[usize]) -> Result<Shape, ShapeError> {
        match *call {
            Call::Command { tool, stages, cwd } => {
                let [(program, argv)] = stages else {
                    return Err(ShapeError::NotOneProgram(stages.len()));
                };
                let offered = Shape::freeable(call);
                if let Some(bad) = free.iter().find(|i| !offered.contains(i)) {
                    let list = offered
                        .iter()
                        .map(usize::to_string)
                        .collect::<Vec<_>>()
                        .join(", ");
                    let list = if list.is_empty() { "none".into() } else { list };
                    return Err(ShapeError::NotFreeable(*bad, list));
                }
                let words = argv
                    .iter()
                    .enumerate()
                    .skip(1)
                    .map(|(i, w)| {
                        if free.contains(&i) {
                            Word::Free
                        } else {
                            Word::Exact(w.clone())
                        }
                    })
                    .collect();
                Ok(Shape::Command {
                    tool: tool.to_owned(),
                    program: program.clone(),
                    words,
                    cwd: cwd.to_path_buf(),
                })
            }
            Call::Write { tool, path } => {
                let name = path
                    .file_name()
                    .and_then(|n| n.to_str())
                    .ok_or(ShapeError::NoName)?;
                let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
                let extension = path.extension().and_then(|e| e.to_str()).map(str::to_owned);
                Ok(Shape::Write {
                    tool: tool.to_owned(),
                    dir,
                    name: free.is_empty().then(|| name.to_owned()),
                    extension: if free.is_empty() { None } else { extension },
                })
            }
        }
    }

    /// Whether this shape covers `call`.
    pub fn covers(&self, call: &Call<'_>) -> bool {
        match (self, call) {
            (
                Shape::Command {
                    tool,
                    program,
                    words,
                    cwd,
                },
                Call::Command {
                    tool: t,
                    stages,
                    cwd: c,
                },
            ) => {
                let [(p, argv)] = stages else {
                    return false;
                };
                tool == t
                    && program == p
                    && argv.len() == words.len() + 1
                    && c.starts_with(cwd)
                    && words.iter().zip(&argv[1..]).all(|(w, a)| match w {
                        Word::Exact(e) => e == a,
                        Word::Free => is_plain_name(a),
                    })
            }
            (
                Shape::Write {
                    tool,
                    dir,
                    name,
                    extension,
                },
                Call::Write { tool: t, path },
            ) => {
                let in_dir = path.parent() == Some(dir.as_path());
                let file = path.file_name().and_then(|n| n.to_str());
                let fits = match (name, file) {
                    (Some(n), Some(f)) => n == f,
                    (None, Some(f)) => {
                        let ext = Path::new(f).extension().and_then(|e| e.to_str());
                        ext == extension.as_deref() && is_plain_name(f)
                    }
                    (_, None) => false,
                };
                tool == t && in_dir && fits
            }
            _ => false,
        }
    }

    /// The shape in a line, as the person and the model read it: `git push origin <any
    /// name>` in `proj` or beneath; `write_file` of `docs/*.md`.
    pub fn describe(&self, jail: &Path) -> String {
        match self {
            Shape::Command {
                tool,
                program,
                words,
                cwd,
            } => {
                let name = program.file_name().map_or_else(
                    || program.display().to_string(),
                    |n| n.to_string_lossy().into_owned(),
                );
                let line: Vec<String> = std::iter::once(name)
                    .chain(words.iter().map(|w| match w {
                        Word::Exact(e) => render_word(e),
                        Word::Free => "<any name>".to_owned(),
                    }))
                    .collect();
                format!(
                    "{tool} `{}` in {} or beneath",
                    line.join(" "),
                    shown_dir(cwd, jail)
                )
            }
            Shape::Write {
                tool,
                dir,
                name,
                extension,
            } => {
                let file = match (name, extension) {
                    (Some(n), _) => n.clone(),
                    (None, Some(e)) => format!("*.{e}"),
                    (None, None) => "* (no extension)".to_owned(),
                };
                format!("{tool} of {}/{file}", shown_dir(dir, jail))
            }
        }
    }
}

/// A word as a person reads it on one line: in single quotes with control characters
/// escaped, where it is not a plain word.
fn render_word(w: &str) -> String {
    if !w.is_empty()
        && w.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./=:,@+%".contains(&b))
    {
        w.to_owned()
    } else {
        let escaped: String = w
            .chars()
            .map(|c| {
                if c.is_control() {
                    format!("\\u{{{:x}}}", c as u32)
                } else {
                    c.to_string()
                }
            })
            .collect();
        format!("'{}'", escaped.replace('\'', r"'\''"))
    }
}

/// `dir` relative to the jail (`.` for the jail itself), else whole.
fn shown_dir(dir: &Path, jail: &Path) -> String {
    match dir.strip_prefix(jail) {
        Ok(rel) if rel.as_os_str().is_empty() => ".".to_owned(),
        Ok(rel) => rel.display().to_string(),
        Err(_) => dir.display().to_string(),
    }
}

/// One example of the preview: a call and what it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Example {
    /// The call in a line.
    pub text: String,
    /// Whether the scope covers it (decided by [`Shape::covers`]).
    pub covered: bool,
}

/// What the person reads before the yes: each choice in plain words, with examples it
/// would and would not cover.
#[derive(Debug, Clone, Serialize)]
pub struct Preview {
    /// The exact shape (nothing free), in a line.
    pub exact: String,
    /// Examples for the exact shape.
    pub exact_examples: Vec<Example>,
    /// Per place that may be marked free: the place, its word, the shape with it free, and
    /// examples.
    pub free: Vec<FreePlace>,
    /// A sentence per kind: what `once`, `session` and `rule` mean here.
    pub kinds: Vec<(ScopeKind, String)>,
}

/// One place the person may mark free, as the preview shows it.
#[derive(Debug, Clone, Serialize)]
pub struct FreePlace {
    /// 1-based place (the program is 0).
    pub place: usize,
    /// The word there now.
    pub word: String,
    /// The shape with this place free, in a line.
    pub shape: String,
    /// Examples for that shape.
    pub examples: Vec<Example>,
}

/// What a session and a rule last, for the preview's words.
#[derive(Debug, Clone, Copy)]
pub struct Lifetimes {
    /// A session scope's most, in seconds.
    pub session_seconds: u64,
    /// A rule's most, in seconds.
    pub rule_seconds: u64,
}

/// A duration in words: `8 h`, `30 days`, `15 min`.
pub fn in_words(seconds: u64) -> String {
    match seconds {
        s if s >= 86_400 && s % 86_400 == 0 => format!("{} days", s / 86_400),
        s if s >= 3_600 && s % 3_600 == 0 => format!("{} h", s / 3_600),
        s if s >= 60 && s % 60 == 0 => format!("{} min", s / 60),
        s => format!("{s} s"),
    }
}

impl Preview {
    /// The preview for `call`, whose place `free` and write globs are offered. `jail`
    /// shortens the directories shown.
    pub fn of(call: &Call<'_>, jail: &Path, life: Lifetimes) -> Result<Preview, ShapeError> {
        let exact = Shape::of(call, &[])?;
        let exact_examples = examples(&exact, call, None, jail);
        let free = match call {
            Call::Command { stages, .. } => Shape::freeable(call)
                .into_iter()
                .filter_map(|place| {
                    let shape = Shape::of(call, &[place]).ok()?;
                    Some(FreePlace {
                        place,
                        word: stages[0].1[place].clone(),
                        shape: shape.describe(jail),
                        examples: examples(&shape, call, Some(place), jail),
                    })
                })
                .collect(),
            Call::Write { path, .. } => Shape::of(call, &[1])
                .ok()
                .filter(|_| path.extension().is_some())
                .map(|shape| FreePlace {
                    place: 1,
                    word: path
                        .file_name()
                        .map(|n| n.to_string_lossy().into_owned())
                        .unwrap_or_default(),
                    shape: shape.describe(jail),
                    examples: examples(&shape, call, Some(1), jail),
                })
                .into_iter()
                .collect(),
        };
        let kinds = vec![
            (
                ScopeKind::Once,
                "once: this call only (the default)".to_owned(),
            ),
            (
                ScopeKind::Session,
                format!(
                    "session: calls of the chosen shape in this MCP session (over stateless HTTP: by this caller), until it ends or {} have passed",
                    in_words(life.session_seconds)
                ),
            ),
            (
                ScopeKind::Rule,
                format!(
                    "rule: calls of the chosen shape by this caller, kept in the approvals file beside the policy, until revoked (safe-mcp approvals revoke) or {} have passed",
                    in_words(life.rule_seconds)
                ),
            ),
        ];
        Ok(Preview {
            exact: exact.describe(jail),
            exact_examples,
            free,
            kinds,
        })
    }

    /// The preview as text, for a form's message, the page and `approvals show`.
    pub fn text(&self) -> String {
        let list = |examples: &[Example], covered: bool| {
            examples
                .iter()
                .filter(|e| e.covered == covered)
                .map(|e| format!("`{}`", e.text))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut out = String::from("How long this yes lasts (choose; once is the default):\n");
        for (_, words) in &self.kinds {
            out.push_str(&format!("  - {words}\n"));
        }
        out.push_str(&format!(
            "The shape, with nothing marked free: {}.\n  covers {}; never {}\n",
            self.exact,
            list(&self.exact_examples, true),
            list(&self.exact_examples, false)
        ));
        for f in &self.free {
            out.push_str(&format!(
                "With place {} (`{}`) marked free: {}.\n  covers {}; never {}\n",
                f.place,
                render_word(&f.word),
                f.shape,
                list(&f.examples, true),
                list(&f.examples, false)
            ));
        }
        out
    }
}

/// Candidate calls near `call`, each classified by `shape` itself: the call, the free
/// place with another name, and what a scope must never take (an option added, an option
/// or a force refspec in the free place, another fixed word, another directory).
fn examples(shape: &Shape, call: &Call<'_>, free: Option<usize>, jail: &Path) -> Vec<Example> {
    match *call {
        Call::Command { tool, stages, cwd } => {
            let Some((program, argv)) = stages.first() else {
                return Vec::new();
            };
            let mut candidates: Vec<(Vec<String>, PathBuf)> =
                vec![(argv.clone(), cwd.to_path_buf())];
            let with = |i: usize, w: &str| {
                let mut a = argv.clone();
                a[i] = w.to_owned();
                a
            };
            if let Some(i) = free {
                let other = if argv[i] == "other" {
                    "another"
                } else {
                    "other"
                };
                candidates.push((with(i, other), cwd.to_path_buf()));
                candidates.push((with(i, "--force"), cwd.to_path_buf()));
                candidates.push((with(i, &format!("+{}", argv[i])), cwd.to_path_buf()));
            }
            let mut longer = argv.clone();
            longer.push("--force".to_owned());
            candidates.push((longer, cwd.to_path_buf()));
            if let Some(j) = (2..argv.len()).find(|j| Some(*j) != free) {
                let other = if argv[j] == "other" {
                    "another"
                } else {
                    "other"
                };
                candidates.push((with(j, other), cwd.to_path_buf()));
            }
            if let Some(parent) = cwd.parent() {
                candidates.push((argv.clone(), parent.to_path_buf()));
            }
            candidates
                .into_iter()
                .map(|(argv, dir)| {
                    let stages = [(program.clone(), argv.clone())];
                    let covered = shape.covers(&Call::Command {
                        tool,
                        stages: &stages,
                        cwd: &dir,
                    });
                    let mut text = argv
                        .iter()
                        .map(|w| render_word(w))
                        .collect::<Vec<_>>()
                        .join(" ");
                    if dir != cwd {
                        text.push_str(&format!(" (in {})", shown_dir(&dir, jail)));
                    }
                    Example { text, covered }
                })
                .collect()
        }
        Call::Write { tool, path } => {
            let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
            let ext = path.extension().and_then(|e| e.to_str());
            let named = |n: &str| dir.join(n);
            let mut candidates = vec![path.to_path_buf()];
            candidates.push(named(&match ext {
                Some(e) => format!("other.{e}"),
                None => "other".to_owned(),
            }));
            candidates.push(named("other.sh"));
            if let (Some(parent), Some(name)) = (dir.parent(), path.file_name()) {
                candidates.push(parent.join(name));
            }
            candidates.push(dir.join("sub").join(path.file_name().unwrap_or_default()));
            candidates
                .into_iter()
                .map(|p| Example {
                    covered: shape.covers(&Call::Write { tool, path: &p }),
                    text: format!("{tool} {}", shown_dir(&p, jail)),
                })
                .collect()
        }
    }
}

#[cfg(test)]
mod tests;
