//! `Serialize` for [`Value`] and the serializer that builds a [`Value`].

use std::sync::Arc;

use serde::ser::{self, Serialize, SerializeMap as _, SerializeSeq as _};

use super::error::{SerdeError, SerdeErrorKind};
use super::{DepthGuard, offer, offer_tree, take_offered, take_offered_tree, too_deep_message};
use crate::json::{self, Array, MAX_SAFE_INTEGER, Number, Object, Value};

impl Serialize for Value {
    fn serialize<S: ser::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Value::Null => serializer.serialize_unit(),
            Value::Bool(b) => serializer.serialize_bool(*b),
            Value::Number(n) => n.serialize(serializer),
            Value::String(s) => serializer.serialize_str(s),
            Value::Array(items) => {
                let (seq, taken) = offer_tree(self, || serializer.serialize_seq(Some(items.len())));
                let mut seq = seq?;
                if !taken {
                    let _depth = DepthGuard::enter()
                        .ok_or_else(|| ser::Error::custom(too_deep_message()))?;
                    for item in items.iter() {
                        seq.serialize_element(item)?;
                    }
                }
                seq.end()
            }
            Value::Object(o) => {
                let (map, taken) = offer_tree(self, || serializer.serialize_map(Some(o.len())));
                let mut map = map?;
                if !taken {
                    let _depth = DepthGuard::enter()
                        .ok_or_else(|| ser::Error::custom(too_deep_message()))?;
                    for (k, v) in o.iter() {
                        map.serialize_entry(k, v)?;
                    }
                }
                map.end()
            }
        }
    }
}

impl Serialize for Number {
    /// Integral values within the 64-bit range as integers, everything else as `f64`; this
    /// module's serializer keeps the exact number, spelling included. A literal outside the
    /// double range (`1e400`, kept verbatim by the parser) is an error for other serializers,
    /// which would write it as `null` or refuse it.
    fn serialize<S: ser::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let v = self.as_f64();
        let (result, taken) = offer(self, || {
            // The casts are exact: the value is integral and inside the target's range.
            if v.fract() == 0.0 && (0.0..18_446_744_073_709_551_616.0).contains(&v) {
                serializer.serialize_u64(v as u64)
            } else if v.fract() == 0.0 && (-9_223_372_036_854_775_808.0..0.0).contains(&v) {
                serializer.serialize_i64(v as i64)
            } else {
                serializer.serialize_f64(v)
            }
        });
        if !v.is_finite() && !taken {
            return Err(ser::Error::custom(format!(
                "number {self} is outside the double range"
            )));
        }
        result
    }
}

impl Serialize for Object {
    fn serialize<S: ser::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        Value::Object(self.clone()).serialize(serializer)
    }
}

impl Serialize for Array {
    fn serialize<S: ser::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        Value::Array(self.clone()).serialize(serializer)
    }
}

fn unsafe_integer(text: &impl ToString) -> SerdeError {
    SerdeError::new(SerdeErrorKind::UnsafeInteger(text.to_string()))
}

fn int_number(v: i128) -> Result<Value, SerdeError> {
    if let Some(n) = take_offered(v as f64) {
        return Ok(Value::Number(n));
    }
    if v.unsigned_abs() > MAX_SAFE_INTEGER as u128 {
        return Err(unsafe_integer(&v));
    }
    // Exact: |v| ≤ 2^53 − 1.
    Ok(Value::Number(
        Number::from_i64(v as i64).ok_or_else(|| unsafe_integer(&v))?,
    ))
}

fn float_number(v: f64) -> Result<Value, SerdeError> {
    if let Some(n) = take_offered(v) {
        return Ok(Value::Number(n));
    }
    let n = Number::from_f64(v).ok_or_else(|| SerdeError::new(SerdeErrorKind::NonFinite))?;
    if n.is_negative_zero() {
        return Err(SerdeError::new(SerdeErrorKind::NegativeZero));
    }
    if !n.is_appendable() {
        // Integral and outside the safe range (the only other refusal).
        return Err(unsafe_integer(&n));
    }
    Ok(Value::Number(n))
}

/// The serializer whose output is a [`Value`].
pub(super) struct ValueSerializer;

