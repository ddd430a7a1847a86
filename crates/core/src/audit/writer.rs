//! Appending to the trail: durable before anything runs, group commit, rotation.
//!
//! Owns the open file and the chain's state. [`AuditLog::append_attempt`] returns only once
//! the record is on disk (fdatasync). Concurrent callers share fsyncs: the first caller to
//! need one syncs everything written so far, and the callers whose records that covered
//! return together (group commit). A trail whose file was deleted or replaced is re-opened,
//! not written into an unlinked inode. A torn last line left by a crash is sealed on the next
//! start with a `recovered` record, never silently continued.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use serde_json::{Map, Value, json};

use super::chain::{Chain, GENESIS, rfc3339_now, sanitize};
use crate::config::AuditFailMode;

/// Why a record could not be made durable.
#[derive(Debug, Clone, thiserror::Error)]
#[error("audit log {path}: {message}")]
pub struct AuditError {
    /// The trail's path.
    pub path: PathBuf,
    /// What failed.
    pub message: String,
}

/// How the trail is kept.
#[derive(Debug, Clone)]
pub struct AuditOptions {
    /// Closed (default) or open.
    pub fail_mode: AuditFailMode,
    /// Rotate when the file would grow past this many bytes (0: never).
    pub max_bytes: u64,
    /// Rotated files to keep (`audit.jsonl.1` … `.N`).
    pub keep: usize,
    /// HMAC key, when `audit_hmac_key_file` is set.
    pub key: Option<Vec<u8>>,
    /// With shipping: at most this often, a `checkpoint` record names the chain's head.
    pub checkpoint_every: Option<std::time::Duration>,
    /// The server id a new trail's records carry as `server` (one is made when `None`). A
    /// trail that already names one keeps it: servers sharing a file write one chain.
    pub server_id: Option<String>,
}

impl AuditOptions {
    /// Fail-closed, no rotation, no key.
    pub fn closed() -> Self {
        AuditOptions {
            fail_mode: AuditFailMode::Closed,
            max_bytes: 0,
            keep: 5,
            key: None,
            checkpoint_every: None,
            server_id: None,
        }
    }
}

struct Writer {
    file: Option<Arc<File>>,
    len: u64,
    prev: String,
    seq: u64,
    /// `<trail>.lock`, held (flock) across each append so that servers sharing one trail
    /// (both servers started from one policy) take turns and continue each other's chain.
    lock: Option<File>,
    /// When this process last wrote a checkpoint.
    checkpointed: Option<std::time::Instant>,
    /// The chain's server id, stamped on every record: the trail's own once it names one.
    server: Option<String>,
}

impl Writer {
    /// The next record's number and its first fields: when, its number, its kind and the
    /// chain's server.
    fn next_record(&self, kind: &str) -> (u64, Map<String, Value>) {
        let seq = self.seq + 1;
        let mut record = Map::new();
        record.insert("time".into(), json!(rfc3339_now()));
        record.insert("seq".into(), json!(seq));
        record.insert("kind".into(), json!(kind));
        if let Some(server) = &self.server {
            record.insert("server".into(), json!(server));
        }
        (seq, record)
    }
}

/// Holds the trail's cross-process lock until released or dropped (closing the file on an
/// early return releases it too).
struct SharedLock(Option<File>);

impl SharedLock {
    /// Unlocks and hands the lock file back, to be reused by the next append.
    fn release(mut self) -> Option<File> {
        let file = self.0.take();
        if let Some(f) = &file {
            let _ = rustix::fs::flock(f, rustix::fs::FlockOperation::Unlock);
        }
        file
    }
}

impl Drop for SharedLock {
    fn drop(&mut self) {
        if let Some(f) = &self.0 {
            let _ = rustix::fs::flock(f, rustix::fs::FlockOperation::Unlock);
        }
    }
}

#[derive(Default)]
struct SyncState {
    /// Highest seq written to the current file.
    written: u64,
    /// Highest seq known durable.
    synced: u64,
    /// Highest seq whose fsync failed.
    failed: u64,
    in_progress: bool,
    /// Callers waiting for an fsync another caller runs (told when it ends).
    waiting: usize,
    file: Option<Arc<File>>,
}

/// The append-only trail.
pub struct AuditLog {
    path: PathBuf,
    options: AuditOptions,
    chain: Chain,
    writer: Mutex<Writer>,
    sync: Mutex<SyncState>,
    synced: Condvar,
    /// Where each line also goes (`[audit.ship]`), once the server has started it.
    shipper: std::sync::OnceLock<Arc<super::ship::Shipper>>,
}

