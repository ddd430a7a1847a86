//! The envelope of a read of a session on a terminal, and what its record keeps of it.
//!
//! A person sees a screen, so the model gets one: its rows (the blank ones below the text
//! and the cursor left out), the cursor, and the rows that scrolled off the top since the
//! last read, all redacted. The scrollback a read hands out is bounded by the output limit
//! (its newest rows are kept, the rest counted). The trail keeps sizes, never the screen:
//! what the model saw is in its result, and a screen is full of what the person typed.

use serde_json::{Value, json};

use super::ended::read_reason;
use crate::envelope::{OperationResult, ResultCode};
use crate::sessions::{ScreenOut, SessionEnd};

/// The envelope of one read (or of a stop, with the last screen), with at most `limit`
/// bytes of scrollback.
pub(super) fn screen_result(
    tool: &'static str,
    out: ScreenOut,
    end: Option<&SessionEnd>,
    limit: usize,
) -> OperationResult {
    let reason = read_reason(out.running, end);
    let view = out.view;
    let (scrollback, cut) = newest_within(view.scrollback, limit);
    let mut detail = json!({
        "screen": view.lines,
        "cursor": {"row": view.cursor.0, "col": view.cursor.1},
        "scrollback": scrollback,
        "scrollback_dropped": view.scrollback_dropped + cut,
        "terminal": {"rows": view.size.rows, "cols": view.size.cols},
        "alternate_screen": view.alternate,
        "running": out.running,
        "exit_code": out.exit_code,
        "ended": out.ended,
        "dropped_bytes": out.dropped_bytes,
        "more": out.more,
    });
    if let Some(raw) = out.raw {
        detail["raw"] = json!(raw);
    }
    if let Some((key, _)) = end.and_then(|e| e.limit.as_ref()) {
        detail["limit"] = json!(key);
    }
    OperationResult::new(tool, ResultCode::Ok, reason).with_detail(detail)
}

/// The newest of `rows` that fit in `limit` bytes, and how many older ones did not.
fn newest_within(rows: Vec<String>, limit: usize) -> (Vec<String>, u64) {
    let mut total = 0;
    let keep = rows
        .iter()
        .rev()
        .take_while(|r| {
            total += r.len() + 1;
            total <= limit
        })
        .count();
    let cut = rows.len() - keep;
    (rows.into_iter().skip(cut).collect(), cut as u64)
}

/// What the record of a read keeps: the handle, and the size of what was handed out.
pub(super) fn read_record(handle: &str, result: &OperationResult) -> Value {
    let rows = |key: &str| {
        result
            .detail
            .get(key)
            .and_then(Value::as_array)
            .map_or((0, 0), |rows| {
                let bytes = rows
                    .iter()
                    .filter_map(Value::as_str)
                    .map(str::len)
                    .sum::<usize>();
                (rows.len(), bytes)
            })
    };
    let ((screen_rows, screen_bytes), (scrollback_rows, scrollback_bytes)) =
        (rows("screen"), rows("scrollback"));
    let raw_bytes = result
        .detail
        .get("raw")
        .and_then(Value::as_str)
        .map(str::len);
    json!({
        "handle": handle,
        "screen_rows": screen_rows,
        "screen_bytes": screen_bytes,
        "scrollback_rows": scrollback_rows,
        "scrollback_bytes": scrollback_bytes,
        "raw_bytes": raw_bytes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_newest_scrollback_within_the_limit_is_kept() {
        let rows: Vec<String> = ["aaaa", "bb", "c"]
            .iter()
            .map(|s| (*s).to_owned())
            .collect();
        assert_eq!(newest_within(rows.clone(), 100), (rows.clone(), 0));
        assert_eq!(
            newest_within(rows.clone(), 5),
            (vec!["bb".to_owned(), "c".to_owned()], 1)
        );
        assert_eq!(newest_within(rows, 0), (Vec::new(), 3));
    }
}
