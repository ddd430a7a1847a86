//! The exec allowlist (issue 35): which files a command, and everything it starts, may
//! execute. Landlock checks its execute right on every `execve` of the tree with no race: on
//! the file executed, on a script's `#!` interpreter and on an ELF's `PT_INTERP` loader, all
//! three opened for exec. So a denylisted or unlisted program cannot be started by anything
//! in the tree, however it is named.
//!
//! This module turns the policy's list ([`Executables`]: allowlisted programs and helpers, as
//! the core resolved them) into the canonical files Landlock is given, adding what each file
//! needs to start: its `#!` interpreter (and, for `#!/usr/bin/env NAME`, `NAME` on the
//! policy's PATH) and the loader its ELF header names. Directories (git's exec-path, a
//! toolchain) are granted whole and not read. Everything here runs once, at server start.
//!
//! The ELF header is read by hand, not with an object-file crate: only the program headers'
//! table and one entry's string are needed, and the parse refuses whatever it does not
//! recognise (then the file gets no loader, and fails to start: closed, not open).

use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use safe_mcp_contract::{ConfinementSpec, Executables, ExecuteReport, SandboxMode};

/// How many `#!` interpreters deep a file's starting needs are followed.
const MAX_DEPTH: usize = 4;

/// What may be executed, resolved: every path canonical and existing.
#[derive(Debug, Default)]
pub(super) struct Resolved {
    /// What every stage may execute.
    pub(super) every: Vec<PathBuf>,
    /// Beyond `every`, for the stages of one program (by the path `ExecStage::program` holds).
    pub(super) helpers: Vec<(PathBuf, Vec<PathBuf>)>,
    /// Named, but not there.
    pub(super) missing: Vec<PathBuf>,
}

impl Resolved {
    /// Resolves `list`: each file with what it needs to start.
    pub(super) fn of(list: &Executables) -> Resolved {
        let mut missing = Vec::new();
        let mut every = Vec::new();
        for path in &list.every {
            add_with_needs(path, &list.path, &mut every, &mut missing, 0);
        }
        let helpers = list
            .helpers
            .iter()
            .map(|(program, helpers)| {
                let mut own = Vec::new();
                for path in helpers {
                    add_with_needs(path, &list.path, &mut own, &mut missing, 0);
                }
                own.retain(|p| !every.contains(p));
                (program.clone(), own)
            })
            .collect();
        missing.sort();
        missing.dedup();
        Resolved {
            every,
            helpers,
            missing,
        }
    }

    /// The group a stage running `program` belongs to: 0 for `every` alone, else one more
    /// than the index of its helpers.
    pub(super) fn group_of(&self, program: &Path) -> usize {
        self.helpers
            .iter()
            .position(|(p, _)| p == program)
            .map_or(0, |i| i + 1)
    }

    /// The report's form.
    pub(super) fn report(&self) -> ExecuteReport {
        ExecuteReport {
            mode: "allowlist",
            every: self.every.clone(),
            helpers: self
                .helpers
                .iter()
                .filter(|(_, own)| !own.is_empty())
                .map(|(program, own)| (program.display().to_string(), own.clone()))
                .collect::<BTreeMap<_, _>>(),
            missing: self.missing.clone(),
        }
    }
}

/// What may be executed, for the report: the allowlist as opened, or why there is none.
pub(super) fn execute_report(spec: &ConfinementSpec, resolved: Option<&Resolved>) -> ExecuteReport {
    match (spec.mode, resolved) {
        (SandboxMode::Off, _) => ExecuteReport {
            mode: "off",
            ..Default::default()
        },
        (_, Some(r)) => r.report(),
        (_, None) => ExecuteReport {
            mode: "read-paths",
            every: spec.read_paths.clone(),
            ..Default::default()
        },
    }
}

/// Adds `path` (canonical) to `into`, and, for a file, what starting it needs.
fn add_with_needs(
    path: &Path,
    search: &[PathBuf],
    into: &mut Vec<PathBuf>,
    missing: &mut Vec<PathBuf>,
    depth: usize,
) {
    let Ok(real) = std::fs::canonicalize(path) else {
        missing.push(path.to_path_buf());
        return;
    };
    if into.contains(&real) {
        return;
    }
    into.push(real.clone());
    if depth >= MAX_DEPTH || !real.is_file() {
        return;
    }
    for need in needs(&real, search) {
        add_with_needs(&need, search, into, missing, depth + 1);
    }
}