impl std::fmt::Debug for AuditLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuditLog")
            .field("path", &self.path)
            .field("alg", &self.chain.alg())
            .finish()
    }
}

impl AuditLog {
    /// Names the trail. Nothing is opened yet: the first append (or [`AuditLog::check`])
    /// opens or creates it (mode 0600, never through a symlink) and finds the chain's tail.
    pub fn open(path: &Path, options: AuditOptions) -> Self {
        AuditLog {
            path: path.to_path_buf(),
            chain: Chain::new(options.key.clone()),
            options,
            writer: Mutex::new(Writer {
                file: None,
                len: 0,
                prev: GENESIS.to_owned(),
                seq: 0,
                lock: None,
                checkpointed: None,
                server: None,
            }),
            sync: Mutex::new(SyncState::default()),
            synced: Condvar::new(),
            shipper: std::sync::OnceLock::new(),
        }
    }

    /// Ships every line written from now on (once).
    pub fn ship_to(&self, shipper: Arc<super::ship::Shipper>) {
        let _ = self.shipper.set(shipper);
    }

    /// Why new calls are refused now, when shipping says so (`on_failure = "deny"` and a
    /// sink down).
    pub fn shipping_refusal(&self) -> Option<String> {
        self.shipper.get().and_then(|s| s.refusing())
    }

    /// Under `[audit.ship] on_failure = "deny"`: whether every acknowledging sink has
    /// confirmed the record `seq` (see [`super::ship::Shipper::confirmed`]).
    pub fn shipping_confirmed(&self, seq: u64) -> Result<(), String> {
        match self.shipper.get() {
            Some(s) => s.confirmed(seq),
            None => Ok(()),
        }
    }

    fn ship(&self, seq: u64, line: &str) {
        if let Some(s) = self.shipper.get() {
            s.offer(seq, line);
        }
    }

    /// Opens the trail now, to report a problem at startup rather than at the first call.
    pub fn check(&self) -> Result<(), AuditError> {
        let (mut w, held, _) = self.open_locked()?;
        w.lock = held.release();
        Ok(())
    }

    /// The writer, with the trail's cross-process lock held and the trail open, and the
    /// length the open file had (`None` when it was opened just now).
    fn open_locked(&self) -> Result<(MutexGuard<'_, Writer>, SharedLock, Option<u64>), AuditError> {
        let mut w = self
            .writer
            .lock()
            .map_err(|_| self.error("writer lock poisoned"))?;
        let held = SharedLock(self.shared_lock(&mut w)?);
        let len = self.ensure_open(&mut w)?;
        Ok((w, held, len))
    }

    /// The server id this trail's records carry (the trail's own once it names one): what
    /// handles, plan ids and tickets name as their owner. Opens the trail to learn it.
    pub fn server_id(&self) -> String {
        if let Ok(mut w) = self.writer.lock() {
            if w.server.is_none()
                && let Ok(held) = self.shared_lock(&mut w).map(SharedLock)
            {
                let _ = self.ensure_open(&mut w);
                w.lock = held.release();
            }
            let fallback = || {
                self.options
                    .server_id
                    .clone()
                    .unwrap_or_else(crate::fleet::generated_server_id)
            };
            return w.server.get_or_insert_with(fallback).clone();
        }
        self.options.server_id.clone().unwrap_or_default()
    }

    /// Closed or open.
    pub fn fail_mode(&self) -> AuditFailMode {
        self.options.fail_mode
    }

    /// The trail's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends an attempt record and waits until it is durable. Only after `Ok` may the
    /// command run.
    pub fn append_attempt(&self, fields: Map<String, Value>) -> Result<u64, AuditError> {
        self.append("attempt", fields, true)
    }

    /// Appends an outcome record; it becomes durable with the next fsync.
    pub fn append_outcome(&self, fields: Map<String, Value>) -> Result<u64, AuditError> {
        self.append("outcome", fields, false)
    }

