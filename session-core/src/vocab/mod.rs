//! A typed vocabulary for the reference's core events: messages, content blocks, message
//! sources, tool calls and results, turn and step boundaries, stream chunks, usage, request
//! headers and route metadata, with serde support.
//!
//! Each type reads from and writes to a [`json::Value`](crate::json::Value) directly
//! (`from_value` / `to_value`) and implements `Serialize` / `Deserialize` through that, so
//! a harness can build an event's data without touching `json::Value`
//! (`session_surface::Draft::from_serde`) and read one back with [`Event::data_as`](crate::Event::data_as).
//!
//! # What a round trip keeps
//!
//! - Every field a type does not name is kept in its [`Extra`], and a tag a union does not
//!   name (an unknown content block type, message source kind, …) reads as that union's
//!   `Other` variant holding the whole object. Nothing read is dropped.
//! - Key order: reading remembers the order of an object's keys and writing restores it, so
//!   reading then writing a stored message gives an equal [`Value`](crate::json::Value) (key
//!   order included: the same bytes). Values built in code write named fields in the order
//!   of the reference's documentation, then the [`Extra`] fields.
//! - Fields typed as [`Value`](crate::json::Value) (`arguments`, `meta`, `parameters`,
//!   `replayState`) keep number spellings; numeric fields typed as integers keep the value
//!   (a stored `1.0` in `turn` is written back as `1`).
//! - Writing refuses what a live `append` refuses (integers above 2^53 − 1, non-finite
//!   floats), with a [`SerdeError`](crate::json::SerdeError) naming the path.
//!
//! Reading checks types, not the reference's shape rules: a message with an empty `id`
//! reads. `session_surface` checks shapes on append and on restore.
//!
//! # Example
//!
//! ```
//! use session_core::vocab::{ContentBlock, EventPayload, Message, Role, TurnStart};
//! use session_core::{Event, json};
//!
//! let msg = Message::user_text("m1", "hello");
//! let data = json::to_value(&msg)?;
//! assert_eq!(
//!     data.to_json(),
//!     r#"{"id":"m1","role":"user","content":[{"type":"text","text":"hello"}],"source":{"kind":"user"}}"#
//! );
//!
//! // A stored message keeps its key order and unknown fields.
//! let stored = json::Value::parse(
//!     r#"{"content":[{"type":"text","text":"hi","lang":"en"}],"source":{"kind":"user"},"role":"user","id":"m2"}"#,
//! )?;
//! let event = Event::appended(Message::EVENT_TYPE, 0, 0, stored.clone(), None, None);
//! let read: Message = event.data_as()?;
//! assert_eq!(read.role, Role::User);
//! let ContentBlock::Text(block) = &read.content[0] else { panic!() };
//! assert_eq!(block.extra.fields.get("lang").and_then(json::Value::as_str), Some("en"));
//! assert_eq!(read.to_value()?, stored);
//!
//! let turn: TurnStart = json::from_value(&json::Value::parse(r#"{"turn":1}"#)?)?;
//! assert_eq!(turn.turn, 1);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#[macro_use]
mod macros;
mod events;
pub(crate) mod fields;
mod message;
mod request;

pub use events::{
    Aborted, AssistantChunk, AssistantMessageData, BlockEnd, BlockStart, CancelCause, Delta,
    Failed, Finish, FinishReason, HookCause, LlmFailure, StepEnd, StepStart, StreamChunk, ToolCall,
    ToolCallDelta, ToolError, ToolResultData, TurnEnd, TurnEndReason, TurnError, TurnStart, Usage,
    UsageChunk,
};
pub use fields::Extra;
pub use message::{
    Attachment, Bare, ContentBlock, Dimensions, ImageBlock, Message, MessageSource, ModelSource,
    PluginSource, Role, Section, TextBlock, ToolCallBlock, ToolResultBlock, ToolSource,
};
pub use request::{
    AdapterDefaults, CallConfig, EpochHeader, RequestContext, RequestHeaderData, ToolSchema,
};

/// The data of one event type: what `session_surface::Draft::from_serde` builds a draft of.
pub trait EventPayload: serde::Serialize {
    /// The event type whose `data` this is.
    const EVENT_TYPE: &'static str;

    /// The `data` value (by default through serde; the vocabulary's types write directly,
    /// so that an error keeps its path).
    fn to_data(&self) -> Result<crate::json::Value, crate::json::SerdeError> {
        crate::json::to_value(self)
    }
}

macro_rules! payloads {
    ($($ty:ty => $event:literal),* $(,)?) => {$(
        impl EventPayload for $ty {
            const EVENT_TYPE: &'static str = $event;

            fn to_data(&self) -> Result<crate::json::Value, crate::json::SerdeError> {
                self.to_value()
            }
        }
    )*};
}

payloads! {
    Message => "user/message",
    AssistantMessageData => "assistant/message",
    ToolResultData => "tool/result",
    TurnStart => "turn/start",
    TurnEnd => "turn/end",
    StepStart => "step/start",
    StepEnd => "step/end",
    ToolCall => "tool/call",
    AssistantChunk => "assistant/chunk",
    RequestHeaderData => "request/header",
    RequestContext => "request/context",
}
