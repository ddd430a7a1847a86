//! The organizer's write-ahead journal: what was moved, so it can always be undone.
//!
//! Owns durability of actions. Before any rename, a `begin` (or `undo`, `redo`) record naming
//! every move is appended and fsynced; after the renames (and an fsync of the directories
//! they touched), a `commit` (`undone`, `redone`) record follows. The journal lives outside
//! the workspace. On open it is replayed into undo and redo stacks; an action left without its
//! closing record by a crash is reconciled against the filesystem (each file is at its source
//! or its destination, since a rename is atomic) and recorded as what really happened, so undo
//! restores exactly what was done.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::fsroot::Workspace;

/// One move: identity is the inode that was at `src` when it was planned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Move {
    /// Source, relative to the workspace root.
    pub src: String,
    /// Destination, relative to the workspace root.
    pub dst: String,
    /// Device of the file.
    pub dev: u64,
    /// Inode of the file.
    pub ino: u64,
}

/// One undoable action: a single move or an applied plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Action {
    /// Journal-wide id.
    pub id: u64,
    /// The tool that did it.
    pub tool: String,
    /// The moves, in the order they were made.
    pub moves: Vec<Move>,
    /// Folders created for it (removed on undo when empty).
    pub dirs: Vec<String>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "ev", rename_all = "kebab-case")]
enum Event {
    Begin {
        action: Action,
    },
    Commit {
        id: u64,
    },
    Abort {
        id: u64,
    },
    Undo {
        id: u64,
    },
    Undone {
        id: u64,
    },
    Redo {
        id: u64,
    },
    Redone {
        id: u64,
    },
    /// After a crash: what really happened. `state` is `applied` (the moves listed stand at
    /// their destinations), `undone` (every file is back: redoable) or `void` (nothing moved).
    Reconciled {
        action: Action,
        state: String,
    },
}

enum Pending {
    Forward(Action),
    Undo(Action),
    Redo(Action),
}

/// The journal and the stacks it implies.
#[derive(Debug)]
pub struct Journal {
    path: PathBuf,
    file: File,
    undo: Vec<Action>,
    redo: Vec<Action>,
    next_id: u64,
}

impl Journal {
    /// Opens (creating, mode 0600, never through a symlink) and replays the journal,
    /// reconciling an interrupted action. Returns notes for the operator's log.
    pub fn open(path: &Path, ws: &Workspace) -> std::io::Result<(Journal, Vec<String>)> {
        let file = OpenOptions::new()
            .append(true)
            .read(true)
            .create(true)
            .mode(0o600)
            .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
            .open(path)?;
        let mut journal = Journal {
            path: path.to_path_buf(),
            file,
            undo: Vec::new(),
            redo: Vec::new(),
            next_id: 1,
        };
        let mut pending: Option<Pending> = None;
        let mut notes = Vec::new();
        let reader = BufReader::new(File::open(path)?);
        for line in reader.lines() {
            let line = line?;
            let Ok(event) = serde_json::from_str::<Event>(&line) else {
                notes.push(
                    "the journal's last line was torn by a crash; it was never acted on".to_owned(),
                );
                continue;
            };
            journal.apply_event(event, &mut pending);
        }
        if let Some(p) = pending {
            let (action, kind, back_is_undone) = match p {
                Pending::Forward(a) => (a, "an interrupted move", false),
                Pending::Undo(a) => (a, "an interrupted undo", true),
                Pending::Redo(a) => (a, "an interrupted redo", true),
            };
            let id = action.id;
            let at_dst: Vec<Move> = action
                .moves
                .iter()
                .filter(|m| {
                    ws.stat(&m.dst)
                        .ok()
                        .flatten()
                        .is_some_and(|e| e.ino == m.ino && e.dev == m.dev)
                })
                .cloned()
                .collect();
            let (total, done) = (action.moves.len(), at_dst.len());
            if done == 0 {
                // Nothing stands at a destination: the folders made for it are clutter now.
                for d in action.dirs.iter().rev() {
                    ws.rmdir_if_empty(d);
                }
            }
            let event = if done > 0 {
                Event::Reconciled {
                    action: Action {
                        moves: at_dst,
                        ..action
                    },
                    state: "applied".into(),
                }
            } else if back_is_undone {
                Event::Reconciled {
                    action,
                    state: "undone".into(),
                }
            } else {
                Event::Reconciled {
                    action,
                    state: "void".into(),
                }
            };
            notes.push(format!(
                "reconciled {kind} (action {id}): {done} of {total} files stand at their destinations{}",
                if done > 0 { "; undo_last_action restores them" } else { "" }
            ));
            journal.record(&event)?;
            let mut none = None;
            journal.apply_event(event, &mut none);
        }
        Ok((journal, notes))
    }

