//! Command syntax without a shell.
//!
//! Owns turning a `command` string into a list of simple commands. POSIX quoting is
//! tokenization only: `echo "a;b"` is `echo` with the one argument `a;b`. Outside quotes,
//! `|`, `&&`, `||`, `;` (and a newline) build a list that the server wires itself. Everything
//! a shell would *expand or redirect* is refused with a reason, never interpreted: this module
//! must never produce an argv that differs from what the user would see quoted.
//!
//! Words are passed literally: there is no glob, brace, tilde or variable expansion.

use std::fmt;

/// Longest command string accepted (bytes).
pub const MAX_COMMAND_BYTES: usize = 64 * 1024;
/// Most simple commands in one list.
pub const MAX_STAGES: usize = 16;

pub use safe_mcp_contract::Sequence;

/// A parsed command: pipelines joined by `;`, `&&`, `||`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandList {
    /// Each pipeline is a list of stages; each stage is an argv (program first).
    pub pipelines: Vec<Vec<Vec<String>>>,
    /// `joins[i]` joins `pipelines[i]` to `pipelines[i + 1]`.
    pub joins: Vec<Sequence>,
}

impl CommandList {
    /// A single simple command given as an argv array.
    pub fn from_argv(argv: Vec<String>) -> Result<Self, SyntaxError> {
        if argv.iter().any(|a| a.contains('\0')) {
            return Err(SyntaxError::NulByte);
        }
        if argv.first().is_none_or(|p| p.is_empty()) {
            return Err(SyntaxError::Forbidden(Forbidden::EmptyCommand));
        }
        let total: usize = argv.iter().map(|a| a.len() + 1).sum();
        if total > MAX_COMMAND_BYTES {
            return Err(SyntaxError::TooLong);
        }
        Ok(CommandList {
            pipelines: vec![vec![argv]],
            joins: Vec::new(),
        })
    }

    /// Every stage in order, flattened.
    pub fn stages(&self) -> impl Iterator<Item = &Vec<String>> {
        self.pipelines.iter().flatten()
    }
}

/// A shell construct this server refuses instead of interpreting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Forbidden {
    /// `$VAR`, `${VAR}`, `$?`, or a bare `$`.
    VariableExpansion,
    /// `$(...)` or backticks.
    CommandSubstitution,
    /// `<`, `>`, `>>`, `2>&1`, `&>`.
    Redirection,
    /// `<<` or `<<<`.
    HereDoc,
    /// A lone `&`.
    Background,
    /// `(`, `)`, `{`, `}` as commands.
    Subshell,
    /// `NAME=value cmd`.
    LeadingAssignment,
    /// An unquoted word starting with `#`.
    Comment,
    /// `|&`.
    PipeStderr,
    /// Nothing to run: an empty string, `;;`, a trailing `|`, `&&`.
    EmptyCommand,
    /// An unquoted `*` or `?`: a shell would expand it to file names; here it would reach
    /// the program literally, which is never what was meant.
    Glob,
    /// `cd`, a shell builtin: there is no shell, and the cwd is an argument.
    ChangeDirectory,
}

impl Forbidden {
    /// Every refused construct, in the order `describe_policy` lists them.
    pub const ALL: [Forbidden; 12] = [
        Forbidden::VariableExpansion,
        Forbidden::CommandSubstitution,
        Forbidden::Redirection,
        Forbidden::HereDoc,
        Forbidden::Background,
        Forbidden::Subshell,
        Forbidden::LeadingAssignment,
        Forbidden::Comment,
        Forbidden::PipeStderr,
        Forbidden::EmptyCommand,
        Forbidden::Glob,
        Forbidden::ChangeDirectory,
    ];

