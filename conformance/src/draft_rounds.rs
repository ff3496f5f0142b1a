//! Acknowledged ⇒ loadable, for arbitrary drafts on any backend (issue #14; decision 5 of the
//! port: a log that can be appended but not reloaded is a defect).
//!
//! A round appends a list of drafts to one live session persisted on a backend: valid history
//! drafts interleaved with hostile ones (random JSON payloads and surface metadata, retired and
//! unknown types, packed-row tags, turn payloads with extra or odd keys). Then:
//!
//! * every refused draft changed nothing: the log kept its length and the next draft still
//!   appends at the same seq;
//! * after `flush`, a cold service over a reopened backend `load`s exactly the acknowledged
//!   events (byte-identical JSON), followed only by the closers of an interrupted turn.
//!
//! [`check_round`] runs one round against a [`Harness`]; [`arb_round`] generates rounds. Each
//! backend crate runs it from its own tests with `proptest!`.

use proptest::prelude::*;
use session_core::json::Value;
use session_core::{Event, SharedClock};
use session_persist::{Persistence, PersistenceOptions};
use session_repair::interrupted_turn_closers;
use session_store::{PrepareOptions, SessionStore};
use session_surface::Draft;

use crate::backend_suite::Harness;
use crate::r#gen::json::arb_json;
use crate::r#gen::{History, arb_history_of};

/// The session id of every round.
pub const ROUND_ID: &str = "drafts";

/// One round: the drafts, in order.
#[derive(Debug, Clone)]
pub struct Round {
    /// The drafts to append.
    pub drafts: Vec<Draft>,
}

/// Types that exercise every rule: surface types, turn and step boundaries, retired and
/// reserved types, unknown ones.
const TYPES: [&str; 14] = [
    "user/message",
    "assistant/message",
    "tool/result",
    "turn/start",
    "turn/end",
    "step/start",
    "request/header",
    "request/header-delta",
    "mode/set",
    "steering/message",
    "text-chunks",
    "tool-call-chunks",
    "x-future/event",
    "todo/write",
];

