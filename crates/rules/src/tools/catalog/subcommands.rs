//! Subcommand tables: the grammar of programs whose first operand picks what they do (git),
//! as data a [`Spec`](super::spec::Spec) points to, and the matcher that reads an argv against it.
//!
//! Owns the second half of such an argv: which subcommand it names, what that subcommand's
//! options mean (`-u` is `--upload-pack` for `git fetch` but a flag for `git push`), which of
//! them are escapes or paths, which subcommands (or second words, `submodule foreach`) are
//! escapes in themselves, what to say about a subcommand the table does not list, and which
//! options or operands mean an option they do not spell (`git push +main` forces), for the
//! operator's argument rules.
//!
//! It must never let a misread hide an option: whether a short option takes a value depends
//! on the subcommand, so the options are read twice, once with the table's value-taking
//! letters and once with none, and an escape found in either reading counts.

use crate::tools::inspection::{Inspection, PathCheck};
use crate::tools::parse::{Arg, Grammar, Parsed, parse};

/// The subcommands of one program and the options that may follow them.
#[derive(Debug, Clone, Copy)]
pub struct Subcommands {
    /// The options after the subcommand: every subcommand's long options, and the short
    /// letters that take a value under some subcommand.
    pub grammar: Grammar,
    /// Options that are escapes after any subcommand.
    pub escapes: &'static [OptEscape],
    /// Options whose value is a path after any subcommand.
    pub path_opts: &'static [&'static str],
    /// Every subcommand the program has. A name not here gets `unknown`.
    pub table: &'static [Sub],
    /// How a subcommand the table does not list is refused, if it is.
    pub unknown: Option<Unknown>,
}

/// The escape for a subcommand the table does not list (for git: an alias or a `git-*`
/// program, which run whatever they are set to).
#[derive(Debug, Clone, Copy)]
pub struct Unknown {
    /// The escape's id.
    pub id: &'static str,
    /// Why, after "`program sub` "; `{sub}` stands for the name given.
    pub why: &'static str,
}

/// An option that is an escape after a subcommand.
#[derive(Debug, Clone, Copy)]
pub struct OptEscape {
    /// The canonical option (with dashes), which is also the escape's id.
    pub id: &'static str,
    /// Other options that mean the same escape (`--tool` runs a program like `--extcmd`).
    pub also: &'static [&'static str],
    /// Why, after "`program sub option` ".
    pub why: &'static str,
}

/// One subcommand (or several that share their meaning).
#[derive(Debug, Clone, Copy)]
pub struct Sub {
    /// Its names.
    pub names: &'static [&'static str],
    /// Short options that, under this subcommand, are another spelling of a long option of
    /// the table: (`"-u"`, `"--upload-pack"`).
    pub aliases: &'static [(&'static str, &'static str)],
    /// Options that are escapes under this subcommand only.
    pub escapes: &'static [OptEscape],
    /// The subcommand itself is an escape.
    pub refuse: Option<Refusal>,
    /// Second words with a meaning of their own (`submodule foreach`, `bundle create`).
    pub words: &'static [Word],
    /// Hardening inserted right after the subcommand (`git diff --no-ext-diff`).
    pub inject: &'static [&'static str],
    /// Spellings under this subcommand that mean a long option they do not spell, so that an
    /// operator's `deny_args` written with the option catch them too.
    pub implies: &'static [Implies],
}

/// A subcommand plain enough that only the table's own options concern it.
pub const PLAIN: Sub = Sub {
    names: &[],
    aliases: &[],
    escapes: &[],
    refuse: None,
    words: &[],
    inject: &[],
    implies: &[],
};

/// One spelling that means a long option without spelling it.
#[derive(Debug, Clone, Copy)]
pub struct Implies {
    /// The spelling.
    pub by: ImpliedBy,
    /// The long option it means, without dashes (`"force"`).
    pub means: &'static str,
}

/// Where an implied option hides.
#[derive(Debug, Clone, Copy)]
pub enum ImpliedBy {
    /// An option (canonical, with dashes; its abbreviations and the subcommand's aliases
    /// count): `--force-with-lease`, `-f`.
    Option(&'static str),
    /// An operand that starts with this text: `+` in `git push origin +main`.
    OperandPrefix(&'static str),
}

/// A second word after a subcommand: the first operand of the subcommand's options.
#[derive(Debug, Clone, Copy)]
pub struct Word {
    /// Its names.
    pub names: &'static [&'static str],
    /// The word is an escape.
    pub refuse: Option<Refusal>,
    /// How many operands after the word are paths (`bundle create FILE`).
    pub path_operands: usize,
    /// Hardening inserted right after the word, when it directly follows the subcommand
    /// (`git stash show --no-ext-diff`).
    pub inject: &'static [&'static str],
}

