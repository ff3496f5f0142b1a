//! Redaction of events before they are persisted (off by default).
//!
//! A [`Redactor`] set in [`crate::PersistenceOptions::redact`] sees every event right before the
//! coordinator hands a batch to [`crate::Backend::append_batch`], and returns the copy that is
//! written instead. The in-memory session keeps the original event; only the stored copy is
//! redacted, so a session reloaded from storage shows the redacted payloads.
//!
//! A redactor may rewrite `data` only. The envelope (type, seq, time, `surfaceOp`,
//! `sourceEventSeqs` and the ignorable flag) is what the surface, repair and every reader rely
//! on, so [`apply`] checks it and refuses the whole batch with
//! [`crate::Error::RedactionChangedEnvelope`] when a redactor changed it: nothing is written,
//! and the flush that carried the batch fails.
//!
//! Re-attaching a live session to its stored log accepts a stored event that equals the
//! redacted copy of the live one, so redaction does not break that check. The hook must be
//! deterministic and cheap: it runs on the write path of every batch.
//!
//! ```
//! use std::sync::Arc;
//! use session_core::{Event, json::Value};
//! use session_persist::redact::{Redactor, apply, with_data};
//!
//! let hide: Redactor = Arc::new(|e: &Event| {
//!     if e.event_type() == "user/message" {
//!         with_data(e, Value::parse(r#"{"text":"[redacted]"}"#).expect("valid JSON"))
//!     } else {
//!         e.clone()
//!     }
//! });
//! let secret = Event::appended("user/message", 0, 1, Value::parse(r#"{"text":"pw"}"#)?, None, None);
//! let stored = apply(&hide, "demo", vec![secret])?;
//! assert_eq!(stored[0].data().to_json(), r#"{"text":"[redacted]"}"#);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::sync::Arc;

use session_core::event::{EventParts, KeyOrder};
use session_core::{Event, json::Value};

use crate::{Error, Result};

/// A redaction hook: maps an admitted event to the copy that is persisted.
pub type Redactor = Arc<dyn Fn(&Event) -> Event + Send + Sync>;

/// A copy of `event` with `data` replaced and the envelope kept (serialized in the key order
/// of appended events).
pub fn with_data(event: &Event, data: Value) -> Event {
    Event::from_parts(
        EventParts {
            ty: Arc::from(event.event_type()),
            seq: event.seq(),
            time: event.time(),
            data,
            surface_op: event.surface_op_value().cloned(),
            source_event_seqs: event.source_event_seqs_value().cloned(),
            ignorable: event.ignorable(),
        },
        KeyOrder::APPEND,
    )
}

/// Runs `redactor` over a batch of session `id`, refusing any result whose envelope differs
/// from the original's.
///
/// # Errors
///
/// [`Error::RedactionChangedEnvelope`] naming the first changed field.
pub fn apply(redactor: &Redactor, id: &str, events: Vec<Event>) -> Result<Vec<Event>> {
    events
        .into_iter()
        .map(|original| {
            let redacted = redactor(&original);
            let field = if redacted.event_type() != original.event_type() {
                Some("type")
            } else if redacted.seq() != original.seq() {
                Some("seq")
            } else if redacted.time() != original.time() {
                Some("time")
            } else if redacted.surface_op_value() != original.surface_op_value() {
                Some("surfaceOp")
            } else if redacted.source_event_seqs_value() != original.source_event_seqs_value() {
                Some("sourceEventSeqs")
            } else if redacted.ignorable() != original.ignorable() {
                Some("ignorable")
            } else {
                None
            };
            match field {
                Some(field) => Err(Error::RedactionChangedEnvelope {
                    id: id.to_owned(),
                    seq: original.seq(),
                    field,
                }),
                None => Ok(redacted),
            }
        })
        .collect()
}

/// What replaces a secret-looking string.
pub const MASK: &str = "[redacted]";

/// Prefixes of well-known credential formats (API keys, access tokens) that
/// [`mask_secret_text`] masks when at least 16 token characters follow.
pub const SECRET_PREFIXES: &[&str] = &[
    "sk-",
    "sk_live_",
    "sk_test_",
    "ghp_",
    "gho_",
    "ghs_",
    "ghu_",
    "github_pat_",
    "glpat-",
    "xoxb-",
    "xoxp-",
    "xoxa-",
    "AKIA",
    "AIza",
    "hf_",
    "npm_",
];

fn token_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '-' || c == '_'
}

