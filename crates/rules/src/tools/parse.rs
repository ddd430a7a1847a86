//! The one argument normaliser every tool rule uses.
//!
//! GNU getopt_long semantics: short options bundle (`-xvf`), a short option that takes a
//! value takes the rest of its token or the next token (`-Icmd`, `-I cmd`), long options
//! take `=value` or the next token, a long option may be abbreviated to any unique prefix,
//! options may follow operands, and `--` ends options. An abbreviation that matches several
//! long options is kept as given and flagged ambiguous, so a rule can still refuse it.
//!
//! Also the old-style key bundle some tools keep from before getopt (GNU tar's `tar cf a.tar
//! f`), read as GNU tar reads it ([`parse_old_style`]), and OpenSSH's restart of option
//! parsing after the destination (`ssh host -o Key=V cmd`, [`parse_around_first_operand`]).
//!
//! It must never guess in the tool's favour: where the real tool would read a token as an
//! option, this reads it as an option too, so the rules that look for escapes see it.

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
    /// Long options (without dashes), separated by spaces, as getopt's option strings are
    /// written: `name` a flag, `name=` one that takes `=value` or the next word, `name=?` one
    /// that takes only `=value` ([`Val`]; [`Grammar::longs`] reads them).
    pub long: &'static str,
    /// Whether options may follow operands (GNU permutation). Tools with subcommands or
    /// POSIX-strict parsing stop at the first operand.
    pub permute: bool,
}

impl Grammar {
    /// The long options, each with what it takes.
    pub fn longs(&self) -> impl Iterator<Item = (&'static str, Val)> {
        self.long.split_ascii_whitespace().map(|word| {
            if let Some(name) = word.strip_suffix("=?") {
                (name, Val::Optional)
            } else if let Some(name) = word.strip_suffix('=') {
                (name, Val::Required)
            } else {
                (word, Val::No)
            }
        })
    }
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

