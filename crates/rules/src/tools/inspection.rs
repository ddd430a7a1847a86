//! The answer the knowledge base gives about one simple command: [`Inspection`], the escapes
//! it found ([`Escape`]) and the arguments it wants contained ([`PathCheck`]).
//!
//! Owns only these result types and the one way an escape is recorded. It is a leaf: it must
//! never import from `tools` or the catalog (they import it), and it must never decide
//! anything about a tool; that is the catalog's job.

/// How an argument must be contained.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathCheck {
    /// A path the tool opens: it must resolve inside the jail.
    Path(String),
    /// Not known either way: absolute, `..` and `~` arguments must resolve inside the jail.
    Generic(String),
}

/// An escape found in an argv.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Escape {
    /// The name an operator uses to opt in (`allow_escapes = ["-exec"]`).
    pub id: String,
    /// Why it is refused, naming the escape.
    pub reason: String,
}

/// What the knowledge base says about one simple command.
#[derive(Debug, Clone, Default)]
pub struct Inspection {
    /// Every escape found (the first one refuses the command unless opted in).
    pub escapes: Vec<Escape>,
    /// The command is an interpreter or trampoline.
    pub interpreter: Option<String>,
    /// Arguments to contain in the jail.
    pub paths: Vec<PathCheck>,
    /// Arguments inserted right after the program name (hardening).
    pub inject_args: Vec<String>,
    /// Environment added for this program (hardening).
    pub inject_env: Vec<(String, String)>,
    /// Arguments inserted after argument `n` of the argv (program excluded, 0-based): right
    /// after a subcommand, where only it reads them (`git diff --no-ext-diff`).
    pub inject_after: Vec<(usize, Vec<String>)>,
}

impl Inspection {
    pub(crate) fn escape(&mut self, id: &str, reason: impl Into<String>) {
        self.escapes.push(Escape {
            id: id.to_owned(),
            reason: reason.into(),
        });
    }
}
