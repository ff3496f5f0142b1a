//! Compact storage for streamed delta chunk events.
//!
//! A large session is mostly `assistant/chunk` deltas of a few bytes each. Holding each one as
//! an envelope plus a JSON tree costs several hundred bytes per event, so restored deltas are
//! kept in shared [`ChunkBlock`]s instead: up to [`BLOCK_MEMBERS`] members per block, each
//! member a 16-byte record (seq and time relative to the block, the end of its text in the
//! block's text buffer, and an index into the block's table of shared fields). An
//! [`Event`](super::Event) handle names a block and a member. The member's `data` tree is only
//! built when somebody asks for it, and then kept; serializing never needs it.

use std::sync::{Arc, OnceLock};

use super::{Event, EventParts, KeyOrder, chunk_event_type};
use crate::json::{self, Object, Value};

/// The most members one block holds.
pub(crate) const BLOCK_MEMBERS: usize = 1024;

/// The kind of a delta chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DeltaKind {
    /// `text-delta`.
    Text,
    /// `reasoning-delta`.
    Reasoning,
    /// `tool-call-delta`.
    ToolCall,
}

impl DeltaKind {
    /// The `chunk.type` string.
    pub(crate) fn chunk_type(self) -> &'static str {
        match self {
            DeltaKind::Text => "text-delta",
            DeltaKind::Reasoning => "reasoning-delta",
            DeltaKind::ToolCall => "tool-call-delta",
        }
    }

    pub(crate) fn is_tool(self) -> bool {
        self == DeltaKind::ToolCall
    }
}

/// The fields that consecutive members of one run share.
#[derive(Clone)]
pub(crate) struct DeltaMeta {
    pub(crate) kind: DeltaKind,
    pub(crate) turn: Value,
    pub(crate) step: Value,
    pub(crate) index: Value,
    /// The tool call's `id` (a string); `Null` for text and reasoning deltas.
    pub(crate) id: Value,
    /// The tool call's `name`, when present.
    pub(crate) name: Option<Value>,
    /// Read from a verbatim stored line, whose envelope key order is remembered as read
    /// (`type, seq, time, data`) rather than as a live append writes it.
    pub(crate) parsed_order: bool,
}

struct Shared {
    k_type: Arc<str>,
    k_index: Arc<str>,
    k_text: Arc<str>,
    k_id: Arc<str>,
    k_name: Arc<str>,
    k_arguments_delta: Arc<str>,
    k_turn: Arc<str>,
    k_step: Arc<str>,
    k_chunk: Arc<str>,
    chunk_types: [Value; 3],
}

fn shared() -> &'static Shared {
    static SHARED: OnceLock<Shared> = OnceLock::new();
    SHARED.get_or_init(|| Shared {
        k_type: json::key("type"),
        k_index: json::key("index"),
        k_text: json::key("text"),
        k_id: json::key("id"),
        k_name: json::key("name"),
        k_arguments_delta: json::key("argumentsDelta"),
        k_turn: json::key("turn"),
        k_step: json::key("step"),
        k_chunk: json::key("chunk"),
        chunk_types: [
            Value::from(DeltaKind::Text.chunk_type()),
            Value::from(DeltaKind::Reasoning.chunk_type()),
            Value::from(DeltaKind::ToolCall.chunk_type()),
        ],
    })
}

impl DeltaMeta {
    /// The member's `data`: `{turn, step, chunk: {type, index, text}}` or
    /// `{turn, step, chunk: {type, index, id, name?, argumentsDelta}}`.
    pub(crate) fn data_value(&self, text: &str) -> Value {
        let s = shared();
        let ty = (s.k_type.clone(), s.chunk_types[self.kind as usize].clone());
        let index = (s.k_index.clone(), self.index.clone());
        let payload = Value::String(Arc::from(text));
        let chunk = match (self.kind.is_tool(), &self.name) {
            (false, _) => Object::from_ordered_entries([ty, index, (s.k_text.clone(), payload)]),
            (true, None) => Object::from_ordered_entries([
                ty,
                index,
                (s.k_id.clone(), self.id.clone()),
                (s.k_arguments_delta.clone(), payload),
            ]),
            (true, Some(name)) => Object::from_ordered_entries([
                ty,
                index,
                (s.k_id.clone(), self.id.clone()),
                (s.k_name.clone(), name.clone()),
                (s.k_arguments_delta.clone(), payload),
            ]),
        };
        Value::Object(Object::from_ordered_entries([
            (s.k_turn.clone(), self.turn.clone()),
            (s.k_step.clone(), self.step.clone()),
            (s.k_chunk.clone(), Value::Object(chunk)),
        ]))
    }

