//! `notifications/progress` for a call that is running: a ticker that asks what is new at
//! most four times a second and sends it with the request's progress token.
//!
//! Owns the protocol's rules for progress: only when the request carried a token, only while
//! it is in flight (the ticker is stopped, and its last send finished, before the result is
//! returned), and `progress` strictly rising (the poll returns something only when there is
//! more). What to say is the poll's business (redacted output, moves done); this module
//! never looks at it.

use std::time::Duration;

use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::service::{Peer, RequestContext, RoleServer};

/// Between two notifications, at least.
const PERIOD: Duration = Duration::from_millis(250);

/// One notification's content: progress so far, the total when known, a message.
pub(crate) type Tick = (f64, Option<f64>, Option<String>);

/// A running ticker; [`Ticker::stop`] it before answering the request.
pub(crate) struct Ticker {
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Ticker {
    /// Starts a ticker for the request in `context` if it asked for progress; otherwise one
    /// that does nothing.
    pub(crate) fn start(
        context: &RequestContext<RoleServer>,
        mut poll: impl FnMut() -> Option<Tick> + Send + 'static,
    ) -> Ticker {
        let Some(token) = context.meta.get_progress_token() else {
            return Ticker { task: None };
        };
        let peer = context.peer.clone();
        let task = tokio::spawn(async move {
            let mut last = f64::NEG_INFINITY;
            let mut interval = tokio::time::interval(PERIOD);
            interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            interval.tick().await; // the first tick is immediate
            loop {
                interval.tick().await;
                if let Some((progress, total, message)) = poll()
                    && progress > last
                {
                    last = progress;
                    send(&peer, &token, progress, total, message).await;
                }
            }
        });
        Ticker { task: Some(task) }
    }

    /// Stops the ticker and waits until it has stopped: no notification follows.
    pub(crate) async fn stop(self) {
        if let Some(task) = self.task {
            task.abort();
            let _ = task.await;
        }
    }
}

async fn send(
    peer: &Peer<RoleServer>,
    token: &ProgressToken,
    progress: f64,
    total: Option<f64>,
    message: Option<String>,
) {
    let mut param = ProgressNotificationParam::new(token.clone(), progress);
    if let Some(total) = total {
        param = param.with_total(total);
    }
    if let Some(message) = message {
        param = param.with_message(message);
    }
    // A client that went away is the transport's concern, not this call's.
    let _ = peer.notify_progress(param).await;
}
