//! The one argument normaliser every tool rule uses.
//!
//! GNU getopt_long semantics: short options bundle (`-xvf`), a short option that takes a
//! value takes the rest of its token or the next token (`-Icmd`, `-I cmd`), long options
//! take `=value` or the next token, a long option may be abbreviated to any unique prefix,
//! options may follow operands, and `--` ends options. An abbreviation that matches several
//! long options is kept as given and flagged ambiguous, so a rule can still refuse it.

/// Whether a long option takes a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Val {
    /// A flag.
    No,
    /// Takes `=value` or the next token.
    Required,
    /// Takes only `=value`.
    Optional,
}

/// The option grammar of one tool.
#[derive(Debug, Clone, Copy)]
pub struct Grammar {
    /// Short option letters that take a value.
    pub short_value: &'static str,
    /// Long options (without dashes) and whether they take a value.
    pub long: &'static [(&'static str, Val)],
    /// Whether options may follow operands (GNU permutation). Tools with subcommands or
    /// POSIX-strict parsing stop at the first operand.
    pub permute: bool,
}

/// One parsed argument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Arg {
    /// `-x` (name `"-x"`) or `--long` (name `"--long"`, resolved from any abbreviation), with
    /// its value if it took one.
    Opt {
        /// Canonical name with dashes.
        name: String,
        /// The value, attached or from the next token.
        value: Option<String>,
        /// The abbreviation matched several long options.
        ambiguous: bool,
    },
    /// A non-option argument.
    Operand(String),
}

/// A parsed argv (program excluded).
#[derive(Debug, Clone, Default)]
pub struct Parsed {
    /// In order.
    pub args: Vec<Arg>,
}

impl Parsed {
    /// Options named `name` (canonical, with dashes).
    pub fn opts<'a>(&'a self, name: &'a str) -> impl Iterator<Item = Option<&'a str>> + 'a {
        self.args.iter().filter_map(move |a| match a {
            Arg::Opt { name: n, value, .. } if n == name => Some(value.as_deref()),
            _ => None,
        })
    }

    /// Whether option `name` is present.
    pub fn has(&self, name: &str) -> bool {
        self.opts(name).next().is_some()
    }

    /// Operands in order.
    pub fn operands(&self) -> impl Iterator<Item = &str> {
        self.args.iter().filter_map(|a| match a {
            Arg::Operand(s) => Some(s.as_str()),
            _ => None,
        })
    }
}

/// Resolves `given` (without dashes, without `=value`) against the long options.
fn resolve_long<'g>(grammar: &'g Grammar, given: &str) -> (Option<&'g (&'static str, Val)>, bool) {
    if let Some(exact) = grammar.long.iter().find(|(n, _)| *n == given) {
        return (Some(exact), false);
    }
    let mut matches = grammar.long.iter().filter(|(n, _)| n.starts_with(given));
    match (matches.next(), matches.next()) {
        (Some(one), None) => (Some(one), false),
        (Some(_), Some(_)) => (None, true),
        _ => (None, false),
    }
}

/// Parses `args` under `grammar`.
pub fn parse(grammar: &Grammar, args: &[String]) -> Parsed {
    let mut out = Vec::new();
    let mut i = 0;
    let mut options_done = false;
    while i < args.len() {
        let a = &args[i];
        i += 1;
        if options_done || a == "-" || !a.starts_with('-') {
            out.push(Arg::Operand(a.clone()));
            if !grammar.permute && !options_done {
                options_done = true;
            }
            continue;
        }
        if a == "--" {
            options_done = true;
            continue;
        }
        if let Some(long) = a.strip_prefix("--") {
            let (given, attached) = match long.split_once('=') {
                Some((g, v)) => (g, Some(v.to_owned())),
                None => (long, None),
            };
            let (found, ambiguous) = resolve_long(grammar, given);
            let (name, val) = match found {
                Some((n, v)) => (format!("--{n}"), *v),
                None => (
                    format!("--{given}"),
                    if attached.is_some() {
                        Val::Optional
                    } else {
                        Val::No
                    },
                ),
            };
            let value = match (attached, val) {
                (Some(v), _) => Some(v),
                (None, Val::Required) if i < args.len() => {
                    i += 1;
                    Some(args[i - 1].clone())
                }
                _ => None,
            };
            out.push(Arg::Opt {
                name,
                value,
                ambiguous,
            });
            continue;
        }
        // A bundle of short options.
        let letters: Vec<char> = a[1..].chars().collect();
        let mut k = 0;
        while k < letters.len() {
            let c = letters[k];
            k += 1;
            if grammar.short_value.contains(c) {
                let rest: String = letters[k..].iter().collect();
                let value = if !rest.is_empty() {
                    Some(rest)
                } else if i < args.len() {
                    i += 1;
                    Some(args[i - 1].clone())
                } else {
                    None
                };
                out.push(Arg::Opt {
                    name: format!("-{c}"),
                    value,
                    ambiguous: false,
                });
                break;
            }
            out.push(Arg::Opt {
                name: format!("-{c}"),
                value: None,
                ambiguous: false,
            });
        }
    }
    Parsed { args: out }
}

#[cfg(test)]
mod tests {
    use super::*;

    const G: Grammar = Grammar {
        short_value: "oI",
        long: &[
            ("output", Val::Required),
            ("force", Val::No),
            ("follow", Val::No),
            ("compress-program", Val::Required),
        ],
        permute: true,
    };

    fn p(args: &[&str]) -> Vec<Arg> {
        parse(&G, &args.iter().map(|s| s.to_string()).collect::<Vec<_>>()).args
    }

    fn opt(name: &str, value: Option<&str>) -> Arg {
        Arg::Opt {
            name: name.into(),
            value: value.map(str::to_owned),
            ambiguous: false,
        }
    }

    #[test]
    fn every_spelling_normalises() {
        assert_eq!(p(&["-xo", "f"]), [opt("-x", None), opt("-o", Some("f"))]);
        assert_eq!(p(&["-xof"]), [opt("-x", None), opt("-o", Some("f"))]);
        assert_eq!(p(&["-Icmd"]), [opt("-I", Some("cmd"))]);
        assert_eq!(p(&["--output=x"]), [opt("--output", Some("x"))]);
        assert_eq!(p(&["--output", "x"]), [opt("--output", Some("x"))]);
        assert_eq!(p(&["--out", "x"]), [opt("--output", Some("x"))]);
        assert_eq!(
            p(&["--compress-prog=gz"]),
            [opt("--compress-program", Some("gz"))]
        );
        assert_eq!(
            p(&["file", "--forc"]),
            [Arg::Operand("file".into()), opt("--force", None)]
        );
        assert_eq!(p(&["--", "--force"]), [Arg::Operand("--force".into())]);
        assert_eq!(
            p(&["--fo"]),
            [Arg::Opt {
                name: "--fo".into(),
                value: None,
                ambiguous: true
            }],
            "ambiguous between force and follow"
        );
    }

    #[test]
    fn posix_parsing_stops_at_the_first_operand() {
        let g = Grammar {
            permute: false,
            ..G
        };
        let args: Vec<String> = ["sub", "--force"].iter().map(|s| s.to_string()).collect();
        assert_eq!(
            parse(&g, &args).args,
            [Arg::Operand("sub".into()), Arg::Operand("--force".into())]
        );
    }
}