impl ser::Serializer for ValueSerializer {
    type Ok = Value;
    type Error = SerdeError;
    type SerializeSeq = SeqBuilder;
    type SerializeTuple = SeqBuilder;
    type SerializeTupleStruct = SeqBuilder;
    type SerializeTupleVariant = Variant<SeqBuilder>;
    type SerializeMap = MapBuilder;
    type SerializeStruct = MapBuilder;
    type SerializeStructVariant = Variant<MapBuilder>;

    fn serialize_bool(self, v: bool) -> Result<Value, SerdeError> {
        Ok(Value::Bool(v))
    }
    fn serialize_i8(self, v: i8) -> Result<Value, SerdeError> {
        int_number(i128::from(v))
    }
    fn serialize_i16(self, v: i16) -> Result<Value, SerdeError> {
        int_number(i128::from(v))
    }
    fn serialize_i32(self, v: i32) -> Result<Value, SerdeError> {
        int_number(i128::from(v))
    }
    fn serialize_i64(self, v: i64) -> Result<Value, SerdeError> {
        int_number(i128::from(v))
    }
    fn serialize_i128(self, v: i128) -> Result<Value, SerdeError> {
        int_number(v)
    }
    fn serialize_u8(self, v: u8) -> Result<Value, SerdeError> {
        int_number(i128::from(v))
    }
    fn serialize_u16(self, v: u16) -> Result<Value, SerdeError> {
        int_number(i128::from(v))
    }
    fn serialize_u32(self, v: u32) -> Result<Value, SerdeError> {
        int_number(i128::from(v))
    }
    fn serialize_u64(self, v: u64) -> Result<Value, SerdeError> {
        int_number(i128::from(v))
    }
    fn serialize_u128(self, v: u128) -> Result<Value, SerdeError> {
        match i128::try_from(v) {
            Ok(v) => int_number(v),
            Err(_) => Err(unsafe_integer(&v)),
        }
    }
    fn serialize_f32(self, v: f32) -> Result<Value, SerdeError> {
        float_number(f64::from(v))
    }
    fn serialize_f64(self, v: f64) -> Result<Value, SerdeError> {
        float_number(v)
    }
    fn serialize_char(self, v: char) -> Result<Value, SerdeError> {
        Ok(Value::String(Arc::from(v.encode_utf8(&mut [0; 4]) as &str)))
    }
    fn serialize_str(self, v: &str) -> Result<Value, SerdeError> {
        Ok(Value::from(v))
    }
    fn serialize_bytes(self, v: &[u8]) -> Result<Value, SerdeError> {
        // As serde_json does: an array of numbers.
        Ok(Value::array(v.iter().map(|&b| Value::from(b))))
    }
    fn serialize_none(self) -> Result<Value, SerdeError> {
        Ok(Value::Null)
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<Value, SerdeError> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<Value, SerdeError> {
        Ok(Value::Null)
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<Value, SerdeError> {
        Ok(Value::Null)
    }
    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<Value, SerdeError> {
        Ok(Value::from(variant))
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<Value, SerdeError> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<Value, SerdeError> {
        let inner = value
            .serialize(ValueSerializer)
            .map_err(|e| e.under_key(variant))?;
        Ok(Value::object([(variant, inner)]))
    }
    fn serialize_seq(self, len: Option<usize>) -> Result<SeqBuilder, SerdeError> {
        let mut seq = SeqBuilder::new(len);
        // The offer is for the container whose `serialize_seq` this is: same kind, same length.
        seq.whole =
            take_offered_tree().filter(|v| v.as_array().is_some_and(|a| Some(a.len()) == len));
        Ok(seq)
    }
    fn serialize_tuple(self, len: usize) -> Result<SeqBuilder, SerdeError> {
        Ok(SeqBuilder::new(Some(len)))
    }
    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        len: usize,
    ) -> Result<SeqBuilder, SerdeError> {
        Ok(SeqBuilder::new(Some(len)))
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<Variant<SeqBuilder>, SerdeError> {
        Ok(Variant {
            variant,
            inner: SeqBuilder::new(Some(len)),
        })
    }
    fn serialize_map(self, len: Option<usize>) -> Result<MapBuilder, SerdeError> {
        let mut map = MapBuilder::new(len);
        map.whole =
            take_offered_tree().filter(|v| v.as_object().is_some_and(|o| Some(o.len()) == len));
        Ok(map)
    }
    fn serialize_struct(self, _name: &'static str, len: usize) -> Result<MapBuilder, SerdeError> {
        Ok(MapBuilder::new(Some(len)))
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<Variant<MapBuilder>, SerdeError> {
        Ok(Variant {
            variant,
            inner: MapBuilder::new(Some(len)),
        })
    }
}

/// Capacity reserved from a size hint, bounded so that a lying hint cannot reserve much.
fn bounded(len: Option<usize>) -> usize {
    len.unwrap_or(0).min(1024)
}

/// Builds an array.
pub(super) struct SeqBuilder {
    items: Vec<Value>,
    /// The whole array, when a [`Value`] handed itself over.
    whole: Option<Value>,
}

impl SeqBuilder {
    fn new(len: Option<usize>) -> SeqBuilder {
        SeqBuilder {
            items: Vec::with_capacity(bounded(len)),
            whole: None,
        }
    }

    fn push<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), SerdeError> {
        if self.whole.is_some() {
            return Err(<SerdeError as ser::Error>::custom(
                "array element after the whole array",
            ));
        }
        let index = self.items.len();
        let v = value
            .serialize(ValueSerializer)
            .map_err(|e| e.under_index(index))?;
        self.items.push(v);
        Ok(())
    }

    fn finish(self) -> Value {
        self.whole.unwrap_or_else(|| Value::from(self.items))
    }
}

impl ser::SerializeSeq for SeqBuilder {
    type Ok = Value;
    type Error = SerdeError;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), SerdeError> {
        self.push(value)
    }
    fn end(self) -> Result<Value, SerdeError> {
        Ok(self.finish())
    }
}

impl ser::SerializeTuple for SeqBuilder {
    type Ok = Value;
    type Error = SerdeError;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), SerdeError> {
        self.push(value)
    }
    fn end(self) -> Result<Value, SerdeError> {
        Ok(self.finish())
    }
}

impl ser::SerializeTupleStruct for SeqBuilder {
    type Ok = Value;
    type Error = SerdeError;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), SerdeError> {
        self.push(value)
    }
    fn end(self) -> Result<Value, SerdeError> {
        Ok(self.finish())
    }
}

