//! Inputs found by the fuzz targets (`fuzz/`, see RELIABILITY.md "Fuzzing"), kept as named
//! regression tests with the input inline.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use session_core::json::Value;
use session_core::{Event, FixedClock};
use session_surface::Session;

/// `seed` target: an entry whose envelope `time` is `-0`. Snapshot mode refuses it as not
/// losslessly serializable (`JSON.stringify(-0)` is `0`) before the contiguity check; the same
/// entry read as an [`Event`] has time 0, so the event-based constructor sees the seq gap instead.
#[test]
fn fuzz_regression_negative_zero_envelope_time_in_a_seed() {
    let seed = Value::parse(
        r#"[{"type":"sandbox/mode","seq":0,"time":0,"data":{}},{"type":"agent/inbox/spliced","seq":0,"time":-0,"data":{}}]"#,
    )
    .unwrap();
    let values: Vec<Value> = seed.as_array().unwrap().iter().cloned().collect();
    let clock = Arc::new(FixedClock::new(1));
    let err = Session::create("s", Some(values.clone()), None, clock.clone()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "seed event at index 1 is not losslessly JSON-serializable"
    );
    let event = Event::from_value(&values[1]).unwrap();
    assert_eq!(event.time(), 0);
    assert_ne!(event.to_json(), values[1].to_json(), "-0 does not survive");
    let events: Vec<Event> = values
        .iter()
        .map(|v| Event::from_value(v).unwrap())
        .collect();
    let err = Session::create_from_events("s", Some(events.into()), None, clock).unwrap_err();
    assert_eq!(
        err.to_string(),
        "seed event at index 1 has seq 0 (expected 1); seed must be contiguous from 0"
    );
}
