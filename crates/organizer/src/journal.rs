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
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

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

#[derive(Debug)]
enum Pending {
    Forward(Action),
    Undo(Action),
    Redo(Action),
}

/// The journal and the stacks it implies.
#[derive(Debug)]
pub struct Journal {
    file: File,
    undo: Vec<Action>,
    redo: Vec<Action>,
    next_id: u64,
    /// An action begun and not yet closed (committed, aborted, finished).
    open: Option<Pending>,
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
        // One files server per journal: two would hand out the same action ids and undo
        // each other's moves. The lock lives as long as this descriptor.
        match rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => {}
            Err(rustix::io::Errno::WOULDBLOCK) => {
                return Err(std::io::Error::other(
                    "another files server is using it; give each files server its own journal",
                ));
            }
            Err(e) => return Err(e.into()),
        }
        let mut journal = Journal {
            file,
            undo: Vec::new(),
            redo: Vec::new(),
            next_id: 1,
            open: None,
        };
        let mut pending: Option<Pending> = None;
        let mut notes = Vec::new();
        // Bytes, not lines of text: a line torn inside a multi-byte character must not stop
        // the server from starting.
        let data = std::fs::read(path)?;
        for line in data.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
            match serde_json::from_slice::<Event>(line) {
                Ok(event) => journal.apply_event(event, &mut pending),
                Err(_) => notes.push(
                    "a journal line torn by a crash was skipped; it was never acted on".to_owned(),
                ),
            }
        }
        if data.last().is_some_and(|&b| b != b'\n') {
            // End the torn fragment, or the next record would be glued onto it and lost.
            journal.file.write_all(b"\n")?;
            journal.file.sync_data()?;
        }
        if let Some(p) = pending {
            notes.push(journal.reconcile(p, ws)?);
        }
        Ok((journal, notes))
    }

    /// Records what really happened to an action left open (by a crash, or by a rename that
    /// failed mid-way): the moves whose files stand at their destinations stay undoable.
    fn reconcile(&mut self, p: Pending, ws: &Workspace) -> std::io::Result<String> {
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
        self.record(&event)?;
        let mut none = None;
        self.apply_event(event, &mut none);
        self.open = None;
        Ok(format!(
            "reconciled {kind} (action {id}): {done} of {total} files stand at their destinations{}",
            if done > 0 {
                "; undo_last_action restores them"
            } else {
                ""
            }
        ))
    }

    /// Reconciles an action a failure left open, before anything new starts.
    fn settle(&mut self, ws: &Workspace) -> std::io::Result<()> {
        if let Some(p) = self.open.take() {
            let note = self.reconcile(p, ws)?;
            tracing::info!("files: {note}");
        }
        Ok(())
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

    /// Writes ahead a new action; returns it with its id.
    pub fn begin(
        &mut self,
        ws: &Workspace,
        tool: &str,
        moves: Vec<Move>,
        dirs: Vec<String>,
    ) -> std::io::Result<Action> {
        self.settle(ws)?;
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
        self.open = Some(Pending::Forward(action.clone()));
        Ok(action)
    }

    /// The action's renames are durable: it becomes undoable, and redo is cleared.
    pub fn commit(&mut self, action: Action) -> std::io::Result<()> {
        self.record(&Event::Commit { id: action.id })?;
        self.open = None;
        self.undo.push(action);
        self.redo.clear();
        Ok(())
    }

    /// Only the first `done` moves of the action were made (the client cancelled between
    /// two moves): those become one undoable action, as a reconciliation after a crash
    /// would record them; the rest never happened.
    pub fn commit_partial(&mut self, action: Action, done: usize) -> std::io::Result<()> {
        let mut action = action;
        action.moves.truncate(done);
        let event = Event::Reconciled {
            action,
            state: "applied".into(),
        };
        self.record(&event)?;
        let mut none = None;
        self.apply_event(event, &mut none);
        self.open = None;
        Ok(())
    }

    /// The action was rolled back; nothing changed.
    pub fn abort(&mut self, id: u64) -> std::io::Result<()> {
        self.record(&Event::Abort { id })?;
        self.open = None;
        Ok(())
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
    pub fn start_undo(&mut self, ws: &Workspace, id: u64) -> std::io::Result<()> {
        self.settle(ws)?;
        self.record(&Event::Undo { id })?;
        self.open = self
            .undo
            .iter()
            .rev()
            .find(|a| a.id == id)
            .cloned()
            .map(Pending::Undo);
        Ok(())
    }

    /// The undo of `id` is durable.
    pub fn finish_undo(&mut self, id: u64) -> std::io::Result<()> {
        self.record(&Event::Undone { id })?;
        self.open = None;
        let mut none = None;
        self.apply_event(Event::Undone { id }, &mut none);
        Ok(())
    }

    /// Writes ahead a redo of `id`.
    pub fn start_redo(&mut self, ws: &Workspace, id: u64) -> std::io::Result<()> {
        self.settle(ws)?;
        self.record(&Event::Redo { id })?;
        self.open = self
            .redo
            .iter()
            .rev()
            .find(|a| a.id == id)
            .cloned()
            .map(Pending::Redo);
        Ok(())
    }

    /// The redo of `id` is durable.
    pub fn finish_redo(&mut self, id: u64) -> std::io::Result<()> {
        self.record(&Event::Redone { id })?;
        self.open = None;
        let mut none = None;
        self.apply_event(Event::Redone { id }, &mut none);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;
    use std::path::PathBuf;

    fn fixture() -> (tempfile::TempDir, Workspace, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("ws");
        std::fs::create_dir(&root).unwrap();
        for name in ["a.txt", "b.txt"] {
            std::fs::write(root.join(name), name).unwrap();
        }
        let ws = Workspace::open(&root).unwrap();
        (dir, ws, root)
    }

    fn mv(root: &Path, src: &str, dst: &str) -> Move {
        let m = std::fs::metadata(root.join(src)).unwrap();
        Move {
            src: src.into(),
            dst: dst.into(),
            dev: m.dev(),
            ino: m.ino(),
        }
    }

    #[test]
    fn an_action_left_open_by_a_failure_is_reconciled_before_the_next() {
        let (dir, ws, root) = fixture();
        let path = dir.path().join("j.jsonl");
        let (mut j, _) = Journal::open(&path, &ws).unwrap();
        let first = j
            .begin(&ws, "move_file", vec![mv(&root, "a.txt", "a2.txt")], vec![])
            .unwrap();
        ws.rename_noreplace("a.txt", "a2.txt").unwrap();
        // No commit: the action is still open when the next one begins.
        let second = j
            .begin(&ws, "move_file", vec![mv(&root, "b.txt", "b2.txt")], vec![])
            .unwrap();
        ws.rename_noreplace("b.txt", "b2.txt").unwrap();
        j.commit(second).unwrap();
        drop(j);
        let (j, notes) = Journal::open(&path, &ws).unwrap();
        assert!(notes.is_empty(), "{notes:?}");
        let ids: Vec<u64> = j.undo.iter().map(|a| a.id).collect();
        assert_eq!(ids, [first.id, first.id + 1], "both actions stay undoable");
    }

    #[test]
    fn a_torn_last_line_does_not_swallow_the_next_record() {
        let (dir, ws, root) = fixture();
        let path = dir.path().join("j.jsonl");
        std::fs::write(
            &path,
            "{\"ev\":\"begin\",\"action\":{\"id\":1,\"tool\":\"x\",\"mo\u{e9}",
        )
        .unwrap();
        let (mut j, notes) = Journal::open(&path, &ws).unwrap();
        assert_eq!(notes.len(), 1, "{notes:?}");
        let a = j
            .begin(&ws, "move_file", vec![mv(&root, "a.txt", "a2.txt")], vec![])
            .unwrap();
        ws.rename_noreplace("a.txt", "a2.txt").unwrap();
        j.commit(a).unwrap();
        drop(j);
        let (j, _) = Journal::open(&path, &ws).unwrap();
        assert_eq!(
            j.last_undo().map(|a| a.moves[0].dst.as_str()),
            Some("a2.txt")
        );
    }
}