/// Builds an object; keys keep their insertion order, under the JavaScript rules of
/// [`Object::from_entries`].
pub(super) struct MapBuilder {
    entries: Vec<(Arc<str>, Value)>,
    key: Option<Arc<str>>,
    /// The whole object, when a [`Value`] handed itself over.
    whole: Option<Value>,
}

impl MapBuilder {
    fn new(len: Option<usize>) -> MapBuilder {
        MapBuilder {
            entries: Vec::with_capacity(bounded(len)),
            key: None,
            whole: None,
        }
    }

    fn put<T: Serialize + ?Sized>(&mut self, key: Arc<str>, value: &T) -> Result<(), SerdeError> {
        if self.whole.is_some() {
            return Err(<SerdeError as ser::Error>::custom(
                "object entry after the whole object",
            ));
        }
        let v = value
            .serialize(ValueSerializer)
            .map_err(|e| e.under_key(&key))?;
        self.entries.push((key, v));
        Ok(())
    }

    fn finish(self) -> Value {
        match self.whole {
            Some(v) => v,
            None => Value::Object(Object::from_entries(self.entries)),
        }
    }
}

impl ser::SerializeMap for MapBuilder {
    type Ok = Value;
    type Error = SerdeError;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), SerdeError> {
        self.key = Some(key.serialize(KeySerializer)?);
        Ok(())
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), SerdeError> {
        let key = self
            .key
            .take()
            .ok_or_else(|| <SerdeError as ser::Error>::custom("map value without a key"))?;
        self.put(key, value)
    }
    fn end(self) -> Result<Value, SerdeError> {
        Ok(self.finish())
    }
}

impl ser::SerializeStruct for MapBuilder {
    type Ok = Value;
    type Error = SerdeError;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), SerdeError> {
        self.put(json::key(key), value)
    }
    fn end(self) -> Result<Value, SerdeError> {
        Ok(self.finish())
    }
}

/// A tuple or struct variant: `{"<variant>": <inner>}`.
pub(super) struct Variant<T> {
    variant: &'static str,
    inner: T,
}

impl ser::SerializeTupleVariant for Variant<SeqBuilder> {
    type Ok = Value;
    type Error = SerdeError;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), SerdeError> {
        let variant = self.variant;
        self.inner.push(value).map_err(|e| e.under_key(variant))
    }
    fn end(self) -> Result<Value, SerdeError> {
        Ok(Value::object([(self.variant, self.inner.finish())]))
    }
}

