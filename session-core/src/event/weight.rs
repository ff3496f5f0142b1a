//! A cheap estimate of an event's JSON size, without serializing it.
//!
//! The write-behind controller weighs every pending event against its back-pressure bound, and
//! the commands that copy a log weigh events to cut it into batches no larger than that bound.
//! Both need a size for every event, and neither may build the `data` tree of a compact chunk
//! member (a member's tree, once built, stays with it), nor allocate for the common shallow
//! event.

use super::{Event, Repr, SeqRuns, Sources};
use crate::json::Value;

/// Nesting depth up to which [`approx_value_len`] recurses; deeper values are set aside and
/// weighed by the caller, so any depth costs bounded stack and shallow values (nearly all
/// events) cost no allocation.
const APPROX_MAX_DEPTH: u32 = 32;

/// The bytes of a compact chunk member's JSON line besides its text: the envelope, `turn`,
/// `step`, and the chunk's `type` and `index` (and, for a tool call, its `id` and `name`), at
/// their usual sizes.
const MEMBER_OVERHEAD: usize = 160;

impl Event {
    /// An estimate of the event's compact JSON length in bytes: within a small constant of
    /// [`Event::to_json`]'s length for ordinary events, and never building a compact chunk
    /// member's `data`.
    pub fn approx_json_len(&self) -> usize {
        if let Repr::Member(block, k) = &self.0 {
            return MEMBER_OVERHEAD + block.text(*k).len();
        }
        let mut deep = Vec::new();
        let mut total = 48 + self.event_type().len() + approx_value_len(self.data(), 0, &mut deep);
        if let Some(v) = self.surface_op_value() {
            total += approx_value_len(v, 0, &mut deep);
        }
        // Sources kept as runs are weighed from the runs: their array value, once built, would
        // stay with the event.
        match &self.0 {
            Repr::Single(e) => match &e.source_event_seqs {
                Some(Sources::Runs(runs)) => total += runs_len(runs),
                Some(Sources::Value(v)) => total += approx_value_len(v, 0, &mut deep),
                None => {}
            },
            Repr::Verbatim(_) | Repr::Member(..) => {
                if let Some(v) = self.source_event_seqs_value() {
                    total += approx_value_len(v, 0, &mut deep);
                }
            }
        }
        while let Some(v) = deep.pop() {
            total += approx_value_len(v, 0, &mut deep);
        }
        total
    }
}

/// The JSON length of the array `runs` stands for: each item's digits and its comma (an
/// integer's digits counted by powers of ten, so a long run costs a few steps).
fn runs_len(runs: &SeqRuns) -> usize {
    let mut items: u64 = 0;
    for &(first, count) in &runs.runs {
        let end = first.saturating_add(count);
        let mut lo = first;
        while lo < end {
            let digits = lo.checked_ilog10().map_or(1, |d| d + 1);
            let hi = 10u64.checked_pow(digits).map_or(end, |next| next.min(end));
            items = items.saturating_add((hi - lo).saturating_mul(u64::from(digits) + 1));
            lo = hi;
        }
    }
    usize::try_from(items)
        .unwrap_or(usize::MAX)
        .saturating_add(2)
}

fn approx_value_len<'a>(v: &'a Value, depth: u32, deep: &mut Vec<&'a Value>) -> usize {
    if depth == APPROX_MAX_DEPTH {
        deep.push(v);
        return 0;
    }
    match v {
        Value::Null | Value::Bool(_) => 5,
        Value::Number(_) => 12,
        Value::String(s) => s.len() + 2,
        Value::Array(items) => {
            2 + items.len()
                + items
                    .iter()
                    .map(|item| approx_value_len(item, depth + 1, deep))
                    .sum::<usize>()
        }
        Value::Object(o) => {
            2 + o
                .iter()
                .map(|(k, item)| k.len() + 4 + approx_value_len(item, depth + 1, deep))
                .sum::<usize>()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Repr, Sources};
    use crate::Event;
    use crate::chunk_rows::StorageDecoder;

    fn ev(line: &str) -> Event {
        Event::parse(line).unwrap()
    }

    #[test]
    fn the_size_estimate_grows_with_the_payload() {
        let small = ev(r#"{"type":"x","seq":0,"time":0,"data":null}"#);
        let big = ev(&format!(
            r#"{{"type":"x","seq":0,"time":0,"data":{{"text":"{}"}}}}"#,
            "a".repeat(10_000)
        ));
        assert!(big.approx_json_len() > small.approx_json_len() + 9_000);
        assert!(big.approx_json_len() < 11_000);
    }

    #[test]
    fn the_size_estimate_counts_every_level_of_a_deep_payload() {
        // 1,000 nested arrays around a 5,000-byte string: deeper than the recursion bound,
        // so the estimate goes through the set-aside path and still sees the whole value.
        let depth = 1_000;
        let line = format!(
            r#"{{"type":"x","seq":0,"time":0,"data":{}"{}"{}}}"#,
            "[".repeat(depth),
            "a".repeat(5_000),
            "]".repeat(depth)
        );
        let len = ev(&line).approx_json_len();
        assert!(len >= 5_000 + 3 * depth, "{len}");
        assert!(len < 5_000 + 4 * depth + 100, "{len}");
    }

    #[test]
    fn a_compact_chunk_member_is_weighed_by_its_text_without_building_its_data() {
        let text = "x".repeat(3_000);
        let mut decoder = StorageDecoder::new();
        decoder.decode_line(
            format!(
                r#"{{"type":"text-chunks","seq0":4,"time0":10,"data":{{"turn":1,"step":1,"index":0,"dt":[1],"texts":["a","{text}"]}}}}"#
            )
            .as_bytes(),
        );
        let events = decoder.take_events();
        assert_eq!(events.len(), 2);
        for e in &events {
            let Repr::Member(block, _) = &e.0 else {
                panic!("seq {} is not a compact member", e.seq());
            };
            let exact = e.to_json().len();
            let approx = e.approx_json_len();
            assert!(
                approx >= exact && approx < exact + 120,
                "{approx} vs {exact}"
            );
            assert!(block.data_is_unbuilt(), "weighing built the member's data");
        }
    }

    #[test]
    fn sources_kept_as_runs_are_weighed_without_building_their_array() {
        let seqs: Vec<String> = (3..4_000)
            .chain(9_990..10_020)
            .map(|n| n.to_string())
            .collect();
        let line = format!(
            r#"{{"type":"assistant/message","seq":70000,"time":1,"data":{{}},"sourceEventSeqs":[{}],"surfaceOp":"append"}}"#,
            seqs.join(",")
        );
        let e = ev(&line);
        let Repr::Single(inner) = &e.0 else {
            panic!("not an ordinary event");
        };
        let Some(Sources::Runs(runs)) = &inner.source_event_seqs else {
            panic!("the sources are not kept as runs");
        };
        let approx = e.approx_json_len();
        assert!(runs.value.get().is_none(), "weighing built the array");
        let exact = line.len();
        assert!(approx.abs_diff(exact) < 100, "{approx} vs {exact}");
    }
}
