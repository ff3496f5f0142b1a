//! The session list: every stored session with `sessionctl list --json`'s fields. One home
//! for both: `sessionctl list` prints these rows, the web view serves them.

use session_core::SessionHeader;
use session_core::clock::rfc3339;
use session_core::json::Value;
use session_persist::Persistence;

use crate::view::{num, obj, opt_num, opt_str};

/// One stored session as listed.
#[derive(Debug, Clone)]
pub struct ListRow {
    /// The header; `None` when it cannot be read.
    pub meta: Option<SessionHeader>,
    /// The log file (JSONL stores).
    pub file: Option<String>,
    /// Stored events (`None`: not counted, or the log cannot be read).
    pub events: Option<usize>,
    /// Whether storage has a torn tail `load` would cut.
    pub torn: bool,
    /// Why the session or its log cannot be read.
    pub error: Option<String>,
    /// What lies beneath `error` ([`session_persist::Error::cause_text`]).
    pub cause: Option<String>,
}

/// Lists every stored session, oldest first; sessions whose header cannot be read come last,
/// by file. One damaged session never fails the listing; a layout error of the store does.
/// With `count`, every log is read for its event count and torn tail; without it, the rows
/// come from the headers alone (`events` is `None`, `torn` is `false`).
pub async fn list_rows(
    persistence: &Persistence,
    count: bool,
) -> session_persist::Result<Vec<ListRow>> {
    let listed = persistence.list_entries(None).await?;
    let mut rows = Vec::with_capacity(listed.len());
    for entry in listed {
        let file = entry
            .location
            .as_ref()
            .map(|l| l.path.display().to_string());
        let meta = match entry.header {
            Ok(meta) => meta,
            Err(e) if e.fails_listing() => return Err(e),
            Err(e) => {
                rows.push(ListRow {
                    meta: None,
                    file,
                    events: None,
                    torn: false,
                    error: Some(e.to_string()),
                    cause: e.cause_text(),
                });
                continue;
            }
        };
        let file = file.or_else(|| {
            persistence
                .locate(&meta)
                .map(|l| l.path.display().to_string())
        });
        let (events, torn, error, cause) = if count {
            match persistence.backend().load_stored(&meta.id).await {
                Ok(Some(p)) => (Some(p.events.len()), p.torn.is_some(), None, None),
                Ok(None) => (None, false, Some("vanished while listing".to_owned()), None),
                Err(e) => (None, false, Some(e.to_string()), e.cause_text()),
            }
        } else {
            (None, false, None, None)
        };
        rows.push(ListRow {
            meta: Some(meta),
            file,
            events,
            torn,
            error,
            cause,
        });
    }
    rows.sort_by(|a, b| match (&a.meta, &b.meta) {
        (Some(x), Some(y)) => x.created_at.cmp(&y.created_at).then(x.id.cmp(&y.id)),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => a.file.cmp(&b.file),
    });
    Ok(rows)
}

impl ListRow {
    /// The row as `sessionctl list --json` prints it.
    pub fn to_json(&self) -> Value {
        let m = self.meta.as_ref();
        obj([
            ("id", opt_str(m.map(|m| m.id.to_string()))),
            ("createdAt", m.map_or(Value::Null, |m| num(m.created_at))),
            (
                "created",
                m.map_or(Value::Null, |m| Value::from(rfc3339(m.created_at))),
            ),
            ("cwd", opt_str(m.and_then(|m| m.cwd.as_deref()))),
            ("events", opt_num(self.events.map(|n| n as u64))),
            (
                "parentSession",
                opt_str(m.and_then(|m| m.parent_session.as_deref())),
            ),
            ("seedLength", opt_num(m.and_then(|m| m.seed_length))),
            ("tornTail", Value::from(self.torn)),
            ("file", opt_str(self.file.clone())),
            ("error", opt_str(self.error.clone())),
            ("cause", opt_str(self.cause.clone())),
        ])
    }
}
