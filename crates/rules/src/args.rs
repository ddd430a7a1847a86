//! Argument normalisation for argument rules.
//!
//! Owns one question: does an argv contain every token of a rule pattern, in any order?
//! Tools accept the same option in many spellings, so both sides are normalised first:
//! bundled short flags (`-fv` holds `-f` and `-v`), `--key=value` (holds `--key`), and unique
//! prefixes of long options (`--forc` is `--force`, as git and GNU getopt accept).
//! It must never make a match *less* likely than the literal comparison: every literal token
//! still matches itself.

use crate::tools::parse::{Arg, Grammar, parse};

/// One normalised view of an argv (program excluded).
#[derive(Debug, Default)]
pub struct NormalizedArgs {
    /// Every argument exactly as given.
    literal: Vec<String>,
    /// Long option names without the leading `--` and without any `=value`.
    long_names: Vec<String>,
    /// `--name=value` pairs, name without dashes.
    long_values: Vec<(String, String)>,
    /// Every letter of every short-option bundle (`-fv` gives `f`, `v`).
    short_letters: Vec<char>,
}

/// Rules match tool-agnostic token sets, so they read every argv with the same neutral
/// grammar of the one shared parser: every option may follow operands, and no short option is
/// assumed to take a value (its letters all count, which can only make a rule deny more).
const RULE_GRAMMAR: Grammar = Grammar {
    short_value: "",
    long: "",
    permute: true,
};

impl NormalizedArgs {
    /// Normalises `args` (without the program name) with [`crate::tools::parse`].
    pub fn new(args: &[String]) -> Self {
        let mut n = NormalizedArgs {
            literal: args.to_vec(),
            ..NormalizedArgs::default()
        };
        for arg in parse(&RULE_GRAMMAR, args).args {
            let Arg::Opt { name, value, .. } = arg else {
                continue;
            };
            match name.strip_prefix("--") {
                Some(long) => {
                    if let Some(v) = value {
                        n.long_values.push((long.to_owned(), v));
                    }
                    n.long_names.push(long.to_owned());
                }
                None => n.short_letters.extend(name.chars().skip(1)),
            }
        }
        n
    }

    /// Records that the argv means `--name` though it does not spell it (git's `+refspec`
    /// forces a push just like `--force`).
    pub fn imply_long(&mut self, name: &str) {
        self.long_names.push(name.to_owned());
        self.literal.push(format!("--{name}"));
    }

    /// True when every token of `pattern` (split on whitespace) is present.
    pub fn contains_all(&self, pattern: &str) -> bool {
        let mut any = false;
        for token in pattern.split_whitespace() {
            any = true;
            if !self.contains(token) {
                return false;
            }
        }
        any
    }

    fn contains(&self, token: &str) -> bool {
        if self.literal.iter().any(|a| a == token) {
            return true;
        }
        if let Some(long) = token.strip_prefix("--") {
            if long.is_empty() {
                return false;
            }
            return match long.split_once('=') {
                // `--key=value` in a rule: the key may be abbreviated, the value must match.
                Some((name, value)) => self
                    .long_values
                    .iter()
                    .any(|(n, v)| v == value && is_abbreviation(n, name)),
                None => self.long_names.iter().any(|n| is_abbreviation(n, long)),
            };
        }
        if let Some(short) = token.strip_prefix('-') {
            return !short.is_empty() && short.chars().all(|c| self.short_letters.contains(&c));
        }
        false
    }
}

/// `given` abbreviates `full` (`forc` abbreviates `force`). Fail closed: an abbreviation that
/// the tool would reject as ambiguous still counts, since it is refused either way.
fn is_abbreviation(given: &str, full: &str) -> bool {
    !given.is_empty() && full.starts_with(given)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(args: &[&str]) -> NormalizedArgs {
        NormalizedArgs::new(&args.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn order_independent_tokens() {
        assert!(n(&["push", "origin", "--force"]).contains_all("push --force"));
        assert!(n(&["--force", "origin", "push"]).contains_all("push --force"));
        assert!(!n(&["push", "origin"]).contains_all("push --force"));
        assert!(!n(&["status"]).contains_all(""));
    }

    #[test]
    fn bundled_short_flags() {
        assert!(n(&["push", "-fv"]).contains_all("push -f"));
        assert!(n(&["push", "-vf"]).contains_all("push -f"));
        assert!(n(&["-rf", "x"]).contains_all("-f -r"));
        assert!(!n(&["push", "-v"]).contains_all("push -f"));
    }

    #[test]
    fn long_prefixes_and_values() {
        assert!(n(&["push", "--forc"]).contains_all("push --force"));
        assert!(n(&["push", "--force=yes"]).contains_all("push --force"));
        assert!(n(&["--output=/tmp/x"]).contains_all("--output=/tmp/x"));
        assert!(n(&["--out=/tmp/x"]).contains_all("--output=/tmp/x"));
        assert!(!n(&["--output=/tmp/y"]).contains_all("--output=/tmp/x"));
        assert!(!n(&["push", "--follow-tags"]).contains_all("push --force"));
        assert!(!n(&["push", "--"]).contains_all("push --force"));
    }
}
