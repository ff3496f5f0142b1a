//! The checkpoint policy (spec §5): *when* an agent loop makes a session durable. Persistence
//! decides *how* (through the store's `session/flush` listeners).
//!
//! A loop calls [`checkpoint_request`] before a model request, [`checkpoint_step`] before each
//! step, and [`checkpoint_tool`] before a top-level tool body. Each awaits
//! `store.flush(session)`, so the request or side effect happens only once everything the
//! session recorded so far is on disk; a failed flush blocks it (fail closed). Without
//! checkpoints, persistence still writes in the background within its batching window, but a
//! crash can lose the current window or an outstanding write.

use session_core::json::Value;
use session_store::{SessionStore, SharedSession};

use crate::cancel::{self, CancelToken};
use crate::error::{Error, Result};

/// The `error.info.code` of the canonical result of a tool call cancelled at its checkpoint.
pub const TOOL_ABORTED_BEFORE_DISPATCH: &str = "TOOL_ABORTED_BEFORE_DISPATCH";

/// Flushes `session` through `store` (every `session/flush` listener). Returns whether any
/// listener took part.
///
/// # Errors
/// The store's first listener failure ([`Error::Store`]), or "not live".
pub async fn checkpoint_step(store: &SessionStore, session: &SharedSession) -> Result<bool> {
    store.flush(session).await.map_err(Error::Store)
}

/// The checkpoint before a model request: flushes the session named by `session_id` when it
/// is live in `store`; no id, or a detached one, flushes nothing (`Ok(false)`). On an error
/// the request must not be sent.
pub async fn checkpoint_request(store: &SessionStore, session_id: Option<&str>) -> Result<bool> {
    let Some(session) = session_id.and_then(|id| store.get(id)) else {
        return Ok(false);
    };
    checkpoint_step(store, &session).await
}

/// What a tool dispatch does after its checkpoint.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolCheckpoint {
    /// Run the tool body.
    Proceed,
    /// The call was cancelled while checkpointing: return this canonical result without
    /// running the body.
    AbortedBeforeDispatch(Value),
}

/// The checkpoint before a tool body. A nested dispatch (`nested`: a tool called by a tool)
/// reuses the outer checkpoint and flushes nothing. Otherwise the session is flushed; if
/// `cancel` fired meanwhile, the canonical "aborted before dispatch" result is returned.
///
/// # Errors
/// A failed flush: the tool runtime reports it as the call's error result (`Error: <msg>`)
/// and the body does not run.
pub async fn checkpoint_tool(
    store: &SessionStore,
    session: &SharedSession,
    nested: bool,
    cancel: Option<&CancelToken>,
) -> Result<ToolCheckpoint> {
    if nested {
        return Ok(ToolCheckpoint::Proceed);
    }
    checkpoint_step(store, session).await?;
    if cancel::check(cancel).is_err() {
        return Ok(ToolCheckpoint::AbortedBeforeDispatch(
            aborted_before_dispatch_result(),
        ));
    }
    Ok(ToolCheckpoint::Proceed)
}

/// `{content:[{type:'text', text:'Error: tool call aborted before dispatch'}], isError:true,
/// error:{message:'tool call aborted before dispatch', info:{name:'AbortError',
/// code:'TOOL_ABORTED_BEFORE_DISPATCH'}}}`.
pub fn aborted_before_dispatch_result() -> Value {
    const MESSAGE: &str = "tool call aborted before dispatch";
    Value::object([
        (
            "content",
            Value::array([Value::object([
                ("type", Value::from("text")),
                ("text", Value::from(format!("Error: {MESSAGE}").as_str())),
            ])]),
        ),
        ("isError", Value::Bool(true)),
        (
            "error",
            Value::object([
                ("message", Value::from(MESSAGE)),
                (
                    "info",
                    Value::object([
                        ("name", Value::from("AbortError")),
                        ("code", Value::from(TOOL_ABORTED_BEFORE_DISPATCH)),
                    ]),
                ),
            ]),
        ),
    ])
}
