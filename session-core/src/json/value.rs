//! The immutable JSON tree used for every payload in a session.

use std::fmt;
use std::sync::Arc;

use super::number::Number;

/// An immutable JSON value.
///
/// Containers are reference-counted slices, so cloning any value is O(1) and two clones are
/// the same value (`Value::ptr_eq`). Values are never mutated after construction: this is how
/// the session keeps accepted events frozen.
///
/// Object keys follow the JavaScript own-property order that `JSON.stringify` emits: keys that
/// are canonical array indices (`"0"`, `"17"`, below 2^32 − 1) come first in ascending numeric
/// order, every other key follows in insertion order, and a duplicate key keeps the position of
/// its first occurrence and the value of its last. Every constructor applies this rule.
///
/// Dropping, comparing, printing and parsing are iterative, so deeply nested values cannot
/// overflow the stack.
#[derive(Clone, Default)]
pub enum Value {
    /// `null`.
    #[default]
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// A number, kept with the exact text it was read from when that differs from the
    /// JavaScript formatting of its value.
    Number(Number),
    /// A string.
    String(Arc<str>),
    /// An array.
    Array(Array),
    /// An object.
    Object(Object),
}

/// An immutable JSON array.
#[derive(Clone, Default)]
pub struct Array(Arc<[Value]>);

/// An immutable JSON object whose keys are in JavaScript own-property order.
#[derive(Clone, Default)]
pub struct Object(Arc<[(Arc<str>, Value)]>);

impl Array {
    /// Builds an array from its elements.
    pub fn new(items: impl Into<Arc<[Value]>>) -> Self {
        Array(items.into())
    }

    /// The elements.
    pub fn as_slice(&self) -> &[Value] {
        &self.0
    }

    /// Whether two arrays share the same allocation.
    pub fn ptr_eq(&self, other: &Array) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl std::ops::Deref for Array {
    type Target = [Value];
    fn deref(&self) -> &[Value] {
        &self.0
    }
}

/// Whether `key` is a canonical array index (JavaScript "integer-like" property key).
pub(crate) fn array_index(key: &str) -> Option<u32> {
    let bytes = key.as_bytes();
    if bytes.is_empty() || bytes.len() > 10 {
        return None;
    }
    if bytes[0] == b'0' {
        return if bytes.len() == 1 { Some(0) } else { None };
    }
    let mut n: u64 = 0;
    for &b in bytes {
        if !b.is_ascii_digit() {
            return None;
        }
        n = n * 10 + u64::from(b - b'0');
    }
    // Array indices stop at 2^32 - 2.
    if n < u64::from(u32::MAX) {
        Some(n as u32)
    } else {
        None
    }
}

impl Object {
    /// Builds an object from entries, applying the JavaScript key-order and duplicate-key rules.
    pub fn from_entries(entries: impl IntoIterator<Item = (Arc<str>, Value)>) -> Self {
        // One allocation for exact-size sources (arrays, vectors); the rules rarely apply,
        // and only then is the object rebuilt.
        let entries: Arc<[(Arc<str>, Value)]> = entries.into_iter().collect();
        if needs_normalization(&entries) {
            Object(normalize_entries(entries.to_vec()).into())
        } else {
            Object(entries)
        }
    }

    /// Builds an object from entries that are already in serialization order: distinct keys,
    /// none of them an array index. Skips the normalization pass and the intermediate vector
    /// (one allocation for a fixed-size array), for hot paths that build known shapes.
    pub(crate) fn from_ordered_entries(entries: impl Into<Arc<[(Arc<str>, Value)]>>) -> Self {
        let entries = entries.into();
        debug_assert!(
            entries
                .iter()
                .enumerate()
                .all(|(i, (k, _))| array_index(k).is_none()
                    && entries[..i].iter().all(|(k2, _)| k2 != k)),
            "from_ordered_entries needs distinct, non-index keys"
        );
        Object(entries)
    }

    /// The entries in serialization order.
    pub fn entries(&self) -> &[(Arc<str>, Value)] {
        &self.0
    }