    /// Appends a record of `kind`, durable at once when `durable`.
    pub fn append(
        &self,
        kind: &str,
        fields: Map<String, Value>,
        durable: bool,
    ) -> Result<u64, AuditError> {
        let seq = {
            let (mut w, held, len) = self.open_locked()?;
            self.catch_up(&mut w, len)?;
            let (seq, mut record) = w.next_record(kind);
            if let Value::Object(fields) = sanitize(Value::Object(fields)) {
                for (k, v) in fields {
                    record.entry(k).or_insert(v);
                }
            }
            let line = self
                .chain
                .seal(record, &w.prev)
                .map_err(|e| self.error(format!("cannot encode: {e}")))?;
            let bytes = line.len() as u64 + 1;
            if self.options.max_bytes > 0 && w.len > 0 && w.len + bytes > self.options.max_bytes {
                self.rotate(&mut w)?;
            }
            self.write_line(&mut w, &line)?;
            w.prev = self.chain.digest(line.as_bytes());
            w.seq = seq;
            w.len += bytes;
            self.ship(seq, &line);
            // The chain's head, named now and then for a receiver (sealed like any record,
            // so HMAC-signed when a key is set).
            if let Some(every) = self.options.checkpoint_every
                && kind != "checkpoint"
                && w.checkpointed.is_none_or(|t| t.elapsed() >= every)
            {
                let head = Map::from_iter([
                    ("head_seq".to_owned(), json!(seq)),
                    ("head_hash".to_owned(), json!(w.prev)),
                ]);
                self.seal_extra(&mut w, "checkpoint", head)?;
                w.checkpointed = Some(std::time::Instant::now());
            }
            if let Ok(mut s) = self.sync.lock() {
                s.written = w.seq;
            }
            w.lock = held.release();
            seq
        };
        if durable {
            self.wait_durable(seq)?;
        }
        Ok(seq)
    }

    /// Takes the trail's cross-process lock (blocking while another server appends): a
    /// flock on `<trail>.lock`, a 0600 file of the server's own user beside the trail, so
    /// that no other user can open it to hold the lock. A trail that is not a regular file
    /// (`/dev/full`) is never shared and needs none. The descriptor is returned to the
    /// writer by the caller after the append. A writer that holds the lock file already
    /// found the trail a regular file (a trail replaced since is re-opened under the lock).
    fn shared_lock(&self, w: &mut Writer) -> Result<Option<File>, AuditError> {
        use std::os::unix::fs::MetadataExt;
        if w.lock.is_none() && std::fs::symlink_metadata(&self.path).is_ok_and(|m| !m.is_file()) {
            return Ok(None);
        }
        let file = match w.lock.take() {
            Some(f) => f,
            None => {
                let mut name = self.path.clone().into_os_string();
                name.push(".lock");
                let f = super::private::options()
                    .read(true)
                    .write(true)
                    .truncate(false)
                    .open(PathBuf::from(name))
                    .map_err(|e| self.error(format!("cannot open its lock file: {e}")))?;
                let meta = f
                    .metadata()
                    .map_err(|e| self.error(format!("cannot stat its lock file: {e}")))?;
                if !meta.is_file() || meta.uid() != rustix::process::geteuid().as_raw() {
                    return Err(self.error(
                        "its lock file belongs to another user; remove it (only the server's user may hold the trail's lock)",
                    ));
                }
                f
            }
        };
        rustix::fs::flock(&file, rustix::fs::FlockOperation::LockExclusive)
            .map_err(|e| self.error(format!("cannot lock: {e}")))?;
        Ok(Some(file))
    }

    /// Another server sharing the trail appended since our last write: continue its chain.
    /// Called under the shared lock, so no record is half written; `seen` is the file's
    /// length read under it already, if it was.
    fn catch_up(&self, w: &mut Writer, seen: Option<u64>) -> Result<(), AuditError> {
        let Some(file) = w.file.clone() else {
            return Ok(());
        };
        let len = match seen {
            Some(len) => len,
            None => file
                .metadata()
                .map_err(|e| self.error(format!("cannot stat: {e}")))?
                .len(),
        };
        if len == w.len {
            return Ok(());
        }
        if len < w.len {
            // Shrunk in place: not another server's appends, but a cut. The chain goes on
            // from memory and says so, as for a deleted or replaced file.
            w.len = len;
            return self.seal_extra(
                w,
                "discontinuity",
                Map::from_iter([(
                    "reason".to_owned(),
                    json!("the trail file shrank while the server ran; the chain continues from the server's memory"),
                )]),
            );
        }
        let tail = read_tail(&mut &*file)
            .map_err(|e| self.error(format!("cannot read the chain's tail: {e}")))?;
        if let Some(line) = &tail.last_line {
            w.prev = self.chain.digest(line);
            w.seq = seq_of(line);
            w.server = crate::fleet::server_named_in(line).or(w.server.take());
        }
        w.len = tail.len;
        if let Some(torn) = tail.torn {
            self.seal_torn(w, torn)?;
        }
        Ok(())
    }

