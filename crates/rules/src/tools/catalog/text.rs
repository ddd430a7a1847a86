//! Text filters with a language of their own: sort, sed, awk (gawk, mawk, nawk), jq.
//!
//! Owns the options that run programs (`sort --compress-program`, `awk --load`, mawk's
//! `-W exec`), which operand is the script, which awk operands are files and which are
//! assignments, sort's list of names (`--files0-from`), and the checks inside the scripts:
//! sed's `e`/`r`/`w` commands and flags, awk's `system()`, pipes, `getline`, redirection,
//! `ARGV` (which changes the files read) and gawk's `@include`/`@load` (which read source
//! files or load code). gawk and GNU sed also get their sandbox flags injected, as defence
//! in depth behind those checks.
//!
//! It must never pass a script it cannot read to the end: a script check fails closed, and
//! an awk program in a file (`-f`, `-W exec`) is refused where no sandbox can stand behind
//! the check.

use std::path::Path;

use super::spec::{BASE, Operands, Spec};
use crate::tools::inspection::{Inspection, PathCheck};
use crate::tools::parse::{Arg, Grammar, Parsed};

pub(crate) const SPECS: &[Spec] = &[
    Spec {
        names: &["sort"],
        grammar: Grammar {
            short_value: "oTSkt",
            long: "output= temporary-directory= compress-program= files0-from= key= \
                   field-separator= buffer-size= parallel= batch-size= random-source= reverse \
                   numeric-sort unique",
            permute: true,
        },
        escapes: &[(
            "--compress-program",
            "`sort --compress-program` runs a program of the caller's choosing",
        )],
        path_opts: &[
            "-o",
            "--output",
            "-T",
            "--temporary-directory",
            "--random-source",
        ],
        name_lists: &["--files0-from"],
        ..BASE
    },
    Spec {
        names: &["sed"],
        grammar: Grammar {
            short_value: "efl",
            long: "expression= file= line-length= in-place=? sandbox separate",
            permute: true,
        },
        path_opts: &["-f", "--file"],
        program_opts: &["-e", "--expression", "-f", "--file"],
        operands: Operands::AfterProgram,
        // GNU sed's sandbox refuses the `e`, `r` and `w` commands and the `s///e` and `s///w`
        // flags at run time too: defence in depth behind the script check.
        inject_args: &["--sandbox"],
        custom: Some(sed),
        ..BASE
    },
    Spec {
        names: &["awk", "gawk", "mawk", "nawk"],
        grammar: Grammar {
            short_value: "fvFWe",
            long: "file= assign= field-separator= sandbox load= include= source= exec=",
            permute: false,
        },
        escapes: &[
            ("--load", "`awk --load` loads a shared-library extension"),
            ("-l", "`awk -l` loads a shared-library extension"),
            (
                "--exec",
                "`awk --exec` runs a program file given as the last option",
            ),
            (
                "-E",
                "`awk -E` runs a program file given as the last option",
            ),
        ],
        path_opts: &["-f", "--file", "--include", "-i"],
        program_opts: &["-f", "--file", "--source", "-e"],
        operands: Operands::AfterProgram,
        custom: Some(awk),
        reads_program: true,
        ..BASE
    },
    Spec {
        names: &["jq"],
        grammar: Grammar {
            short_value: "fL",
            long: "from-file= arg= argjson= slurpfile= rawfile= indent=",
            permute: true,
        },
        path_opts: &["-f", "--from-file", "-L"],
        program_opts: &["-f", "--from-file"],
        operands: Operands::AfterProgram,
        custom: Some(jq),
        ..BASE
    },
];