/// Why a subcommand or word is an escape, unless it is read-only.
#[derive(Debug, Clone, Copy)]
pub struct Refusal {
    /// Why, after "`program sub` ".
    pub why: &'static str,
    /// Options that make it read-only (`git config --get`); empty: always refused.
    pub unless: &'static [&'static str],
}

impl Refusal {
    /// Refused always, whatever the options.
    pub const fn always(why: &'static str) -> Self {
        Refusal { why, unless: &[] }
    }

    fn applies(&self, options: &Parsed) -> bool {
        !self.unless.iter().any(|o| options.has(o))
    }
}

/// The subcommand and the words after it, unparsed. The subcommand is the first operand;
/// the program's global grammar does not permute, so it stops there and every later word is
/// an operand of `parsed`, whose meaning is the subcommand's.
fn split_subcommand(parsed: &Parsed) -> Option<(&str, Vec<String>)> {
    let mut after = parsed
        .args
        .iter()
        .skip_while(|a| matches!(a, Arg::Opt { .. }));
    let Some(Arg::Operand(sub)) = after.next() else {
        return None;
    };
    let rest = after
        .filter_map(|a| match a {
            Arg::Operand(s) => Some(s.clone()),
            Arg::Opt { .. } => None,
        })
        .collect();
    Some((sub, rest))
}

/// `rest` read twice: with the table's value-taking letters, and with none, so that an
/// option hidden behind a misread value (`git push -u --receive-pack=CMD`) is still found.
fn both_readings(table: &Subcommands, rest: &[String]) -> (Parsed, Parsed) {
    let flags = Grammar {
        short_value: "",
        ..table.grammar
    };
    (parse(&table.grammar, rest), parse(&flags, rest))
}

/// Whether option `name` as parsed (after alias resolution) means `full`: it is `full`, or an
/// ambiguous abbreviation that could be it.
fn means(name: &str, ambiguous: bool, full: &str) -> bool {
    let given = name.trim_start_matches('-');
    name == full || (ambiguous && full.trim_start_matches('-').starts_with(given))
}

/// The long options the subcommand part of `parsed` means without spelling them, by the
/// subcommand's [`Implies`], in both readings (an implied option can only make an operator's
/// rule deny more).
pub(crate) fn implied(table: &Subcommands, parsed: &Parsed) -> Vec<&'static str> {
    let Some((sub, rest)) = split_subcommand(parsed) else {
        return Vec::new();
    };
    let Some(entry) = table.table.iter().find(|s| s.names.contains(&sub)) else {
        return Vec::new();
    };
    let (options, flags_only) = both_readings(table, &rest);
    let mut out = Vec::new();
    for arg in options.args.iter().chain(&flags_only.args) {
        for imp in entry.implies {
            let hit = match (arg, imp.by) {
                (
                    Arg::Opt {
                        name, ambiguous, ..
                    },
                    ImpliedBy::Option(opt),
                ) => {
                    let name = entry
                        .aliases
                        .iter()
                        .find(|(short, _)| short == name)
                        .map_or(name.as_str(), |(_, long)| *long);
                    means(name, *ambiguous, opt)
                }
                (Arg::Operand(o), ImpliedBy::OperandPrefix(prefix)) => o.starts_with(prefix),
                _ => false,
            };
            if hit && !out.contains(&imp.means) {
                out.push(imp.means);
            }
        }
    }
    out
}