    /// Appends the member's `data` JSON, exactly as [`DeltaMeta::data_value`] serializes.
    fn write_data(&self, text: &str, out: &mut String) {
        out.push_str("{\"turn\":");
        self.turn.write_json(out);
        out.push_str(",\"step\":");
        self.step.write_json(out);
        out.push_str(",\"chunk\":{\"type\":\"");
        out.push_str(self.kind.chunk_type());
        out.push_str("\",\"index\":");
        self.index.write_json(out);
        if self.kind.is_tool() {
            out.push_str(",\"id\":");
            self.id.write_json(out);
            if let Some(name) = &self.name {
                out.push_str(",\"name\":");
                name.write_json(out);
            }
            out.push_str(",\"argumentsDelta\":");
        } else {
            out.push_str(",\"text\":");
        }
        json::write_str(text, out);
        out.push_str("}}");
    }

    /// Whether members with `self` and `other` have equal `data` when their texts are equal
    /// (structural equality, as [`Value`]'s `PartialEq`).
    fn same_data_shape(&self, other: &DeltaMeta) -> bool {
        self.kind == other.kind
            && self.turn == other.turn
            && self.step == other.step
            && self.index == other.index
            && (!self.kind.is_tool() || (self.id == other.id && self.name == other.name))
    }
}

#[derive(Debug, Clone, Copy)]
struct Member {
    /// `seq - base_seq`.
    seq: u32,
    /// `time - base_time`.
    time: i32,
    /// End of the member's text in the block's text buffer.
    end: u32,
    /// Index into the block's metas.
    meta: u16,
}

/// An immutable block of delta chunk events (see the module documentation).
pub(crate) struct ChunkBlock {
    base_seq: u64,
    base_time: i64,
    members: Box<[Member]>,
    metas: Box<[DeltaMeta]>,
    text: Box<str>,
    data: OnceLock<Box<[OnceLock<Value>]>>,
}

impl ChunkBlock {
    #[inline]
    pub(crate) fn seq(&self, k: u32) -> u64 {
        self.base_seq + u64::from(self.members[k as usize].seq)
    }

    #[inline]
    pub(crate) fn time(&self, k: u32) -> i64 {
        self.base_time + i64::from(self.members[k as usize].time)
    }

    #[inline]
    pub(crate) fn meta(&self, k: u32) -> &DeltaMeta {
        &self.metas[usize::from(self.members[k as usize].meta)]
    }

    pub(crate) fn text(&self, k: u32) -> &str {
        let k = k as usize;
        let start = if k == 0 { 0 } else { self.members[k - 1].end };
        self.text
            .get(start as usize..self.members[k].end as usize)
            .unwrap_or_default()
    }

    /// The member's `data`, built on first use and kept.
    pub(crate) fn data(&self, k: u32) -> &Value {
        let slots = self.data.get_or_init(|| {
            std::iter::repeat_with(OnceLock::new)
                .take(self.members.len())
                .collect()
        });
        slots[k as usize].get_or_init(|| self.meta(k).data_value(self.text(k)))
    }

    /// Whether no member's `data` tree was built yet.
    #[cfg(test)]
    pub(crate) fn data_is_unbuilt(&self) -> bool {
        self.data.get().is_none()
    }

    /// The member's `data` without building or keeping a tree when it was not built yet.
    pub(crate) fn data_uncached(&self, k: u32) -> Value {
        match self.data.get().and_then(|slots| slots[k as usize].get()) {
            Some(v) => v.clone(),
            None => self.meta(k).data_value(self.text(k)),
        }
    }

    pub(crate) fn write_data(&self, k: u32, out: &mut String) {
        self.meta(k).write_data(self.text(k), out);
    }

