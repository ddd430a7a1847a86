//! One integration-test binary for the `safe-mcp` crate (see `suite/`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
