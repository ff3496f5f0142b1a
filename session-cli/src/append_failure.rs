//! What `append` says when a flush fails: the process is about to exit, so the events it holds
//! in memory are lost with it. The message says what is on disk (read back from the store, not
//! assumed), which events are lost, and which input lines to feed to which command next.

use session_persist::Error as PersistError;

use crate::store::Store;

/// The input lines of the drafts this process appended, with the seq each got.
#[derive(Default)]
pub(crate) struct Accepted {
    lines: Vec<(u64, usize)>,
}

impl Accepted {
    /// Records that input line `line` became the event `seq`.
    pub(crate) fn push(&mut self, seq: u64, line: usize) {
        self.lines.push((seq, line));
    }

    /// The first input line whose event is at or after `seq`.
    fn first_line_from(&self, seq: u64) -> Option<usize> {
        self.lines.iter().find(|(s, _)| *s >= seq).map(|(_, l)| *l)
    }
}

/// `a..=b`, or `a` when both are equal.
fn range(first: u64, last: u64) -> String {
    if first == last {
        format!("event {first}")
    } else {
        format!("events {first}..={last}")
    }
}

/// Whether the failure is a publication whose log reached the disk without a durable directory
/// entry.
fn entry_not_durable(cause: &(dyn std::error::Error + 'static)) -> bool {
    let mut at = Some(cause);
    while let Some(e) = at {
        if let Some(PersistError::PublicationNotDurable { .. }) = e.downcast_ref::<PersistError>() {
            return true;
        }
        at = e.source();
    }
    false
}

/// The hint of a failed flush of session `id`, whose in-memory log holds `held` events.
pub(crate) fn flush_failure_hint(
    store: &Store,
    id: &str,
    held: u64,
    accepted: &Accepted,
    created: bool,
    cause: &(dyn std::error::Error + 'static),
    stored: &session_persist::Result<Option<session_persist::StoredPrefix>>,
) -> String {
    let (on_disk, stored_count) = match stored {
        Ok(Some(prefix)) if prefix.events.is_empty() => (
            format!("on disk: the header of \"{id}\", no events"),
            Some(0),
        ),
        Ok(Some(prefix)) => {
            let n = prefix.events.len() as u64;
            let torn = if prefix.torn.is_some() {
                " (followed by a torn tail that the next load cuts)"
            } else {
                ""
            };
            (
                format!("on disk: {} of \"{id}\"{torn}", range(0, n - 1)),
                Some(n),
            )
        }
        Ok(None) => (format!("on disk: nothing of \"{id}\""), Some(0)),
        Err(e) => (format!("what is on disk could not be read back: {e}"), None),
    };
    let mut parts = vec![on_disk];
    if entry_not_durable(cause) {
        parts.push(
            "its directory entry is not durable yet: a power loss before the next write to this \
             session could remove the log; the next `sessionctl append` that writes to it syncs \
             the directories first"
                .to_owned(),
        );
    }
    let Some(stored) = stored_count else {
        parts.push(format!(
            "events this process accepted but did not acknowledge ({} events in memory) are lost \
             when it exits; run `sessionctl {} inspect {id}` to see what is stored before feeding \
             the rest again",
            held,
            store.at.option()
        ));
        return parts.join("; ");
    };
    if stored < held {
        parts.push(format!(
            "lost when this process exits: {} (accepted in memory, never written)",
            range(stored, held - 1)
        ));
    }
    let option = store.at.option();
    let next = if stored == 0 && created {
        "fix the cause, then run the same command again with the same input".to_owned()
    } else {
        let command = format!("sessionctl {option} append {id}");
        match accepted.first_line_from(stored) {
            Some(line) => format!(
                "fix the cause, then feed input lines {line} and after to `{command}` (without \
                 --create: the stored events are kept and not sent again)"
            ),
            None => format!(
                "every input line already written is on disk; fix the cause, then run `{command}` \
                 with the input after the last acknowledged flush"
            ),
        }
    };
    parts.push(next);
    parts.join("; ")
}
