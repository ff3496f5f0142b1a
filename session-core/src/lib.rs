//! `session-core` owns the data of an agent session: the event envelope and its vocabulary,
//! lossless JSON, the frozen append-only [`Log`], the [`SessionHeader`], request-header
//! folding and the packed chunk-row storage codec.
//!
//! It does no I/O, no async and no compression: every other crate builds on these types.
//!
//! # Key design decision
//!
//! An accepted [`Event`] is an immutable, reference-counted value whose JSON payload is a
//! [`json::Value`] tree with shared, immutable containers. Cloning an event or any part of it
//! is O(1), which makes [`Log::snapshot`] O(1) and lets derived views (the surface, message
//! lists, fork children) share storage with the log instead of copying it. The JSON layer keeps
//! what byte-exact compatibility with the reference's files needs: JavaScript key order,
//! `JSON.stringify` escaping and number formatting, and the spelling of numbers read from disk.
//!
//! Large restored logs are mostly streamed `assistant/chunk` deltas, so the storage reader
//! ([`chunk_rows::StorageDecoder`]) keeps those in shared compact blocks (about 16 bytes per event
//! plus its text) and builds an event's `data` tree only when it is asked for; long
//! `sourceEventSeqs` arrays read from disk are kept as runs. Neither is visible through the API.
//!
//! The event rules readers apply to stored events, which a live `append` applies to new drafts
//! too (retired types, the read-time turn upgrades, known types, storage tags), live in
//! [`rules`]: one set of rules for both directions, so an appendable log is a readable one.
//!
//! # Example
//!
//! ```
//! use session_core::{Event, Log, json::Value};
//!
//! let mut log = Log::new();
//! let data = Value::parse(r#"{"turn":1}"#)?;
//! log.push(Event::appended("turn/start", 0, 1_000, data, None, None))?;
//! let snapshot = log.snapshot(); // O(1), never grows
//! assert_eq!(snapshot.len(), 1);
//! assert_eq!(
//!     snapshot.get(0).unwrap().to_json(),
//!     r#"{"type":"turn/start","seq":0,"time":1000,"data":{"turn":1}}"#
//! );
//! # Ok::<(), session_core::Error>(())
//! ```

pub mod chunk_rows;
pub mod clock;
mod error;
pub mod event;
pub mod header;
pub mod json;
mod log;
pub mod request;
pub mod rules;

pub use clock::{Clock, FixedClock, SharedClock, SystemClock};
pub use error::{Error, Result};
pub use event::{Event, EventParts, KeyOrder, SurfaceOp};
pub use header::{SESSION_FORMAT_VERSION, SessionHeader};
pub use log::{Events, Log, push_back_sealed};
