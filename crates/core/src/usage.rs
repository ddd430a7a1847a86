//! `[terminal.limits] jail_bytes`: how much the jail, the write paths (the caches) and the
//! calls' private TMPDIRs may hold, so that sandboxed code cannot fill the disk the server
//! and the host share.
//!
//! No file system this server can count on offers a quota it may set (ext4 and XFS project
//! quotas need a mount option and root), so the bound is a check: after each call ends (at
//! most once every [`MEASURE_EVERY`]) a background thread adds up the blocks of every entry
//! beneath those roots (never following a symlink, never leaving a root's file system), and
//! while the total is over the bound every new command or process session is refused, with
//! the total and the key in the reason. One call can overshoot the bound by what it writes
//! before it ends (each file at most `file_size_bytes`); THREAT_MODEL says so. It never
//! writes, removes or opens a file for reading.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How often the usage is measured at most.
pub const MEASURE_EVERY: Duration = Duration::from_secs(2);

/// A measurement waits at least this many times as long as the last one took: the walk
/// takes at most a tenth of one core, however large the jail.
pub const IDLE_FACTOR: u32 = 10;

/// The most entries one measurement visits; past it the total counts what it saw.
const MAX_ENTRIES: u64 = 2_000_000;

/// The roots, the bound and the last measurement.
#[derive(Debug)]
pub struct JailUsage {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    limit: u64,
    /// The jail and the write paths, then the executor's scratch root once it is known.
    roots: Mutex<Vec<PathBuf>>,
    bytes: AtomicU64,
    measuring: AtomicBool,
    /// When the last measurement ended, and how long it took.
    last: Mutex<Option<(Instant, Duration)>>,
}

impl JailUsage {
    /// A bound of `limit` bytes (0: none) on what `roots` hold.
    pub fn new(limit: u64, roots: Vec<PathBuf>) -> JailUsage {
        JailUsage {
            inner: Arc::new(Inner {
                limit,
                roots: Mutex::new(roots),
                bytes: AtomicU64::new(0),
                measuring: AtomicBool::new(false),
                last: Mutex::new(None),
            }),
        }
    }

    /// Counts what `root` holds too: the executor's root of the calls' and sessions'
    /// private TMPDIRs, which a command writes as freely as the jail.
    pub fn add_root(&self, root: PathBuf) {
        if let Ok(mut roots) = self.inner.roots.lock() {
            roots.push(root);
        }
    }

    /// Why a new command may not run now, if the roots held more than the bound when last
    /// measured and still do (measured again, at once, before refusing).
    pub fn refusal(&self) -> Option<String> {
        let inner = &self.inner;
        if inner.limit == 0 || inner.bytes.load(Ordering::Acquire) <= inner.limit {
            return None;
        }
        let now = inner.measure();
        (now > inner.limit).then(|| {
            format!(
                "the jail and the write paths hold {now} bytes, over [terminal.limits] jail_bytes = {}, so no command runs until they hold less; ask the operator to remove files (or raise jail_bytes)",
                inner.limit
            )
        })
    }

    /// After a call: measures again in the background, unless a measurement is running or
    /// ran less than [`MEASURE_EVERY`] ago, or less than [`IDLE_FACTOR`] times its own
    /// length ago (a walk of 100,000 entries takes ~0.25 s here: a jail of a million, ~2.5
    /// s, would otherwise keep a core walking while calls come).
    pub fn call_ended(&self) {
        let inner = &self.inner;
        if inner.limit == 0 {
            return;
        }
        let due = inner
            .last
            .lock()
            .map(|last| {
                last.is_none_or(|(at, took)| at.elapsed() >= MEASURE_EVERY.max(took * IDLE_FACTOR))
            })
            .unwrap_or(true);
        if !due || inner.measuring.swap(true, Ordering::AcqRel) {
            return;
        }
        let inner = Arc::clone(&self.inner);
        let spawned = std::thread::Builder::new()
            .name("jail-usage".into())
            .spawn(move || {
                inner.measure();
                inner.measuring.store(false, Ordering::Release);
            });
        if spawned.is_err() {
            self.inner.measuring.store(false, Ordering::Release);
        }
    }
}

impl Inner {
    /// Adds up the roots now, and remembers the total.
    fn measure(&self) -> u64 {
        let started = Instant::now();
        let roots = self.roots.lock().map(|r| r.clone()).unwrap_or_default();
        let total = roots.iter().map(|r| bytes_beneath(r)).sum();
        self.bytes.store(total, Ordering::Release);
        if let Ok(mut last) = self.last.lock() {
            *last = Some((Instant::now(), started.elapsed()));
        }
        total
    }
}

/// The bytes allocated beneath `root` (blocks × 512), on `root`'s file system only.
fn bytes_beneath(root: &std::path::Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let Ok(meta) = std::fs::symlink_metadata(root) else {
        return 0;
    };
    let device = meta.dev();
    let mut total = meta.blocks() * 512;
    let mut seen = 1u64;
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            seen += 1;
            if seen > MAX_ENTRIES {
                return total;
            }
            let Ok(meta) = entry.metadata() else { continue };
            if meta.dev() != device {
                continue;
            }
            total += meta.blocks() * 512;
            if meta.is_dir() {
                stack.push(entry.path());
            }
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn over_the_bound_refuses_until_space_is_freed() {
        let (_dir, jail) = crate::testing::scratch(&[]);
        let usage = JailUsage::new(64 * 1024, vec![jail.clone()]);
        assert_eq!(usage.refusal(), None);
        std::fs::write(jail.join("big"), vec![7u8; 256 * 1024]).unwrap();
        usage.inner.measure();
        let why = usage.refusal().unwrap();
        assert!(why.contains("jail_bytes = 65536"), "{why}");
        std::fs::remove_file(jail.join("big")).unwrap();
        assert_eq!(usage.refusal(), None, "measured again before refusing");
        assert_eq!(JailUsage::new(0, vec![jail.clone()]).refusal(), None);
    }
}
