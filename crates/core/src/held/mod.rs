//! Nothing the model writes runs as the operator: git's whole trust surface, held.
//!
//! The jail is writable, and git, run later by the operator, unconfined, finds what to run
//! through its own discovery: a `.git` directory or pointer at any depth, a bare repository,
//! `commondir`, absorbed submodules (`<gitdir>/modules/**`), linked worktrees
//! (`<gitdir>/worktrees/*`), the hooks and configuration of each, paths its configuration
//! names, and an operation left in progress. A list of paths is the wrong shape for that,
//! so this module holds the class: **every git directory in the jail** (`find.rs`), in one of
//! two ways.
//!
//! - **The operator's** (present when the server first saw the jail, or made while no
//!   server ran: `State` remembers which): the files through which git finds
//!   configuration or programs (`config`, `config.worktree`, `commondir`, `hooks/`, `info/`;
//!   a worktree entry's `commondir`, `gitdir`, `config.worktree`; every `.git` pointer; every
//!   path its configuration or the server user's global configuration names inside the
//!   jail, such as `core.hooksPath`) are bound read-only over themselves in each command's
//!   private view; a missing directory is made empty (and removed at exit), a missing file is
//!   watched.
//! - **The model's** (any other): the model uses it inside the sandbox, and at every sweep
//!   it loses what would make git run something (`neutral.rs`).
//!
//! The sweep runs before a call when process sessions are live, after every call, when a
//! session ends, at exit and at start. What it removes goes to the server's own place
//! outside the jail (`area.rs`), under names the model cannot pre-empt; if anything cannot be
//! moved, the holder is *breached* and every later call is refused with the reason until a
//! sweep succeeds. Each change is an audit record.

mod area;
mod find;
pub mod gitconfig;
mod neutral;
mod watch;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

pub use area::{AreaError, State};
pub use neutral::Change;

use crate::protected::{Plan, ProtectedPaths};

/// What git reads configuration or programs from beneath a git directory, by the name of
/// its `.git/<name>` protected-paths entry (the operator may remove one, a named choice).
const TRUST: &[&str] = &["config", "config.worktree", "commondir", "hooks", "info"];

/// The same beneath a linked worktree's entry (`<gitdir>/worktrees/<name>`).
const WORKTREE_TRUST: &[&str] = &["commondir", "gitdir", "config.worktree"];

/// The server's place outside the jail for the trail at `audit_log`: `<audit_log>.held/`.
pub fn area_for(audit_log: &Path) -> PathBuf {
    let mut name = audit_log.file_name().unwrap_or_default().to_os_string();
    name.push(".held");
    audit_log.with_file_name(name)
}

/// The holder of one jail's git trust surface.
#[derive(Debug)]
pub struct Holder {
    jail: PathBuf,
    write_paths: Vec<PathBuf>,
    area: area::Area,
    plan: Plan,
    adopted: BTreeSet<PathBuf>,
    watch: watch::Watch,
    /// This run's claim on the place ([`area::Area::claim`]); `None` when another running
    /// server on the same trail holds it: that one keeps the state and makes and removes
    /// what holds the paths, this one only sweeps.
    claim: Option<std::fs::File>,
    inner: Mutex<Inner>,
}

#[derive(Debug)]
struct Inner {
    state: State,
    breach: Option<String>,
    /// A sweep has walked the jail and finished, and the watches cover what it walked.
    swept: bool,
}

/// What one sweep did.
#[derive(Debug, Default)]
pub struct Swept {
    /// Each change.
    pub changes: Vec<Change>,
    /// Why it could not finish, when it could not.
    pub breach: Option<String>,
}