    fn apply_event(&mut self, event: Event, pending: &mut Option<Pending>) {
        match event {
            Event::Begin { action } => {
                self.next_id = self.next_id.max(action.id + 1);
                *pending = Some(Pending::Forward(action));
            }
            Event::Commit { .. } => {
                if let Some(Pending::Forward(a)) = pending.take() {
                    self.undo.push(a);
                    self.redo.clear();
                }
            }
            Event::Abort { .. } => *pending = None,
            Event::Undo { id } => {
                if let Some(a) = self.undo.iter().rev().find(|a| a.id == id) {
                    *pending = Some(Pending::Undo(a.clone()));
                }
            }
            Event::Undone { id } => {
                *pending = None;
                if let Some(i) = self.undo.iter().rposition(|a| a.id == id) {
                    let a = self.undo.remove(i);
                    self.redo.push(a);
                }
            }
            Event::Redo { id } => {
                if let Some(a) = self.redo.iter().rev().find(|a| a.id == id) {
                    *pending = Some(Pending::Redo(a.clone()));
                }
            }
            Event::Redone { id } => {
                *pending = None;
                if let Some(i) = self.redo.iter().rposition(|a| a.id == id) {
                    let a = self.redo.remove(i);
                    self.undo.push(a);
                }
            }
            Event::Reconciled { action, state } => {
                *pending = None;
                self.undo.retain(|a| a.id != action.id);
                self.redo.retain(|a| a.id != action.id);
                self.next_id = self.next_id.max(action.id + 1);
                match state.as_str() {
                    "applied" => {
                        self.undo.push(action);
                        self.redo.clear();
                    }
                    "undone" => self.redo.push(action),
                    _ => {}
                }
            }
        }
    }

    fn record(&mut self, event: &Event) -> std::io::Result<()> {
        let mut line = serde_json::to_vec(event).map_err(std::io::Error::other)?;
        line.push(b'\n');
        self.file.write_all(&line)?;
        self.file.sync_data()
    }

    /// The journal's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes ahead a new action; returns it with its id.
    pub fn begin(
        &mut self,
        tool: &str,
        moves: Vec<Move>,
        dirs: Vec<String>,
    ) -> std::io::Result<Action> {
        let action = Action {
            id: self.next_id,
            tool: tool.to_owned(),
            moves,
            dirs,
        };
        self.record(&Event::Begin {
            action: action.clone(),
        })?;
        self.next_id += 1;
        Ok(action)
    }

    /// The action's renames are durable: it becomes undoable, and redo is cleared.
    pub fn commit(&mut self, action: Action) -> std::io::Result<()> {
        self.record(&Event::Commit { id: action.id })?;
        self.undo.push(action);
        self.redo.clear();
        Ok(())
    }

    /// The action was rolled back; nothing changed.
    pub fn abort(&mut self, id: u64) -> std::io::Result<()> {
        self.record(&Event::Abort { id })
    }

    /// The action undo would restore.
    pub fn last_undo(&self) -> Option<&Action> {
        self.undo.last()
    }

    /// The action redo would re-apply.
    pub fn last_redo(&self) -> Option<&Action> {
        self.redo.last()
    }

    /// Writes ahead an undo of `id`.
    pub fn start_undo(&mut self, id: u64) -> std::io::Result<()> {
        self.record(&Event::Undo { id })
    }

    /// The undo of `id` is durable.
    pub fn finish_undo(&mut self, id: u64) -> std::io::Result<()> {
        self.record(&Event::Undone { id })?;
        let mut none = None;
        self.apply_event(Event::Undone { id }, &mut none);
        Ok(())
    }

    /// Writes ahead a redo of `id`.
    pub fn start_redo(&mut self, id: u64) -> std::io::Result<()> {
        self.record(&Event::Redo { id })
    }

    /// The redo of `id` is durable.
    pub fn finish_redo(&mut self, id: u64) -> std::io::Result<()> {
        self.record(&Event::Redone { id })?;
        let mut none = None;
        self.apply_event(Event::Redone { id }, &mut none);
        Ok(())
    }
}
