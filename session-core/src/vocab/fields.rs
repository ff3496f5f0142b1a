//! Reading and writing the vocabulary's objects: typed fields, the fields no type names, and
//! the key order read.

use std::fmt;
use std::sync::Arc;

use crate::json::{self, Number, Object, SerdeError, SerdeErrorKind, Value};

/// The fields of an object that its vocabulary type does not name, and the key order the
/// object was read with.
///
/// Reading keeps every unnamed field here, in order, and remembers the order of all keys;
/// writing puts the named fields and these back in that order (fields added since reading
/// follow, named ones first). A key in `fields` that the type names is ignored on writing: the
/// named field wins. Equality compares the fields only, not the remembered order.
#[derive(Clone, Default)]
pub struct Extra {
    /// The unnamed fields, in the order read.
    pub fields: Object,
    /// Every key of the object read, in order; `None` for a value built in code.
    order: Option<Arc<[Arc<str>]>>,
}

impl Extra {
    /// Unnamed fields for a value built in code.
    pub fn new(fields: Object) -> Extra {
        Extra {
            fields,
            order: None,
        }
    }

    /// Whether there are no unnamed fields.
    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }
}

impl PartialEq for Extra {
    fn eq(&self, other: &Extra) -> bool {
        self.fields == other.fields
    }
}

impl fmt::Debug for Extra {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.fields, f)
    }
}

/// A value the vocabulary reads from and writes to a JSON [`Value`].
pub(crate) trait Field: Sized {
    fn read(v: &Value) -> Result<Self, SerdeError>;
    fn write(&self) -> Result<Value, SerdeError>;
}

/// serde's wording for a value of the wrong kind.
pub(crate) fn invalid_type(v: &Value, expected: &str) -> SerdeError {
    SerdeError::new(SerdeErrorKind::Message(format!(
        "invalid type: {}, expected {expected}",
        v.kind_name()
    )))
}

impl Field for String {
    fn read(v: &Value) -> Result<String, SerdeError> {
        v.as_str()
            .map(str::to_owned)
            .ok_or_else(|| invalid_type(v, "a string"))
    }
    fn write(&self) -> Result<Value, SerdeError> {
        Ok(Value::from(self.as_str()))
    }
}

impl Field for u64 {
    fn read(v: &Value) -> Result<u64, SerdeError> {
        v.as_u64()
            .ok_or_else(|| invalid_type(v, "a non-negative safe integer"))
    }
    fn write(&self) -> Result<Value, SerdeError> {
        Number::from_u64(*self)
            .map(Value::Number)
            .ok_or_else(|| SerdeError::new(SerdeErrorKind::UnsafeInteger(self.to_string())))
    }
}

impl Field for f64 {
    fn read(v: &Value) -> Result<f64, SerdeError> {
        v.as_f64()
            .filter(|f| f.is_finite())
            .ok_or_else(|| invalid_type(v, "a finite number"))
    }
    fn write(&self) -> Result<Value, SerdeError> {
        json::to_value(self)
    }
}

impl Field for bool {
    fn read(v: &Value) -> Result<bool, SerdeError> {
        v.as_bool().ok_or_else(|| invalid_type(v, "a boolean"))
    }
    fn write(&self) -> Result<Value, SerdeError> {
        Ok(Value::Bool(*self))
    }
}

impl Field for Value {
    fn read(v: &Value) -> Result<Value, SerdeError> {
        Ok(v.clone())
    }
    fn write(&self) -> Result<Value, SerdeError> {
        Ok(self.clone())
    }
}

impl<T: Field> Field for Vec<T> {
    fn read(v: &Value) -> Result<Vec<T>, SerdeError> {
        let items = v.as_array().ok_or_else(|| invalid_type(v, "an array"))?;
        items
            .iter()
            .enumerate()
            .map(|(i, item)| T::read(item).map_err(|e| e.under_index(i)))
            .collect()
    }
    fn write(&self) -> Result<Value, SerdeError> {
        let items: Vec<Value> = self
            .iter()
            .enumerate()
            .map(|(i, item)| item.write().map_err(|e| e.under_index(i)))
            .collect::<Result<_, _>>()?;
        Ok(Value::from(items))
    }
}