impl Holder {
    /// Starts holding `jail`: reads what the server saw before from `area_dir`, removes
    /// what a killed run left, finds every git directory, and plans how each is held.
    /// `paths` are the protected paths (the `.git/…` entries in force name the trust files
    /// of every git directory); `write_paths`, where commands write outside the jail.
    /// Returns lines for the server's log.
    pub fn start(
        jail: &Path,
        paths: &ProtectedPaths,
        write_paths: &[PathBuf],
        area_dir: PathBuf,
    ) -> Result<(Holder, Vec<String>), String> {
        let area = area::Area::at(area_dir);
        let mut notes = Vec::new();
        let claim = area.claim();
        if claim.is_none() {
            notes.push(format!("warning: another running server keeps {} (one trail, two servers): this one sweeps but keeps no state of its own", area.dir().display()));
        }
        let prior = area.load().filter(|s| s.jail == jail);
        if let Some(prior) = prior.as_ref().filter(|s| !s.clean && claim.is_some()) {
            notes.push("the last run did not end cleanly: what it made is removed, and git directories that appeared since are treated as the model's".into());
            unmake(prior);
        }
        let found = find::walk(jail, &|_| {});
        let seen: BTreeSet<PathBuf> = found
            .git_dirs
            .iter()
            .chain(&found.pointers)
            .cloned()
            .collect();
        let adopted: BTreeSet<PathBuf> = match &prior {
            None => seen,
            Some(p) if p.clean => seen
                .into_iter()
                .filter(|g| !p.model_made.contains(g))
                .collect(),
            Some(p) => p
                .adopted
                .iter()
                .filter(|g| seen.contains(*g))
                .cloned()
                .collect(),
        };
        let mut plan = crate::protected::plan(jail, paths, true)?;
        let names: Vec<&str> = TRUST
            .iter()
            .copied()
            .filter(|n| paths.entries.iter().any(|e| e.path == format!(".git/{n}")))
            .collect();
        for g in &adopted {
            if found.pointers.contains(g) {
                hold(&mut plan, g, false)?;
                continue;
            }
            let worktree = g
                .parent()
                .is_some_and(|p| p.file_name().is_some_and(|n| n == "worktrees"));
            for name in if worktree { WORKTREE_TRUST } else { &names } {
                hold(&mut plan, &g.join(name), matches!(*name, "hooks" | "info"))?;
            }
        }
        for path in named_by_config(jail, write_paths, &adopted, &found.git_dirs) {
            let exists = std::fs::symlink_metadata(&path).is_ok();
            if exists {
                plan.read_only.push(path);
            } else {
                plan.watched.push(path);
            }
        }
        let roots: Vec<&Path> = std::iter::once(jail)
            .chain(write_paths.iter().map(PathBuf::as_path))
            .collect();
        crate::protected::pin(&mut plan, &roots);
        let mut state = prior.unwrap_or_default();
        state.jail = jail.to_path_buf();
        state.adopted = adopted.iter().cloned().collect();
        state.made = plan.made.iter().filter(|p| p.exists()).cloned().collect();
        state.excluded = plan.excluded.clone();
        state.clean = false;
        if claim.is_none() {
            // The other server's state stands.
        } else if let Err(e) = area.save(&state) {
            // The sweep still holds this run; what is lost is the memory of which git
            // directories are the operator's, for the next start.
            notes.push(format!("warning: what the server saw of the jail could not be kept ({e}); the next start cannot tell the operator's git directories from the model's"));
        }
        let holder = Holder {
            jail: jail.to_path_buf(),
            write_paths: write_paths
                .iter()
                .filter(|w| !w.starts_with(jail))
                .cloned()
                .collect(),
            area,
            plan,
            adopted,
            watch: watch::Watch::new(),
            claim,
            inner: Mutex::new(Inner {
                state,
                breach: None,
                swept: false,
            }),
        };
        Ok((holder, notes))
    }

    /// How the trust surface is held in the private view.
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// Why calls are refused now, when a sweep could not finish.
    pub fn refusal(&self) -> Option<String> {
        self.inner.lock().ok().and_then(|i| i.breach.clone())
    }

    /// Sweeps the jail: watched paths that appeared leave it, model-made git directories
    /// and pointers are neutralized, operations in progress lose what they would run.
    pub fn sweep(&self) -> Swept {
        let Ok(mut inner) = self.inner.lock() else {
            return Swept {
                changes: Vec::new(),
                breach: Some("the holder's lock was poisoned".into()),
            };
        };
        // Nothing changed since a sweep that finished: nothing to walk. The queue is emptied
        // before the walk, so what the walk misses is an event for the next sweep.
        let changed = self.watch.changed();
        if inner.swept && inner.breach.is_none() && !changed {
            return Swept::default();
        }
        let mut changes = Vec::new();
        let result = self.sweep_into(&mut inner.state, &mut changes);
        inner.swept = result.is_ok();
        let breach = result.err().map(|e| {
            format!(
                "{e}: it could have made git run what the model wrote as you, and could not be moved out of the jail; remove it by hand (or free {}), then call again",
                self.area.dir().display()
            )
        });
        inner.breach = breach.clone();
        Swept { changes, breach }
    }

    fn sweep_into(&self, state: &mut State, changes: &mut Vec<Change>) -> Result<(), AreaError> {
        let jail = &self.jail;
        for path in &self.plan.watched {
            if std::fs::symlink_metadata(path).is_ok() {
                let to = self.area.quarantine(jail, path)?;
                changes.push(Change::Quarantined {
                    path: path.clone(),
                    to,
                });
            }
        }
        let found = find::walk(jail, &|dir| self.watch.add(dir));
        let mut new = false;
        for g in &found.git_dirs {
            if !self.adopted.contains(g) {
                if !state.model_made.contains(g) {
                    state.model_made.push(g.clone());
                    new = true;
                }
                changes.extend(neutral::model_made(
                    &self.area,
                    jail,
                    g,
                    &found.git_dirs,
                    &self.write_paths,
                )?);
            }
            changes.extend(neutral::in_progress(&self.area, jail, g)?);
        }
        for p in found.pointers.iter().filter(|p| !self.adopted.contains(*p)) {
            changes.extend(neutral::pointer(&self.area, jail, p, &found.git_dirs)?);
        }
        if new && self.claim.is_some() {
            self.area.save(state)?;
        }
        Ok(())
    }

