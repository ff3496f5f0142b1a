//! Helpers shared by the integration tests.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used)]

use std::sync::{Arc, Mutex};

use session_core::json::Value;
use session_core::{FixedClock, SharedClock};
use session_store::SessionStore;
use session_surface::Draft;

pub const NOW: i64 = 1_767_225_600_000;

pub fn clock() -> SharedClock {
    Arc::new(FixedClock::new(NOW))
}

pub fn store() -> SessionStore {
    SessionStore::new(clock())
}

/// A store whose warnings are collected.
pub fn store_with_warnings() -> (SessionStore, Log) {
    let store = store();
    let warnings = Log::default();
    let sink = warnings.clone();
    store.set_warning_sink(Arc::new(move |w: &str| sink.push(w)));
    (store, warnings)
}

/// A shared, ordered list of strings.
#[derive(Clone, Default)]
pub struct Log(Arc<Mutex<Vec<String>>>);

impl Log {
    pub fn push(&self, s: impl Into<String>) {
        self.0.lock().unwrap().push(s.into());
    }

    pub fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }

    pub fn get(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
}

pub fn json(text: &str) -> Value {
    Value::parse(text).unwrap()
}

pub fn user_message(id: &str, text: &str) -> Value {
    json(&format!(
        r#"{{"id":"{id}","role":"user","content":[{{"type":"text","text":"{text}"}}],"source":{{"kind":"user"}}}}"#
    ))
}

pub fn turn_start(turn: u64) -> Draft {
    Draft::new("turn/start", json(&format!(r#"{{"turn":{turn}}}"#)))
}

pub fn turn_end(turn: u64) -> Draft {
    Draft::new(
        "turn/end",
        json(&format!(
            r#"{{"turn":{turn},"reason":{{"kind":"completed"}}}}"#
        )),
    )
}

pub fn user(id: &str, text: &str) -> Draft {
    Draft::new("user/message", user_message(id, text)).append_op()
}

pub fn plugin(n: u64) -> Draft {
    Draft::new("plugin/thing", json(&format!(r#"{{"n":{n}}}"#))).ignorable()
}

/// A simple closed-turn seed: turn/start, user/message, turn/end.
pub fn seed_one_turn() -> Vec<Value> {
    vec![
        json(r#"{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}"#),
        json(
            r#"{"type":"user/message","seq":1,"time":2,"data":{"id":"m1","role":"user","content":[{"type":"text","text":"hi"}],"source":{"kind":"user"}},"surfaceOp":"append"}"#,
        ),
        json(
            r#"{"type":"turn/end","seq":2,"time":3,"data":{"turn":1,"reason":{"kind":"completed"}}}"#,
        ),
    ]
}