    fn write_line(&self, w: &mut Writer, line: &str) -> Result<(), AuditError> {
        let mut buf = Vec::with_capacity(line.len() + 1);
        buf.extend_from_slice(line.as_bytes());
        buf.push(b'\n');
        let result = match &w.file {
            Some(file) => (&**file).write_all(&buf),
            None => Err(std::io::Error::other("not open")),
        };
        result.map_err(|e| {
            // Drop the handle so the next call re-opens and re-reads the chain's tail.
            w.file = None;
            self.error(format!("cannot write: {e}"))
        })
    }

    /// Group commit: one caller syncs everything written so far; the others wait for it.
    fn wait_durable(&self, seq: u64) -> Result<(), AuditError> {
        let mut s = self
            .sync
            .lock()
            .map_err(|_| self.error("sync lock poisoned"))?;
        loop {
            if s.synced >= seq {
                return Ok(());
            }
            if s.failed >= seq {
                return Err(self.error("fsync failed"));
            }
            if !s.in_progress {
                s.in_progress = true;
                let target = s.written;
                let file = s.file.clone();
                drop(s);
                let result = match file {
                    Some(f) => f.sync_data(),
                    None => Err(std::io::Error::other("not open")),
                };
                s = self
                    .sync
                    .lock()
                    .map_err(|_| self.error("sync lock poisoned"))?;
                s.in_progress = false;
                match &result {
                    Ok(()) => s.synced = s.synced.max(target),
                    Err(_) => s.failed = s.failed.max(target),
                }
                if s.waiting > 0 {
                    self.synced.notify_all();
                }
                if let Err(e) = result
                    && seq <= target
                {
                    return Err(self.error(format!("cannot fsync: {e}")));
                }
            } else {
                s.waiting += 1;
                s = self
                    .synced
                    .wait(s)
                    .map_err(|_| self.error("sync lock poisoned"))?;
                s.waiting -= 1;
            }
        }
    }

    pub(crate) fn error(&self, message: impl Into<String>) -> AuditError {
        AuditError {
            path: self.path.clone(),
            message: message.into(),
        }
    }

    fn rotated(&self, n: usize) -> PathBuf {
        let mut name = self.path.clone().into_os_string();
        name.push(format!(".{n}"));
        PathBuf::from(name)
    }

    /// `audit.jsonl` becomes `.1`, `.1` becomes `.2`, …; the chain carries on in a new file.
    fn rotate(&self, w: &mut Writer) -> Result<(), AuditError> {
        if let Some(file) = &w.file {
            file.sync_data()
                .map_err(|e| self.error(format!("cannot fsync before rotation: {e}")))?;
            if let Ok(mut s) = self.sync.lock() {
                s.synced = s.synced.max(w.seq);
            }
        }
        let keep = self.options.keep.max(1);
        let _ = std::fs::remove_file(self.rotated(keep));
        for n in (1..keep).rev() {
            let from = self.rotated(n);
            if from.exists() {
                std::fs::rename(&from, self.rotated(n + 1))
                    .map_err(|e| self.error(format!("cannot rotate: {e}")))?;
            }
        }
        std::fs::rename(&self.path, self.rotated(1))
            .map_err(|e| self.error(format!("cannot rotate: {e}")))?;
        w.file = None;
        let (prev, seq) = (w.prev.clone(), w.seq);
        self.ensure_open(w)?;
        // The new file continues the chain from memory, not from disk.
        w.prev = prev;
        w.seq = seq;
        Ok(())
    }

