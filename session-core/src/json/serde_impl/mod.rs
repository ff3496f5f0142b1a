//! serde support for [`Value`]: `Serialize` and `Deserialize` for the tree, a serializer that
//! builds a [`Value`] from any `Serialize` type ([`to_value`]) and a deserializer that reads any
//! `Deserialize` type out of a [`Value`] ([`from_value`]).
//!
//! Round trips between [`Value`] and these two are lossless: key order and every number's
//! spelling survive, and a [`Value`] (or one held by a serde type) passes through them as an
//! O(1) clone that shares storage, whatever its depth.
//!
//! serde has no way to pass a number's spelling through its data model, and `serde_json`'s
//! `arbitrary_precision` token would turn numbers into objects for every other format, so
//! [`Value`]'s own impls hand the exact [`Number`] beside the `serialize_*` / `visit_*` call
//! through a thread-local slot ([`offer`]); only this module's serializer and deserializer
//! read it, and only when it matches the value in the call. A whole container is handed over
//! the same way ([`offer_tree`]). Other formats see the number's value (integers as
//! integers), and serde's own buffering (untagged and internally tagged enums, `flatten`)
//! sees values only. `serde_json` parses some floats one unit in the last place off unless
//! its `float_roundtrip` feature is on; read JSON text with [`super::parse`] to keep it exact.
//!
//! Values built from Rust types follow the rules of a live `append` (see
//! [`super::is_appendable`]): NaN, infinities, `-0` and integers outside ±(2^53 − 1) are
//! refused with a [`SerdeError`] naming where they were.

mod de;
mod error;
mod ser;

use std::cell::{Cell, RefCell};

use serde::{Deserialize, Serialize};

pub use error::{PathSegment, SerdeError, SerdeErrorKind};

use super::{Number, Value};

/// The deepest nesting that serde conversions follow where they recurse once per level: a
/// serde type read out of a [`Value`], a [`Value`] written to or read from another format,
/// and the conversion to `serde_json::Value`. Deeper input is refused with
/// [`SerdeErrorKind::TooDeep`]. A [`Value`] passing through [`to_value`] / [`from_value`]
/// whole, the lossless parser and the writer have no such limit.
pub const SERDE_MAX_DEPTH: usize = 128;

/// Serializes `value` into a [`Value`] (losslessly for [`Value`]s and the vocabulary).
pub fn to_value<T: Serialize + ?Sized>(value: &T) -> Result<Value, SerdeError> {
    value.serialize(ser::ValueSerializer)
}

/// Deserializes a `T` out of `value`; strings may be borrowed from it.
pub fn from_value<'de, T: Deserialize<'de>>(value: &'de Value) -> Result<T, SerdeError> {
    T::deserialize(de::ValueDeserializer::new(value))
}

thread_local! {
    /// The number whose `serialize_*` / `visit_*` call is in progress (see the module docs).
    static OFFERED: RefCell<Option<Number>> = const { RefCell::new(None) };
    /// The container whose `serialize_seq` / `serialize_map` or `visit_seq` / `visit_map` call
    /// is in progress: this module's serializer and `Value`'s visitor take it whole (an O(1)
    /// clone) instead of rebuilding it part by part.
    static OFFERED_TREE: RefCell<Option<Value>> = const { RefCell::new(None) };
    /// How deep the `Serialize` / `Deserialize` impls of [`Value`] currently are.
    static DEPTH: Cell<usize> = const { Cell::new(0) };
    /// A [`SerdeError`] being passed through a serde error's `custom` (see [`nested`]).
    static NESTED: RefCell<Option<SerdeError>> = const { RefCell::new(None) };
}