/// mawk and busybox awk have no sandbox: refuse the constructs that run commands or write
/// files. gawk gets `--sandbox`, which refuses them itself.
fn awk(p: &Parsed, _: &[String], program: Option<&Path>, insp: &mut Inspection) {
    // `program` is the real file (symlinks resolved by the caller).
    let is_gawk = program
        .and_then(Path::file_name)
        .is_some_and(|n| n.to_string_lossy().starts_with("gawk"));
    if is_gawk {
        insp.inject_args.push("--sandbox".into());
    }
    if p.has("-f") || p.has("--file") {
        insp.escape(
            "-f",
            "awk here has no sandbox, so a program file cannot be checked: pass the program inline",
        );
        return;
    }
    for value in p.opts("-W") {
        if let Some(why) = awk_w_option(value.unwrap_or("")) {
            insp.escape("-W", why);
        }
    }
    // The program is the first operand, or the text of every -e / --source option.
    let sources: Vec<&str> = p.opts("-e").chain(p.opts("--source")).flatten().collect();
    let text: String = if sources.is_empty() {
        match p.operands().next() {
            Some(t) => t.to_owned(),
            None => return,
        }
    } else {
        sources.join("\n")
    };
    let checks = [
        ("system", "`system()`, which runs a shell command"),
        ("|", "`|`, which pipes to or from a shell command"),
        (
            "getline",
            "`getline`, which can read a command's output or any file",
        ),
        (
            ">",
            "`>`, which can redirect output into any file (this awk has no sandbox; allowlist gawk to compare with `>`)",
        ),
        ("ENVIRON", "ENVIRON, which reads the environment"),
        // Each element of ARGV past the program is read as a file when the input reaches it:
        // `BEGIN{ARGV[1]="/etc/passwd"; ARGC=2}` reads a file no argument names (reproduced
        // with mawk). gawk's SYMTAB reaches ARGV by a name built at run time.
        (
            "ARGV",
            "ARGV, which the program can change to read files no argument names",
        ),
        (
            "SYMTAB",
            "SYMTAB, which reaches ARGV and every other variable by a name built at run time",
        ),
    ];
    for (needle, why) in checks {
        // gawk's sandbox already refuses output redirection (`>` is then only a comparison)
        // and adding a file to ARGV ("cannot add a new file to ARGV in sandbox mode", gawk
        // 5.2); it does not refuse `@include`, checked below for every awk.
        if text.contains(needle) && !(is_gawk && matches!(needle, ">" | "ARGV" | "SYMTAB")) {
            insp.escape(needle, format!("awk program uses {why}"));
        }
    }
    for (directive, why) in [
        (
            "include",
            "`@include`, which reads another source file (any file: its lines show in the errors)",
        ),
        ("load", "`@load`, which loads a shared-library extension"),
    ] {
        if has_directive(&text, directive) {
            insp.escape(&format!("@{directive}"), format!("awk program uses {why}"));
        }
    }
    // Operands after the program are files, except `name=value` assignments. awk takes an
    // operand for an assignment only when what precedes its first `=` is a variable name
    // (POSIX: an underscore or letter, then underscores, digits and letters); anything else
    // is a file name, `./a=b/../../x` included, and stays a path.
    insp.paths
        .retain(|c| !matches!(c, PathCheck::Path(v) if is_awk_assignment(v)));
}

/// Whether an awk operand is a variable assignment (`name=value`) rather than a file.
fn is_awk_assignment(operand: &str) -> bool {
    let Some((name, _)) = operand.split_once('=') else {
        return false;
    };
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
}

/// Whether `text` holds gawk's `@directive`. gawk's lexer skips blanks (and a backslash
/// line continuation) between the `@` and the word, so `@ include` counts; a match inside a
/// string only refuses more.
fn has_directive(text: &str, directive: &str) -> bool {
    text.match_indices('@').any(|(at, _)| {
        let mut rest = &text[at + 1..];
        loop {
            let trimmed = rest.trim_start_matches([' ', '\t', '\r']);
            match trimmed.strip_prefix("\\\n") {
                Some(after) => rest = after,
                None => {
                    rest = trimmed;
                    break;
                }
            }
        }
        rest.starts_with(directive)
    })
}

/// Why one `-W` option (mawk's implementation options, gawk's spelling of any long option)
/// is refused, if it is. mawk takes any abbreviation (`-W e file` is `-W exec file`: the
/// program is read from `file`, reproduced), and gawk reads `-W name` as `--name`, so a
/// name is allowed only when it abbreviates a harmless option and nothing that reads a
/// program or source file, loads code, or writes a file of the caller's choosing.
fn awk_w_option(value: &str) -> Option<String> {
    const HARMLESS: &[&str] = &[
        "version",
        "help",
        "usage",
        "interactive",
        "posix_space",
        "random",
        "sprintf",
        "lint",
        "posix",
        "traditional",
        "sandbox",
        "copyright",
        "characters-as-bytes",
        "re-interval",
        "optimize",
        "no-optimize",
        "use-lc-numeric",
        "non-decimal-data",
    ];
    const DANGEROUS: &[&str] = &[
        "exec",
        "file",
        "source",
        "include",
        "load",
        "dump",
        "dump-variables",
        "profile",
        "pretty-print",
        "debug",
    ];
    let name = value
        .split('=')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    let dangerous = DANGEROUS
        .iter()
        .any(|d| d.starts_with(name.as_str()) || name.starts_with(d));
    let harmless = !name.is_empty() && HARMLESS.iter().any(|h| h.starts_with(name.as_str()));
    if harmless && !dangerous {
        return None;
    }
    Some(format!(
        "`awk -W {value}` could read the program or a source file from a file (mawk's `-W exec`, gawk's `-W file`/`-W source`), load code or write a file: only `-W version`, `-W interactive` and other harmless options are allowed"
    ))
}

