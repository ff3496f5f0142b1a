//! The golden corpus: every case of every `forks.json`.

#![allow(clippy::unwrap_used)] // test helpers unwrap like the tests themselves

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value as Json;
use session_core::json::Value;
use session_core::{Event, FixedClock, SharedClock};
use session_fork::{Error, ForkErrorCode, fork_session, resolve_boundary};
use session_repair::interrupted_turn_closers;
use session_surface::Session;

fn read(path: &Path) -> Json {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn value(j: &Json) -> Value {
    Value::parse(&serde_json::to_string(j).unwrap()).unwrap()
}

fn json_texts(items: &Json) -> Vec<String> {
    items
        .as_array()
        .unwrap()
        .iter()
        .map(|j| value(j).to_json())
        .collect()
}

fn texts<'a>(events: impl IntoIterator<Item = &'a Event>) -> Vec<String> {
    events.into_iter().map(Event::to_json).collect()
}

fn u(j: &Json) -> u64 {
    j.as_u64().unwrap()
}

#[test]
fn every_fork_case_matches_the_reference() {
    let Some(corpus) = conformance::corpus::Corpus::require() else {
        return;
    };
    let dirs: Vec<PathBuf> = corpus
        .index
        .logs
        .iter()
        .filter(|l| l.fork_cases > 0)
        .map(|l| corpus.dir.join("logs").join(&l.name))
        .collect();
    assert!(!dirs.is_empty(), "the corpus index lists fork cases");
    let mut cases = 0;
    for dir in dirs {
        let forks = read(&dir.join("forks.json"));
        let expected = read(&dir.join("expected.json"));
        let clock_ms = forks["clock"].as_i64().unwrap();
        let clock: SharedClock = Arc::new(FixedClock::new(clock_ms));
        let parent_id = forks["parent"]["sessionId"].as_str().unwrap();
        assert_eq!(
            forks["parent"]["events"]["eventsFrom"].as_str(),
            Some("expected.json#events")
        );
        let seed: Vec<Value> = expected["events"]
            .as_array()
            .unwrap()
            .iter()
            .map(value)
            .collect();
        let seed_len = seed.len();
        let parent =
            Session::from_restore(parent_id, seed, &value(&expected["header"]), clock.clone())
                .unwrap();
        let parent_events = parent.events();
        assert_eq!(
            texts(parent_events.iter().skip(seed_len)),
            json_texts(&forks["parent"]["eventsAppendedByConstruction"]),
            "{}",
            dir.display()
        );
        assert_eq!(
            parent_events.len() as u64,
            u(&forks["parent"]["eventCount"])
        );

        for case in forks["cases"].as_array().unwrap() {
            let name = format!("{} {}", dir.display(), case["name"]);
            let boundary = match &case["boundary"] {
                Json::Null => None,
                b => Some(value(b)),
            };
            let child_id = case["childSessionId"].as_str().unwrap_or("session-1");
            let result = &case["result"];
            cases += 1;
            if result["ok"] == Json::Bool(false) {
                let error = &result["error"];
                assert_eq!(error["name"], "SessionForkError", "{name}");
                let code = error["code"].as_str().unwrap();
                if code == "SESSION_ALREADY_EXISTS" {
                    // Store-level: the child id is the (live) parent's own id.
                    assert_eq!(child_id, parent_id, "{name}");
                    assert_eq!(
                        session_fork::ForkError::already_exists(child_id).message(),
                        error["message"].as_str().unwrap(),
                        "{name}"
                    );
                    continue;
                }
                let resolved =
                    resolve_boundary(&parent_events, parent_id, boundary.as_ref()).unwrap_err();
                assert_eq!(resolved.code().as_str(), code, "{name}");
                assert_eq!(
                    resolved.message(),
                    error["message"].as_str().unwrap(),
                    "{name}"
                );
                match fork_session(&parent, boundary.as_ref(), child_id, clock.clone()) {
                    Err(Error::Fork(e)) => {
                        assert_eq!(e, resolved, "{name}");
                        assert_eq!(Some(e.code()), ForkErrorCode::parse(code));
                    }
                    other => panic!("{name}: expected a fork error, got {other:?}"),
                }
                continue;
            }
            let seed_length =
                resolve_boundary(&parent_events, parent_id, boundary.as_ref()).unwrap();
            assert_eq!(
                seed_length as u64,
                u(&result["header"]["seedLength"]),
                "{name}"
            );
            let child = fork_session(&parent, boundary.as_ref(), child_id, clock.clone())
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(&**child.id(), result["id"].as_str().unwrap(), "{name}");
            assert_eq!(
                child.header().to_value().to_json(),
                value(&result["header"]).to_json(),
                "{name}"
            );
            assert_eq!(child.first_live_seq(), u(&result["firstLiveSeq"]), "{name}");
            assert_eq!(child.seq(), u(&result["seq"]), "{name}");
            assert_eq!(
                child.events().len() as u64,
                u(&result["eventCount"]),
                "{name}"
            );
            let child_events = child.events();
            assert_eq!(
                texts(child_events.iter()),
                json_texts(&result["events"]),
                "{name}"
            );
            // `parentPrefixLength`: how many leading events the child and the parent have in
            // common (the child's marker can coincide with the parent's own).
            let common = child_events
                .iter()
                .zip(parent_events.iter())
                .take_while(|(c, p)| c.to_json() == p.to_json())
                .count();
            assert_eq!(common as u64, u(&result["parentPrefixLength"]), "{name}");
            // The inherited part is the parent's own events, shared.
            for i in 0..seed_length {
                assert!(
                    child_events
                        .get(i)
                        .unwrap()
                        .ptr_eq(parent_events.get(i).unwrap()),
                    "{name}: event {i} is not shared"
                );
            }
            let nodes: Vec<u64> = result["surfaceNodes"]
                .as_array()
                .unwrap()
                .iter()
                .map(u)
                .collect();
            assert_eq!(child.surface_nodes().to_vec(), nodes, "{name}");
            assert_eq!(
                child.replace_generation(),
                u(&result["replaceGeneration"]),
                "{name}"
            );
            assert_eq!(
                child.derive_messages().len() as u64,
                u(&result["derivedMessageCount"]),
                "{name}"
            );
            let closers = &result["interruptedTurnClosers"];
            assert_eq!(closers["ok"], Json::Bool(true), "{name}");
            assert_eq!(
                texts(&interrupted_turn_closers(child_events.iter())),
                json_texts(&closers["value"]),
                "{name}"
            );
        }
    }
    assert_eq!(cases, 1326);
}
