//! Drafts from serde values: the vocabulary's payloads and any `Serialize` type.

use std::sync::Arc;

use session_core::event::is_surface_eligible_type;
use session_core::json::{self, SerdeError};
use session_core::vocab::EventPayload;

use crate::session::Draft;

impl Draft {
    /// A draft of a [`session_core::vocab`] payload: its event type, its data, and for the
    /// three surface types `surfaceOp: "append"` (chain [`Draft::replace_op`] and
    /// [`Draft::sources`] for a replacement).
    ///
    /// Values the vocabulary read from a log are written back as read. The data passes the
    /// JSON rules of `append` (the serializer refuses what they refuse); whether the message
    /// shape and the surface rules accept it is [`crate::Session::append`]'s check, as for any
    /// draft.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use session_core::FixedClock;
    /// use session_core::vocab::{Message, TurnStart};
    /// use session_surface::{Draft, Session};
    ///
    /// let mut session = Session::create("s", None, None, Arc::new(FixedClock::new(0)))?;
    /// session.append(Draft::from_serde(&TurnStart { turn: 1, ..Default::default() })?)?;
    /// session.append(Draft::from_serde(&Message::user_text("m1", "hello"))?)?;
    /// let event = session.events().get(1).unwrap().clone();
    /// let read: Message = event.data_as()?;
    /// assert_eq!(read, Message::user_text("m1", "hello"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn from_serde<T: EventPayload>(data: &T) -> Result<Draft, SerdeError> {
        let draft = Draft::new(T::EVENT_TYPE, data.to_data()?);
        Ok(if is_surface_eligible_type(T::EVENT_TYPE) {
            draft.append_op()
        } else {
            draft
        })
    }

    /// A draft of type `ty` whose data is any `Serialize` value (a plugin's own payload
    /// type), without surface metadata.
    pub fn from_serde_as<T: serde::Serialize + ?Sized>(
        ty: impl Into<Arc<str>>,
        data: &T,
    ) -> Result<Draft, SerdeError> {
        Ok(Draft::new(ty, json::to_value(data)?))
    }
}
