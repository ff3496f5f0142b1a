//! `session-repair` owns honest crash repair for agent sessions: the synthetic events that
//! close a turn a crash left open, the tool-pairing balance of the surface, and the optional
//! turn/step invariant.
//!
//! Primary items: [`interrupted_turn_closers`] (a pure function over a log), [`ToolPairing`]
//! (an incremental balance over the surface), and [`Invariant`] / [`Trace`] with the
//! [`InvariantObserver`] adapter that runs the invariant as a pre-commit veto.
//!
//! # Key design decision
//!
//! Repair never invents outcomes. A tool call the harness never recorded as started is
//! answered with a `TOOL_NOT_STARTED` error result; one that was recorded but never answered is
//! answered with `TOOL_OUTCOME_UNKNOWN` and cites its `tool/call`. The invariant separates
//! *staging* a transition from *applying* it, so a veto raised later in the same pre-commit
//! phase can never advance a trace.
//!
//! # Example
//!
//! ```
//! use session_core::{Event, json::Value};
//! use session_repair::{Trace, interrupted_turn_closers};
//!
//! let start = Event::appended("turn/start", 0, 5, Value::parse(r#"{"turn":1}"#)?, None, None);
//! let closers = interrupted_turn_closers([&start]);
//! assert_eq!(closers.len(), 1);
//! assert_eq!(
//!     closers[0].to_json(),
//!     r#"{"type":"turn/end","seq":1,"time":5,"data":{"turn":1,"reason":{"kind":"interrupted"}}}"#
//! );
//! // The repaired log satisfies the invariant, and repair is idempotent.
//! let repaired = [start, closers[0].clone()];
//! assert!(Trace::replay(&repaired).is_ok());
//! assert!(interrupted_turn_closers(&repaired).is_empty());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod closers;
mod error;
mod invariant;
mod observer;
mod pairing;
mod turns;

pub use closers::{
    INTERRUPTED_RESULT_ID_PREFIX, TOOL_NOT_STARTED, TOOL_NOT_STARTED_ERROR, TOOL_NOT_STARTED_TEXT,
    TOOL_OUTCOME_UNKNOWN, TOOL_OUTCOME_UNKNOWN_ERROR, TOOL_OUTCOME_UNKNOWN_TEXT,
    interrupted_turn_closers,
};
pub use error::{Error, Result};
pub use invariant::{INVARIANT_PACKAGE, Invariant, InvariantError, Trace};
pub use observer::InvariantObserver;
pub use pairing::{ToolPairing, ToolPairingCache};
pub use turns::{TurnSpan, turn_spans};
