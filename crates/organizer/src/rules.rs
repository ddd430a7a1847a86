//! What the organizer may move, and where: categories and the two skip layers.
//!
//! Owns classification. Every skip rule declares its layer: PROTECTION rules bind every tool
//! (`move_file` too) and cannot be overridden; RESTRAINT rules bind only `plan_organize`,
//! where an automatic organizer should not guess (NEEDS_EXPLICIT_REQUEST). The protection set
//! is *derived* by filtering the one rule list by layer, never kept as a second list. Anything
//! that is neither a regular file nor a directory (a symlink, a FIFO, a device) matches no
//! allow rule and falls to deny-by-default, classified PROTECTION.

use std::collections::BTreeMap;

use safe_mcp_core::ResultCode;
use safe_mcp_core::config::{FilesPolicy, SkipCondition, SkipLayer};
use serde::Serialize;

use crate::fsroot::{EntryInfo, Kind};

/// Why an entry is not moved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Skip {
    /// Protection or restraint (`protection`, `restraint` in JSON).
    pub layer: SkipLayer,
    /// POLICY_DENIED (protection), NEEDS_EXPLICIT_REQUEST (restraint), CONFLICT (occupied).
    pub code: ResultCode,
    /// The rule: `default-deny`, a condition name, or `files.skip[N]`.
    pub rule: String,
    /// One sentence.
    pub reason: String,
}

#[derive(Debug, Clone)]
struct Rule {
    name: String,
    layer: SkipLayer,
    when: Vec<SkipCondition>,
    reason: String,
}

/// Categories and skip rules.
#[derive(Debug, Clone)]
pub struct Rules {
    categories: BTreeMap<String, Vec<String>>,
    rules: Vec<Rule>,
    /// A file modified more recently than this is "recent".
    recent_ns: i128,
}

const DEFAULT_CATEGORIES: &[(&str, &[&str])] = &[
    (
        "Documents",
        &[
            ".pdf", ".doc", ".docx", ".odt", ".rtf", ".txt", ".md", ".tex", ".epub", ".pages",
        ],
    ),
    (
        "Images",
        &[
            ".jpg", ".jpeg", ".png", ".gif", ".bmp", ".svg", ".webp", ".heic", ".tif", ".tiff",
            ".raw",
        ],
    ),
    (
        "Audio",
        &[".mp3", ".wav", ".flac", ".aac", ".ogg", ".m4a", ".opus"],
    ),
    ("Video", &[".mp4", ".mkv", ".mov", ".avi", ".webm", ".m4v"]),
    (
        "Archives",
        &[
            ".zip", ".tar", ".gz", ".tgz", ".bz2", ".xz", ".7z", ".rar", ".zst",
        ],
    ),
    (
        "Code",
        &[
            ".rs", ".py", ".js", ".ts", ".go", ".java", ".c", ".cpp", ".h", ".rb", ".json",
            ".yaml", ".yml", ".toml", ".html", ".css",
        ],
    ),
    (
        "Spreadsheets",
        &[".xls", ".xlsx", ".ods", ".csv", ".numbers"],
    ),
    ("Presentations", &[".ppt", ".pptx", ".odp", ".key"]),
];

/// The built-in rules, each with its layer. Operator rules are added after them.
const DEFAULT_RULES: &[(&str, SkipLayer, &[SkipCondition], &str)] = &[
    (
        "unsafe-name",
        SkipLayer::Protection,
        &[SkipCondition::UnsafeName],
        "the name has control characters, a newline or invalid UTF-8, so it cannot be shown or addressed safely",
    ),
    (
        "sensitive",
        SkipLayer::Protection,
        &[SkipCondition::Sensitive],
        "credentials and repository metadata (.git, .ssh, .env, keys, .netrc, .aws, .kube) stay where their tools expect them",
    ),
    (
        "hardlink",
        SkipLayer::Protection,
        &[SkipCondition::Hardlink],
        "the file has other hard links; moving one name would surprise whoever uses the others",
    ),
    (
        "dotfile",
        SkipLayer::Restraint,
        &[SkipCondition::Dotfile],
        "hidden files are configuration more often than clutter",
    ),
    (
        "installer",
        SkipLayer::Restraint,
        &[SkipCondition::Installer, SkipCondition::Executable],
        "installers and executables are not filed automatically",
    ),
    (
        "app-bundle",
        SkipLayer::Restraint,
        &[SkipCondition::AppBundle],
        "an application bundle is a folder that must stay whole where it is",
    ),
    (
        "system-file",
        SkipLayer::Restraint,
        &[SkipCondition::SystemFile],
        "operating-system bookkeeping (desktop.ini, .DS_Store, Thumbs.db) belongs where it is",
    ),
    (
        "directory",
        SkipLayer::Restraint,
        &[SkipCondition::Directory],
        "folders are not moved automatically",
    ),
    // Named like the conditions, so that an operator's rule can say the same words.
    (
        "recent",
        SkipLayer::Restraint,
        &[SkipCondition::Recent],
        "the file was modified in the last two minutes, so it may still be in use",
    ),
    (
        "partial-download",
        SkipLayer::Restraint,
        &[SkipCondition::PartialDownload],
        "the file is a partial download, so it may still be in use",
    ),
    (
        "uncategorized",
        SkipLayer::Restraint,
        &[SkipCondition::Uncategorized],
        "no category matches this file's extension; move it where it belongs with move_file",
    ),
];