    /// What it looks like, for `describe_policy`'s list of refused syntax.
    pub fn construct(self) -> &'static str {
        match self {
            Forbidden::VariableExpansion => "$VAR and ${VAR}",
            Forbidden::CommandSubstitution => "$(...) and backticks",
            Forbidden::Redirection => "< > >> 2>&1 redirections",
            Forbidden::HereDoc => "<< here-docs",
            Forbidden::Background => "& background",
            Forbidden::Subshell => "( ) { } groups",
            Forbidden::LeadingAssignment => {
                "NAME=value for other names, or with no command after it"
            }
            Forbidden::Comment => "unquoted # comments",
            Forbidden::PipeStderr => "|& (pipe stderr)",
            Forbidden::EmptyCommand => "empty commands (`;;`, a trailing `|` or `&&`)",
            Forbidden::Glob => "unquoted * and ? (no file-name expansion; quote them)",
            Forbidden::ChangeDirectory => "cd (pass the directory as `cwd`)",
        }
    }

    /// Why it is refused, as a sentence for the model.
    pub fn reason(self) -> &'static str {
        match self {
            Forbidden::VariableExpansion => {
                "`$` expands variables in a shell and no shell runs here; quote it ('$') to pass it literally"
            }
            Forbidden::CommandSubstitution => {
                "command substitution (`$(...)` or backticks) is refused: no shell runs here. Run the inner command on its own first and pass what it printed as an argument"
            }
            Forbidden::Redirection => {
                "redirections (`<`, `>`, `2>&1`) are refused: output is returned to you; to create or replace a file use write_file, to change one edit_file"
            }
            Forbidden::HereDoc => {
                "here-documents are refused; pass input with the `stdin` argument"
            }
            Forbidden::Background => {
                "`&` (background execution) is refused: every call runs in the foreground and is bounded. A command that keeps running (a server, a watcher) goes to start_process"
            }
            Forbidden::Subshell => {
                "subshells and command groups (`(`, `)`, `{`, `}`) are refused: no shell runs here. Chain commands with `&&` or `;`, and give a directory as `cwd`"
            }
            Forbidden::LeadingAssignment => {
                "an assignment with no command after it (`NAME=value` alone) sets nothing here: put it before the command it is for (`RUST_BACKTRACE=1 cargo test`)"
            }
            Forbidden::Comment => {
                "an unquoted `#` starts a comment in a shell; quote it to pass it literally"
            }
            Forbidden::PipeStderr => {
                "`|&` is refused. Use `|`: stderr is returned to you separately"
            }
            Forbidden::EmptyCommand => "empty command: nothing to run. Send the command itself",
            Forbidden::Glob => {
                "`*` and `?` are not expanded here (no shell runs, so `ls *.py` would look for a file named `*.py`): quote the pattern when the program itself takes one (`find . -name '*.py'`), or list matching files with `find . -name '*.py'`"
            }
            Forbidden::ChangeDirectory => {
                "`cd` is a shell builtin and no shell runs here: pass the directory as the `cwd` argument of run_command instead (`{\"command\": \"ls\", \"cwd\": \"src\"}`)"
            }
        }
    }

    /// A short stable name for audit records and tests.
    pub fn name(self) -> &'static str {
        match self {
            Forbidden::VariableExpansion => "variable-expansion",
            Forbidden::CommandSubstitution => "command-substitution",
            Forbidden::Redirection => "redirection",
            Forbidden::HereDoc => "here-doc",
            Forbidden::Background => "background",
            Forbidden::Subshell => "subshell",
            Forbidden::LeadingAssignment => "leading-assignment",
            Forbidden::Comment => "comment",
            Forbidden::PipeStderr => "pipe-stderr",
            Forbidden::EmptyCommand => "empty-command",
            Forbidden::Glob => "glob",
            Forbidden::ChangeDirectory => "cd",
        }
    }
}

/// Why a command string could not become a [`CommandList`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SyntaxError {
    /// A `'` or `"` was never closed (INVALID_REQUEST).
    UnterminatedQuote(char),
    /// The string ends in a lone backslash (INVALID_REQUEST).
    TrailingBackslash,
    /// A NUL byte, which no argv can carry (INVALID_REQUEST).
    NulByte,
    /// Longer than [`MAX_COMMAND_BYTES`] or more than [`MAX_STAGES`] stages (INVALID_REQUEST).
    TooLong,
    /// A construct refused by policy (POLICY_DENIED).
    Forbidden(Forbidden),
}

impl SyntaxError {
    /// True when the request is not understood, as opposed to understood and refused.
    pub fn is_invalid_request(&self) -> bool {
        !matches!(self, SyntaxError::Forbidden(_))
    }
}

impl fmt::Display for SyntaxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SyntaxError::UnterminatedQuote(q) => write!(f, "unterminated {q} quote"),
            SyntaxError::TrailingBackslash => f.write_str("the command ends in a lone backslash"),
            SyntaxError::NulByte => f.write_str("the command contains a NUL byte"),
            SyntaxError::TooLong => write!(
                f,
                "the command is too long (at most {MAX_COMMAND_BYTES} bytes and {MAX_STAGES} commands)"
            ),
            SyntaxError::Forbidden(what) => f.write_str(what.reason()),
        }
    }
}

impl std::error::Error for SyntaxError {}

#[derive(Debug, PartialEq)]
enum Token {
    Word(String),
    Pipe,
    Join(Sequence),
}

