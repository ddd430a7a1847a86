//! What a person already approved, as the model asks about it (issue 53, item 3):
//! `explain_command` says a call is approved by a scope without asking, and
//! `describe_policy` lists the scopes this caller's calls may use. Neither counts a use.

use serde_json::{Value, json};

use super::describe::Describe;
use super::request::CommandInput;
use crate::policy::evaluate;
use crate::scopes::{OwnedCall, Scope};

impl Describe<'_> {
    /// The scope that would approve `command` in `cwd` as `run_command` for `caller` in
    /// `session`, if one would; a call that needs no approval has none.
    pub fn pre_approved(
        &self,
        command: &CommandInput,
        cwd: Option<&str>,
        caller: &str,
        session: &str,
    ) -> Option<Scope> {
        let (call, needs_approval) = self.scoped(command, cwd)?;
        needs_approval
            .then(|| self.0.scopes.would_cover(&call, caller, session))
            .flatten()
    }

    /// A rule of another server of a fleet that would cover `command` for `caller`: this
    /// server does not apply it, and says whose it is.
    pub fn approved_elsewhere(
        &self,
        command: &CommandInput,
        cwd: Option<&str>,
        caller: &str,
    ) -> Option<Scope> {
        let (call, _) = self.scoped(command, cwd)?;
        self.0.scopes.elsewhere_covering(&call, caller)
    }

    /// `command` in `cwd` as `run_command`, as a scope sees it, and whether the policy asks
    /// a person about it; `None` when it does not parse or resolve.
    fn scoped(&self, command: &CommandInput, cwd: Option<&str>) -> Option<(OwnedCall, bool)> {
        let list = command.parse().ok()?;
        let decision = evaluate(&self.0.policy, &self.0.jail, &list, cwd);
        let call = OwnedCall::of_decision(super::result::RUN, &decision)?;
        Some((call, decision.needs_approval))
    }

    /// The live scopes `caller` in `session` may use, as the model reads them.
    pub fn scopes_of(&self, caller: &str, session: &str) -> Vec<Value> {
        self.0
            .scopes
            .of(caller, session)
            .into_iter()
            .map(|s| {
                json!({"scope": s.id, "kind": s.kind, "covers": s.described,
                       "expires_at": s.expires_at, "uses": s.uses})
            })
            .collect()
    }
}