/// The conditions a name decides on its own; `false` for those that need metadata, which
/// [`Rules::holds`] decides.
fn name_holds(condition: SkipCondition, name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    let extension = ext(name).unwrap_or_default();
    match condition {
        // Control characters, and the invisible ones that reorder or hide text when a name
        // is shown (bidirectional overrides and isolates, zero-width characters).
        SkipCondition::UnsafeName => name.chars().any(|c| {
            c.is_control()
                || matches!(
                    c,
                    '\u{200B}'..='\u{200F}'
                        | '\u{202A}'..='\u{202E}'
                        | '\u{2066}'..='\u{2069}'
                        | '\u{061C}'
                        | '\u{FEFF}'
                )
        }),
        SkipCondition::Dotfile => name.starts_with('.'),
        SkipCondition::Installer => matches!(
            extension.as_str(),
            ".exe"
                | ".msi"
                | ".dmg"
                | ".pkg"
                | ".deb"
                | ".rpm"
                | ".appimage"
                | ".apk"
                | ".run"
                | ".bin"
                | ".msix"
                | ".snap"
                | ".flatpak"
        ),
        SkipCondition::SystemFile => matches!(
            lower.as_str(),
            "desktop.ini" | ".ds_store" | "thumbs.db" | "ehthumbs.db" | ".directory" | "icon\r"
        ),
        SkipCondition::Sensitive => {
            matches!(
                lower.as_str(),
                ".git"
                    | ".ssh"
                    | ".aws"
                    | ".kube"
                    | ".gnupg"
                    | ".npmrc"
                    | ".netrc"
                    | ".pgpass"
                    | ".git-credentials"
                    | ".pypirc"
                    | ".docker"
            ) || lower.starts_with(".env")
                || lower.starts_with("id_")
                || matches!(
                    extension.as_str(),
                    ".pem" | ".p12" | ".pfx" | ".kdbx" | ".ppk" | ".keystore" | ".jks"
                )
        }
        SkipCondition::ToolConfig => matches!(
            lower.as_str(),
            ".gitconfig"
                | ".gitattributes"
                | ".gitmodules"
                | ".bashrc"
                | ".bash_profile"
                | ".bash_login"
                | ".bash_logout"
                | ".profile"
                | ".zshrc"
                | ".zshenv"
                | ".zprofile"
                | ".zlogin"
                | ".vimrc"
                | ".gvimrc"
                | ".exrc"
                | ".nanorc"
                | ".inputrc"
                | ".curlrc"
                | ".wgetrc"
                | ".yarnrc"
                | ".yarnrc.yml"
                | ".envrc"
                | ".gdbinit"
                | ".lesskey"
                | ".manpath"
                | ".pythonrc"
                | ".pythonstartup"
                | ".editorconfig"
                | ".pre-commit-config.yaml"
                | ".vscode"
                | ".idea"
                | ".devcontainer"
                | ".config"
                | ".cargo"
                | ".github"
        ),
        SkipCondition::PartialDownload => matches!(
            extension.as_str(),
            ".part" | ".crdownload" | ".tmp" | ".download" | ".partial" | ".!ut"
        ),
        SkipCondition::Executable
        | SkipCondition::AppBundle
        | SkipCondition::Directory
        | SkipCondition::Recent
        | SkipCondition::Hardlink
        | SkipCondition::Uncategorized => false,
    }
}

/// A workspace path at or beneath one of the default protected paths (`.git/config`,
/// `.mcp.json`, `.vscode/`, …), with the same reason the terminal gives.
fn protected_path(rel: &str) -> Option<Skip> {
    safe_mcp_core::protected::default_covering(rel).map(|entry| Skip {
        layer: SkipLayer::Protection,
        code: ResultCode::PolicyDenied,
        rule: "protected-path".into(),
        reason: safe_mcp_core::protected::reason(entry),
    })
}