/// What the kernel opens for exec besides `file` when `file` is executed: its `#!`
/// interpreter (with `env`'s program), or its ELF loader. Nothing for what it cannot read.
fn needs(file: &Path, search: &[PathBuf]) -> Vec<PathBuf> {
    let Ok(mut f) = std::fs::File::open(file) else {
        return Vec::new();
    };
    let mut head = [0u8; 256];
    let mut n = 0;
    while n < head.len() {
        match f.read(&mut head[n..]) {
            Ok(0) | Err(_) => break,
            Ok(k) => n += k,
        }
    }
    let head = &head[..n];
    if let Some(line) = head.strip_prefix(b"#!") {
        return shebang(line, search);
    }
    elf_interpreter(&f, head).into_iter().collect()
}

/// The interpreter of a `#!` line, and for `/usr/bin/env NAME` also `NAME` on `search`.
fn shebang(line: &[u8], search: &[PathBuf]) -> Vec<PathBuf> {
    let Some((interpreter, name)) = safe_mcp_contract::shebang(line) else {
        return Vec::new();
    };
    let found = name.and_then(|name| search.iter().map(|d| d.join(&name)).find(|p| p.is_file()));
    std::iter::once(interpreter).chain(found).collect()
}

/// The loader an ELF file names in its `PT_INTERP` program header (64-bit, little-endian:
/// the machines this runs on), or `None` for a static or unrecognised file.
fn elf_interpreter(f: &std::fs::File, head: &[u8]) -> Option<PathBuf> {
    const PT_INTERP: u32 = 3;
    if head.len() < 64 || &head[..4] != b"\x7fELF" || head[4] != 2 || head[5] != 1 {
        return None;
    }
    let u16_at =
        |b: &[u8], at: usize| Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?));
    let u32_at =
        |b: &[u8], at: usize| Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?));
    let u64_at =
        |b: &[u8], at: usize| Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?));
    let phoff = u64_at(head, 32)?;
    let phentsize = usize::from(u16_at(head, 54)?);
    let phnum = usize::from(u16_at(head, 56)?);
    if phentsize < 56 || phnum > 256 {
        return None;
    }
    let mut table = vec![0u8; phentsize * phnum];
    f.read_exact_at(&mut table, phoff).ok()?;
    let entry = table
        .chunks(phentsize)
        .find(|e| u32_at(e, 0) == Some(PT_INTERP))?;
    let offset = u64_at(entry, 8)?;
    let size = usize::try_from(u64_at(entry, 32)?).ok()?;
    if size == 0 || size > 4096 {
        return None;
    }
    let mut name = vec![0u8; size];
    f.read_exact_at(&mut name, offset).ok()?;
    let end = name.iter().position(|b| *b == 0).unwrap_or(name.len());
    let name = std::str::from_utf8(&name[..end]).ok()?;
    Some(PathBuf::from(name)).filter(|p| p.is_absolute())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_elf_program_brings_its_loader_and_a_script_its_interpreter() {
        let sh = std::fs::canonicalize("/bin/sh").unwrap();
        let found = needs(&sh, &[]);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].to_string_lossy().contains("ld-"),
            "the loader of {}: {found:?}",
            sh.display()
        );
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("tool");
        std::fs::write(&script, "#!/usr/bin/env sh\necho hi\n").unwrap();
        let found = needs(&script, &[PathBuf::from("/bin")]);
        assert_eq!(
            found,
            [PathBuf::from("/usr/bin/env"), PathBuf::from("/bin/sh")]
        );
        let list = Executables {
            every: vec![script.clone(), dir.path().join("absent")],
            helpers: vec![(PathBuf::from("/x/cargo"), vec![script.clone()])],
            path: vec![PathBuf::from("/bin")],
        };
        let r = Resolved::of(&list);
        // The script, env, sh and the loaders of env and sh (one file): four at most.
        assert!(r.every.contains(&std::fs::canonicalize(&script).unwrap()));
        assert!(r.every.contains(&sh), "{:?}", r.every);
        assert_eq!(r.missing, [dir.path().join("absent")]);
        // A helper every stage has already is not listed again.
        assert_eq!(r.group_of(Path::new("/x/cargo")), 1);
        assert!(r.helpers[0].1.is_empty());
        assert_eq!(r.group_of(Path::new("/x/other")), 0);
    }

    #[test]
    fn what_is_not_an_elf_or_a_script_needs_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("data");
        std::fs::write(&f, b"\x7fELF\x01\x01 short").unwrap();
        assert!(needs(&f, &[]).is_empty());
        std::fs::write(&f, b"plain text").unwrap();
        assert!(needs(&f, &[]).is_empty());
    }
}