    /// Looks a key up.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.0.iter().find(|(k, _)| &**k == key).map(|(_, v)| v)
    }

    /// Whether the key is present (a present `null` counts as present).
    pub fn contains_key(&self, key: &str) -> bool {
        self.0.iter().any(|(k, _)| &**k == key)
    }

    /// Number of keys.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the object has no keys.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Iterates over `(key, value)` pairs in serialization order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&str, &Value)> + '_ {
        self.0.iter().map(|(k, v)| (&**k, v))
    }

    /// Iterates over the keys in serialization order.
    pub fn keys(&self) -> impl ExactSizeIterator<Item = &str> + '_ {
        self.0.iter().map(|(k, _)| &**k)
    }

    /// Whether the key set is exactly `keys` (in any order, each exactly once).
    pub fn has_exactly_keys(&self, keys: &[&str]) -> bool {
        self.0.len() == keys.len() && keys.iter().all(|k| self.contains_key(k))
    }

    /// A new object with `key` set to `value` (replacing in place, or appended at the end).
    #[must_use]
    pub fn with(&self, key: &str, value: Value) -> Object {
        let mut entries: Vec<(Arc<str>, Value)> = self.0.to_vec();
        if let Some(slot) = entries.iter_mut().find(|(k, _)| &**k == key) {
            slot.1 = value;
            Object(entries.into())
        } else {
            entries.push((super::key(key), value));
            Object::from_entries(entries)
        }
    }

    /// A new object without `key`.
    #[must_use]
    pub fn without(&self, key: &str) -> Object {
        Object(
            self.0
                .iter()
                .filter(|(k, _)| &**k != key)
                .cloned()
                .collect::<Vec<_>>()
                .into(),
        )
    }

    /// Whether two objects share the same allocation.
    pub fn ptr_eq(&self, other: &Object) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

/// Whether the JavaScript rules change `entries`: an array-index key (those come first) or a
/// repeated key (the last value wins, at the first position).
fn needs_normalization(entries: &[(Arc<str>, Value)]) -> bool {
    entries.iter().any(|(k, _)| array_index(k).is_some()) || has_duplicate_key(entries)
}

/// Duplicate detection: quadratic for small objects, hashed for large ones.
fn has_duplicate_key(entries: &[(Arc<str>, Value)]) -> bool {
    if entries.len() <= 16 {
        entries
            .iter()
            .enumerate()
            .any(|(i, (k, _))| entries[..i].iter().any(|(k2, _)| k2 == k))
    } else {
        let mut seen = std::collections::HashSet::with_capacity(entries.len());
        entries.iter().any(|(k, _)| !seen.insert(k.clone()))
    }
}

fn normalize_entries(mut entries: Vec<(Arc<str>, Value)>) -> Vec<(Arc<str>, Value)> {
    let has_index = entries.iter().any(|(k, _)| array_index(k).is_some());
    let has_dup = has_duplicate_key(&entries);
    if has_dup {
        let mut out: Vec<(Arc<str>, Value)> = Vec::with_capacity(entries.len());
        let mut index: std::collections::HashMap<Arc<str>, usize> =
            std::collections::HashMap::with_capacity(entries.len());
        for (k, v) in entries {
            if let Some(&i) = index.get(&k) {
                out[i].1 = v;
            } else {
                index.insert(k.clone(), out.len());
                out.push((k, v));
            }
        }
        entries = out;
    }
    if has_index {
        // Stable: integer-like keys first (ascending), then the rest in insertion order.
        entries.sort_by_key(|(k, _)| match array_index(k) {
            Some(n) => (0u8, n),
            None => (1u8, 0),
        });
    }
    entries
}

impl Value {
    /// Builds a string value.
    pub fn string(s: impl Into<Arc<str>>) -> Value {
        Value::String(s.into())
    }

    /// Builds an array value.
    pub fn array(items: impl IntoIterator<Item = Value>) -> Value {
        Value::Array(Array(items.into_iter().collect::<Vec<_>>().into()))
    }

