//! The golden corpus: every log's `pure.interruptedTurnClosers`, the session's tool-pairing
//! results, and the closers implied by every crash variant's `inspect()` result.

#![allow(clippy::unwrap_used)] // test helpers unwrap like the tests themselves

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value as Json;
use session_core::json::Value;
use session_core::{Event, FixedClock, SharedClock};
use session_repair::{ToolPairing, ToolPairingCache, Trace, interrupted_turn_closers};
use session_surface::Session;

const CLOCK: i64 = 1_767_225_600_000;

fn read(path: &Path) -> Json {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn value(j: &Json) -> Value {
    Value::parse(&serde_json::to_string(j).unwrap()).unwrap()
}

fn at<'a>(root: &'a Json, path: &str) -> &'a Json {
    path.split('.').fold(root, |j, k| {
        j.get(k).unwrap_or_else(|| panic!("no key {path}"))
    })
}

/// An event list, following `{"sameAs": P}` and `{"prefixOf": P, "count": n}` references.
fn event_list(root: &Json, list: &Json) -> Vec<Json> {
    if let Some(items) = list.as_array() {
        return items.clone();
    }
    if let Some(p) = list.get("sameAs").and_then(Json::as_str) {
        return event_list(root, at(root, p));
    }
    let p = list.get("prefixOf").and_then(Json::as_str).unwrap();
    let n = list.get("count").and_then(Json::as_u64).unwrap() as usize;
    let mut all = event_list(root, at(root, p));
    all.truncate(n);
    all
}

fn events(items: &[Json]) -> Vec<Event> {
    items
        .iter()
        .map(|j| Event::from_value(&value(j)).unwrap())
        .collect()
}

fn texts(events: &[Event]) -> Vec<String> {
    events.iter().map(Event::to_json).collect()
}

fn json_texts(items: &[Json]) -> Vec<String> {
    items.iter().map(|j| value(j).to_json()).collect()
}

/// Every log of the corpus, from its index (`None`: absent, and skipping is allowed).
fn log_dirs() -> Option<Vec<PathBuf>> {
    conformance::corpus::Corpus::require().map(|c| c.logs())
}

fn ok_value(result: &Json) -> &Json {
    assert_eq!(result.get("ok"), Some(&Json::Bool(true)), "{result}");
    result.get("value").unwrap()
}

#[test]
fn pure_closers_match_every_log() {
    let mut checked = 0;
    let Some(logs) = log_dirs() else { return };
    for dir in logs {
        let expected = read(&dir.join("expected.json"));
        let log = events(&event_list(&expected, &expected["events"]));
        let want = ok_value(&expected["pure"]["interruptedTurnClosers"]);
        assert_eq!(
            texts(&interrupted_turn_closers(&log)),
            json_texts(want.as_array().unwrap()),
            "{}",
            dir.display()
        );
        checked += 1;
    }
    assert_eq!(checked, 102);
}

#[test]
fn session_closers_and_tool_pairing_match_every_log() {
    let clock: SharedClock = Arc::new(FixedClock::new(CLOCK));
    let mut queries = 0;
    let Some(logs) = log_dirs() else { return };
    for dir in logs {
        let name = dir.display().to_string();
        let expected = read(&dir.join("expected.json"));
        let seed: Vec<Value> = event_list(&expected, &expected["events"])
            .iter()
            .map(value)
            .collect();
        let id = expected["sessionId"].as_str().unwrap();
        let session =
            Session::from_restore(id, seed, &value(&expected["header"]), clock.clone()).unwrap();
        let s = &expected["session"];
        let all = session.events().to_vec();
        let want = ok_value(&s["interruptedTurnClosers"]);
        assert_eq!(
            texts(&interrupted_turn_closers(&all)),
            json_texts(want.as_array().unwrap()),
            "{name}"
        );
        let pairing = ToolPairing::new(&session);
        let mut cache = ToolPairingCache::new();
        for entry in s["toolPairing"].as_array().unwrap() {
            let seq = entry["seq"].as_u64().unwrap();
            let before = ok_value(&entry["before"]).as_bool().unwrap();
            let after = ok_value(&entry["after"]).as_bool().unwrap();
            assert_eq!(
                pairing.balanced_before(seq),
                Ok(before),
                "{name} before {seq}"
            );
            assert_eq!(pairing.balanced_after(seq), Ok(after), "{name} after {seq}");
            assert_eq!(cache.balanced_before(&session, seq), Ok(before));
            assert_eq!(cache.balanced_after(&session, seq), Ok(after));
            queries += 2;
        }
        let balanced = ok_value(&s["toolPairingBalanced"]).as_bool().unwrap();
        assert_eq!(pairing.balanced(), Ok(balanced), "{name}");
    }
    assert!(queries > 0);
}

#[test]
fn crash_variants_imply_exactly_our_closers() {
    let mut variants = 0;
    let mut with_closers = 0;
    let Some(logs) = log_dirs() else { return };
    for dir in logs {
        let mut crashes: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.join("expected.json").is_file())
            .collect();
        crashes.sort();
        for crash in crashes {
            let expected = read(&crash.join("expected.json"));
            for encoding in ["jsonl", "zstd"] {
                let name = format!("{} {encoding}", crash.display());
                let results = &expected[encoding];
                assert_eq!(results["inspect"]["ok"], Json::Bool(true), "{name}");
                assert_eq!(results["readFrom"]["ok"], Json::Bool(true), "{name}");
                let inspected = events(&event_list(&expected, &results["inspect"]["events"]));
                let committed = results["readFrom"]["eventCount"].as_u64().unwrap() as usize;
                let (kept, closers) = inspected.split_at(committed);
                assert_eq!(
                    texts(&interrupted_turn_closers(kept)),
                    texts(closers),
                    "{name}"
                );
                // The repaired log is closed, and stays valid under the invariant when the
                // kept prefix was.
                assert!(interrupted_turn_closers(&inspected).is_empty(), "{name}");
                if Trace::replay(kept).is_ok() {
                    Trace::replay(&inspected).unwrap();
                }
                if expected["kind"] == "between-turns" {
                    assert!(closers.is_empty(), "{name}");
                }
                with_closers += usize::from(!closers.is_empty());
                variants += 1;
            }
        }
    }
    assert_eq!(variants, 2 * 194);
    assert!(with_closers > 0);
}