fn ext(name: &str) -> Option<String> {
    let dot = name.rfind('.')?;
    (dot > 0).then(|| name[dot..].to_ascii_lowercase())
}

impl Rules {
    /// The policy's categories (or the built-in set) and the built-in rules plus the
    /// operator's `[[files.skip]]`.
    pub fn from_policy(policy: &FilesPolicy) -> Self {
        let categories = if policy.categories.is_empty() {
            DEFAULT_CATEGORIES
                .iter()
                .map(|(n, e)| ((*n).to_owned(), e.iter().map(|s| (*s).to_owned()).collect()))
                .collect()
        } else {
            policy
                .categories
                .iter()
                .map(|(n, e)| {
                    (
                        n.clone(),
                        e.iter().map(|x| x.to_ascii_lowercase()).collect(),
                    )
                })
                .collect()
        };
        let mut rules: Vec<Rule> = DEFAULT_RULES
            .iter()
            .map(|(name, layer, when, reason)| Rule {
                name: (*name).to_owned(),
                layer: *layer,
                when: when.to_vec(),
                reason: (*reason).to_owned(),
            })
            .collect();
        for (i, s) in policy.skip.iter().enumerate() {
            rules.push(Rule {
                name: format!("files.skip[{i}]"),
                layer: s.layer,
                when: s.when.clone(),
                reason: s.reason.clone(),
            });
        }
        Rules {
            categories,
            rules,
            recent_ns: 120 * 1_000_000_000,
        }
    }

    /// The category folder for `name`, by extension.
    pub fn category(&self, name: &str) -> Option<&str> {
        let e = ext(name)?;
        self.categories
            .iter()
            .find(|(_, exts)| exts.contains(&e))
            .map(|(c, _)| c.as_str())
    }

    /// The category names, for recognising already-organised folders.
    pub fn category_names(&self) -> impl Iterator<Item = &str> {
        self.categories.keys().map(String::as_str)
    }

    fn holds(&self, condition: SkipCondition, e: &EntryInfo, now_ns: i128) -> bool {
        let extension = ext(&e.name).unwrap_or_default();
        match condition {
            SkipCondition::UnsafeName => !e.valid_utf8 || name_holds(condition, &e.name),
            SkipCondition::Executable => {
                (e.kind == Kind::File && e.mode & 0o111 != 0)
                    || matches!(
                        extension.as_str(),
                        ".sh" | ".bat" | ".cmd" | ".ps1" | ".com" | ".jar" | ".command"
                    )
            }
            SkipCondition::AppBundle => e.kind == Kind::Directory && extension == ".app",
            SkipCondition::Directory => e.kind == Kind::Directory,
            SkipCondition::Recent => now_ns - e.mtime_ns < self.recent_ns,
            SkipCondition::Hardlink => e.kind == Kind::File && e.nlink > 1,
            SkipCondition::Uncategorized => {
                e.kind == Kind::File && self.category(&e.name).is_none()
            }
            SkipCondition::Dotfile
            | SkipCondition::Installer
            | SkipCondition::SystemFile
            | SkipCondition::Sensitive
            | SkipCondition::ToolConfig
            | SkipCondition::PartialDownload => name_holds(condition, &e.name),
        }
    }

    /// [`Rules::path_protection`] for a path something moves away from: also refused where
    /// it is (or lies beneath) a protected path, as commands and the file tools refuse it.
    pub fn source_protection(&self, rel: &str) -> Option<Skip> {
        self.path_protection(rel).or_else(|| protected_path(rel))
    }

    /// The PROTECTION rules that a name alone decides (unsafe names, sensitive names, …),
    /// applied to every component of a workspace path: `.ssh/authorized_keys` and
    /// `repo/.git/HEAD` are protected as source and as destination, not just by their last
    /// name.
    pub fn path_protection(&self, rel: &str) -> Option<Skip> {
        rel.split('/').find_map(|component| {
            self.rules
                .iter()
                .filter(|r| r.layer == SkipLayer::Protection)
                .find(|r| r.when.iter().any(|&c| name_holds(c, component)))
                .map(|r| Skip {
                    layer: SkipLayer::Protection,
                    code: ResultCode::PolicyDenied,
                    rule: r.name.clone(),
                    reason: format!("`{component}`: {}", r.reason),
                })
        })
    }

