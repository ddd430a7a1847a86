//! Where the libraries' log lines go: the crates log through `tracing`, and the binary
//! prints their events on stderr as it always has, one line each: `safe-mcp: warning: …` for
//! a warning, `safe-mcp: …` for the rest. Only the project's own crates are heard; the
//! dependencies' own tracing (rmcp's, hyper's) stays silent, as before.

use std::fmt;

use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::{Layer, filter};

/// `safe-mcp: ` and, for a warning, `warning: `, then the message.
struct Prefixed;

impl<S, N> FormatEvent<S, N> for Prefixed
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        write!(writer, "safe-mcp: ")?;
        if *event.metadata().level() == Level::WARN {
            write!(writer, "warning: ")?;
        }
        ctx.field_format().format_fields(writer.by_ref(), event)?;
        writeln!(writer)
    }
}

/// Installs the stderr printer for the process; a second call changes nothing.
pub(crate) fn install() {
    let ours = filter::filter_fn(|meta| meta.target().starts_with("safe_mcp"));
    let layer = tracing_subscriber::fmt::layer()
        .event_format(Prefixed)
        .with_writer(std::io::stderr)
        .with_filter(ours);
    let _ = tracing::subscriber::set_global_default(tracing_subscriber::registry().with(layer));
}