    /// Builds an object value, applying the JavaScript key-order rules (see [`Object`]).
    pub fn object<K: AsRef<str>>(entries: impl IntoIterator<Item = (K, Value)>) -> Value {
        Value::Object(Object::from_entries(
            entries
                .into_iter()
                .map(|(k, v)| (super::key(k.as_ref()), v)),
        ))
    }

    /// An empty object.
    pub fn empty_object() -> Value {
        Value::Object(Object::default())
    }

    /// Whether this is `null`.
    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    /// The boolean, if this is one.
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }

    /// The number, if this is one.
    pub fn as_number(&self) -> Option<&Number> {
        match self {
            Value::Number(n) => Some(n),
            _ => None,
        }
    }

    /// The number as `f64`, if this is one.
    pub fn as_f64(&self) -> Option<f64> {
        self.as_number().map(Number::as_f64)
    }

    /// The value as a non-negative safe integer (`Number.isSafeInteger(n) && n >= 0`).
    pub fn as_u64(&self) -> Option<u64> {
        self.as_number().and_then(Number::as_u64)
    }

    /// The value as a safe integer (`Number.isSafeInteger`).
    pub fn as_i64(&self) -> Option<i64> {
        self.as_number().and_then(Number::as_i64)
    }

    /// The string, if this is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// The shared string, if this is one.
    pub fn as_arc_str(&self) -> Option<&Arc<str>> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// The elements, if this is an array.
    pub fn as_array(&self) -> Option<&Array> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }

    /// The object, if this is one.
    pub fn as_object(&self) -> Option<&Object> {
        match self {
            Value::Object(o) => Some(o),
            _ => None,
        }
    }

    /// Looks a key up when this is an object; `None` otherwise.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.as_object().and_then(|o| o.get(key))
    }

    /// Whether this is a non-empty string.
    pub fn is_non_empty_str(&self) -> bool {
        self.as_str().is_some_and(|s| !s.is_empty())
    }

    /// Whether both values share storage (the same frozen object, in JavaScript terms).
    pub fn ptr_eq(&self, other: &Value) -> bool {
        match (self, other) {
            (Value::Array(a), Value::Array(b)) => a.ptr_eq(b),
            (Value::Object(a), Value::Object(b)) => a.ptr_eq(b),
            (Value::String(a), Value::String(b)) => Arc::ptr_eq(a, b),
            (Value::Null, Value::Null) => true,
            _ => false,
        }
    }

    /// A short name of the JSON kind, for messages.
    pub fn kind_name(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Bool(_) => "boolean",
            Value::Number(_) => "number",
            Value::String(_) => "string",
            Value::Array(_) => "array",
            Value::Object(_) => "object",
        }
    }

    /// Deep equality where object keys are compared as sets (order-insensitive), arrays by
    /// length and element, and numbers by value.
    pub fn eq_unordered(&self, other: &Value) -> bool {
        deep_eq(self, other, false)
    }

    /// Serializes to compact JSON text (`JSON.stringify` form; numbers read from text keep
    /// their original spelling).
    pub fn to_json(&self) -> String {
        let mut out = String::new();
        super::write::write_value(self, &mut out);
        out
    }

    /// Appends compact JSON text to `out`.
    pub fn write_json(&self, out: &mut String) {
        super::write::write_value(self, out);
    }

    /// Parses JSON text losslessly (see [`super::parse`]).
    pub fn parse(text: &str) -> Result<Value, super::ParseError> {
        super::parse::parse(text)
    }
}

/// Structural equality: objects compare key order too (like comparing `JSON.stringify`
/// output), numbers compare by value.
impl PartialEq for Value {
    fn eq(&self, other: &Value) -> bool {
        deep_eq(self, other, true)
    }
}