/// Refuses sed scripts that run commands or touch files: the `e`, `r`, `R`, `w`, `W`
/// commands and the `e` and `w` flags of `s`. Fail closed: anything unparsable counts.
fn sed(p: &Parsed, _: &[String], _: Option<&Path>, insp: &mut Inspection) {
    let mut scripts: Vec<&str> = p
        .opts("-e")
        .chain(p.opts("--expression"))
        .flatten()
        .collect();
    let from_opts = !scripts.is_empty() || p.has("-f") || p.has("--file");
    if !from_opts && let Some(first) = p.operands().next() {
        scripts.push(first);
    }
    for script in scripts {
        if let Some((id, why)) = sed_script_escape(script) {
            insp.escape(id, format!("sed script uses {why}"));
        }
    }
}

/// The first escape in one sed script, as (id, what it does).
fn sed_script_escape(script: &str) -> Option<(&'static str, &'static str)> {
    let chars: Vec<char> = script.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        // Skip separators, addresses (`1,5`, `$`, `/re/`, `\%re%`) and negation.
        let c = chars[i];
        if c.is_whitespace()
            || matches!(c, ';' | '{' | '}' | ',' | '!' | '$' | '~' | '+')
            || c.is_ascii_digit()
        {
            i += 1;
            continue;
        }
        if c == '/' || c == '\\' {
            let delim = if c == '\\' {
                chars.get(i + 1).copied().unwrap_or('/')
            } else {
                '/'
            };
            i += if c == '\\' { 2 } else { 1 };
            while i < chars.len() && chars[i] != delim {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            // Address flags such as `I` and `M`.
            while i < chars.len() && matches!(chars[i], 'I' | 'M') {
                i += 1;
            }
            continue;
        }
        match c {
            'e' => return Some(("e", "the `e` command, which runs a shell command")),
            'r' | 'R' => {
                return Some((
                    "r",
                    "the `r`/`R` command, which reads a file of the caller's choosing",
                ));
            }
            'w' | 'W' => {
                return Some((
                    "w",
                    "the `w`/`W` command, which writes a file of the caller's choosing",
                ));
            }
            's' | 'y' => {
                let &delim = chars.get(i + 1)?;
                i += 2;
                for _ in 0..2 {
                    while i < chars.len() && chars[i] != delim {
                        i += if chars[i] == '\\' { 2 } else { 1 };
                    }
                    i += 1;
                }
                if c == 's' {
                    while i < chars.len() && !matches!(chars[i], ';' | '}' | '\n') {
                        match chars[i] {
                            'e' => {
                                return Some((
                                    "s///e",
                                    "the `e` flag of `s`, which runs the pattern space as a command",
                                ));
                            }
                            'w' | 'W' => {
                                return Some((
                                    "s///w",
                                    "the `w` flag of `s`, which writes a file of the caller's choosing",
                                ));
                            }
                            _ => i += 1,
                        }
                    }
                }
            }
            // Commands with a text argument to end of line: a, i, c, and labels b, t, T, :
            'a' | 'i' | 'c' | 'b' | 't' | 'T' | ':' => {
                while i < chars.len() && chars[i] != '\n' && chars[i] != ';' {
                    i += 1;
                }
            }
            _ => i += 1,
        }
    }
    None
}