/// Splits `input` into a [`CommandList`] without a shell.
pub fn parse(input: &str) -> Result<CommandList, SyntaxError> {
    if input.contains('\0') {
        return Err(SyntaxError::NulByte);
    }
    if input.len() > MAX_COMMAND_BYTES {
        return Err(SyntaxError::TooLong);
    }
    let tokens = tokenize(input)?;
    assemble(tokens)
}

fn forbid(what: Forbidden) -> SyntaxError {
    SyntaxError::Forbidden(what)
}

fn tokenize(input: &str) -> Result<Vec<Token>, SyntaxError> {
    let mut tokens = Vec::new();
    // `None` means "between words", so that `""` still yields an empty argument.
    let mut word: Option<String> = None;
    let mut chars = input.chars().peekable();

    fn end_word(word: &mut Option<String>, tokens: &mut Vec<Token>) {
        if let Some(w) = word.take() {
            tokens.push(Token::Word(w));
        }
    }

    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' | '\r' => end_word(&mut word, &mut tokens),
            '\n' => {
                end_word(&mut word, &mut tokens);
                tokens.push(Token::Join(Sequence::Then));
            }
            '\'' => {
                let w = word.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(ch) => w.push(ch),
                        None => return Err(SyntaxError::UnterminatedQuote('\'')),
                    }
                }
            }
            '"' => {
                let w = word.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            // POSIX: inside double quotes a backslash escapes only these.
                            Some(e @ ('$' | '`' | '"' | '\\')) => w.push(e),
                            Some('\n') => {}
                            Some(other) => {
                                w.push('\\');
                                w.push(other);
                            }
                            None => return Err(SyntaxError::UnterminatedQuote('"')),
                        },
                        Some('$') => return Err(dollar(chars.peek().copied())),
                        Some('`') => return Err(forbid(Forbidden::CommandSubstitution)),
                        Some(ch) => w.push(ch),
                        None => return Err(SyntaxError::UnterminatedQuote('"')),
                    }
                }
            }
            '\\' => match chars.next() {
                None => return Err(SyntaxError::TrailingBackslash),
                Some('\n') => {} // line continuation
                Some(ch) => word.get_or_insert_with(String::new).push(ch),
            },
            '$' => return Err(dollar(chars.peek().copied())),
            '`' => return Err(forbid(Forbidden::CommandSubstitution)),
            '|' => {
                end_word(&mut word, &mut tokens);
                match chars.peek() {
                    Some('|') => {
                        chars.next();
                        tokens.push(Token::Join(Sequence::Or));
                    }
                    Some('&') => return Err(forbid(Forbidden::PipeStderr)),
                    _ => tokens.push(Token::Pipe),
                }
            }
            '&' => {
                end_word(&mut word, &mut tokens);
                match chars.peek() {
                    Some('&') => {
                        chars.next();
                        tokens.push(Token::Join(Sequence::And));
                    }
                    Some('>') => return Err(forbid(Forbidden::Redirection)),
                    _ => return Err(forbid(Forbidden::Background)),
                }
            }
            ';' => {
                end_word(&mut word, &mut tokens);
                tokens.push(Token::Join(Sequence::Then));
            }
            '<' => {
                return Err(match chars.peek() {
                    Some('<') => forbid(Forbidden::HereDoc),
                    Some('(') => forbid(Forbidden::CommandSubstitution),
                    _ => forbid(Forbidden::Redirection),
                });
            }
            '>' => {
                return Err(match chars.peek() {
                    Some('(') => forbid(Forbidden::CommandSubstitution),
                    _ => forbid(Forbidden::Redirection),
                });
            }
            '(' | ')' => return Err(forbid(Forbidden::Subshell)),
            '#' if word.is_none() => return Err(forbid(Forbidden::Comment)),
            // In an option (`--include=*.py`, `--glob=*.ts`) a shell passes the word on
            // unchanged, since no file is named like the option: so do we. Anywhere else a
            // shell would expand it, and we do not, so it is refused with that reason.
            '*' | '?' if word.as_deref().is_some_and(|w| w.starts_with('-')) => {
                word.get_or_insert_with(String::new).push(c);
            }
            '*' | '?' => return Err(forbid(Forbidden::Glob)),
            other => word.get_or_insert_with(String::new).push(other),
        }
    }
    end_word(&mut word, &mut tokens);
    Ok(tokens)
}

fn dollar(next: Option<char>) -> SyntaxError {
    match next {
        Some('(') => forbid(Forbidden::CommandSubstitution),
        _ => forbid(Forbidden::VariableExpansion),
    }
}

