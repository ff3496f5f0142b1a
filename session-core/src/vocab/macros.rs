//! The macros that define the vocabulary's structs and tagged unions.

/// The Rust type of a required (`req`) or optional (`opt`) field.
macro_rules! field_ty {
    (req $ty:ty) => { $ty };
    (opt $ty:ty) => { Option<$ty> };
}

/// A reference to a required field, or an optional field as `Option<&T>`.
macro_rules! field_ref {
    (req $e:expr) => {
        &$e
    };
    (opt $e:expr) => {
        $e.as_ref()
    };
}

/// `Serialize` / `Deserialize` through the type's `to_value` / `from_value`, and the internal
/// [`Field`](super::fields::Field) impl.
macro_rules! vocab_serde {
    ($name:ident) => {
        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                self.to_value()
                    .map_err(|e| {
                        $crate::json::nested(&e, |e| <S::Error as serde::ser::Error>::custom(e))
                    })?
                    .serialize(s)
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<$name, D::Error> {
                let v = $crate::json::Value::deserialize(d)?;
                $name::from_value(&v).map_err(|e| {
                    $crate::json::nested(&e, |e| <D::Error as serde::de::Error>::custom(e))
                })
            }
        }

        impl $crate::vocab::fields::Field for $name {
            fn read(v: &$crate::json::Value) -> Result<$name, $crate::json::SerdeError> {
                $name::from_value(v)
            }
            fn write(&self) -> Result<$crate::json::Value, $crate::json::SerdeError> {
                self.to_value()
            }
        }
    };
}

/// A struct of named fields (`req` or `opt`, each with its JSON key) plus [`Extra`].
macro_rules! vocab_struct {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $( $(#[$fmeta:meta])* $field:ident: $kind:ident $ty:ty = $key:literal, )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Default)]
        pub struct $name {
            $( $(#[$fmeta])* pub $field: field_ty!($kind $ty), )*
            /// The fields this type does not name, and the key order read.
            pub extra: $crate::vocab::Extra,
        }

        impl $name {
            /// Reads the object `v`; every field it does not name is kept in `extra`.
            pub fn from_value(v: &$crate::json::Value) -> Result<$name, $crate::json::SerdeError> {
                $name::read_skipping(v, None)
            }

            /// The object, in the key order read (see [`Extra`](crate::vocab::Extra)).
            pub fn to_value(&self) -> Result<$crate::json::Value, $crate::json::SerdeError> {
                self.write_tagged(None)
            }

            #[allow(unused_mut, unused_variables)]
            pub(crate) fn read_skipping(
                v: &$crate::json::Value,
                tag: Option<&str>,
            ) -> Result<$name, $crate::json::SerdeError> {
                let mut r = $crate::vocab::fields::Reader::new(v, tag)?;
                $( let $field = r.$kind($key)?; )*
                Ok($name { $( $field, )* extra: r.finish() })
            }

            #[allow(unused_mut)]
            pub(crate) fn write_tagged(
                &self,
                tag: Option<(&str, &str)>,
            ) -> Result<$crate::json::Value, $crate::json::SerdeError> {
                let mut w = $crate::vocab::fields::Writer::default();
                if let Some((key, value)) = tag {
                    w.tag(key, value);
                }
                $( w.$kind($key, field_ref!($kind self.$field))?; )*
                Ok(w.finish(&self.extra))
            }
        }

        vocab_serde!($name);
    };
}

/// A union tagged by the string field `$tag`; each variant holds the struct of its other
/// fields. A tag the vocabulary does not name reads as `Other` with the whole object.
macro_rules! vocab_enum {
    (
        $(#[$meta:meta])*
        pub enum $name:ident tag $tag:literal default $default:ident {
            $( $(#[$vmeta:meta])* $variant:ident($vty:ty) = $vtag:literal, )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq)]
        pub enum $name {
            $( $(#[$vmeta])* $variant($vty), )*
            #[doc = concat!("A `", $tag, "` this vocabulary does not name: the whole object, as read.")]
            Other($crate::json::Object),
        }

        impl $name {
            /// Reads the object `v` by its tag.
            pub fn from_value(v: &$crate::json::Value) -> Result<$name, $crate::json::SerdeError> {
                let tag = $crate::vocab::fields::read_tag(v, $tag)?;
                Ok(match tag {
                    $( $vtag => $name::$variant(<$vty>::read_skipping(v, Some($tag))?), )*
                    _ => $name::Other(v.as_object().cloned().unwrap_or_default()),
                })
            }

            /// The object, tag included, in the key order read.
            pub fn to_value(&self) -> Result<$crate::json::Value, $crate::json::SerdeError> {
                match self {
                    $( $name::$variant(x) => x.write_tagged(Some(($tag, $vtag))), )*
                    $name::Other(o) => Ok($crate::json::Value::Object(o.clone())),
                }
            }

            #[doc = concat!("The `", $tag, "` tag (`None` for an `Other` object without a string tag).")]
            pub fn tag(&self) -> Option<&str> {
                match self {
                    $( $name::$variant(_) => Some($vtag), )*
                    $name::Other(o) => o.get($tag).and_then($crate::json::Value::as_str),
                }
            }
        }

        impl Default for $name {
            fn default() -> $name {
                $name::$default(Default::default())
            }
        }

        vocab_serde!($name);
    };
}