/// Reads the subcommand part of `parsed` (the whole argv, parsed with the program's global,
/// non-permuting grammar) against `table`. `program` names the tool in the reasons;
/// `words` is how many arguments the argv has (program excluded), to place injections.
pub(crate) fn inspect(
    table: &Subcommands,
    program: &str,
    parsed: &Parsed,
    words: usize,
    insp: &mut Inspection,
) {
    let Some((sub, rest)) = split_subcommand(parsed) else {
        return;
    };
    // The subcommand's name is not a path.
    insp.paths
        .retain(|c| !matches!(c, PathCheck::Generic(v) if v == sub));
    let listed = table.table.iter().find(|s| s.names.contains(&sub));
    if listed.is_none()
        && let Some(unknown) = &table.unknown
    {
        insp.escape(
            unknown.id,
            format!("`{program} {sub}` {}", unknown.why.replace("{sub}", sub)),
        );
    }
    let entry = listed.unwrap_or(&PLAIN);
    // The global grammar stops at the subcommand, so each later word is one operand: the
    // subcommand is argument `words - rest.len() - 1`.
    let at = words.checked_sub(rest.len() + 1);
    if let Some(at) = at
        && !entry.inject.is_empty()
    {
        insp.inject_after
            .push((at, entry.inject.iter().map(|a| (*a).to_owned()).collect()));
    }
    let (options, flags_only) = both_readings(table, &rest);
    for (name, value, ambiguous) in options.options().chain(flags_only.options()) {
        let name = entry
            .aliases
            .iter()
            .find(|(short, _)| *short == name)
            .map_or(name, |(_, long)| *long);
        // An ambiguous abbreviation means every option it abbreviates.
        let is = |full: &str| means(name, ambiguous, full);
        for esc in table.escapes.iter().chain(entry.escapes) {
            if is(esc.id) || esc.also.iter().any(|o| is(o)) {
                insp.escape(esc.id, format!("`{program} {sub} {}` {}", esc.id, esc.why));
            }
        }
        if let Some(v) = value
            && table.path_opts.iter().any(|o| is(o))
        {
            insp.paths.push(PathCheck::Path(v.to_owned()));
        }
    }
    if let Some(refusal) = &entry.refuse
        && refusal.applies(&options)
    {
        insp.escape(sub, format!("`{program} {sub}` {}", refusal.why));
    }
    let mut operands = options.operands();
    if let Some(first) = operands.next()
        && let Some(word) = entry.words.iter().find(|w| w.names.contains(&first))
    {
        if let Some(refusal) = &word.refuse
            && refusal.applies(&options)
        {
            insp.escape(
                &format!("{sub} {first}"),
                format!("`{program} {sub} {first}` {}", refusal.why),
            );
        }
        insp.paths.extend(
            operands
                .take(word.path_operands)
                .map(|o| PathCheck::Path(o.to_owned())),
        );
        // Only where the word is the very next argument is its place certain.
        if let Some(at) = at
            && !word.inject.is_empty()
            && rest.first().map(String::as_str) == Some(first)
        {
            insp.inject_after.push((
                at + 1,
                word.inject.iter().map(|a| (*a).to_owned()).collect(),
            ));
        }
    }
}

#[cfg(test)]
mod tests {

    use super::*;

    /// A made-up program, so that the matcher is tested apart from git's facts.
    const TABLE: Subcommands = Subcommands {
        grammar: Grammar {
            short_value: "ro",
            long: "run= rung out= read-only",
            permute: true,
        },
        escapes: &[OptEscape {
            id: "--run",
            also: &[],
            why: "runs a program",
        }],
        path_opts: &["--out"],
        table: &[
            Sub {
                names: &["get"],
                aliases: &[("-r", "--run"), ("-o", "--out")],
                implies: &[
                    Implies {
                        by: ImpliedBy::Option("--out"),
                        means: "write",
                    },
                    Implies {
                        by: ImpliedBy::OperandPrefix("+"),
                        means: "force",
                    },
                ],
                ..PLAIN
            },
            Sub {
                names: &["set"],
                refuse: Some(Refusal {
                    why: "writes",
                    unless: &["--read-only"],
                }),
                ..PLAIN
            },
            Sub {
                names: &["job"],
                words: &[
                    Word {
                        names: &["exec"],
                        refuse: Some(Refusal::always("runs a command")),
                        path_operands: 0,
                        inject: &[],
                    },
                    Word {
                        names: &["save"],
                        refuse: None,
                        path_operands: 1,
                        inject: &[],
                    },
                ],
                ..PLAIN
            },
        ],
        unknown: Some(Unknown {
            id: "alias",
            why: "is unknown: it would run prog-{sub}",
        }),
    };

    const GLOBAL: Grammar = Grammar {
        short_value: "",
        long: "",
        permute: false,
    };

    fn check(args: &[&str]) -> Inspection {
        let args: Vec<String> = args.iter().map(|s| (*s).to_owned()).collect();
        let parsed = parse(&GLOBAL, &args);
        let mut insp = Inspection {
            paths: parsed
                .operands()
                .map(|o| PathCheck::Generic(o.to_owned()))
                .collect(),
            ..Inspection::default()
        };
        inspect(&TABLE, "prog", &parsed, args.len(), &mut insp);
        insp
    }