/// `text` with every secret-looking token replaced by [`MASK`]: a token (letters, digits,
/// `-`, `_`) starting with one of [`SECRET_PREFIXES`] followed by at least 16 more token
/// characters, the token after `Bearer ` when it has at least 16 characters, and the body of
/// a PEM `PRIVATE KEY` block. Borrowed when nothing is masked.
pub fn mask_secret_text(text: &str) -> std::borrow::Cow<'_, str> {
    let mut out = String::new();
    let mut last = 0;
    let mut i = 0;
    let bytes = text.as_bytes();
    while i < bytes.len() {
        let at_token_start = i == 0 || !token_char(text[..i].chars().next_back().unwrap_or(' '));
        if at_token_start && text.is_char_boundary(i) {
            let rest = &text[i..];
            if let Some(begin) = rest.strip_prefix("-----BEGIN ")
                && let Some(head_end) = begin.find("-----")
                && begin[..head_end].ends_with("PRIVATE KEY")
            {
                let tail = format!("-----END {}-----", &begin[..head_end]);
                let end = rest.find(&tail).map_or(rest.len(), |e| e + tail.len());
                out.push_str(&text[last..i]);
                out.push_str(MASK);
                i += end;
                last = i;
                continue;
            }
            let token_len = rest.find(|c: char| !token_char(c)).unwrap_or(rest.len());
            let token = &rest[..token_len];
            let secret = SECRET_PREFIXES
                .iter()
                .any(|p| token.starts_with(p) && token.len() >= p.len() + 16);
            if secret {
                out.push_str(&text[last..i]);
                out.push_str(MASK);
                i += token_len;
                last = i;
                continue;
            }
            if token == "Bearer" && rest[token_len..].starts_with(' ') {
                let after = &rest[token_len + 1..];
                let n = after
                    .find(|c: char| {
                        !(token_char(c) || c == '.' || c == '=' || c == '/' || c == '+')
                    })
                    .unwrap_or(after.len());
                if n >= 16 {
                    let keep = i + token_len + 1;
                    out.push_str(&text[last..keep]);
                    out.push_str(MASK);
                    i += token_len + 1 + n;
                    last = i;
                    continue;
                }
            }
            if token_len > 0 {
                i += token_len;
                continue;
            }
        }
        i += text[i..].chars().next().map_or(1, char::len_utf8);
    }
    if last == 0 {
        return std::borrow::Cow::Borrowed(text);
    }
    out.push_str(&text[last..]);
    std::borrow::Cow::Owned(out)
}

/// `value` with [`mask_secret_text`] applied to every string (object keys included), sharing
/// every subtree that holds nothing to mask.
pub fn mask_secrets_in(value: &Value) -> Value {
    match value {
        Value::String(s) => match mask_secret_text(s) {
            std::borrow::Cow::Borrowed(_) => value.clone(),
            std::borrow::Cow::Owned(masked) => Value::from(masked),
        },
        Value::Array(items) => {
            let masked: Vec<Value> = items.iter().map(mask_secrets_in).collect();
            if masked.iter().zip(items.iter()).all(|(a, b)| a == b) {
                value.clone()
            } else {
                Value::array(masked)
            }
        }
        Value::Object(o) => {
            let masked: Vec<(String, Value)> = o
                .iter()
                .map(|(k, v)| (mask_secret_text(k).into_owned(), mask_secrets_in(v)))
                .collect();
            if masked
                .iter()
                .zip(o.iter())
                .all(|((k, v), (k0, v0))| k == k0 && v == v0)
            {
                value.clone()
            } else {
                Value::object(masked)
            }
        }
        _ => value.clone(),
    }
}

/// The redaction hook that masks secret-looking strings in `data` ([`mask_secrets_in`]); an
/// event with nothing to mask is returned as it is.
pub fn mask_secrets() -> Redactor {
    Arc::new(|e: &Event| {
        let masked = mask_secrets_in(e.data());
        if &masked == e.data() {
            e.clone()
        } else {
            with_data(e, masked)
        }
    })
}

#[cfg(test)]
mod mask_tests {
    use super::*;

    #[test]
    fn secret_looking_tokens_are_masked_and_the_rest_kept() {
        let key = "sk-abcdefghijklmnopqrstuvwx";
        assert_eq!(
            mask_secret_text(&format!("key={key} ok")),
            "key=[redacted] ok"
        );
        assert_eq!(
            mask_secret_text("ask-me-anything-at-all-please"),
            "ask-me-anything-at-all-please"
        );
        assert_eq!(mask_secret_text("sk-short"), "sk-short");
        assert_eq!(
            mask_secret_text("Authorization: Bearer abcdefghijklmnop.qrs"),
            "Authorization: Bearer [redacted]"
        );
        assert_eq!(
            mask_secret_text(
                "a -----BEGIN RSA PRIVATE KEY-----\nMII\n-----END RSA PRIVATE KEY----- b"
            ),
            "a [redacted] b"
        );
        assert_eq!(
            mask_secret_text("ünïcode AKIAABCDEFGHIJKLMNOP"),
            "ünïcode [redacted]"
        );
        assert!(matches!(
            mask_secret_text("nothing here"),
            std::borrow::Cow::Borrowed(_)
        ));
    }

    #[test]
    fn masking_keeps_the_envelope_and_shares_clean_events() {
        let clean = Event::appended(
            "user/message",
            0,
            1,
            Value::parse(r#"{"t":"hi"}"#).expect("json"),
            None,
            None,
        );
        let dirty = Event::appended(
            "user/message",
            1,
            1,
            Value::parse(r#"{"t":["x","token ghp_0123456789abcdefghij"]}"#).expect("json"),
            None,
            None,
        );
        let out = apply(&mask_secrets(), "s", vec![clean.clone(), dirty]).expect("envelope kept");
        assert_eq!(out[0], clean);
        assert_eq!(out[1].data().to_json(), r#"{"t":["x","token [redacted]"]}"#);
    }
}
