//! The error of serde conversions to and from [`crate::json::Value`].

use std::fmt;

use super::SERDE_MAX_DEPTH;

/// One step of the path to where a conversion failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathSegment {
    /// An object key.
    Key(String),
    /// An array index.
    Index(usize),
}

/// What went wrong in a serde conversion.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SerdeErrorKind {
    /// The data does not fit the type (serde's message: a missing field, a wrong type, an
    /// unknown variant, a failing custom impl).
    Message(String),
    /// A NaN or infinite float: JSON has no spelling for it.
    NonFinite,
    /// `-0`: a JavaScript reader would turn it into `0`.
    NegativeZero,
    /// An integer outside ±(2^53 − 1): a JavaScript reader would round it. The text is the
    /// integer.
    UnsafeInteger(String),
    /// A map key that is not a string, a character, an integer or a boolean.
    KeyNotString,
    /// Nesting deeper than [`SERDE_MAX_DEPTH`].
    TooDeep,
}

/// Why a value could not be converted, and where (a JSON Pointer into the value).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SerdeError {
    kind: SerdeErrorKind,
    /// Innermost segment first: segments are pushed while the error unwinds.
    path_rev: Vec<PathSegment>,
}

impl SerdeError {
    /// An error of `kind` at the root.
    pub fn new(kind: SerdeErrorKind) -> SerdeError {
        SerdeError {
            kind,
            path_rev: Vec::new(),
        }
    }

    /// What went wrong.
    pub fn kind(&self) -> &SerdeErrorKind {
        &self.kind
    }

    /// The path from the root to where it went wrong, outermost first.
    pub fn path(&self) -> impl DoubleEndedIterator<Item = &PathSegment> + '_ {
        self.path_rev.iter().rev()
    }

    /// The path as a JSON Pointer (RFC 6901): `""` for the root, `/content/0/text` below it.
    pub fn pointer(&self) -> String {
        let mut out = String::new();
        for segment in self.path() {
            out.push('/');
            match segment {
                PathSegment::Key(k) => out.push_str(&k.replace('~', "~0").replace('/', "~1")),
                PathSegment::Index(i) => out.push_str(&i.to_string()),
            }
        }
        out
    }

    /// The same error one level further down: under `key`.
    #[must_use]
    pub fn under_key(mut self, key: &str) -> SerdeError {
        self.path_rev.push(PathSegment::Key(key.to_owned()));
        self
    }

    /// The same error one level further down: under array index `index`.
    #[must_use]
    pub fn under_index(mut self, index: usize) -> SerdeError {
        self.path_rev.push(PathSegment::Index(index));
        self
    }
}

impl SerdeError {
    /// What went wrong, without the place.
    pub fn kind_message(&self) -> String {
        match &self.kind {
            SerdeErrorKind::Message(m) => m.clone(),
            SerdeErrorKind::NonFinite => "number is NaN or infinite".to_owned(),
            SerdeErrorKind::NegativeZero => "number is negative zero".to_owned(),
            SerdeErrorKind::UnsafeInteger(n) => {
                format!("integer {n} is outside the safe range ±(2^53 − 1)")
            }
            SerdeErrorKind::KeyNotString => "map key is not a string".to_owned(),
            SerdeErrorKind::TooDeep => format!("JSON nesting deeper than {SERDE_MAX_DEPTH} levels"),
        }
    }
}

impl fmt::Display for SerdeError {
    /// `<what> at <pointer>`, or `<what>` alone at the root.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.kind_message())?;
        if !self.path_rev.is_empty() {
            write!(f, " at {}", self.pointer())?;
        }
        Ok(())
    }
}

impl std::error::Error for SerdeError {}

fn custom(msg: &dyn fmt::Display) -> SerdeError {
    let text = msg.to_string();
    super::take_nested(&text).unwrap_or_else(|| SerdeError::new(SerdeErrorKind::Message(text)))
}

impl serde::ser::Error for SerdeError {
    fn custom<T: fmt::Display>(msg: T) -> SerdeError {
        custom(&msg)
    }
}

impl serde::de::Error for SerdeError {
    fn custom<T: fmt::Display>(msg: T) -> SerdeError {
        custom(&msg)
    }
}