    fn ids(insp: &Inspection) -> Vec<&str> {
        insp.escapes.iter().map(|e| e.id.as_str()).collect()
    }

    #[test]
    fn an_unlisted_subcommand_gets_the_unknown_escape() {
        let insp = check(&["frob", "x"]);
        assert_eq!(ids(&insp), ["alias"]);
        assert_eq!(
            insp.escapes[0].reason,
            "`prog frob` is unknown: it would run prog-frob"
        );
        assert!(check(&["get"]).escapes.is_empty());
        assert!(check(&[]).escapes.is_empty(), "no subcommand");
    }

    #[test]
    fn the_subcommand_name_is_not_a_path() {
        assert_eq!(check(&["get", "x"]).paths, [PathCheck::Generic("x".into())]);
    }

    #[test]
    fn option_escapes_in_every_spelling() {
        for args in [
            &["get", "--run=x"][..],
            &["get", "--run", "x"],
            &["set", "--ru", "x"],
            &["get", "-r", "x"],
            &["get", "-rx"],
        ] {
            let insp = check(args);
            assert!(ids(&insp).contains(&"--run"), "{args:?}");
        }
        assert_eq!(
            check(&["set", "--run=x"]).escapes[0].reason,
            "`prog set --run` runs a program"
        );
        assert!(
            check(&["job", "-r", "x"]).escapes.is_empty(),
            "`-r` means `--run` only under `get`"
        );
        assert!(check(&["get", "--rung"]).escapes.is_empty());
    }

    #[test]
    fn an_option_behind_a_misread_value_is_still_found() {
        // `-r` takes a value in the table's grammar, so the first reading swallows `--run=x`.
        // The reading with no values finds it.
        assert_eq!(ids(&check(&["job", "-r", "--run=x"])), ["--run"]);
    }

    #[test]
    fn path_options_through_aliases() {
        let paths = check(&["get", "-o", "/o", "--out=/p"]).paths;
        assert!(paths.contains(&PathCheck::Path("/o".into())));
        assert!(paths.contains(&PathCheck::Path("/p".into())));
        assert!(
            !check(&["set", "-o", "/o"])
                .paths
                .contains(&PathCheck::Path("/o".into()))
        );
    }

    #[test]
    fn a_refused_subcommand_unless_read_only() {
        let insp = check(&["set", "k", "v"]);
        assert_eq!(ids(&insp), ["set"]);
        assert_eq!(insp.escapes[0].reason, "`prog set` writes");
        assert!(check(&["set", "--read-only", "k"]).escapes.is_empty());
    }

    #[test]
    fn second_words() {
        let insp = check(&["job", "--rung", "exec", "x"]);
        assert_eq!(ids(&insp), ["job exec"]);
        assert_eq!(insp.escapes[0].reason, "`prog job exec` runs a command");
        let paths = check(&["job", "save", "/f", "/g"]).paths;
        assert!(paths.contains(&PathCheck::Path("/f".into())));
        assert!(
            !paths.contains(&PathCheck::Path("/g".into())),
            "one operand"
        );
        assert!(check(&["job", "list", "exec"]).escapes.is_empty());
    }

    fn implied_by(args: &[&str]) -> Vec<&'static str> {
        let args: Vec<String> = args.iter().map(|s| (*s).to_owned()).collect();
        implied(&TABLE, &parse(&GLOBAL, &args))
    }

    #[test]
    fn implied_options_through_aliases_abbreviations_and_operands() {
        assert_eq!(implied_by(&["get", "--out=x"]), ["write"]);
        assert_eq!(implied_by(&["get", "--ou", "x"]), ["write"]);
        assert_eq!(implied_by(&["get", "-o", "x"]), ["write"], "alias");
        assert_eq!(implied_by(&["get", "a", "+b", "-ox"]), ["force", "write"]);
        // `-r` takes a value in the first reading and hides `+b`; the second finds it.
        assert_eq!(implied_by(&["get", "-r", "+b"]), ["force"]);
        assert!(
            implied_by(&["set", "--out=x", "+b"]).is_empty(),
            "only under `get`"
        );
        assert!(
            implied_by(&["frob", "+b"]).is_empty(),
            "an unlisted subcommand"
        );
        assert!(implied_by(&[]).is_empty());
    }
}