impl ser::SerializeStructVariant for Variant<MapBuilder> {
    type Ok = Value;
    type Error = SerdeError;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), SerdeError> {
        let variant = self.variant;
        self.inner
            .put(json::key(key), value)
            .map_err(|e| e.under_key(variant))
    }
    fn end(self) -> Result<Value, SerdeError> {
        Ok(Value::object([(self.variant, self.inner.finish())]))
    }
}

/// Serializes a map key: strings and characters as they are, integers and booleans as their
/// decimal or literal text (as `serde_json` does); anything else is refused.
struct KeySerializer;

fn key_not_string<T>() -> Result<T, SerdeError> {
    Err(SerdeError::new(SerdeErrorKind::KeyNotString))
}

macro_rules! int_keys {
    ($($method:ident: $t:ty),*) => {$(
        fn $method(self, v: $t) -> Result<Arc<str>, SerdeError> {
            Ok(Arc::from(v.to_string()))
        }
    )*};
}

impl ser::Serializer for KeySerializer {
    type Ok = Arc<str>;
    type Error = SerdeError;
    type SerializeSeq = ser::Impossible<Arc<str>, SerdeError>;
    type SerializeTuple = ser::Impossible<Arc<str>, SerdeError>;
    type SerializeTupleStruct = ser::Impossible<Arc<str>, SerdeError>;
    type SerializeTupleVariant = ser::Impossible<Arc<str>, SerdeError>;
    type SerializeMap = ser::Impossible<Arc<str>, SerdeError>;
    type SerializeStruct = ser::Impossible<Arc<str>, SerdeError>;
    type SerializeStructVariant = ser::Impossible<Arc<str>, SerdeError>;

    int_keys!(serialize_i8: i8, serialize_i16: i16, serialize_i32: i32, serialize_i64: i64,
        serialize_i128: i128, serialize_u8: u8, serialize_u16: u16, serialize_u32: u32,
        serialize_u64: u64, serialize_u128: u128);

    fn serialize_bool(self, v: bool) -> Result<Arc<str>, SerdeError> {
        Ok(Arc::from(if v { "true" } else { "false" }))
    }
    fn serialize_f32(self, _v: f32) -> Result<Arc<str>, SerdeError> {
        key_not_string()
    }
    fn serialize_f64(self, _v: f64) -> Result<Arc<str>, SerdeError> {
        key_not_string()
    }
    fn serialize_char(self, v: char) -> Result<Arc<str>, SerdeError> {
        Ok(Arc::from(v.encode_utf8(&mut [0; 4]) as &str))
    }
    fn serialize_str(self, v: &str) -> Result<Arc<str>, SerdeError> {
        Ok(json::key(v))
    }
    fn serialize_bytes(self, _v: &[u8]) -> Result<Arc<str>, SerdeError> {
        key_not_string()
    }
    fn serialize_none(self) -> Result<Arc<str>, SerdeError> {
        key_not_string()
    }
    fn serialize_some<T: Serialize + ?Sized>(self, _v: &T) -> Result<Arc<str>, SerdeError> {
        key_not_string()
    }
    fn serialize_unit(self) -> Result<Arc<str>, SerdeError> {
        key_not_string()
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<Arc<str>, SerdeError> {
        key_not_string()
    }
    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<Arc<str>, SerdeError> {
        Ok(json::key(variant))
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<Arc<str>, SerdeError> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _value: &T,
    ) -> Result<Arc<str>, SerdeError> {
        key_not_string()
    }
    fn serialize_seq(self, _len: Option<usize>) -> Result<Self::SerializeSeq, SerdeError> {
        key_not_string()
    }
    fn serialize_tuple(self, _len: usize) -> Result<Self::SerializeTuple, SerdeError> {
        key_not_string()
    }
    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleStruct, SerdeError> {
        key_not_string()
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleVariant, SerdeError> {
        key_not_string()
    }
    fn serialize_map(self, _len: Option<usize>) -> Result<Self::SerializeMap, SerdeError> {
        key_not_string()
    }
    fn serialize_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeStruct, SerdeError> {
        key_not_string()
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeStructVariant, SerdeError> {
        key_not_string()
    }
}
