//! Stored logs are validated in the reference's order and the first error in that order is the
//! one reported (issue #15 item 3): the header, the read-time upgrades, the unknown-type check
//! over every stored record (a record without a string `type` included), then the events in
//! seq order (envelope, surface and shape rules). An earlier header or surface error is not
//! hidden by a later envelope error.
#![allow(clippy::unwrap_used)] // helpers outside `#[test]` functions unwrap too

mod common;

use std::sync::Arc;

use common::{TempDir, rt};
use session_core::FixedClock;
use session_persist::{Compression, JsonlBackend, JsonlConfig, Persistence, PersistenceOptions};
use session_store::SessionStore;

const USER: &str = r#""data":{"id":"m","role":"user","content":[],"source":{"kind":"user"}}"#;

/// `load` and `inspect` of session `s` whose raw log is the header line plus `body`; both
/// must fail with the same text, which is returned.
fn load_error(header: &str, body: &[String]) -> String {
    let tmp = TempDir::new("validation-order");
    let root = tmp.root();
    let dir = root.join("_no-cwd").join("s");
    std::fs::create_dir_all(&dir).unwrap();
    let mut text = format!("{header}\n");
    for line in body {
        text.push_str(line);
        text.push('\n');
    }
    std::fs::write(dir.join("session.jsonl"), text).unwrap();
    rt().block_on(async {
        let config = JsonlConfig::new(&root).compression(Compression::None);
        let backend = JsonlBackend::open(config).unwrap();
        let store = SessionStore::new(Arc::new(FixedClock::new(5)));
        let persistence =
            Persistence::new(Arc::new(backend), store, PersistenceOptions::default()).unwrap();
        let inspected = persistence
            .inspect("s", None)
            .await
            .unwrap_err()
            .to_string();
        let loaded = persistence.load("s").await.unwrap_err().to_string();
        persistence.dispose().await.unwrap();
        assert_eq!(inspected, loaded);
        loaded
    })
}

const HEADER: &str = r#"{"type":"session","version":0,"id":"s","createdAt":1,"delegationDepth":0}"#;

/// A closed turn whose line at `seq` is `middle`.
fn log(middle: &str) -> Vec<String> {
    vec![
        r#"{"type":"turn/start","seq":0,"time":0,"data":{"turn":1}}"#.to_owned(),
        format!(r#"{{"type":"user/message","seq":1,"time":0,{USER},"surfaceOp":"append"}}"#),
        middle.to_owned(),
        r#"{"type":"turn/end","seq":3,"time":0,"data":{"turn":1,"reason":{"kind":"completed"}}}"#
            .to_owned(),
    ]
}

fn unknown(ty: &str, seq: u64) -> String {
    format!(
        "session \"s\" contains event type \"{ty}\" (seq {seq}) unknown to this harness and not \
         marked ignorable; refusing to interpret the log \u{2014} it was likely written by a newer \
         harness"
    )
}

#[test]
fn a_record_without_a_string_type_is_an_unknown_type_not_an_envelope_error() {
    let missing = load_error(HEADER, &log(r#"{"seq":2,"time":0,"data":{}}"#));
    assert!(missing.starts_with(&unknown("undefined", 2)), "{missing}");
    let number = load_error(HEADER, &log(r#"{"type":5,"seq":2,"time":0,"data":{}}"#));
    assert!(number.starts_with(&unknown("5", 2)), "{number}");
    // Marked ignorable, an unknown string type passes the type check and the envelope
    // error (the extra key) is reported.
    let ignorable = load_error(
        HEADER,
        &log(r#"{"type":"x/y","seq":2,"time":0,"data":{},"ignorable":true,"extra":1}"#),
    );
    assert!(
        ignorable.ends_with("seed event at index 2 has an invalid event envelope"),
        "{ignorable}"
    );
}

#[test]
fn an_unknown_type_before_an_invalid_envelope_is_named_first() {
    let mut body = log(r#"{"type":"turn/pause","seq":2,"time":0,"data":{}}"#);
    body[1] = r#"{"type":"future/thing","seq":1,"time":0,"data":null}"#.to_owned();
    body[2] = r#"{"seq":2,"time":0,"data":{}}"#.to_owned();
    let message = load_error(HEADER, &body);
    assert!(
        message.starts_with(&unknown("future/thing", 1)),
        "{message}"
    );
}

#[test]
fn a_header_error_is_not_hidden_by_a_later_envelope_error() {
    let header = r#"{"type":"session","version":0,"id":"s","createdAt":1,"seedLength":"3","delegationDepth":0}"#;
    let message = load_error(
        header,
        &log(r#"{"type":"todo/write","seq":2,"time":0.5,"data":{}}"#),
    );
    assert!(
        message.ends_with("session header seedLength must be a non-negative safe integer"),
        "{message}"
    );
}

#[test]
fn an_earlier_surface_error_is_not_hidden_by_a_later_envelope_error() {
    let mut body = log(r#"{"type":"todo/write","seq":2,"time":0.5,"data":{}}"#);
    body[1] = format!(r#"{{"type":"user/message","seq":1,"time":0,{USER}}}"#);
    let message = load_error(HEADER, &body);
    assert!(
        message.ends_with(
            "invalid seed event at index 1: session event \"user/message\" is surface-eligible and requires a surfaceOp marker"
        ),
        "{message}"
    );
    // Without the earlier problem, the envelope error is the one reported.
    let message = load_error(
        HEADER,
        &log(r#"{"type":"todo/write","seq":2,"time":0.5,"data":{}}"#),
    );
    assert!(
        message.ends_with("seed event at index 2 has an invalid event envelope"),
        "{message}"
    );
}

#[test]
fn a_header_cwd_that_is_not_a_string_gets_the_header_validation_text() {
    let header =
        r#"{"type":"session","version":0,"id":"s","createdAt":1,"cwd":1,"delegationDepth":0}"#;
    let message = load_error(
        header,
        &log(r#"{"type":"todo/write","seq":2,"time":0.5,"data":{}}"#),
    );
    assert!(
        message.ends_with("session header cwd must be a string"),
        "{message}"
    );
}
