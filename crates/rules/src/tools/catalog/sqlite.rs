//! sqlite3, the SQLite shell.
//!
//! Owns its single-dash long options (`-cmd`, `-init`, `-unsafe-testing`), which operand is
//! the database, and the SQL and dot-commands in the rest: `.system`, `.shell`, `.load`, the
//! dot-commands that open or write other files, `load_extension()`, ATTACH and VACUUM INTO.
//! `-safe` is injected, which refuses the same things inside sqlite3 itself.
//!
//! It must never read sqlite3's options with getopt's grammar (`-cmd` is one option, not
//! `-c -m -d`), and it must never let SQL open a second database file unchecked.

use std::path::Path;

use super::spec::{BASE, Operands, Spec};
use crate::tools::inspection::{Inspection, PathCheck};
use crate::tools::parse::Parsed;

pub(crate) const SPECS: &[Spec] = &[Spec {
    names: &["sqlite3"],
    operands: Operands::Generic,
    // -safe refuses .system, .shell, .load, load_extension() and writing outside the db.
    inject_args: &["-safe"],
    custom: Some(sqlite3),
    ..BASE
}];

/// sqlite3 has single-dash long options and reads SQL and dot-commands from its operands.
fn sqlite3(_: &Parsed, args: &[String], _: Option<&Path>, insp: &mut Inspection) {
    const DOT: &[&str] = &[
        ".system", ".shell", ".load", ".output", ".once", ".open", ".save", ".backup", ".restore",
        ".import", ".excel", ".log", ".read", ".cd", ".clone", ".archive", ".ar",
    ];
    const VALUE: &[&str] = &[
        "-cmd",
        "-init",
        "-separator",
        "-newline",
        "-nullvalue",
        "-vfs",
        "-maxsize",
        "-mmap",
        "-pagecache",
        "-lookaside",
        "-heap",
    ];
    insp.paths.clear();
    let mut db_seen = false;
    let mut i = 0;
    let mut sql: Vec<&str> = Vec::new();
    while i < args.len() {
        let a = args[i].as_str();
        i += 1;
        let opt = a.trim_start_matches('-');
        if a.starts_with('-') && a.len() > 1 {
            if VALUE.contains(&format!("-{opt}").as_str()) {
                let v = args.get(i).map(String::as_str).unwrap_or("");
                i += 1;
                match opt {
                    "cmd" => sql.push(v),
                    "init" => insp.paths.push(PathCheck::Path(v.to_owned())),
                    _ => {}
                }
            } else if opt == "unsafe-testing" {
                insp.escape(
                    "-unsafe-testing",
                    "`sqlite3 -unsafe-testing` lifts safety limits",
                );
            }
            continue;
        }
        if !db_seen {
            db_seen = true;
            insp.paths.push(PathCheck::Path(a.to_owned()));
        } else {
            sql.push(a);
        }
    }
    for text in sql {
        for line in text.split(['\n', ';']) {
            let line = line.trim();
            let lower = line.to_ascii_lowercase();
            if let Some(dot) = DOT
                .iter()
                .find(|d| lower == **d || lower.starts_with(&format!("{d} ")))
            {
                insp.escape(dot, format!("`{dot}` in sqlite3 runs a command, loads code or reads or writes a file of the caller's choosing"));
            }
            if lower.contains("load_extension") {
                insp.escape(
                    "load_extension",
                    "`load_extension()` loads a shared library",
                );
            }
            if lower.starts_with("attach")
                || lower.contains(" attach ")
                || lower.contains("vacuum into")
            {
                insp.escape(
                    "attach",
                    "ATTACH / VACUUM INTO open a database file of the caller's choosing",
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::run;

    /// Every case in `cases/sqlite.txt`.
    #[test]
    fn cases() {
        super::super::testing::check_cases("sqlite.txt", include_str!("cases/sqlite.txt"));
    }

    #[test]
    fn dot_commands_that_run_load_or_open_files() {
        assert_eq!(
            run(&["sqlite3", "-cmd", ".system CMD", "db"]).escapes[0].id,
            ".system"
        );
        assert_eq!(
            run(&["sqlite3", "db", ".shell CMD"]).escapes[0].id,
            ".shell"
        );
        assert_eq!(
            run(&["sqlite3", "db", ".SYSTEM CMD"]).escapes[0].id,
            ".system"
        );
        assert_eq!(
            run(&["sqlite3", "db", "select 1; .load x"]).escapes[0].id,
            ".load"
        );
        assert_eq!(
            run(&["sqlite3", "db", ".output /tmp/x"]).escapes[0].id,
            ".output"
        );
        assert!(run(&["sqlite3", "db", ".tables"]).escapes.is_empty());
    }

    #[test]
    fn sql_that_loads_code_or_opens_files() {
        assert_eq!(
            run(&["sqlite3", "db", "select load_extension('x')"]).escapes[0].id,
            "load_extension"
        );
        assert_eq!(
            run(&["sqlite3", "db", "attach '/etc/x.db' as x"]).escapes[0].id,
            "attach"
        );
        assert_eq!(
            run(&["sqlite3", "db", "vacuum into '/tmp/x'"]).escapes[0].id,
            "attach"
        );
        assert!(run(&["sqlite3", "db", "select 1"]).escapes.is_empty());
    }
}
