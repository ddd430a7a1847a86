//! Where the loader reads environment variables: the [`Env`] trait, so that tests need not
//! touch the process environment.

use std::ffi::OsString;

/// Reads environment variables; injectable so tests need not touch the process environment.
pub trait Env {
    /// The variable's value, if set and non-empty.
    fn var(&self, name: &str) -> Option<OsString>;
}

/// The real process environment.
#[derive(Debug, Clone, Copy, Default)]
pub struct ProcessEnv;

impl Env for ProcessEnv {
    fn var(&self, name: &str) -> Option<OsString> {
        std::env::var_os(name).filter(|v| !v.is_empty())
    }
}

impl<F: Fn(&str) -> Option<OsString>> Env for F {
    fn var(&self, name: &str) -> Option<OsString> {
        self(name).filter(|v| !v.is_empty())
    }
}
