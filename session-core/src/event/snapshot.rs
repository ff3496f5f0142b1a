//! The JSON rules applied to whole events: a live append's ([`Event::snapshot_for_append`])
//! and a seed of stored events' ([`Event::snapshot_for_seed`]).

use super::{Event, EventParts, Repr, Sources};
use crate::json::{self, Value};

impl Event {
    /// The event with its JSON values as a live `append` stores them
    /// ([`json::snapshot_for_append`]): `None` if one of them is not appendable; the event
    /// itself (shared, not copied) when nothing changes.
    pub fn snapshot_for_append(&self) -> Option<Event> {
        let e = match &self.0 {
            Repr::Member(b, k) => {
                let meta = b.meta(*k);
                let mut unchanged = true;
                for v in [&meta.turn, &meta.step, &meta.index] {
                    if let Value::Number(n) = v {
                        if !n.is_appendable() {
                            return None;
                        }
                        unchanged &= !n.is_verbatim();
                    }
                }
                // The strings are always appendable.
                if unchanged {
                    return Some(self.clone());
                }
                return Some(Event::from_parts(
                    EventParts {
                        ty: self.event_type_arc().clone(),
                        seq: self.seq(),
                        time: self.time(),
                        data: json::snapshot_for_append(self.data())?,
                        surface_op: None,
                        source_event_seqs: None,
                        ignorable: false,
                    },
                    self.key_order(),
                ));
            }
            Repr::Single(e) => e,
            Repr::Verbatim(_) => return None,
        };
        let data = json::snapshot_for_append(&e.data)?;
        let surface_op = match &e.surface_op {
            Some(v) => Some(json::snapshot_for_append(v)?),
            None => None,
        };
        // Runs are non-negative safe integers in JavaScript spelling: they never change.
        let source_event_seqs = match &e.source_event_seqs {
            Some(Sources::Value(v)) => Some(json::snapshot_for_append(v)?),
            Some(Sources::Runs(_)) | None => None,
        };
        let same = |a: Option<&Value>, b: Option<&Value>| match (a, b) {
            (Some(a), Some(b)) => a.ptr_eq(b) || a.to_json() == b.to_json(),
            (None, None) => true,
            _ => false,
        };
        let sources_same = match &e.source_event_seqs {
            Some(Sources::Value(v)) => same(Some(v), source_event_seqs.as_ref()),
            Some(Sources::Runs(_)) | None => true,
        };
        if same(Some(&e.data), Some(&data))
            && same(e.surface_op.as_ref(), surface_op.as_ref())
            && sources_same
        {
            return Some(self.clone());
        }
        let source_event_seqs = match &e.source_event_seqs {
            Some(Sources::Runs(runs)) => Some(runs.value().clone()),
            _ => source_event_seqs,
        };
        Some(Event::from_parts(
            EventParts {
                ty: e.ty.clone(),
                seq: e.seq,
                time: e.time,
                data,
                surface_op,
                source_event_seqs,
                ignorable: e.ignorable,
            },
            e.order,
        ))
    }

    /// The event as a seed of already-stored events keeps it ([`json::snapshot_for_seed`]):
    /// never refused; numbers JavaScript would respell are respelled, everything else is kept
    /// as read. The event itself (shared, not copied) when nothing changes.
    #[must_use]
    pub fn snapshot_for_seed(&self) -> Event {
        let e = match &self.0 {
            Repr::Member(b, k) => {
                let meta = b.meta(*k);
                let respell = [&meta.turn, &meta.step, &meta.index].into_iter().any(|v| {
                    matches!(v, Value::Number(n) if n.is_verbatim() && n.is_finite()
                        && !n.is_negative_zero())
                });
                if !respell {
                    return self.clone();
                }
                return Event::from_parts(
                    EventParts {
                        ty: self.event_type_arc().clone(),
                        seq: self.seq(),
                        time: self.time(),
                        data: json::snapshot_for_seed(self.data()),
                        surface_op: None,
                        source_event_seqs: None,
                        ignorable: false,
                    },
                    self.key_order(),
                );
            }
            Repr::Single(e) => e,
            // Kept as stored: a seed keeps it unchanged.
            Repr::Verbatim(_) => return self.clone(),
        };
        let sources = match &e.source_event_seqs {
            Some(Sources::Value(v)) => Some(v),
            Some(Sources::Runs(_)) | None => None,
        };
        if !json::seed_respells(&e.data)
            && !e.surface_op.as_ref().is_some_and(json::seed_respells)
            && !sources.is_some_and(json::seed_respells)
        {
            return self.clone();
        }
        let data = json::snapshot_for_seed(&e.data);
        let surface_op = e.surface_op.as_ref().map(json::snapshot_for_seed);
        let sources = sources.map(json::snapshot_for_seed);
        let source_event_seqs = match &e.source_event_seqs {
            Some(Sources::Runs(runs)) => Some(runs.value().clone()),
            _ => sources,
        };
        Event::from_parts(
            EventParts {
                ty: e.ty.clone(),
                seq: e.seq,
                time: e.time,
                data,
                surface_op,
                source_event_seqs,
                ignorable: e.ignorable,
            },
            e.order,
        )
    }
}
