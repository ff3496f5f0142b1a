//! The sessions and events the backend suite and the crash model write.
//!
//! Every turn is the same eleven drafts, valid for a live
//! [`Session`](session_surface::Session) and for the turn/step invariant: `turn/start`,
//! `step/start`, a user message, three streamed text deltas (a run the JSONL backend packs into
//! one chunk row), an assistant message with a text block and a tool-call block, the
//! `tool/call`, its `tool/result`, `step/end` and `turn/end`. A prefix of a turn is an
//! interrupted turn whose crash closers are non-trivial (a pending tool call, an open step).
//!
//! [`agent_session`] builds the large sessions the backends' benches load: long agent turns
//! of streamed deltas ([`agent_turn`]).

use std::sync::Arc;

use session_core::event::seq_value;
use session_core::json::Value;
use session_core::{Event, SessionHeader};
use session_surface::Draft;

/// The working directory of every fixture session.
pub const SUITE_CWD: &str = "/conformance/suite";

/// The creation time of every fixture session, and the time of its first event (ms).
pub const SUITE_TIME_MS: i64 = 1_767_225_600_000;

/// How many events one fixture turn has.
pub const TURN_LEN: u64 = 11;

/// Where in a turn the `tool/call` is (its `tool/result` cites it).
const CALL_PHASE: u64 = 7;

/// The header of a fixture session: `id`, [`SUITE_CWD`], [`SUITE_TIME_MS`], delegation
/// depth 0 (what every backend stores when none is given).
pub fn meta(id: &str) -> SessionHeader {
    let mut meta = SessionHeader::new(id, SUITE_TIME_MS as u64);
    meta.cwd = Some(Arc::from(SUITE_CWD));
    meta.delegation_depth = Some(0);
    meta
}

fn json(text: &str) -> Value {
    // Every template below is valid JSON built from numbers and fixed strings.
    Value::parse(text).unwrap_or(Value::Null)
}