/// jq: the FILE of `--slurpfile NAME FILE` and `--rawfile NAME FILE`.
fn jq(p: &Parsed, _: &[String], _: Option<&Path>, insp: &mut Inspection) {
    // --slurpfile NAME FILE and --rawfile NAME FILE take two values; the second is a path.
    let args = &p.args;
    for (i, a) in args.iter().enumerate() {
        if let Arg::Opt { name, .. } = a
            && (name == "--slurpfile" || name == "--rawfile")
            && let Some(Arg::Operand(path)) = args.get(i + 1)
        {
            insp.paths.push(PathCheck::Path(path.clone()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{escapes, run};
    use super::{awk_w_option, has_directive, is_awk_assignment, sed_script_escape};

    /// Every case in `cases/text.txt`.
    #[test]
    fn cases() {
        super::super::testing::check_cases("text.txt", include_str!("cases/text.txt"));
    }

    #[test]
    fn sed_commands_and_flags_that_run_or_touch_files() {
        for (script, id) in [
            ("s/x/CMD/e", "s///e"),
            ("1e", "e"),
            ("w /tmp/out", "w"),
            ("s/a/b/w /tmp/x", "s///w"),
            ("1r /etc/passwd", "r"),
            ("/x/R f", "r"),
            ("$W f", "w"),
            ("\\%a%e", "e"),
        ] {
            assert_eq!(
                sed_script_escape(script).map(|(i, _)| i),
                Some(id),
                "{script}"
            );
        }
        for script in [
            "s/a/b/g",
            "s|/api/v1|/api/v2|",
            "1,5p",
            "/re/I d",
            "y/abc/xyz/",
            "a text with e and w",
            ":loop",
            "s/e/w/",
        ] {
            assert_eq!(sed_script_escape(script), None, "{script}");
        }
    }

    #[test]
    fn sed_reads_the_script_from_e_or_the_first_operand() {
        assert_eq!(escapes("sed -n 1p f"), Vec::<String>::new());
    }

    #[test]
    fn awk_without_a_sandbox_refuses_commands_pipes_and_redirection() {
        assert_eq!(run(&["awk", "BEGIN{print | \"sh\"}"]).escapes[0].id, "|");
        assert_eq!(
            run(&["awk", "{print > \"/tmp/x\"}", "f"]).escapes[0].id,
            ">"
        );
        assert_eq!(
            run(&["awk", "BEGIN{print ENVIRON[\"HOME\"]}"]).escapes[0].id,
            "ENVIRON"
        );
    }

    #[test]
    fn awk_operands_with_an_equals_sign_are_files_unless_a_name_precedes_it() {
        // The review's case: awk opens `./a=b/../../x` as a file, outside the jail.
        for operand in ["x=1", "_=y", "Name_2=../../etc", "x="] {
            assert!(is_awk_assignment(operand), "{operand}");
        }
        for operand in ["./a=b", "a/b=c", "=x", "é=1", "f", "1x=2", "a b=c"] {
            assert!(!is_awk_assignment(operand), "{operand}");
        }
    }

    #[test]
    fn awk_include_and_load_directives_are_refused() {
        for (program, id) in [
            ("@include \"/etc/passwd\"", "@include"),
            ("@include\"x.awk\" BEGIN{}", "@include"),
            ("@ include \"x\"", "@include"),
            ("@\\\ninclude \"x\"", "@include"),
            ("@load \"filefuncs\"", "@load"),
            ("BEGIN{x=1}\n\t@load \"rwarray\"", "@load"),
        ] {
            assert_eq!(run(&["awk", program, "f"]).escapes[0].id, id, "{program}");
        }
        assert_eq!(
            run(&["awk", "-e", "@include \"x\""]).escapes[0].id,
            "@include"
        );
        assert!(!has_directive("{print $1 \"@\" $2}", "include"));
        assert!(run(&["awk", "{print $1 \"@\" $2}", "f"]).escapes.is_empty());
    }

    #[test]
    fn awk_argv_changes_are_refused() {
        // Reproduced with mawk: the program reads a file no argument names.
        let insp = run(&["awk", "BEGIN{ARGV[1]=\"/etc/passwd\"; ARGC=2}{print}"]);
        assert_eq!(insp.escapes[0].id, "ARGV");
        assert_eq!(
            run(&["gawk", "BEGIN{SYMTAB[\"AR\" \"GV\"][1]=\"x\"}"]).escapes[0].id,
            "SYMTAB"
        );
        assert!(
            run(&["awk", "{print FILENAME, $1}", "f"])
                .escapes
                .is_empty()
        );
    }

    #[test]
    fn awk_w_options_that_read_programs_are_refused() {
        // mawk: `-W exec FILE` runs the program in FILE, in any abbreviation (reproduced).
        for command in [
            "awk -W exec p.awk",
            "awk -Wexec p.awk",
            "awk -We p.awk",
            "awk -W ex p.awk",
            "awk -W file=p.awk x",
            "awk -W source=BEGIN{} x",
            "awk -W load=ext 1",
            "awk -W dump=/tmp/x 1",
            "awk -W i x",
            "awk -W d 1",
            "awk -W every p.awk",
            "awk -W",
        ] {
            assert_eq!(
                escapes(command).first().map(String::as_str),
                Some("-W"),
                "{command}"
            );
        }
        for value in [
            "version",
            "v",
            "interactive",
            "posix_space",
            "random=3",
            "sprintf=99",
            "us",
        ] {
            assert_eq!(awk_w_option(value), None, "{value}");
        }
    }
}
