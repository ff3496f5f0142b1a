//! `session-surface` owns the model-visible view of a session log: the surface and its
//! append/replace rules, message derivation, and the validated [`Session`] that keeps them in
//! step with its log.
//!
//! Primary types: [`Session`] (validated construction from seeds, validated `append`,
//! derived views), [`Surface`] (the per-event transition of §3.2 as plan-then-apply),
//! [`Messages`], [`Transcript`], and [`SharedSession`] (observers with a pre-commit veto and
//! contained post-commit listeners). [`fold_surface`] replays a whole log.
//! [`Session::compactions`] reports every surface replace with what it hid and the size of the
//! model's view before and after ([`Compaction`]).
//!
//! # Validation
//!
//! [`Session::append`] applies every rule a reader applies to a stored event, in the reader's
//! order and with its message (decision 5 of the port: a log that can be appended but not
//! reloaded is a defect): the JSON rules and retired request-header shapes (§2.2), the rules of
//! `session_core::rules` (retired types, pre-react-loop turn shapes, a `turn/start` turn its
//! crash closer could not carry, unknown types without [`Draft::ignorable`], packed-row
//! storage tags, a safe `time`), the request-header and message shapes of the seed path
//! (§2.8, §2.9), then the surface rules (§3.2). Seeds of already-stored events
//! ([`Session::create_from_events`], [`Session::from_restore_events`], fork children) are
//! exempt from the stricter append JSON rules (decision 3 applies to new drafts only).
//!
//! # Key design decision
//!
//! Everything derived from the log is updated eagerly when an event is committed and kept in
//! persistent sequences, so every read ([`Session::events`], [`Session::derive_messages`],
//! [`Surface::nodes`], [`Session::transcript`]) is an O(1) snapshot that never changes
//! afterwards. Surface nodes carry integer keys that stay sorted in surface order, and
//! Fenwick trees over those keys give surface positions and message indices in O(log n), so a
//! compaction replace costs O(replaced range + log n) whatever the session size. Validation
//! only plans; a failed or vetoed append leaves every view untouched.
//!
//! # Example
//!
//! ```
//! use std::sync::Arc;
//! use session_core::{FixedClock, json::Value};
//! use session_surface::{Draft, Session};
//!
//! let clock = Arc::new(FixedClock::new(1_000));
//! let mut session = Session::create("demo", None, None, clock)?;
//! let hello = Value::parse(
//!     r#"{"id":"m1","role":"user","content":[{"type":"text","text":"hello"}],"source":{"kind":"user"}}"#,
//! )?;
//! session.append(Draft::new("user/message", hello).append_op())?;
//! let summary = Value::parse(
//!     r#"{"id":"m2","role":"user","content":[{"type":"text","text":"(compacted)"}],"source":{"kind":"user"}}"#,
//! )?;
//! session.append(Draft::new("user/message", summary).replace_op(0, 0).sources(&[0]))?;
//!
//! assert_eq!(session.surface().nodes().to_vec(), vec![1]);
//! assert_eq!(session.replace_generation(), 1);
//! assert_eq!(session.derive_messages().len(), 1);
//! // The transcript still shows the original, plus a replacement marker.
//! assert_eq!(session.transcript().len(), 2);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Typed events
//!
//! [`Draft::from_serde`] builds a draft from a [`session_core::vocab`] payload (event type and
//! surface marker included); [`Draft::from_serde_as`] from any `Serialize` type;
//! [`session_core::Event::data_as`] reads one back:
//!
//! ```
//! use std::sync::Arc;
//! use session_core::FixedClock;
//! use session_core::vocab::{Message, TurnEnd, TurnEndReason, TurnStart};
//! use session_surface::{Draft, Session};
//!
//! let mut session = Session::create("s", None, None, Arc::new(FixedClock::new(0)))?;
//! session.append(Draft::from_serde(&TurnStart { turn: 1, ..Default::default() })?)?;
//! session.append(Draft::from_serde(&Message::user_text("m1", "hello"))?)?; // surfaceOp "append"
//! session.append(Draft::from_serde(&TurnEnd {
//!     turn: 1,
//!     reason: TurnEndReason::default(),
//!     ..Default::default()
//! })?)?;
//!
//! let events = session.events();
//! let hello: Message = events.get(1).unwrap().data_as()?;
//! assert_eq!(hello, Message::user_text("m1", "hello"));
//! assert_eq!(
//!     events.get(2).unwrap().data().to_json(),
//!     r#"{"turn":1,"reason":{"kind":"completed"}}"#
//! );
//!
//! // A plugin's own payload: any `Serialize` type.
//! #[derive(serde::Serialize)]
//! struct Feedback<'a> {
//!     text: &'a str,
//! }
//! session.append(Draft::from_serde_as("feedback/record", &Feedback { text: "nice" })?)?;
//! assert_eq!(session.events().get(3).unwrap().data().to_json(), r#"{"text":"nice"}"#);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod compaction;
mod derive;
mod draft_serde;
mod error;
mod pseq;
mod session;
mod shared;
mod surface;
mod transcript;

pub use compaction::{
    Compaction, EnteredNode, LeftNode, ViewDiff, ViewSize, approx_tokens, compactions_of,
    message_chars, view_diff, view_size,
};
pub use derive::{Messages, MessagesIter, derive_event_message};
pub use error::{Error, Result, ShapeProblem, SharedError};
pub use session::{
    BoxError, Draft, PreparedDraft, RestoreBuilder, SeedMode, Session, check_message_shape,
};
pub use shared::{ObserverId, SessionObserver, SharedSession, WarningSink};
pub use surface::{
    Nodes, NodesIter, Plan, Replacement, Surface, SurfaceError, SurfaceFold, fold_events,
    fold_surface, fold_surface_window,
};
pub use transcript::{Transcript, TranscriptEntry};