/// Reads the fields of one object.
pub(crate) struct Reader<'a> {
    obj: &'a Object,
    used: Vec<bool>,
}

impl<'a> Reader<'a> {
    /// A reader over `v`; `tag` names a key the caller has read already.
    pub(crate) fn new(v: &'a Value, tag: Option<&str>) -> Result<Reader<'a>, SerdeError> {
        let obj = v.as_object().ok_or_else(|| invalid_type(v, "an object"))?;
        let used = obj.keys().map(|k| Some(k) == tag).collect();
        Ok(Reader { obj, used })
    }

    fn take(&mut self, key: &str) -> Option<&'a Value> {
        let i = self.obj.keys().position(|k| k == key)?;
        self.used[i] = true;
        Some(&self.obj.entries()[i].1)
    }

    /// A field that must be present.
    pub(crate) fn req<T: Field>(&mut self, key: &str) -> Result<T, SerdeError> {
        match self.take(key) {
            Some(v) => T::read(v).map_err(|e| e.under_key(key)),
            None => Err(SerdeError::new(SerdeErrorKind::Message(format!(
                "missing field `{key}`"
            )))),
        }
    }

    /// A field that may be absent (a present `null` is read as the field's type).
    pub(crate) fn opt<T: Field>(&mut self, key: &str) -> Result<Option<T>, SerdeError> {
        self.take(key)
            .map(|v| T::read(v).map_err(|e| e.under_key(key)))
            .transpose()
    }

    /// The fields not read, and the key order.
    pub(crate) fn finish(self) -> Extra {
        let fields = self
            .obj
            .entries()
            .iter()
            .zip(&self.used)
            .filter(|(_, used)| !**used)
            .map(|(entry, _)| entry.clone())
            .collect::<Vec<_>>();
        Extra {
            fields: Object::from_entries(fields),
            order: Some(self.obj.entries().iter().map(|(k, _)| k.clone()).collect()),
        }
    }
}

/// Writes the fields of one object.
#[derive(Default)]
pub(crate) struct Writer {
    entries: Vec<(Arc<str>, Value)>,
}

impl Writer {
    /// A string field whose value is fixed (a tag).
    pub(crate) fn tag(&mut self, key: &str, value: &str) {
        self.entries.push((json::key(key), Value::from(value)));
    }

    pub(crate) fn req<T: Field>(&mut self, key: &str, value: &T) -> Result<(), SerdeError> {
        let v = value.write().map_err(|e| e.under_key(key))?;
        self.entries.push((json::key(key), v));
        Ok(())
    }

    pub(crate) fn opt<T: Field>(&mut self, key: &str, value: Option<&T>) -> Result<(), SerdeError> {
        match value {
            Some(value) => self.req(key, value),
            None => Ok(()),
        }
    }

    /// The object: the named fields, then `extra`'s, all in `extra`'s remembered order.
    pub(crate) fn finish(mut self, extra: &Extra) -> Value {
        for (k, v) in extra.fields.entries() {
            if !self.entries.iter().any(|(named, _)| named == k) {
                self.entries.push((k.clone(), v.clone()));
            }
        }
        if let Some(order) = &extra.order {
            // Stable: keys not read keep their relative order, after the ones read.
            let position: std::collections::HashMap<&str, usize> =
                order.iter().enumerate().map(|(i, k)| (&**k, i)).collect();
            self.entries
                .sort_by_key(|(k, _)| position.get(&**k).copied().unwrap_or(usize::MAX));
        }
        Value::Object(Object::from_entries(self.entries))
    }
}

/// The string under `key` of object `v` (an enum's tag).
pub(crate) fn read_tag<'a>(v: &'a Value, key: &str) -> Result<&'a str, SerdeError> {
    let obj = v.as_object().ok_or_else(|| invalid_type(v, "an object"))?;
    match obj.get(key) {
        Some(tag) => tag
            .as_str()
            .ok_or_else(|| invalid_type(tag, "a string").under_key(key)),
        None => Err(SerdeError::new(SerdeErrorKind::Message(format!(
            "missing field `{key}`"
        )))),
    }
}