/// Draft `phase` (`0..TURN_LEN`) of turn `turn`; `call_seq` is the seq of the turn's
/// `tool/call` (cited by the `tool/result` at phase 8, ignored otherwise). Phases past the end
/// wrap around.
pub fn turn_draft(turn: u64, phase: u64, call_seq: u64) -> Draft {
    let t = turn;
    match phase % TURN_LEN {
        0 => Draft::new("turn/start", json(&format!(r#"{{"turn":{t}}}"#))),
        1 => Draft::new("step/start", json(&format!(r#"{{"turn":{t},"step":1}}"#))),
        2 => Draft::new(
            "user/message",
            json(&format!(
                r#"{{"id":"u{t}","role":"user","content":[{{"type":"text","text":"question {t}: \"quoted\", ünïcödé ✓ \\ tab\t"}}],"source":{{"kind":"user"}}}}"#
            )),
        )
        .append_op(),
        k @ 3..=5 => Draft::new(
            "assistant/chunk",
            json(&format!(
                r#"{{"turn":{t},"step":1,"chunk":{{"type":"text-delta","index":0,"text":"{}"}}}}"#,
                ["Hel", "lo ", "🌍"][(k - 3) as usize]
            )),
        ),
        6 => Draft::new(
            "assistant/message",
            json(&format!(
                r#"{{"turn":{t},"step":1,"message":{{"id":"a{t}","role":"assistant","content":[{{"type":"text","text":"Hello 🌍"}},{{"type":"tool-call","id":"call-{t}","name":"bash","arguments":"{{\"cmd\":\"ls\"}}"}}],"source":{{"kind":"model","provider":"p","model":"m"}}}}}}"#
            )),
        )
        .append_op(),
        7 => Draft::new(
            "tool/call",
            json(&format!(
                r#"{{"turn":{t},"step":1,"callId":"call-{t}","name":"bash","arguments":"{{\"cmd\":\"ls\"}}"}}"#
            )),
        ),
        8 => {
            let mut draft = Draft::new(
                "tool/result",
                json(&format!(
                    r#"{{"turn":{t},"step":1,"message":{{"id":"r{t}","role":"user","source":{{"kind":"tool","callId":"call-{t}"}},"content":[{{"type":"tool-result","toolCallId":"call-{t}","content":[{{"type":"text","text":"a.txt\nb.txt"}}]}}]}}}}"#
                )),
            )
            .append_op();
            draft.source_event_seqs = Some(Value::array([seq_value(call_seq)]));
            draft
        }
        9 => Draft::new("step/end", json(&format!(r#"{{"turn":{t},"step":1}}"#))),
        _ => Draft::new(
            "turn/end",
            json(&format!(
                r#"{{"turn":{t},"reason":{{"kind":"completed"}}}}"#
            )),
        ),
    }
}

/// The event a live session would store for `draft` at `seq` (time [`SUITE_TIME_MS`] + `seq`).
pub fn event_of(draft: &Draft, seq: u64) -> Event {
    Event::appended(
        draft.ty.clone(),
        seq,
        SUITE_TIME_MS + seq as i64,
        draft.data.clone(),
        draft.source_event_seqs.clone(),
        draft.surface_op.clone(),
    )
}

/// The first `len` events (at most [`TURN_LEN`]) of turn `turn`, starting at seq `first`.
pub fn partial_turn(first: u64, turn: u64, len: u64) -> Vec<Event> {
    (0..len.min(TURN_LEN))
        .map(|phase| event_of(&turn_draft(turn, phase, first + CALL_PHASE), first + phase))
        .collect()
}

/// A complete turn `turn` ([`TURN_LEN`] events) starting at seq `first`.
pub fn turn(first: u64, turn: u64) -> Vec<Event> {
    partial_turn(first, turn, TURN_LEN)
}

/// `turns` complete turns numbered from 1, starting at seq 0.
pub fn turns(turns: u64) -> Vec<Event> {
    (0..turns).flat_map(|k| turn(k * TURN_LEN, k + 1)).collect()
}

/// Events whose JSON must survive storage byte for byte: escapes, astral and combining
/// characters, integers beyond 2^53, negative zero, exponents, long fraction digits, unusual
/// key order, nesting, an empty key, `null`s, and an event type this harness does not know
/// marked `ignorable` (storage does not interpret types). Seqs start at `first`.
pub fn tricky_events(first: u64) -> Vec<Event> {
    let bodies = [
        r#""type":"x-suite/numbers","data":{"big":123456789012345678901234567890,"neg":-0,"exp":1E+300,"small":1e-7,"frac":0.10000000000000000555,"int":-9007199254740993,"zero":0.0},"ignorable":true"#,
        r#""type":"x-suite/text","data":{"z":"last key first","a":"\u0000\u001f \" \\ / \b\f\n\r\t","emoji":"👩‍👩‍👧","combining":"é","rtl":"שלום","escaped":"\ud83d\ude00","":"empty key"},"ignorable":true"#,
        r#""type":"x-suite/nesting","data":{"deep":[[[[[[[[{"k":[null,true,false,[],{}]}]]]]]]]],"list":[1,"2",3.5,null]},"ignorable":true"#,
        r#""type":"x-suite/null","data":null,"ignorable":true"#,
    ];
    bodies
        .iter()
        .enumerate()
        .filter_map(|(k, body)| {
            let seq = first + k as u64;
            let time = SUITE_TIME_MS + seq as i64;
            Event::parse(&format!(r#"{{{body},"seq":{seq},"time":{time}}}"#)).ok()
        })
        .collect()
}

/// One large batch starting at seq 0: `turns` complete turns, then one event carrying a text
/// of `big_text` bytes (a record far larger than any I/O buffer).
pub fn large_batch(turns: u64, big_text: usize) -> Vec<Event> {
    let mut events = self::turns(turns);
    let seq = events.len() as u64;
    let text: String = "0123456789abcdef".chars().cycle().take(big_text).collect();
    let time = SUITE_TIME_MS + seq as i64;
    events.extend(
        Event::parse(&format!(
            r#"{{"type":"x-suite/blob","seq":{seq},"time":{time},"data":{{"blob":"{text}"}},"ignorable":true}}"#
        ))
        .ok(),
    );
    events
}

/// How many events one [`agent_turn`] has.
pub const AGENT_TURN_LEN: u64 = 366;

/// An event at `seq` (time [`SUITE_TIME_MS`] + `seq`) with the JSON `data`.
fn agent_event(ty: &str, seq: u64, data: &str) -> Event {
    Event::appended(ty, seq, SUITE_TIME_MS + seq as i64, json(data), None, None)
}

/// A streamed `assistant/chunk` at `seq` in step 1 of turn `turn`: a delta of type `kind`
/// (`text-delta`, `reasoning-delta`) to content block `index`, with the text `token {seq} `.
pub fn stream_delta(seq: u64, turn: u64, kind: &str, index: u64) -> Event {
    agent_event(
        "assistant/chunk",
        seq,
        &format!(
            r#"{{"turn":{turn},"step":1,"chunk":{{"type":"{kind}","index":{index},"text":"token {seq} "}}}}"#
        ),
    )
}

/// Agent turn `turn` starting at seq `first` ([`AGENT_TURN_LEN`] events): `turn/start`, a
/// user message, `step/start`, 60 reasoning and 300 text deltas ([`stream_delta`]), an
/// assistant message citing the deltas (`sourceEventSeqs`), `step/end` and `turn/end`.
pub fn agent_turn(first: u64, turn: u64) -> Vec<Event> {
    let mut seq = first;
    let mut next = || {
        seq += 1;
        seq - 1
    };
    let mut out = Vec::with_capacity(AGENT_TURN_LEN as usize);
    out.push(agent_event(
        "turn/start",
        next(),
        &format!(r#"{{"turn":{turn}}}"#),
    ));
    out.push(Event::appended(
        "user/message",
        next(),
        SUITE_TIME_MS,
        json(&format!(
            r#"{{"id":"u{turn}","role":"user","content":[{{"type":"text","text":"question {turn}: what does the log say about seq {first}?"}}],"source":{{"kind":"user"}}}}"#
        )),
        None,
        Some(Value::from("append")),
    ));
    out.push(agent_event(
        "step/start",
        next(),
        &format!(r#"{{"turn":{turn},"step":1}}"#),
    ));
    for _ in 0..60 {
        out.push(stream_delta(next(), turn, "reasoning-delta", 0));
    }
    for _ in 0..300 {
        out.push(stream_delta(next(), turn, "text-delta", 1));
    }
    out.push(Event::appended(
        "assistant/message",
        next(),
        SUITE_TIME_MS,
        json(&format!(
            r#"{{"turn":{turn},"step":1,"message":{{"id":"a{turn}","role":"assistant","content":[{{"type":"text","text":"answer {turn}"}}]}}}}"#
        )),
        Some(Value::array(
            (first + 3..first + 363).map(|s| Value::from(s as u32)),
        )),
        Some(Value::from("append")),
    ));
    out.push(agent_event(
        "step/end",
        next(),
        &format!(r#"{{"turn":{turn},"step":1}}"#),
    ));
    out.push(agent_event(
        "turn/end",
        next(),
        &format!(r#"{{"turn":{turn},"reason":{{"kind":"completed"}}}}"#),
    ));
    out
}

/// A session of `len` events from seq 0: [`agent_turn`]s numbered from 1, the last one cut
/// short.
///
/// ```
/// use conformance::backend_suite::fixtures::{AGENT_TURN_LEN, agent_session, agent_turn};
///
/// assert_eq!(agent_turn(0, 1).len() as u64, AGENT_TURN_LEN);
/// let session = agent_session(1_000);
/// assert_eq!(session.len(), 1_000);
/// assert!(session.iter().enumerate().all(|(k, e)| e.seq() == k as u64));
/// assert_eq!(session[AGENT_TURN_LEN as usize].event_type(), "turn/start");
/// ```
pub fn agent_session(len: u64) -> Vec<Event> {
    let len = usize::try_from(len).unwrap_or(usize::MAX);
    let mut out = Vec::new();
    // A best-effort reservation: the last turn may overshoot before the cut.
    let _ = out.try_reserve(len.saturating_add(AGENT_TURN_LEN as usize));
    let mut turn = 1;
    while out.len() < len {
        out.extend(agent_turn(out.len() as u64, turn));
        turn += 1;
    }
    out.truncate(len);
    out
}