    /// Every option: its canonical name, its value, and whether its abbreviation was
    /// ambiguous.
    pub fn options(&self) -> impl Iterator<Item = (&str, Option<&str>, bool)> {
        self.args.iter().filter_map(|a| match a {
            Arg::Opt {
                name,
                value,
                ambiguous,
            } => Some((name.as_str(), value.as_deref(), *ambiguous)),
            Arg::Operand(_) => None,
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
fn resolve_long(grammar: &Grammar, given: &str) -> (Option<(&'static str, Val)>, bool) {
    if let Some(exact) = grammar.longs().find(|(n, _)| *n == given) {
        return (Some(exact), false);
    }
    let mut matches = grammar.longs().filter(|(n, _)| n.starts_with(given));
    match (matches.next(), matches.next()) {
        (Some(one), None) => (Some(one), false),
        (Some(_), Some(_)) => (None, true),
        _ => (None, false),
    }
}

/// Parses `args` under `grammar`.
pub fn parse(grammar: &Grammar, args: &[String]) -> Parsed {
    let mut out = Vec::new();
    parse_options(grammar, args, 0, false, false, &mut out);
    Parsed { args: out }
}

/// Parses `args` the way OpenSSH's ssh reads its command line: options, the destination,
/// then options again up to the first word of the remote command, after which every word is
/// an operand. ssh.c restarts getopt once it has taken the destination (`goto again`), so
/// `ssh host -o ProxyCommand=CMD` sets the option just like `ssh -o ProxyCommand=CMD host`;
/// a `--` before the destination ends options for good. `grammar.permute` is ignored: ssh's
/// getopt (OpenSSH's own, on glibc systems too) never permutes.
pub fn parse_around_first_operand(grammar: &Grammar, args: &[String]) -> Parsed {
    let strict = Grammar {
        permute: false,
        ..*grammar
    };
    let mut out = Vec::new();
    if let Some(first) = parse_options(&strict, args, 0, false, true, &mut out) {
        out.push(Arg::Operand(args[first].clone()));
        parse_options(&strict, args, first + 1, false, false, &mut out);
    }
    Parsed { args: out }
}

/// Parses `args` under `grammar` for a tool whose first argument, when it does not start
/// with `-`, is an old-style key bundle: GNU tar's `tar cf a.tar f`, `tar xzf a.tgz`.
///
/// GNU tar's semantics (tar.c, "Convert old-style tar call"): every letter of the bundle is
/// a short option, and each letter that takes a value takes the next unused word, in order.
/// `tar cfb a.tar 20 f` is `-c -f a.tar -b 20 f`, and `tar cfI a.tar prog f` is
/// `-c -f a.tar -I prog f`; the rest of the argv is then parsed as usual. Reading the bundle
/// as `-cfI` instead would let `f` swallow `I` and hide `-I`, which runs a program.
pub fn parse_old_style(grammar: &Grammar, args: &[String]) -> Parsed {
    let Some(bundle) = args.first().filter(|a| !a.starts_with('-')) else {
        return parse(grammar, args);
    };
    let mut out = Vec::new();
    let mut next = 1;
    let mut options_done = false;
    for c in bundle.chars() {
        // GNU tar turns a `-` in the bundle into `--`, which ends options: every later letter,
        // its value and every later word are operands.
        if c == '-' {
            options_done = true;
            continue;
        }
        let value = if grammar.short_value.contains(c) {
            let word = args.get(next).cloned();
            next += usize::from(word.is_some());
            word
        } else {
            None
        };
        if options_done {
            out.push(Arg::Operand(format!("-{c}")));
            out.extend(value.map(Arg::Operand));
        } else {
            out.push(Arg::Opt {
                name: format!("-{c}"),
                value,
                ambiguous: false,
            });
        }
    }
    parse_options(grammar, args, next, options_done, false, &mut out);
    Parsed { args: out }
}

/// The getopt_long loop over `args[start..]`, appending to `out`. With `stop_at_operand`,
/// the first operand met while options are still being read is not appended: the loop stops
/// and returns its index instead (`None` when there was none).
fn parse_options(
    grammar: &Grammar,
    args: &[String],
    start: usize,
    mut options_done: bool,
    stop_at_operand: bool,
    out: &mut Vec<Arg>,
) -> Option<usize> {
    let mut i = start;
    while i < args.len() {
        let a = &args[i];
        i += 1;
        if stop_at_operand && !options_done && (a == "-" || !a.starts_with('-')) {
            return Some(i - 1);
        }
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
                Some((n, v)) => (format!("--{n}"), v),
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
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const G: Grammar = Grammar {
        short_value: "oI",
        long: "output= force follow compress-program=",
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

    /// A few of GNU tar's value-taking letters.
    const TAR: Grammar = Grammar {
        short_value: "bfIC",
        long: "file= create",
        permute: true,
    };

    fn old(args: &[&str]) -> Vec<Arg> {
        parse_old_style(
            &TAR,
            &args.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
        )
        .args
    }

    fn operand(s: &str) -> Arg {
        Arg::Operand(s.into())
    }

    #[test]
    fn old_style_letters_take_the_next_words_in_order() {
        assert_eq!(
            old(&["cfb", "a.tar", "20", "f"]),
            [
                opt("-c", None),
                opt("-f", Some("a.tar")),
                opt("-b", Some("20")),
                operand("f")
            ]
        );
        assert_eq!(
            old(&["cfI", "a.tar", "prog", "x"]),
            [
                opt("-c", None),
                opt("-f", Some("a.tar")),
                opt("-I", Some("prog")),
                operand("x")
            ],
            "`I` takes its own word: `f` must not swallow it"
        );
        assert_eq!(
            old(&["cIf", "prog", "a.tar"]),
            [
                opt("-c", None),
                opt("-I", Some("prog")),
                opt("-f", Some("a.tar"))
            ]
        );
        assert_eq!(
            old(&["xf", "a.tar", "f", "--cre", "-C", "d"]),
            [
                opt("-x", None),
                opt("-f", Some("a.tar")),
                operand("f"),
                opt("--create", None),
                opt("-C", Some("d"))
            ],
            "the rest of the argv parses as usual"
        );
        assert_eq!(
            old(&["cf"]),
            [opt("-c", None), opt("-f", None)],
            "no word left"
        );
        assert_eq!(
            old(&[""]),
            Vec::<Arg>::new(),
            "an empty bundle has no letters"
        );
    }

    #[test]
    fn only_a_first_argument_without_a_dash_is_an_old_style_bundle() {
        assert_eq!(
            old(&["-cfI", "x"]),
            [opt("-c", None), opt("-f", Some("I")), operand("x")],
            "a dash-led bundle is an ordinary getopt bundle"
        );
        assert_eq!(
            old(&["-c", "cfI", "x"]),
            [opt("-c", None), operand("cfI"), operand("x")]
        );
        assert_eq!(
            parse(&TAR, &["cfI".to_string(), "x".to_string()]).args,
            [operand("cfI"), operand("x")],
            "the plain parser knows no old style"
        );
    }

    #[test]
    fn a_dash_inside_an_old_style_bundle_ends_options() {
        // GNU tar explodes `cI-b` into `-c -I prog -- -b 20`: after `--` all are operands.
        assert_eq!(
            old(&["cI-b", "prog", "20", "-f", "x"]),
            [
                opt("-c", None),
                opt("-I", Some("prog")),
                operand("-b"),
                operand("20"),
                operand("-f"),
                operand("x")
            ]
        );
    }

    fn around(args: &[&str]) -> Vec<Arg> {
        parse_around_first_operand(&G, &args.iter().map(|s| s.to_string()).collect::<Vec<_>>()).args
    }

    #[test]
    fn options_resume_once_after_the_first_operand() {
        // `ssh host -o X cmd -o Y`: the second `-o` belongs to the remote command.
        assert_eq!(
            around(&["-I", "a", "host", "-oX", "cmd", "-o", "Y"]),
            [
                opt("-I", Some("a")),
                operand("host"),
                opt("-o", Some("X")),
                operand("cmd"),
                operand("-o"),
                operand("Y")
            ]
        );
        assert_eq!(
            around(&["--", "host", "-oX"]),
            [operand("host"), operand("-oX")],
            "`--` before the destination ends options for good"
        );
        assert_eq!(
            around(&["host", "--", "-oX"]),
            [operand("host"), operand("-oX")]
        );
        assert_eq!(around(&["-oX"]), [opt("-o", Some("X"))], "no operand");
    }
}