/// Turn payloads that readers refuse or rewrite, and current ones.
fn arb_turn_data() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(r#"{"turn":1,"x":1,"reason":{"kind":"completed"}}"#),
        Just(r#"{"turn":1e300,"reason":{"kind":"completed"}}"#),
        Just(r#"{"turn":1,"reason":{"kind":"aborted"}}"#),
        Just(r#"{"turn":1,"reason":{"kind":"disposed"}}"#),
        Just(r#"{"turn":1,"reason":{"kind":"completed","why":"x"}}"#),
        Just(r#"{"turn":1,"reason":{"kind":"error","step":1,"message":"m"}}"#),
        Just(r#"{"turn":1,"reason":{"kind":"future-kind","x":1}}"#),
        Just(r#"{"turn":1,"trigger":{"kind":"user"}}"#),
        Just(r#"{"turn":1}"#),
        Just(r#"{"turn":0.5,"reason":{"kind":"max-tokens"}}"#),
    ]
    .prop_map(|text| Value::parse(text).expect("valid JSON"))
}

/// A hostile draft: a type from [`TYPES`], a random or turn-shaped payload, random surface
/// metadata, maybe `ignorable`.
fn arb_hostile() -> impl Strategy<Value = Draft> {
    (
        prop::sample::select(TYPES.to_vec()),
        prop_oneof![arb_json(), arb_turn_data()],
        prop::option::of(prop_oneof![Just(Value::from("append")), arb_json()]),
        prop::option::of(arb_json()),
        any::<bool>(),
    )
        .prop_map(|(ty, data, op, sources, ignorable)| {
            let mut draft = Draft::new(ty, data);
            draft.surface_op = op;
            draft.source_event_seqs = sources;
            draft.ignorable = ignorable;
            draft
        })
}

/// Rounds: a valid history of up to 24 actions with hostile drafts inserted at random places.
pub fn arb_round() -> impl Strategy<Value = Round> {
    (
        arb_history_of(24),
        prop::collection::vec((any::<prop::sample::Index>(), arb_hostile()), 0..12),
    )
        .prop_map(|(history, hostile): (History, _)| {
            let mut drafts = history.drafts();
            for (at, draft) in hostile {
                let at = at.index(drafts.len() + 1);
                drafts.insert(at, draft);
            }
            Round { drafts }
        })
}

/// Runs one round on storage opened by `harness` (see the module docs). `Err` names the first
/// broken promise.
pub async fn check_round(
    harness: &dyn Harness,
    round: &Round,
    clock: SharedClock,
) -> Result<(), String> {
    let backend = harness.open().await;
    let options = || PersistenceOptions {
        write_batch_max_delay_ms: 1,
        ..PersistenceOptions::default()
    };
    let store = SessionStore::new(clock.clone());
    let persistence = Persistence::new(backend.clone(), store.clone(), options())
        .map_err(|e| format!("persistence: {e}"))?;
    let prepare = PrepareOptions {
        meta: Some(Value::object([("cwd", Value::from("/conformance/drafts"))])),
        ..PrepareOptions::default()
    };
    let (session, detach) = store
        .create(Some(ROUND_ID), prepare)
        .map_err(|e| format!("create: {e}"))?;
    let mut acknowledged: Vec<Event> = Vec::new();
    for (i, draft) in round.drafts.iter().enumerate() {
        let before = session.seq();
        match session.append(draft.clone()) {
            Ok(event) => {
                if event.seq() != before {
                    return Err(format!(
                        "draft {i} acknowledged at seq {} after {before}",
                        event.seq()
                    ));
                }
                acknowledged.push(event);
            }
            Err(e) => {
                if session.seq() != before || session.events().len() as u64 != before {
                    return Err(format!("refused draft {i} ({e}) changed the log"));
                }
            }
        }
    }
    store
        .flush(&session)
        .await
        .map_err(|e| format!("flush: {e}"))?;
    if session.events().to_vec() != acknowledged {
        return Err("the live log differs from the acknowledged events".to_owned());
    }
    detach.detach();
    persistence
        .dispose()
        .await
        .map_err(|e| format!("dispose: {e}"))?;

    let backend = harness.reopen(backend).await;
    let cold_store = SessionStore::new(clock);
    let cold = Persistence::new(backend, cold_store, options())
        .map_err(|e| format!("persistence: {e}"))?;
    let loaded = cold.load(ROUND_ID).await;
    let outcome = match (acknowledged.is_empty(), loaded) {
        (true, Err(e)) if e.to_string() == format!("session \"{ROUND_ID}\" not found") => Ok(()),
        (true, other) => Err(format!("nothing was acknowledged, yet load gave {other:?}")),
        (false, Err(e)) => Err(format!("acknowledged events do not load: {e}")),
        (false, Ok(loaded)) => {
            // Acknowledged events byte for byte; the closers by content (row stores keep no
            // envelope key order).
            let n = acknowledged.len();
            let closers = interrupted_turn_closers(acknowledged.iter());
            let form = |i: usize, e: &Event| if i < n { e.to_json() } else { content(e) };
            let got: Vec<String> = loaded
                .events
                .iter()
                .enumerate()
                .map(|(i, e)| form(i, e))
                .collect();
            let want: Vec<String> = acknowledged
                .iter()
                .chain(&closers)
                .enumerate()
                .map(|(i, e)| form(i, e))
                .collect();
            if got == want {
                Ok(())
            } else {
                let at = got.iter().zip(&want).position(|(a, b)| a != b);
                Err(format!(
                    "load does not return the acknowledged events (first difference at {at:?}; {} loaded, {} expected)",
                    got.len(),
                    want.len()
                ))
            }
        }
    };
    cold.dispose().await.map_err(|e| format!("dispose: {e}"))?;
    outcome
}

/// An event's content without its envelope key order.
fn content(e: &Event) -> String {
    let json = |v: Option<&Value>| v.map_or_else(String::new, Value::to_json);
    format!(
        "{} {} {} {} {} {} {}",
        e.event_type(),
        e.seq(),
        e.time(),
        e.data().to_json(),
        json(e.surface_op_value()),
        json(e.source_event_seqs_value()),
        e.ignorable()
    )
}