/// `e` as the error `E` of an outer serializer or deserializer. When `E` is [`SerdeError`],
/// the result is `e` itself (kind and path kept, so that the outer levels extend the path);
/// other formats get `e`'s text. Used by impls that convert through a [`Value`] with a
/// [`SerdeError`] of their own (the vocabulary's).
pub(crate) fn nested<E, F: FnOnce(&SerdeError) -> E>(e: &SerdeError, custom: F) -> E {
    NESTED.with(|n| *n.borrow_mut() = Some(e.clone()));
    let out = custom(e);
    NESTED.with(|n| n.borrow_mut().take());
    out
}

/// The error passed through [`nested`], if its text is `text`.
pub(super) fn take_nested(text: &str) -> Option<SerdeError> {
    NESTED
        .with(|n| n.borrow_mut().take())
        .filter(|e| e.to_string() == text)
}

/// Runs `f` with `value` in `slot`; returns its result and whether the slot was emptied
/// meanwhile (taken by this module). The slot is empty afterwards, even if `f` panics.
fn offer_in<T: Clone + 'static, R>(
    slot: &'static std::thread::LocalKey<RefCell<Option<T>>>,
    value: &T,
    f: impl FnOnce() -> R,
) -> (R, bool) {
    struct Clear<T: 'static>(&'static std::thread::LocalKey<RefCell<Option<T>>>);
    impl<T: 'static> Drop for Clear<T> {
        fn drop(&mut self) {
            self.0.with(|o| o.borrow_mut().take());
        }
    }
    slot.with(|o| *o.borrow_mut() = Some(value.clone()));
    let clear = Clear(slot);
    let r = f();
    let taken = slot.with(|o| o.borrow().is_none());
    drop(clear);
    (r, taken)
}

/// Runs `f` (one leaf `serialize_*` or `visit_*` call for `n`) with `n` offered; returns its
/// result and whether this module took the offer.
pub(super) fn offer<R>(n: &Number, f: impl FnOnce() -> R) -> (R, bool) {
    offer_in(&OFFERED, n, f)
}

/// Runs `f` (the `serialize_seq` / `serialize_map` or `visit_seq` / `visit_map` call that
/// starts container `v`) with `v` offered whole; returns its result and whether this module
/// took it (then the container is already complete: a clone, sharing storage).
pub(super) fn offer_tree<R>(v: &Value, f: impl FnOnce() -> R) -> (R, bool) {
    offer_in(&OFFERED_TREE, v, f)
}

/// The container offered by [`offer_tree`], if any.
pub(super) fn take_offered_tree() -> Option<Value> {
    OFFERED_TREE.with(|o| o.borrow_mut().take())
}

/// Withdraws an offered container: a visitor that reads the container's parts did not take
/// it, and nothing deeper may.
pub(super) fn withdraw_tree() {
    OFFERED_TREE.with(|o| o.borrow_mut().take());
}

/// The offered number, if one is offered and has the value `v` (a leaf call for another value
/// never picks it up).
// Exact comparison on purpose: the offer is for this very value (`-0` matches `0`).
#[allow(clippy::float_cmp)]
pub(super) fn take_offered(v: f64) -> Option<Number> {
    OFFERED
        .with(|o| o.borrow_mut().take())
        .filter(|n| n.as_f64() == v || (n.as_f64().is_nan() && v.is_nan()))
}

/// One level of nesting in the impls of [`Value`]; `None` past [`SERDE_MAX_DEPTH`].
pub(super) struct DepthGuard(());

impl DepthGuard {
    pub(super) fn enter() -> Option<DepthGuard> {
        DEPTH.with(|d| {
            if d.get() >= SERDE_MAX_DEPTH {
                None
            } else {
                d.set(d.get() + 1);
                Some(DepthGuard(()))
            }
        })
    }
}

impl Drop for DepthGuard {
    fn drop(&mut self) {
        DEPTH.with(|d| d.set(d.get().saturating_sub(1)));
    }
}

/// The message of a nesting refusal.
pub(super) fn too_deep_message() -> String {
    format!("JSON nesting deeper than {SERDE_MAX_DEPTH} levels")
}