fn deep_eq(a: &Value, b: &Value, ordered: bool) -> bool {
    let mut stack: Vec<(&Value, &Value)> = vec![(a, b)];
    while let Some((a, b)) = stack.pop() {
        match (a, b) {
            (Value::Null, Value::Null) => {}
            (Value::Bool(x), Value::Bool(y)) => {
                if x != y {
                    return false;
                }
            }
            (Value::Number(x), Value::Number(y)) => {
                if x != y {
                    return false;
                }
            }
            (Value::String(x), Value::String(y)) => {
                if x != y {
                    return false;
                }
            }
            (Value::Array(x), Value::Array(y)) => {
                if x.ptr_eq(y) {
                    continue;
                }
                if x.len() != y.len() {
                    return false;
                }
                stack.extend(x.iter().zip(y.iter()));
            }
            (Value::Object(x), Value::Object(y)) => {
                if x.ptr_eq(y) {
                    continue;
                }
                if x.len() != y.len() {
                    return false;
                }
                if ordered {
                    for ((kx, vx), (ky, vy)) in x.entries().iter().zip(y.entries()) {
                        if kx != ky {
                            return false;
                        }
                        stack.push((vx, vy));
                    }
                } else {
                    for (k, vx) in x.entries() {
                        match y.get(k) {
                            Some(vy) => stack.push((vx, vy)),
                            None => return false,
                        }
                    }
                }
            }
            _ => return false,
        }
    }
    true
}

impl Drop for Value {
    fn drop(&mut self) {
        // Iterative teardown of uniquely owned containers, so that dropping a deeply nested
        // value cannot overflow the stack.
        let mut stack: Vec<Value> = Vec::new();
        take_children(self, &mut stack);
        while let Some(mut v) = stack.pop() {
            take_children(&mut v, &mut stack);
        }
    }
}

fn take_children(v: &mut Value, stack: &mut Vec<Value>) {
    match v {
        Value::Array(Array(arc)) => {
            if let Some(items) = Arc::get_mut(arc) {
                for item in items.iter_mut() {
                    if item.has_children() {
                        stack.push(std::mem::take(item));
                    }
                }
            }
        }
        Value::Object(Object(arc)) => {
            if let Some(items) = Arc::get_mut(arc) {
                for (_, item) in items.iter_mut() {
                    if item.has_children() {
                        stack.push(std::mem::take(item));
                    }
                }
            }
        }
        _ => {}
    }
}

impl Value {
    fn has_children(&self) -> bool {
        match self {
            Value::Array(a) => !a.is_empty(),
            Value::Object(o) => !o.is_empty(),
            _ => false,
        }
    }
}

impl fmt::Debug for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_json())
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_json())
    }
}

impl fmt::Debug for Object {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&Value::Object(self.clone()), f)
    }
}

impl PartialEq for Object {
    fn eq(&self, other: &Object) -> bool {
        Value::Object(self.clone()) == Value::Object(other.clone())
    }
}

impl fmt::Debug for Array {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&Value::Array(self.clone()), f)
    }
}

impl From<bool> for Value {
    fn from(b: bool) -> Value {
        Value::Bool(b)
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Value {
        Value::String(super::string_value(s))
    }
}

impl From<String> for Value {
    fn from(s: String) -> Value {
        Value::String(s.into())
    }
}

impl From<Arc<str>> for Value {
    fn from(s: Arc<str>) -> Value {
        Value::String(s)
    }
}

impl From<Number> for Value {
    fn from(n: Number) -> Value {
        Value::Number(n)
    }
}

impl From<Object> for Value {
    fn from(o: Object) -> Value {
        Value::Object(o)
    }
}

impl From<Array> for Value {
    fn from(a: Array) -> Value {
        Value::Array(a)
    }
}

macro_rules! from_small_int {
    ($($t:ty),*) => {$(
        impl From<$t> for Value {
            fn from(n: $t) -> Value {
                Value::Number(Number::from(n))
            }
        }
    )*};
}
from_small_int!(u8, u16, u32, i8, i16, i32);

impl From<Vec<Value>> for Value {
    fn from(items: Vec<Value>) -> Value {
        Value::Array(Array(items.into()))
    }
}
