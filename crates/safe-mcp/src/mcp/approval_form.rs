//! The approval form a person answers in the client (issue 53): `approve`, and, where the
//! call can take a scope, how long the yes lasts (`scope`: once, session, rule; once by
//! default) and which places may vary (`free`, a multi-select of the places the preview
//! offers). The message above it carries the preview: each choice in plain words, with the
//! calls it would and would not cover. The same form goes out as an elicitation request and,
//! on MCP 2026-07-28, in an `InputRequiredResult`; its answer is read here for both.

use rmcp::model::{ElicitationSchema, EnumSchema};
use safe_mcp_core::approval::{Answer, ApprovalRequest, Choice};
use serde_json::Value;

/// The form for `request`.
pub(crate) fn schema(request: &ApprovalRequest) -> Result<ElicitationSchema, String> {
    let mut form = ElicitationSchema::builder().required_bool("approve");
    if let Some(p) = &request.preview {
        let kinds: Vec<String> = p.kinds.iter().map(|(k, _)| k.as_str().to_owned()).collect();
        let titles: Vec<String> = p.kinds.iter().map(|(_, words)| words.clone()).collect();
        let scope = EnumSchema::builder(kinds)
            .with_default("once")?
            .enum_titles(titles)?
            .title("How long this yes lasts")
            .build();
        form = form.optional_enum_schema("scope", scope);
        if !p.free.is_empty() {
            let places: Vec<String> = p.free.iter().map(|f| f.place.to_string()).collect();
            let titles: Vec<String> = p
                .free
                .iter()
                .map(|f| format!("let place {} ({}) vary: {}", f.place, f.word, f.shape))
                .collect();
            let free = EnumSchema::builder(places)
                .enum_titles(titles)?
                .multiselect()
                .title("What may vary (nothing by default)")
                .build();
            form = form.optional_enum_schema("free", free);
        }
    }
    form.build().map_err(str::to_owned)
}

/// The answer in an accepted form's `content`: approved (with the scope chosen), `approve
/// = false`, or not the form that was asked for. A yes whose choice cannot be read
/// approves nothing.
pub(crate) fn read(content: Option<&Value>) -> (Answer, Option<Choice>) {
    let Some(content) = content else {
        return (Answer::Failed("the answer held no form".into()), None);
    };
    match content.get("approve").and_then(Value::as_bool) {
        Some(true) => match Choice::from_answer(content.get("scope"), content.get("free")) {
            Ok(choice) => (Answer::Approved, Some(choice)),
            Err(why) => (
                Answer::Failed(format!("the scope chosen could not be read: {why}")),
                None,
            ),
        },
        Some(false) => (Answer::ApproveFalse, None),
        None => (
            Answer::Failed("the answer was not the form that was asked for".into()),
            None,
        ),
    }
}
