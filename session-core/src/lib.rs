//! `session-core` owns the data of an agent session: the event envelope and its vocabulary,
//! lossless JSON, the frozen append-only [`Log`], the [`SessionHeader`], request-header
//! folding, the packed chunk-row storage codec, and a typed serde [`vocab`]ulary of the core
//! events.
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
//!
//! Typed data: the [`vocab`] types and any serde type convert to and from [`json::Value`]
//! ([`json::to_value`], [`json::from_value`], [`Event::data_as`]); the conversions of a
//! [`json::Value`] itself are lossless, and reading then writing a stored message through
//! [`vocab::Message`] gives back the same bytes:
//!
//! ```
//! use session_core::{Event, json, vocab};
//!
//! let stored = r#"{"content":[{"type":"text","text":"hi"}],"source":{"kind":"user"},"role":"user","id":"m1"}"#;
//! let event = Event::appended("user/message", 0, 0, json::Value::parse(stored)?, None, None);
//! let mut message: vocab::Message = event.data_as()?;
//! message.id = "m2".into();
//! assert_eq!(
//!     json::to_value(&message)?.to_json(),
//!     stored.replace("m1", "m2")
//! );
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod chunk_rows;
mod chunked;
pub mod clock;
mod error;
pub mod event;
pub mod header;
pub mod json;
mod log;
pub mod request;
pub mod rules;
pub mod vocab;

pub use chunked::LeafIter;
pub use clock::{Clock, FixedClock, SharedClock, SystemClock};
pub use error::{EnvelopeProblem, Error, Result};
pub use event::{Event, EventParts, KeyOrder, SurfaceOp};
pub use header::{SESSION_FORMAT_VERSION, SessionHeader};
pub use log::{Events, Log, push_back_sealed};