    /// [`Rules::path_protection`] for a path something will be created at (a `move_file`
    /// destination, or an entry of a folder that moves): also refused where any component is
    /// a file tools read as their configuration on their own, since making one configures
    /// the next program that runs. Moving such a file away stays possible.
    pub fn destination_protection(&self, rel: &str) -> Option<Skip> {
        self.path_protection(rel)
            .or_else(|| protected_path(rel))
            .or_else(|| {
            rel.split('/')
                .find(|component| name_holds(SkipCondition::ToolConfig, component))
                .map(|component| Skip {
                    layer: SkipLayer::Protection,
                    code: ResultCode::PolicyDenied,
                    rule: "tool-config".into(),
                    reason: format!(
                        "`{component}`: tools read this file as their configuration on their own; creating one would configure the next program that runs"
                    ),
                })
        })
    }

    /// The PROTECTION verdict alone: what binds every tool.
    pub fn protection(&self, e: &EntryInfo, now_ns: i128) -> Option<Skip> {
        if matches!(e.kind, Kind::Symlink | Kind::Special) {
            let what = if e.kind == Kind::Symlink {
                "a symlink"
            } else {
                "a FIFO, socket or device"
            };
            return Some(Skip {
                layer: SkipLayer::Protection,
                code: ResultCode::PolicyDenied,
                rule: "default-deny".into(),
                reason: format!(
                    "{what} matches no allow rule (only regular files and folders are moved)"
                ),
            });
        }
        self.first(SkipLayer::Protection, e, now_ns)
    }

    /// The full verdict for `plan_organize`: protection, then restraint.
    pub fn classify(&self, e: &EntryInfo, now_ns: i128) -> Option<Skip> {
        self.protection(e, now_ns)
            .or_else(|| self.first(SkipLayer::Restraint, e, now_ns))
    }

    /// The first rule of `layer` whose conditions any hold. Deriving each layer's set by
    /// filtering the one list is what keeps them from drifting apart.
    fn first(&self, layer: SkipLayer, e: &EntryInfo, now_ns: i128) -> Option<Skip> {
        self.rules
            .iter()
            .filter(|r| r.layer == layer)
            .find(|r| r.when.iter().any(|&c| self.holds(c, e, now_ns)))
            .map(|r| Skip {
                layer,
                code: if layer == SkipLayer::Protection {
                    ResultCode::PolicyDenied
                } else {
                    ResultCode::NeedsExplicitRequest
                },
                rule: r.name.clone(),
                reason: r.reason.clone(),
            })
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use safe_mcp_core::config::SkipRule;

    use super::*;

    fn rules(skip: Vec<SkipRule>) -> Rules {
        Rules::from_policy(&FilesPolicy {
            workspace_root: PathBuf::from("/w"),
            journal: None,
            max_plan_moves: 10,
            categories: BTreeMap::new(),
            skip,
        })
    }

    fn file(name: &str, mode: u32) -> EntryInfo {
        EntryInfo {
            name: name.to_owned(),
            valid_utf8: true,
            kind: Kind::File,
            size: 1,
            mode,
            nlink: 1,
            dev: 1,
            ino: 1,
            mtime_ns: 0,
        }
    }

    const NOW: i128 = 10_000 * 1_000_000_000;

    #[test]
    fn an_operator_protection_rule_binds_by_name_and_by_metadata() {
        let r = rules(vec![
            SkipRule {
                layer: SkipLayer::Protection,
                when: vec![SkipCondition::PartialDownload],
                reason: "still downloading".into(),
            },
            SkipRule {
                layer: SkipLayer::Protection,
                when: vec![SkipCondition::Executable],
                reason: "programs stay".into(),
            },
        ]);
        // A name condition protects every component of a path.
        let skip = r.path_protection("in/x.part/y.pdf").unwrap();
        assert_eq!(
            (skip.rule.as_str(), skip.code),
            ("files.skip[0]", ResultCode::PolicyDenied)
        );
        // A metadata condition needs the entry, so a path alone does not decide it ...
        assert!(r.path_protection("tool.pdf").is_none());
        // ... but the entry does, for every tool.
        let skip = r.protection(&file("tool.pdf", 0o755), NOW).unwrap();
        assert_eq!(skip.rule, "files.skip[1]");
        assert!(r.protection(&file("doc.pdf", 0o644), NOW).is_none());
        assert!(r.classify(&file("doc.pdf", 0o644), NOW).is_none());
        // The built-in restraint rules still follow.
        let skip = r.classify(&file("doc.xyz", 0o644), NOW).unwrap();
        assert_eq!(
            (skip.layer, skip.rule.as_str(), skip.code),
            (
                SkipLayer::Restraint,
                "uncategorized",
                ResultCode::NeedsExplicitRequest
            )
        );
    }
}