    /// Whether member `k` of `self` and member `j` of `other` have equal `data`.
    pub(crate) fn data_eq(&self, k: u32, other: &ChunkBlock, j: u32) -> bool {
        self.meta(k).same_data_shape(other.meta(j)) && self.text(k) == other.text(j)
    }

    /// Appends the member's JSON line (envelope order `type, seq, time, data`).
    pub(crate) fn write_json(&self, k: u32, out: &mut String) {
        out.push_str("{\"type\":\"assistant/chunk\",\"seq\":");
        crate::json::write_int(self.seq(k), out);
        out.push_str(",\"time\":");
        crate::json::write_int(self.time(k), out);
        out.push_str(",\"data\":");
        self.write_data(k, out);
        out.push('}');
    }
}

impl Event {
    /// An event equal to this one (same envelope, key order, `data` and JSON text) that shares
    /// no lazily built state with it. A compact member keeps the `data` tree it is asked for,
    /// so a pass that reads every chunk's `data` once (a redaction hook, say) would hold one
    /// tree per chunk; the copy of a member is an ordinary event whose `data` is built for it
    /// alone (or shares the member's, when that was built already) and freed with it. Any
    /// other event is its own copy.
    #[must_use]
    pub fn detached(&self) -> Event {
        let Some((block, k)) = self.as_member() else {
            return self.clone();
        };
        Event::from_parts(
            EventParts {
                ty: chunk_event_type().clone(),
                seq: block.seq(k),
                time: block.time(k),
                data: block.data_uncached(k),
                surface_op: None,
                source_event_seqs: None,
                ignorable: false,
            },
            self.key_order(),
        )
    }
}

/// Builds one [`ChunkBlock`] member by member.
#[derive(Default)]
pub(crate) struct BlockBuilder {
    base_seq: u64,
    base_time: i64,
    members: Vec<Member>,
    metas: Vec<DeltaMeta>,
    /// Whether the last meta has members yet.
    meta_used: bool,
    text: String,
}

impl BlockBuilder {
    pub(crate) fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// The meta new members get, if any.
    pub(crate) fn current_meta(&self) -> Option<&DeltaMeta> {
        self.metas.last()
    }

    /// Makes `meta` the meta of the following members. An unused current meta is replaced.
    pub(crate) fn set_meta(&mut self, meta: DeltaMeta) {
        if !self.meta_used {
            self.metas.pop();
        }
        self.metas.push(meta);
        self.meta_used = false;
    }

    /// Appends a member with the current meta (a run of one, [`BlockBuilder::push_run`]). `None`
    /// when it does not fit: the block is full, or the member's seq, time or text offset cannot
    /// be stored relative to the block (finish the block and retry), or there is no current
    /// meta.
    pub(crate) fn push(&mut self, seq: u64, time: i64, text: &str) -> Option<u32> {
        let (k, taken) = self.push_run(seq, &[time], text, &[text.len()], 0);
        (taken == 1).then_some(k)
    }

    /// Appends members `first..` of a run with the current meta, in one pass, as many as the
    /// block takes: member `k` of the run has seq `seq0 + k`, time `times[k]` and text
    /// `text[ends[k - 1]..ends[k]]` (from 0 for the first). Returns the block index of the first
    /// member taken and how many were taken; none when the next one does not fit (finish the
    /// block and retry) or there is no current meta.
    pub(crate) fn push_run(
        &mut self,
        seq0: u64,
        times: &[i64],
        text: &str,
        ends: &[usize],
        first: usize,
    ) -> (u32, usize) {
        let start = self.members.len() as u32;
        let Some(meta) = self
            .metas
            .len()
            .checked_sub(1)
            .and_then(|m| u16::try_from(m).ok())
        else {
            return (start, 0);
        };
        let count = times.len().min(ends.len());
        if first >= count {
            return (start, 0);
        }
        let from = run_text_start(ends, first);
        let (Some(seq), Some(&time)) = (seq0.checked_add(first as u64), times.get(first)) else {
            return (start, 0);
        };
        if self.members.is_empty() {
            self.base_seq = seq;
            self.base_time = time;
        }
        let room = BLOCK_MEMBERS.saturating_sub(self.members.len());
        let text_base = self.text.len();
        let mut k = first;
        while k < count && k - first < room {
            let rel_seq = seq0
                .checked_add(k as u64)
                .and_then(|s| s.checked_sub(self.base_seq))
                .and_then(|d| u32::try_from(d).ok());
            let rel_time = times[k]
                .checked_sub(self.base_time)
                .and_then(|d| i32::try_from(d).ok());
            let end = ends[k]
                .checked_sub(from)
                .and_then(|len| text_base.checked_add(len))
                .and_then(|e| u32::try_from(e).ok());
            let (Some(seq), Some(time), Some(end)) = (rel_seq, rel_time, end) else {
                break;
            };
            self.members.push(Member {
                seq,
                time,
                end,
                meta,
            });
            k += 1;
        }
        let taken = k - first;
        if taken > 0 {
            let to = ends[k - 1];
            self.text.push_str(text.get(from..to).unwrap_or_default());
            self.meta_used = true;
        }
        (start, taken)
    }

