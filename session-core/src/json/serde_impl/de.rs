//! `Deserialize` for [`Value`] and the deserializer that reads types out of a [`Value`].

use std::fmt;
use std::sync::Arc;

use serde::de::{self, Deserialize, DeserializeSeed, IntoDeserializer, Visitor};

use super::error::{SerdeError, SerdeErrorKind};
use super::{
    DepthGuard, SERDE_MAX_DEPTH, offer, offer_tree, take_offered, take_offered_tree,
    too_deep_message, withdraw_tree,
};
use crate::json::{self, Number, Object, Value};

/// The key `serde_json`'s `arbitrary_precision` feature wraps a number's text in.
const SERDE_JSON_NUMBER_TOKEN: &str = "$serde_json::private::Number";

impl<'de> Deserialize<'de> for Value {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(ValueVisitor)
    }
}

impl<'de> Deserialize<'de> for Object {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Object, D::Error> {
        let v = Value::deserialize(deserializer)?;
        match v.as_object() {
            Some(o) => Ok(o.clone()),
            None => Err(de::Error::invalid_type(unexpected(&v), &"a JSON object")),
        }
    }
}

/// How serde names the kind of `v` in a type error.
pub(crate) fn unexpected(v: &Value) -> de::Unexpected<'_> {
    match v {
        Value::Null => de::Unexpected::Unit,
        Value::Bool(b) => de::Unexpected::Bool(*b),
        Value::Number(n) => de::Unexpected::Float(n.as_f64()),
        Value::String(s) => de::Unexpected::Str(s),
        Value::Array(_) => de::Unexpected::Seq,
        Value::Object(_) => de::Unexpected::Map,
    }
}

/// An integer from another format: exact, kept in its decimal spelling when it is outside the
/// safe range (as the lossless parser keeps such a literal).
fn integer(v: i128) -> Value {
    match i64::try_from(v).ok().and_then(Number::from_i64) {
        Some(n) => Value::Number(n),
        None => Value::Number(Number::from_text(&v.to_string())),
    }
}

struct ValueVisitor;

impl<'de> Visitor<'de> for ValueVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
        Ok(take_offered(v as f64).map_or_else(|| integer(i128::from(v)), Value::Number))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
        Ok(take_offered(v as f64).map_or_else(|| integer(i128::from(v)), Value::Number))
    }
    fn visit_i128<E: de::Error>(self, v: i128) -> Result<Value, E> {
        Ok(integer(v))
    }
    fn visit_u128<E: de::Error>(self, v: u128) -> Result<Value, E> {
        Ok(match i128::try_from(v) {
            Ok(v) => integer(v),
            Err(_) => Value::Number(Number::from_text(&v.to_string())),
        })
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        if let Some(n) = take_offered(v) {
            return Ok(Value::Number(n));
        }
        if v == 0.0 && v.is_sign_negative() {
            // What the lossless parser keeps for the literal `-0`.
            return Ok(Value::Number(Number::from_text("-0")));
        }
        Number::from_f64(v)
            .map(Value::Number)
            .ok_or_else(|| E::custom("number is NaN or infinite"))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_some<D: de::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        Value::deserialize(d)
    }
    fn visit_newtype_struct<D: de::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        Value::deserialize(d)
    }
    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        if let Some(whole) = take_offered_tree().filter(|v| {
            v.as_array()
                .is_some_and(|a| Some(a.len()) == seq.size_hint())
        }) {
            return Ok(whole);
        }
        let _depth = DepthGuard::enter().ok_or_else(|| de::Error::custom(too_deep_message()))?;
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1024));
        while let Some(item) = seq.next_element::<Value>()? {
            items.push(item);
        }
        Ok(Value::from(items))
    }
    fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        if let Some(whole) = take_offered_tree().filter(|v| {
            v.as_object()
                .is_some_and(|o| Some(o.len()) == map.size_hint())
        }) {
            return Ok(whole);
        }
        let _depth = DepthGuard::enter().ok_or_else(|| de::Error::custom(too_deep_message()))?;
        let mut entries: Vec<(Arc<str>, Value)> =
            Vec::with_capacity(map.size_hint().unwrap_or(0).min(1024));
        while let Some(key) = map.next_key::<KeyString>()? {
            if entries.is_empty() && key.0 == SERDE_JSON_NUMBER_TOKEN {
                // serde_json with `arbitrary_precision`: the number's exact text.
                let text: String = map.next_value()?;
                return match json::parse(&text) {
                    Ok(v) if v.as_number().is_some() => Ok(v),
                    _ => Err(de::Error::custom(format!("invalid number text {text:?}"))),
                };
            }
            let value = map.next_value::<Value>()?;
            entries.push((json::key(&key.0), value));
        }
        Ok(Value::Object(Object::from_entries(entries)))
    }
}

/// An object key.
struct KeyString(String);

impl<'de> Deserialize<'de> for KeyString {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<KeyString, D::Error> {
        struct KeyVisitor;
        impl Visitor<'_> for KeyVisitor {
            type Value = KeyString;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string key")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<KeyString, E> {
                Ok(KeyString(v.to_owned()))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<KeyString, E> {
                Ok(KeyString(v))
            }
        }
        d.deserialize_str(KeyVisitor)
    }
}

/// The deserializer over a borrowed [`Value`]. Errors carry the path to where they happened.
pub(super) struct ValueDeserializer<'de> {
    value: &'de Value,
    depth: usize,
}

