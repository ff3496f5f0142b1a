//! `session-web` owns the read-only web view of stored sessions: the JSON API under `/api/`
//! (axum, on the caller's tokio runtime), the embedded pages (plain JavaScript, no build
//! step, nothing loaded from elsewhere) and the self-contained exported page
//! (`sessionctl view SESSION -o FILE.html`).
//!
//! It reads through [`session_persist::Persistence`] with inspect semantics only
//! ([`Persistence::inspect_detailed`](session_persist::Persistence::inspect_detailed),
//! `list_entries`, the backend's `load_stored`), so it serves every store the caller opened
//! (JSONL, `SQLite`, `PostgreSQL`) and never writes. Each session is read once into a
//! [`SessionView`] (timeline rows, compactions, closers, lineage) and then served in pages:
//! events by seq range, timeline rows by index, messages and the folded request header as of
//! a seq. `docs/web.md` documents the routes.
//!
//! # Example
//!
//! ```no_run
//! use std::sync::Arc;
//! use session_core::clock::system_clock;
//! use session_persist::{JsonlBackend, JsonlConfig, Persistence, PersistenceOptions};
//! use session_store::SessionStore;
//! use session_web::WebState;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let backend = Arc::new(JsonlBackend::open(JsonlConfig::new("./sessions"))?);
//! let persistence = Persistence::new(backend, SessionStore::new(system_clock()), PersistenceOptions::default())?;
//! let state = WebState::new(persistence, "jsonl:./sessions", None, true);
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
//! session_web::serve(listener, state, std::future::pending()).await?;
//! # Ok(()) }
//! ```

mod api;
mod assets;
mod error;
mod export;
mod list;
mod tally;
mod view;

pub use api::{MAX_EVENTS_PAGE, MAX_TIMELINE_PAGE, SERVED_CSP, WebState, router, serve};
pub use assets::{APP_CSS, APP_JS};
pub use error::{Error, ErrorKind, Result};
pub use export::{
    ExportLimits, ExportOptions, bundle, export_csp, export_page, export_view, render, render_to,
};
pub use list::{ListRow, list_rows};
pub use tally::{TypeCounts, TypeTally, counts};
pub use view::{
    Closer, Row, RowKind, SessionView, closer_code, closer_text, compaction_json, timeline,
    view_size_json,
};