    /// The block of the members pushed so far; the builder starts a new block that keeps the
    /// current meta.
    pub(crate) fn finish(&mut self) -> Arc<ChunkBlock> {
        let current = self.metas.last().cloned();
        let block = ChunkBlock {
            base_seq: self.base_seq,
            base_time: self.base_time,
            members: std::mem::take(&mut self.members).into_boxed_slice(),
            metas: std::mem::take(&mut self.metas).into_boxed_slice(),
            text: std::mem::take(&mut self.text).into_boxed_str(),
            data: OnceLock::new(),
        };
        self.metas.extend(current);
        self.meta_used = false;
        Arc::new(block)
    }
}

enum Slot {
    Ready(Event),
    Member(u32),
}

/// Collects events in order, storing delta chunk members compactly: members go into the
/// current block and become [`Event`] handles when the block is finished.
#[derive(Default)]
pub(crate) struct EventSink {
    builder: BlockBuilder,
    pending: Vec<Slot>,
    out: Vec<Event>,
}

/// Where member `k`'s text starts in a run's text: the end of member `k - 1`, 0 for the first
/// (a run gives each member's text as its end offset, `ends[k]`).
fn run_text_start(ends: &[usize], k: usize) -> usize {
    k.checked_sub(1).map_or(0, |prev| ends[prev])
}

impl EventSink {
    /// Appends an ordinary event.
    pub(crate) fn push_event(&mut self, event: Event) {
        if self.pending.is_empty() {
            self.out.push(event);
        } else {
            self.pending.push(Slot::Ready(event));
        }
    }

    /// The meta of the following members, if any.
    pub(crate) fn current_meta(&self) -> Option<&DeltaMeta> {
        self.builder.current_meta()
    }

    /// Makes `meta` the meta of the following members.
    pub(crate) fn set_meta(&mut self, meta: DeltaMeta) {
        self.builder.set_meta(meta);
    }

    /// Appends a member with the current meta (see [`EventSink::set_meta`]).
    pub(crate) fn push_member(&mut self, seq: u64, time: i64, text: &str) {
        if let Some(k) = self.builder.push(seq, time, text) {
            self.pending.push(Slot::Member(k));
            return;
        }
        self.flush();
        if let Some(k) = self.builder.push(seq, time, text) {
            self.pending.push(Slot::Member(k));
            return;
        }
        // Not storable compactly (no meta, or a text beyond 4 GiB): a plain event.
        let Some(meta) = self.builder.current_meta() else {
            return;
        };
        let event = Event::from_parts(
            EventParts {
                ty: chunk_event_type().clone(),
                seq,
                time,
                data: meta.data_value(text),
                surface_op: None,
                source_event_seqs: None,
                ignorable: false,
            },
            if meta.parsed_order {
                KeyOrder::PARSED
            } else {
                KeyOrder::APPEND
            },
        );
        self.out.push(event);
    }

