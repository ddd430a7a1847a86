//! The decisions of safe-mcp that need nothing but their input: no file, no socket, no
//! thread, no process, no environment (`scripts/check_imports.py` fails CI on any, with a
//! planted control). A reviewer reads each of these rules here, and a test drives each with
//! plain values; what touches the machine (the jail on disk, the trail, the executor) stays
//! in `safe-mcp-core` and `safe-mcp-exec`, which apply them. rustls's no-I/O core is the
//! model.
//!
//! - [`syntax`]: a command line split without a shell, every shell operator refused;
//! - [`env_prefix`]: which `NAME=value` prefixes a command may carry;
//! - [`egress`]: host names normalised and judged against the allow and deny lists, the
//!   addresses a name resolved to checked, and the typed refusals;
//! - [`envelope`]: the result every tool returns, its codes and their meaning;
//! - [`reader`]: the text block a model reads of an envelope;
//! - [`cut`]: cutting text at character and line boundaries;
//! - [`paths`]: lexical normalisation of a path;
//! - [`tools`]: the catalog, what each allowlisted program can be made to do, and what of a
//!   command line is a path, a program it starts or an escape;
//! - [`args`]: a program's arguments normalised before the rules match them;
//! - [`redact`]: what a secret looks like, and the redactor results and the trail pass through;
//! - [`jail`]: whether a cwd or an argument stays beneath the jail (or a write or read path),
//!   asking a [`jail::Resolver`] the caller hands in how the kernel resolves a path, what
//!   `PATH` holds and what a small file says: everything the rules ask of the machine;
//! - [`gitdir`]: whether the repository a git command starts in keeps its git directory
//!   where the kernel lets git reach it;
//! - [`protected`]: the protected paths, their glob and the refusal of a write through one;
//! - [`credentials`]: what a credential is, how it is injected, its hosts' method and path
//!   rules, the spellings a placeholder may travel in;
//! - [`config`]: the policy file's types, settings and reports;
//! - [`scopes`]: what one yes of a person may cover beyond its call (a shape: the same
//!   program and words, the ones marked free varying over plain names, beneath one cwd),
//!   and the preview that shows it;
//! - [`gateway`]: the name a downstream MCP server's tool takes before the client, and the
//!   verdict on one call of it (deny, then allow, then argument rules, then confirm);
//! - [`policy`]: the verdict on a command list: deny by default, the denylist, argument
//!   rules, the catalog's escapes, jail containment, protected paths; and the policy's own
//!   examples.
//!
//! `safe-mcp-core` re-exports these under their old paths and adds what touches the
//! machine: the jail on disk, the loader, the running vault, the plan that holds protected
//! paths, the trail.
#![forbid(unsafe_code)]

pub mod args;
pub mod config;
pub mod credentials;
pub mod cut;
pub mod egress;
pub mod env_prefix;
pub mod envelope;
pub mod gateway;
pub mod gitdir;
pub mod jail;
pub mod paths;
pub mod policy;
pub mod protected;
pub mod reader;
pub mod redact;
pub mod scopes;
pub mod syntax;
pub mod tools;