    /// Re-opens when the file was removed or replaced under us. `Some` is the length of the
    /// open file, read as it was found to be the trail still; `None`, it was opened now.
    fn ensure_open(&self, w: &mut Writer) -> Result<Option<u64>, AuditError> {
        let mut replaced = false;
        if let Some(file) = &w.file {
            let ours = file.metadata().ok();
            let same_as = |path: &Path| match (&ours, std::fs::symlink_metadata(path)) {
                (Some(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
                _ => false,
            };
            if same_as(&self.path) {
                return Ok(ours.map(|m| m.len()));
            }
            // Our file now at `.1`: a server sharing the trail rotated it, and the chain goes
            // on in the new file. Anything else is a deletion or a swap.
            replaced = !same_as(&self.rotated(1));
            w.file = None;
        }
        let memory = (w.prev.clone(), w.seq);
        let mut file = super::private::options()
            .append(true)
            .read(true)
            .open(&self.path)
            .map_err(|e| self.error(format!("cannot open: {e}")))?;
        let tail = read_tail(&mut file)
            .map_err(|e| self.error(format!("cannot read the chain's tail: {e}")))?;
        let (mut prev, mut seq) = match &tail.last_line {
            Some(line) => (self.chain.digest(line), seq_of(line)),
            None => (GENESIS.to_owned(), 0),
        };
        let mut named = tail
            .last_line
            .as_deref()
            .and_then(crate::fleet::server_named_in);
        if tail.last_line.is_none() && tail.torn.is_none() {
            // A fresh file after rotation (or a restart right after one): continue from `.1`.
            if let Ok(mut older) = File::open(self.rotated(1))
                && let Ok(t) = read_tail(&mut older)
                && let Some(line) = t.last_line
            {
                prev = self.chain.digest(&line);
                seq = seq_of(&line);
                named = crate::fleet::server_named_in(&line);
            }
        }
        // The trail's own id, else the one this server already used, else the configured
        // one, else a new one.
        w.server = named
            .or(w.server.take())
            .or_else(|| self.options.server_id.clone())
            .or_else(|| Some(crate::fleet::generated_server_id()));
        if replaced {
            // The file was deleted or swapped while we ran: the chain continues from memory,
            // and a discontinuity record says so, so the gap cannot pass for a clean start.
            (prev, seq) = memory;
        }
        w.len = tail.len;
        w.file = Some(Arc::new(file));
        if let Ok(mut s) = self.sync.lock() {
            s.file = w.file.clone();
            s.written = seq;
            s.synced = s.synced.max(seq);
        }
        w.prev = prev;
        w.seq = seq;
        if replaced {
            self.seal_extra(
                w,
                "discontinuity",
                Map::from_iter([(
                    "reason".to_owned(),
                    json!("the trail file was removed or replaced while the server ran; the chain continues from the server's memory"),
                )]),
            )?;
        }
        if let Some(torn) = tail.torn {
            self.seal_torn(w, torn)?;
        }
        Ok(None)
    }

    /// Seals a torn last line: ends it, then links past it with a record that names it.
    fn seal_torn(&self, w: &mut Writer, torn: Torn) -> Result<(), AuditError> {
        self.write_line(w, "")?;
        w.len += 1;
        let mut fields = Map::new();
        fields.insert("torn_line".into(), json!(torn.line));
        fields.insert("torn_digest".into(), json!(self.chain.digest(&torn.bytes)));
        fields.insert(
            "reason".into(),
            json!("the last line was cut by a crash; it is kept, unlinked"),
        );
        self.seal_extra(w, "recovered", fields)
    }
}

impl AuditLog {
    /// Appends a record the writer itself makes (`recovered`, `discontinuity`).
    fn seal_extra(
        &self,
        w: &mut Writer,
        kind: &str,
        mut fields: Map<String, Value>,
    ) -> Result<(), AuditError> {
        let (seq, mut record) = w.next_record(kind);
        record.append(&mut fields);
        let line = self
            .chain
            .seal(record, &w.prev)
            .map_err(|e| self.error(format!("cannot encode: {e}")))?;
        self.write_line(w, &line)?;
        w.prev = self.chain.digest(line.as_bytes());
        w.seq = seq;
        w.len += line.len() as u64 + 1;
        self.ship(seq, &line);
        Ok(())
    }
}

fn seq_of(line: &[u8]) -> u64 {
    serde_json::from_slice::<Value>(line)
        .ok()
        .and_then(|v| v.get("seq").and_then(Value::as_u64))
        .unwrap_or(0)
}

struct Torn {
    line: u64,
    bytes: Vec<u8>,
}

struct Tail {
    len: u64,
    last_line: Option<Vec<u8>>,
    torn: Option<Torn>,
}

/// The last complete line of a trail, and a torn fragment after it, if any.
fn read_tail(mut file: impl Read + Seek) -> std::io::Result<Tail> {
    let len = file.seek(SeekFrom::End(0))?;
    if len == 0 {
        return Ok(Tail {
            len,
            last_line: None,
            torn: None,
        });
    }
    file.seek(SeekFrom::Start(0))?;
    let mut all = Vec::with_capacity(len as usize);
    file.read_to_end(&mut all)?;
    let (complete, fragment) = match all.iter().rposition(|&b| b == b'\n') {
        Some(i) => (&all[..i], &all[i + 1..]),
        None => (&all[..0], &all[..]),
    };
    let torn = (!fragment.is_empty()).then(|| Torn {
        line: complete.iter().filter(|&&b| b == b'\n').count() as u64
            + u64::from(!complete.is_empty())
            + 1,
        bytes: fragment.to_vec(),
    });
    let last_line = if complete.is_empty() {
        None
    } else {
        let start = complete
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |i| i + 1);
        Some(complete[start..].to_vec())
    };
    Ok(Tail {
        len,
        last_line,
        torn,
    })
}

#[cfg(test)]
mod tests;
