//! Per-event-type tallies: the counts `inspect`, `stats` and the web view print.

use std::collections::HashMap;

use session_core::Event;

/// Stored events per type, in order of first appearance.
pub fn counts<'a>(events: impl IntoIterator<Item = &'a Event>) -> Vec<(String, u64)> {
    let mut tally = TypeCounts::default();
    for e in events {
        tally.push(e);
    }
    tally.into_rows()
}

/// Events per type, counted one event at a time ([`counts`] over an iteration that also
/// serves another pass).
///
/// A run of events whose type is the same string (every compact chunk shares one, and so do
/// the events of one decoded row) adds up by an address comparison, and reaches the
/// [`TypeTally`] once per run. Comparing addresses is sound here: every type string is borrowed
/// for `'a`, so two of them at the same address and length are the same string.
#[derive(Default)]
pub struct TypeCounts<'a> {
    tally: TypeTally<u64>,
    run: Option<(&'a str, u64)>,
}

impl<'a> TypeCounts<'a> {
    /// Counts `event`.
    #[inline]
    pub fn push(&mut self, event: &'a Event) {
        let ty = event.event_type();
        match &mut self.run {
            Some((last, n)) if std::ptr::eq(*last, ty) => *n += 1,
            run => {
                if let Some((last, n)) = run.replace((ty, 1)) {
                    *self.tally.entry(last) += n;
                }
            }
        }
    }

    /// The counts, in the order their types were first seen.
    pub fn into_rows(mut self) -> Vec<(String, u64)> {
        if let Some((last, n)) = self.run.take() {
            *self.tally.entry(last) += n;
        }
        self.tally.into_rows()
    }
}

/// Up to this many distinct types, [`TypeTally`] finds a type by a linear scan.
const TALLY_LINEAR: usize = 32;

/// Per-event-type tallies in first-seen order, without hashing a string for every event: the
/// type of the previous event is tried first (runs of one type are the common case), then the
/// few types seen so far by a linear scan; only a log of more than 32 (`TALLY_LINEAR`) distinct
/// types looks them up in a hash index, so hostile input costs no more than before.
pub struct TypeTally<T> {
    rows: Vec<(String, T)>,
    last: usize,
    index: HashMap<String, usize>,
}

impl<T> Default for TypeTally<T> {
    fn default() -> TypeTally<T> {
        TypeTally {
            rows: Vec::new(),
            last: 0,
            index: HashMap::new(),
        }
    }
}

impl<T: Default> TypeTally<T> {
    /// The tally of `ty`, created (zero) when `ty` is new.
    pub fn entry(&mut self, ty: &str) -> &mut T {
        if self.rows.get(self.last).is_some_and(|(t, _)| t == ty) {
            return &mut self.rows[self.last].1;
        }
        let found = if self.rows.len() <= TALLY_LINEAR {
            self.rows.iter().position(|(t, _)| t == ty)
        } else {
            self.index.get(ty).copied()
        };
        let i = found.unwrap_or_else(|| {
            let i = self.rows.len();
            self.rows.push((ty.to_owned(), T::default()));
            if self.rows.len() == TALLY_LINEAR + 1 {
                for (j, (t, _)) in self.rows.iter().enumerate() {
                    self.index.insert(t.clone(), j);
                }
            } else if self.rows.len() > TALLY_LINEAR + 1 {
                self.index.insert(ty.to_owned(), i);
            }
            i
        });
        self.last = i;
        &mut self.rows[i].1
    }

    /// The tallies, in the order their types were first seen.
    pub fn into_rows(self) -> Vec<(String, T)> {
        self.rows
    }
}

#[cfg(test)]
mod tests {
    use super::{TALLY_LINEAR, TypeCounts, TypeTally, counts};
    use session_core::Event;
    use session_core::json::Value;

    /// Counting by runs of one type string agrees with comparing every type, in first-seen
    /// order: for runs of one shared string, for equal strings at different addresses (each
    /// event's own copy) and for alternations.
    #[test]
    fn type_counts_by_runs_match_a_count_of_every_type() {
        let types: Vec<String> = (0..3_000u32)
            .map(|i| match (i / 5) % 6 {
                0 | 1 => "assistant/chunk".to_owned(),
                2 => "turn/start".to_owned(),
                3 => format!("x/type{}", i % 3),
                4 => if i % 2 == 0 {
                    "turn/end"
                } else {
                    "assistant/chunk"
                }
                .to_owned(),
                _ => format!("y/type{}", i % 40),
            })
            .collect();
        let events: Vec<Event> = types
            .iter()
            .enumerate()
            .map(|(seq, t)| Event::appended(t.as_str(), seq as u64, 0, Value::Null, None, None))
            .collect();
        let mut expected = TypeTally::<u64>::default();
        for t in &types {
            *expected.entry(t) += 1;
        }
        let expected = expected.into_rows();
        assert_eq!(counts(&events), expected);
        // The same events, each run of one type pointing at one string.
        let shared: Vec<Event> = events
            .iter()
            .map(|e| {
                let same = events
                    .iter()
                    .find(|f| f.event_type() == e.event_type())
                    .unwrap();
                Event::appended(
                    same.event_type_arc().clone(),
                    e.seq(),
                    0,
                    Value::Null,
                    None,
                    None,
                )
            })
            .collect();
        let mut by_runs = TypeCounts::default();
        for e in &shared {
            by_runs.push(e);
        }
        assert_eq!(by_runs.into_rows(), expected);
        assert!(TypeCounts::default().into_rows().is_empty());
    }

    /// The tally agrees with a plain map count, in first-seen order, for runs, alternations
    /// and more distinct types than the linear scan covers.
    #[test]
    fn type_tally_counts_like_a_map_in_first_seen_order() {
        let mut types: Vec<String> = Vec::new();
        for i in 0..2_000u32 {
            let t = match i % 7 {
                0..=2 => "assistant/chunk".to_owned(),
                3 => "turn/start".to_owned(),
                4 => format!("x/type{}", i % 90),
                5 => "turn/end".to_owned(),
                _ => format!("y/type{}", (i * 31) % 45),
            };
            types.push(t);
        }
        let mut tally = TypeTally::<u64>::default();
        for t in &types {
            *tally.entry(t) += 1;
        }
        let rows = tally.into_rows();
        let mut expected: Vec<(String, u64)> = Vec::new();
        for t in &types {
            match expected.iter_mut().find(|(e, _)| e == t) {
                Some(row) => row.1 += 1,
                None => expected.push((t.clone(), 1)),
            }
        }
        assert!(expected.len() > TALLY_LINEAR, "{}", expected.len());
        assert_eq!(rows, expected);
    }
}