/// Whether `word` is a shell assignment (`NAME=value`, NAME a valid variable name).
pub fn is_assignment(word: &str) -> bool {
    let Some((name, _)) = word.split_once('=') else {
        return false;
    };
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn assemble(tokens: Vec<Token>) -> Result<CommandList, SyntaxError> {
    let mut pipelines: Vec<Vec<Vec<String>>> = Vec::new();
    let mut joins = Vec::new();
    let mut pipeline: Vec<Vec<String>> = Vec::new();
    let mut stage: Vec<String> = Vec::new();
    let mut stage_count = 0usize;

    let mut finish_stage = |stage: &mut Vec<String>, pipeline: &mut Vec<Vec<String>>| {
        if stage.is_empty() {
            return Err(forbid(Forbidden::EmptyCommand));
        }
        // `NAME=value cmd`: the assignments stay in front of the program, for the policy to
        // judge (crate::env_prefix); an assignment with no program after it sets nothing.
        let Some(first) = stage.iter().find(|w| !is_assignment(w)) else {
            return Err(forbid(Forbidden::LeadingAssignment));
        };
        if first == "cd" {
            return Err(forbid(Forbidden::ChangeDirectory));
        }
        if matches!(first.as_str(), "{" | "}") {
            return Err(forbid(Forbidden::Subshell));
        }
        stage_count += 1;
        if stage_count > MAX_STAGES {
            return Err(SyntaxError::TooLong);
        }
        pipeline.push(std::mem::take(stage));
        Ok(())
    };

    let last = tokens.len();
    for (i, token) in tokens.into_iter().enumerate() {
        match token {
            Token::Word(w) => stage.push(w),
            Token::Pipe => finish_stage(&mut stage, &mut pipeline)?,
            Token::Join(seq) => {
                // A trailing `;` (or newline) is harmless in a shell; accept it.
                let trailing = i + 1 == last && seq == Sequence::Then && !stage.is_empty();
                finish_stage(&mut stage, &mut pipeline)?;
                pipelines.push(std::mem::take(&mut pipeline));
                if !trailing {
                    joins.push(seq);
                }
            }
        }
    }
    if !stage.is_empty() || !pipeline.is_empty() || joins.len() == pipelines.len() {
        finish_stage(&mut stage, &mut pipeline)?;
        pipelines.push(pipeline);
    }
    debug_assert_eq!(joins.len() + 1, pipelines.len());
    Ok(CommandList { pipelines, joins })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_forbidden_construct_is_listed_once() {
        // A new variant fails to compile here until it has a place, and then in ALL.
        let place = |f: Forbidden| match f {
            Forbidden::VariableExpansion => 0,
            Forbidden::CommandSubstitution => 1,
            Forbidden::Redirection => 2,
            Forbidden::HereDoc => 3,
            Forbidden::Background => 4,
            Forbidden::Subshell => 5,
            Forbidden::LeadingAssignment => 6,
            Forbidden::Comment => 7,
            Forbidden::PipeStderr => 8,
            Forbidden::EmptyCommand => 9,
            Forbidden::Glob => 10,
            Forbidden::ChangeDirectory => 11,
        };
        for (i, f) in Forbidden::ALL.iter().enumerate() {
            assert_eq!(place(*f), i, "{}", f.name());
            assert!(!f.construct().is_empty());
        }
    }

    fn argv(s: &str) -> Vec<String> {
        let list = parse(s).unwrap();
        assert_eq!(list.pipelines.len(), 1, "{s}");
        assert_eq!(list.pipelines[0].len(), 1, "{s}");
        list.pipelines[0][0].clone()
    }

    fn refused(s: &str) -> Forbidden {
        match parse(s) {
            Err(SyntaxError::Forbidden(f)) => f,
            other => panic!("{s:?}: expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn quotes_are_tokenization_only() {
        assert_eq!(argv(r#"echo "a;b""#), ["echo", "a;b"]);
        assert_eq!(argv("echo 'a|b' \"c&&d\""), ["echo", "a|b", "c&&d"]);
        assert_eq!(argv(r#"echo "" x"#), ["echo", "", "x"]);
        assert_eq!(argv(r"echo a\ b"), ["echo", "a b"]);
        assert_eq!(argv(r#"echo "a\"b" 'c\d'"#), ["echo", "a\"b", r"c\d"]);
        assert_eq!(argv("echo '$HOME' '`x`'"), ["echo", "$HOME", "`x`"]);
        assert_eq!(argv(r"echo \$HOME"), ["echo", "$HOME"]);
        assert_eq!(argv("echo a#b '#c'"), ["echo", "a#b", "#c"]);
        assert_eq!(
            argv("find . -name '*.txt'"),
            ["find", ".", "-name", "*.txt"]
        );
    }

    #[test]
    fn lists_and_pipelines() {
        let l = parse("ls | wc -l && echo ok || echo no; echo end").unwrap();
        assert_eq!(l.pipelines.len(), 4);
        assert_eq!(
            l.pipelines[0],
            vec![vec!["ls".to_owned()], vec!["wc".into(), "-l".into()]]
        );
        assert_eq!(l.joins, vec![Sequence::And, Sequence::Or, Sequence::Then]);
        let l = parse("echo a;").unwrap();
        assert_eq!(l.pipelines.len(), 1);
        assert!(l.joins.is_empty());
        let l = parse("echo a\necho b").unwrap();
        assert_eq!(l.joins, vec![Sequence::Then]);
    }

    #[test]
    fn shell_constructs_are_refused() {
        assert_eq!(refused("echo $HOME"), Forbidden::VariableExpansion);
        assert_eq!(refused("echo \"$HOME\""), Forbidden::VariableExpansion);
        assert_eq!(refused("echo $(id)"), Forbidden::CommandSubstitution);
        assert_eq!(refused("echo \"$(id)\""), Forbidden::CommandSubstitution);
        assert_eq!(refused("echo `id`"), Forbidden::CommandSubstitution);
        assert_eq!(refused("echo a > f"), Forbidden::Redirection);
        assert_eq!(refused("echo a >> f"), Forbidden::Redirection);
        assert_eq!(refused("cat < f"), Forbidden::Redirection);
        assert_eq!(refused("ls 2>&1"), Forbidden::Redirection);
        assert_eq!(refused("ls &> f"), Forbidden::Redirection);
        assert_eq!(refused("cat <<EOF"), Forbidden::HereDoc);
        assert_eq!(refused("cat <<< x"), Forbidden::HereDoc);
        assert_eq!(refused("diff <(ls) f"), Forbidden::CommandSubstitution);
        assert_eq!(refused("sleep 1 &"), Forbidden::Background);
        assert_eq!(refused("(ls)"), Forbidden::Subshell);
        assert_eq!(refused("{ ls; }"), Forbidden::Subshell);
        assert_eq!(refused("FOO=1"), Forbidden::LeadingAssignment);
        assert_eq!(refused("FOO=1 | ls"), Forbidden::LeadingAssignment);
        assert_eq!(parse("FOO=1 ls").unwrap().pipelines[0][0], ["FOO=1", "ls"]);
        assert_eq!(refused("ls # comment"), Forbidden::Comment);
        assert_eq!(refused("ls |& cat"), Forbidden::PipeStderr);
        for empty in ["", "   ", ";", "ls ;; ls", "ls |", "| ls", "ls &&", "&& ls"] {
            assert_eq!(refused(empty), Forbidden::EmptyCommand, "{empty:?}");
        }
    }

    #[test]
    fn malformed_input_is_invalid() {
        assert_eq!(parse("echo 'a"), Err(SyntaxError::UnterminatedQuote('\'')));
        assert_eq!(parse("echo \"a"), Err(SyntaxError::UnterminatedQuote('"')));
        assert_eq!(parse("echo a\\"), Err(SyntaxError::TrailingBackslash));
        assert_eq!(parse("echo a\0b"), Err(SyntaxError::NulByte));
        assert!(parse("echo a\0b").unwrap_err().is_invalid_request());
        assert!(!parse("echo $x").unwrap_err().is_invalid_request());
        let long = "x ".repeat(MAX_COMMAND_BYTES);
        assert_eq!(parse(&long), Err(SyntaxError::TooLong));
        let many = vec!["ls"; MAX_STAGES + 1].join(" | ");
        assert_eq!(parse(&many), Err(SyntaxError::TooLong));
    }

    #[test]
    fn argv_arrays_are_literal() {
        let l = CommandList::from_argv(vec!["echo".into(), "$HOME;x".into()]).unwrap();
        assert_eq!(l.pipelines[0][0], ["echo", "$HOME;x"]);
        assert_eq!(
            CommandList::from_argv(vec![]),
            Err(SyntaxError::Forbidden(Forbidden::EmptyCommand))
        );
        assert_eq!(
            CommandList::from_argv(vec!["a\0".into()]),
            Err(SyntaxError::NulByte)
        );
    }
}
