//! Projecting surface events to model messages (§3.6).

use std::fmt;

use session_core::Event;
use session_core::json::Value;

use crate::pseq::{self, PSeq};

/// `deriveEventMessage(event)`: the model message an event contributes when it is a surface
/// node, or `None`.
///
/// - `user/message`: `data` itself;
/// - `assistant/message`: `data.message`, unless its `content` is an empty array (such an
///   event only carries usage);
/// - `tool/result`: `data.message`;
/// - anything else: `None`.
///
/// The result is the stored value itself, never a copy; a `null` or missing message gives
/// `None`. There is no per-source framing: injected context renders verbatim.
pub fn derive_event_message(event: &Event) -> Option<&Value> {
    let message = match event.event_type() {
        "user/message" => event.data(),
        "assistant/message" => {
            let message = event.data().get("message")?;
            if message
                .get("content")
                .and_then(Value::as_array)
                .is_some_and(|c| c.is_empty())
            {
                return None;
            }
            message
        }
        "tool/result" => event.data().get("message")?,
        _ => return None,
    };
    (!message.is_null()).then_some(message)
}

/// The messages derived from a surface, in surface order: an O(1) snapshot that never
/// changes. The message values are the ones stored in the events (shared, immutable).
#[derive(Clone, Default)]
pub struct Messages(PSeq<Value>);

/// Iterator over [`Messages`].
pub struct MessagesIter<'a>(pseq::Iter<'a, Value>);

impl<'a> Iterator for MessagesIter<'a> {
    type Item = &'a Value;

    fn next(&mut self) -> Option<&'a Value> {
        self.0.next()
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.0.size_hint()
    }
}

impl DoubleEndedIterator for MessagesIter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.0.next_back()
    }
}

impl ExactSizeIterator for MessagesIter<'_> {}

impl Messages {
    pub(crate) fn from_seq(v: PSeq<Value>) -> Messages {
        Messages(v)
    }

    /// Iterates over the messages.
    pub fn iter(&self) -> MessagesIter<'_> {
        MessagesIter(self.0.iter())
    }

    /// Number of messages.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are no messages.
    pub fn is_empty(&self) -> bool {
        self.0.len() == 0
    }

    /// The message at index `i`.
    pub fn get(&self, i: usize) -> Option<&Value> {
        self.0.get(i)
    }

    /// The last message.
    pub fn last(&self) -> Option<&Value> {
        self.0.len().checked_sub(1).and_then(|i| self.0.get(i))
    }

    /// The messages as a `Vec` (O(n); the values are shared).
    pub fn to_vec(&self) -> Vec<Value> {
        self.0.iter().cloned().collect()
    }

    /// The messages as one JSON array value (O(n); the values are shared).
    pub fn to_value(&self) -> Value {
        Value::array(self.0.iter().cloned())
    }

    /// Whether both snapshots share storage.
    pub fn ptr_eq(&self, other: &Messages) -> bool {
        self.0.ptr_eq(&other.0)
    }
}

impl PartialEq for Messages {
    /// Element-wise structural equality (key order included).
    fn eq(&self, other: &Messages) -> bool {
        self.len() == other.len() && self.iter().zip(other.iter()).all(|(a, b)| a == b)
    }
}

impl fmt::Debug for Messages {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.0.iter()).finish()
    }
}

impl<'a> IntoIterator for &'a Messages {
    type Item = &'a Value;
    type IntoIter = MessagesIter<'a>;
    fn into_iter(self) -> MessagesIter<'a> {
        self.iter()
    }
}

impl FromIterator<Value> for Messages {
    fn from_iter<I: IntoIterator<Item = Value>>(iter: I) -> Messages {
        Messages(iter.into_iter().collect())
    }
}