    /// At exit: a last sweep, then what the server made is removed; the run is marked
    /// clean when the sweep finished.
    pub fn release(&self) -> Swept {
        let swept = self.sweep();
        if self.claim.is_none() {
            return swept; // the server that keeps the place removes what it made
        }
        if let Ok(mut inner) = self.inner.lock() {
            unmake(&inner.state);
            inner.state.made.clear();
            inner.state.excluded.clear();
            inner.state.clean = swept.breach.is_none();
            let _ = self.area.save(&inner.state);
        }
        swept
    }
}

/// Holds `path` read-only when it exists; missing, it is made and held when it names a
/// directory (`dir`), else watched.
fn hold(plan: &mut Plan, path: &Path, dir: bool) -> Result<(), String> {
    match std::fs::symlink_metadata(path) {
        // A bind would follow it (holding its target, or failing): the operator replaces it.
        Ok(m) if m.file_type().is_symlink() => Err(format!(
            "{} is a symlink; replace it with what it points at, or remove it, and start again",
            path.display()
        )),
        Ok(_) => {
            plan.read_only.push(path.to_path_buf());
            Ok(())
        }
        Err(_) if dir => {
            std::fs::create_dir(path)
                .map_err(|e| format!("cannot make {}: {e}", path.display()))?;
            plan.made.push(path.to_path_buf());
            plan.read_only.push(path.to_path_buf());
            Ok(())
        }
        Err(_) => {
            plan.watched.push(path.to_path_buf());
            Ok(())
        }
    }
}

/// Removes what a run made (an empty directory, an unchanged placeholder) and the exclude
/// lines it added.
fn unmake(state: &State) {
    for path in state.made.iter().rev() {
        match std::fs::symlink_metadata(path) {
            Ok(m) if m.is_dir() => {
                let _ = std::fs::remove_dir(path); // only when still empty
            }
            Ok(m) if m.is_file() => {
                let unchanged = crate::untrusted::read_small_file(path, 4096)
                    .ok()
                    .flatten()
                    .is_some_and(|t| {
                        crate::protected::DEFAULT.iter().any(
                            |(_, k)| matches!(k, crate::protected::Kind::Placeholder(b) if *b == t),
                        )
                    });
                if unchanged {
                    let _ = std::fs::remove_file(path);
                }
            }
            _ => {}
        }
    }
    for (file, line) in &state.excluded {
        crate::protected::unexclude(file, line);
    }
}

/// The paths inside the jail or a write path that the adopted git directories'
/// configuration, or the server user's global configuration, names (`core.hooksPath`,
/// `include.path`, a helper given as a path): git would read or run them as the operator.
fn named_by_config(
    jail: &Path,
    write_paths: &[PathBuf],
    adopted: &BTreeSet<PathBuf>,
    git_dirs: &BTreeSet<PathBuf>,
) -> Vec<PathBuf> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let mut sources: Vec<(PathBuf, Vec<PathBuf>)> = Vec::new();
    for g in adopted.iter().filter(|g| git_dirs.contains(*g)) {
        let worktree = g.parent().map(Path::to_path_buf).into_iter();
        sources.push((g.join("config"), worktree.chain([g.clone()]).collect()));
    }
    let mut globals = vec![PathBuf::from("/etc/gitconfig")];
    if let Some(h) = &home {
        globals.push(h.join(".gitconfig"));
        globals.push(h.join(".config/git/config"));
    }
    let roots: Vec<PathBuf> = adopted
        .iter()
        .filter_map(|g| g.parent().map(Path::to_path_buf))
        .collect();
    for g in globals {
        sources.push((g, roots.clone()));
    }
    let mut out = BTreeSet::new();
    for (file, bases) in sources {
        let Ok(Some(text)) = crate::untrusted::read_small_file(&file, 1 << 20) else {
            continue;
        };
        let config_dir = file.parent().map(Path::to_path_buf).unwrap_or_default();
        for word in gitconfig::path_values(&text) {
            let candidates: Vec<PathBuf> = if let Some(rest) = word.strip_prefix("~/") {
                home.iter().map(|h| h.join(rest)).collect()
            } else if word.starts_with('/') {
                vec![PathBuf::from(&word)]
            } else {
                bases
                    .iter()
                    .chain([&config_dir])
                    .map(|b| b.join(&word))
                    .collect()
            };
            for c in candidates {
                let c = crate::paths::lexical_normalize(&c);
                // Strictly inside the jail or a write path (where commands write), and never
                // a directory that holds a git directory (binding it read-only would stop
                // git itself).
                let writable = std::iter::once(jail)
                    .chain(write_paths.iter().map(PathBuf::as_path))
                    .any(|w| c.starts_with(w) && c != w);
                if writable && !git_dirs.iter().any(|g| g.starts_with(&c)) {
                    out.insert(c);
                }
            }
        }
    }
    out.into_iter().collect()
}
