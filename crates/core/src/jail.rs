//! The jail's checks ([`safe_mcp_rules::jail`]), with the real filesystem as the resolver
//! they ask how the kernel resolves a path: the one place the core hands the machine in.

use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use safe_mcp_rules::jail::*;

/// The filesystem, as the kernel resolves it.
#[derive(Debug, Clone, Copy)]
pub struct RealFs;

impl Resolver for RealFs {
    fn canonicalize(&self, path: &Path) -> Option<PathBuf> {
        std::fs::canonicalize(path).ok()
    }

    fn exists(&self, path: &Path) -> bool {
        std::fs::symlink_metadata(path).is_ok()
    }

    fn read_link(&self, path: &Path) -> Option<PathBuf> {
        std::fs::read_link(path).ok()
    }

    fn is_dir(&self, path: &Path) -> bool {
        path.is_dir()
    }
}

/// The jail at the canonical `root`, checked against the real filesystem.
pub fn on_disk(root: PathBuf) -> JailRoot {
    JailRoot::new(root, Arc::new(RealFs))
}