impl<'de> ValueDeserializer<'de> {
    pub(super) fn new(value: &'de Value) -> ValueDeserializer<'de> {
        ValueDeserializer { value, depth: 0 }
    }

    /// The depth of this value's children; refused past [`SERDE_MAX_DEPTH`].
    fn deeper(&self) -> Result<usize, SerdeError> {
        if self.depth >= SERDE_MAX_DEPTH {
            return Err(SerdeError::new(SerdeErrorKind::TooDeep));
        }
        Ok(self.depth + 1)
    }

    fn visit_number<V: Visitor<'de>>(n: &Number, visitor: V) -> Result<V::Value, SerdeError> {
        offer(n, || match n.as_i64() {
            Some(i) => match u64::try_from(i) {
                Ok(u) => visitor.visit_u64(u),
                Err(_) => visitor.visit_i64(i),
            },
            None => visitor.visit_f64(n.as_f64()),
        })
        .0
    }
}

impl<'de> de::Deserializer<'de> for ValueDeserializer<'de> {
    type Error = SerdeError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, SerdeError> {
        match self.value {
            Value::Null => visitor.visit_unit(),
            Value::Bool(b) => visitor.visit_bool(*b),
            Value::Number(n) => Self::visit_number(n, visitor),
            Value::String(s) => visitor.visit_borrowed_str(s),
            Value::Array(items) => {
                let access = SeqAccess {
                    items: items.iter(),
                    index: 0,
                    depth: self.deeper()?,
                };
                offer_tree(self.value, || visitor.visit_seq(access)).0
            }
            Value::Object(o) => {
                let access = MapAccess {
                    entries: o.entries().iter(),
                    pending: None,
                    depth: self.deeper()?,
                };
                offer_tree(self.value, || visitor.visit_map(access)).0
            }
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, SerdeError> {
        match self.value {
            Value::Null => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, SerdeError> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, SerdeError> {
        match self.value {
            Value::String(s) => visitor.visit_enum(s.as_ref().into_deserializer()),
            Value::Object(o) if o.len() == 1 => {
                let (variant, value) = &o.entries()[0];
                let inner = ValueDeserializer {
                    value,
                    depth: self.deeper()?,
                };
                visitor
                    .visit_enum(EnumAccess { variant, inner })
                    .map_err(|e| e.under_key(variant))
            }
            other => Err(de::Error::invalid_type(
                unexpected(other),
                &"a string or an object with one key",
            )),
        }
    }

    fn is_human_readable(&self) -> bool {
        true
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        unit unit_struct seq tuple tuple_struct map struct identifier ignored_any
    }
}

struct SeqAccess<'de> {
    items: std::slice::Iter<'de, Value>,
    index: usize,
    depth: usize,
}

impl<'de> de::SeqAccess<'de> for SeqAccess<'de> {
    type Error = SerdeError;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, SerdeError> {
        withdraw_tree();
        let Some(item) = self.items.next() else {
            return Ok(None);
        };
        let index = self.index;
        self.index += 1;
        let d = ValueDeserializer {
            value: item,
            depth: self.depth,
        };
        seed.deserialize(d)
            .map(Some)
            .map_err(|e| e.under_index(index))
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.items.len())
    }
}

struct MapAccess<'de> {
    entries: std::slice::Iter<'de, (Arc<str>, Value)>,
    pending: Option<&'de (Arc<str>, Value)>,
    depth: usize,
}

impl<'de> de::MapAccess<'de> for MapAccess<'de> {
    type Error = SerdeError;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, SerdeError> {
        withdraw_tree();
        let Some(entry) = self.entries.next() else {
            return Ok(None);
        };
        self.pending = Some(entry);
        let key: &'de str = &entry.0;
        seed.deserialize(de::value::BorrowedStrDeserializer::new(key))
            .map(Some)
            .map_err(|e: SerdeError| e.under_key(key))
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(
        &mut self,
        seed: V,
    ) -> Result<V::Value, SerdeError> {
        withdraw_tree();
        let (key, value) = self
            .pending
            .take()
            .ok_or_else(|| <SerdeError as de::Error>::custom("map value without a key"))?;
        let d = ValueDeserializer {
            value,
            depth: self.depth,
        };
        seed.deserialize(d).map_err(|e| e.under_key(key))
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.entries.len())
    }
}

struct EnumAccess<'de> {
    variant: &'de Arc<str>,
    inner: ValueDeserializer<'de>,
}

impl<'de> de::EnumAccess<'de> for EnumAccess<'de> {
    type Error = SerdeError;
    type Variant = ValueDeserializer<'de>;

    fn variant_seed<V: DeserializeSeed<'de>>(
        self,
        seed: V,
    ) -> Result<(V::Value, ValueDeserializer<'de>), SerdeError> {
        let key: &'de str = self.variant;
        let v = seed.deserialize(de::value::BorrowedStrDeserializer::<SerdeError>::new(key))?;
        Ok((v, self.inner))
    }
}

impl<'de> de::VariantAccess<'de> for ValueDeserializer<'de> {
    type Error = SerdeError;

    fn unit_variant(self) -> Result<(), SerdeError> {
        match self.value {
            Value::Null => Ok(()),
            other => Err(de::Error::invalid_type(unexpected(other), &"unit variant")),
        }
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(
        self,
        seed: T,
    ) -> Result<T::Value, SerdeError> {
        seed.deserialize(self)
    }

    fn tuple_variant<V: Visitor<'de>>(
        self,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, SerdeError> {
        de::Deserializer::deserialize_any(self, visitor)
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, SerdeError> {
        de::Deserializer::deserialize_any(self, visitor)
    }
}