    /// [`EventSink::push_member`] for every member of a run with the current meta, the members
    /// that fit the current block in one pass: member `k` has seq `seq0 + k`, time `times[k]`
    /// and text `text[ends[k - 1]..ends[k]]` (from 0 for the first). A packed row decoded by
    /// the fast path is pushed this way (one text copy and one block check per row, not per
    /// member).
    pub(crate) fn push_members(&mut self, seq0: u64, times: &[i64], text: &str, ends: &[usize]) {
        let count = times.len().min(ends.len());
        let mut k = 0;
        let mut flushed = false;
        while k < count {
            let (start, taken) = self.builder.push_run(seq0, times, text, ends, k);
            if taken > 0 {
                self.pending.extend((start..).take(taken).map(Slot::Member));
                k += taken;
                flushed = false;
                continue;
            }
            if !flushed {
                // The next member does not fit this block: finish it and retry, as
                // `push_member` does.
                self.flush();
                flushed = true;
                continue;
            }
            // Not storable compactly even in a new block: `push_member`'s plain event.
            let member_text = text
                .get(run_text_start(ends, k)..ends[k])
                .unwrap_or_default();
            self.push_member(seq0.saturating_add(k as u64), times[k], member_text);
            k += 1;
            flushed = false;
        }
    }

    /// Finishes the current block, turning its members into events.
    pub(crate) fn flush(&mut self) {
        if self.builder.is_empty() {
            return;
        }
        let block = self.builder.finish();
        self.out.reserve(self.pending.len());
        for slot in self.pending.drain(..) {
            self.out.push(match slot {
                Slot::Ready(e) => e,
                Slot::Member(k) => Event::member(&block, k),
            });
        }
    }

    /// How many events were pushed (members included).
    pub(crate) fn len(&self) -> usize {
        self.out.len() + self.pending.len()
    }

    /// The events pushed so far, in order; the sink is empty afterwards.
    pub(crate) fn take(&mut self) -> Vec<Event> {
        self.flush();
        std::mem::take(&mut self.out)
    }
}

#[cfg(test)]
mod tests {
    use crate::Event;
    use crate::chunk_rows::{RowTag, StorageDecoder, chunk_delta};

    fn members() -> Vec<Event> {
        let mut decoder = StorageDecoder::new();
        for line in [
            &br#"{"type":"text-chunks","seq0":0,"time0":10,"data":{"turn":1,"step":2,"index":0,"dt":[1],"texts":["a\"b","c"]}}"#[..],
            br#"{"type":"tool-call-chunks","seq0":2,"time0":30,"data":{"turn":1,"step":2,"index":1,"dt":[4],"id":"call","name":"f","args":["{\"x","\":1}"]}}"#,
            br#"{"type":"assistant/chunk","seq":4,"time":40,"data":{"turn":1,"step":2,"chunk":{"type":"reasoning-delta","index":2,"text":"r"}}}"#,
        ] {
            decoder.decode_line(line);
        }
        decoder.take_events()
    }

    #[test]
    fn a_detached_member_is_an_equal_ordinary_event_and_builds_nothing_in_its_block() {
        let events = members();
        assert_eq!(events.len(), 5);
        for e in &events {
            let (block, _) = e.as_member().expect("a compact member");
            let copy = e.detached();
            assert!(copy.as_member().is_none() && !copy.ptr_eq(e));
            assert_eq!(copy.to_json(), e.to_json());
            assert_eq!(copy.key_order(), e.key_order());
            assert_eq!(&copy, e);
            assert!(block.data_is_unbuilt(), "seq {}", e.seq());
        }
        let plain = Event::parse(&events[0].to_json()).unwrap();
        assert!(plain.detached().ptr_eq(&plain));
    }

    #[test]
    fn a_members_delta_is_read_without_building_its_data() {
        let events = members();
        let deltas: Vec<(RowTag, &str)> = events.iter().filter_map(chunk_delta).collect();
        assert_eq!(
            deltas,
            [
                (RowTag::TextChunks, "a\"b"),
                (RowTag::TextChunks, "c"),
                (RowTag::ToolCallChunks, "{\"x"),
                (RowTag::ToolCallChunks, "\":1}"),
                (RowTag::ReasoningChunks, "r"),
            ]
        );
        for e in &events {
            let (block, _) = e.as_member().expect("a compact member");
            assert!(block.data_is_unbuilt(), "seq {}", e.seq());
            // The general path's reading of the same event agrees.
            let plain = Event::parse(&e.to_json()).unwrap();
            assert!(plain.as_member().is_none());
            assert_eq!(chunk_delta(&plain), chunk_delta(e));
        }
        let message = Event::parse(r#"{"type":"user/message","seq":0,"time":0,"data":{}}"#);
        assert_eq!(chunk_delta(&message.unwrap()), None);
    }
}
