//! `sessionctl view SESSION -o FILE.html`: one self-contained page for sharing. The same
//! script as the served pages reads an embedded bundle instead of the API; a
//! Content-Security-Policy with `default-src 'none'` forbids every network request.

use std::collections::BTreeMap;
use std::io::{self, Write};

use base64::Engine as _;
use session_core::chunk_rows::{RowTag, chunk_delta};
use session_core::json::Value;
use session_core::{Event, Events, SessionHeader};
use session_persist::Persistence;
use session_persist::redact::{Redactor, mask_secrets};
use sha2::{Digest, Sha256};

use crate::assets::{APP_CSS, APP_JS, INDEX_HTML};
use crate::error::{Error, Result};
use crate::view::{SessionView, num, obj};

/// Limits that keep an exported page small whatever the session's size.
#[derive(Debug, Clone, Copy)]
pub struct ExportLimits {
    /// Most event records embedded (a run of `assistant/chunk` events counts as one).
    pub max_events: usize,
    /// Most bytes of JSON of one embedded event; a larger one is replaced by its envelope and
    /// its size.
    pub max_event_bytes: usize,
    /// Most model requests whose messages and header are embedded.
    pub max_requests: usize,
    /// Most timeline rows embedded.
    pub max_rows: usize,
}

impl Default for ExportLimits {
    fn default() -> ExportLimits {
        ExportLimits {
            max_events: 20_000,
            max_event_bytes: 32 * 1024,
            max_requests: 200,
            max_rows: 20_000,
        }
    }
}

/// How to export.
#[derive(Clone)]
pub struct ExportOptions {
    /// The redaction hook applied to every event before anything is embedded (`None`: the
    /// events as stored). [`ExportOptions::default`] masks secret-looking strings
    /// ([`session_persist::redact::mask_secrets`]).
    pub redact: Option<Redactor>,
    /// Size limits.
    pub limits: ExportLimits,
}

impl Default for ExportOptions {
    fn default() -> ExportOptions {
        ExportOptions {
            redact: Some(mask_secrets()),
            limits: ExportLimits::default(),
        }
    }
}

/// The Content-Security-Policy of an exported page: nothing may be fetched; the one inline
/// script is allowed by its hash, inline styles by `'unsafe-inline'` (a style cannot make a
/// request under `default-src 'none'`: `img-src`, `font-src` and `connect-src` stay `'none'`).
pub fn export_csp(script: &str) -> String {
    let hash = base64::engine::general_purpose::STANDARD.encode(Sha256::digest(script.as_bytes()));
    format!(
        "default-src 'none'; script-src 'sha256-{hash}'; style-src 'unsafe-inline'; \
         base-uri 'none'; form-action 'none'"
    )
}

/// Reads session `id` (inspect semantics: nothing is written) and renders its page.
pub async fn export_page(
    persistence: &Persistence,
    id: &str,
    options: &ExportOptions,
) -> Result<String> {
    let view = export_view(persistence, id, options).await?;
    Ok(render(&view, &options.limits))
}

/// Reads session `id` (inspect semantics: nothing is written), redacted as `options` asks:
/// the view [`render_to`] writes the page of.
pub async fn export_view(
    persistence: &Persistence,
    id: &str,
    options: &ExportOptions,
) -> Result<SessionView> {
    let mut detailed = persistence
        .inspect_detailed(id, None)
        .await
        .map_err(|e| Error::storage(format!("reading session \"{id}\""), e))?;
    let headers: Vec<SessionHeader> = persistence.list(None).await.unwrap_or_default();
    if let Some(redact) = &options.redact {
        // The events are copied only from the first one the redactor changed: a session with
        // nothing to mask keeps its log as read instead of a second list of every event.
        let events = &detailed.inspection.events;
        let mut changed: Option<Vec<Event>> = None;
        for (i, e) in events.iter().enumerate() {
            let r = redact_event(redact, e);
            match &mut changed {
                Some(list) => list.push(r),
                None if !r.ptr_eq(e) => {
                    let mut list = Vec::with_capacity(events.len());
                    list.extend(events.iter().take(i).cloned());
                    list.push(r);
                    changed = Some(list);
                }
                None => {}
            }
        }
        if let Some(list) = changed {
            detailed.inspection.events = Events::from_vec(list);
        }
    }
    Ok(SessionView::build(detailed, &headers))
}

/// `redact(e)`, without keeping a built `data` tree on a compact chunk member: a member keeps
/// the tree it is asked for, so redacting every chunk in place would hold one tree per chunk
/// (most of a large session). A chunk is redacted as a detached copy ([`Event::detached`])
/// instead, and the member is kept when the redactor returned that copy unchanged.
fn redact_event(redact: &Redactor, e: &Event) -> Event {
    if e.event_type() != "assistant/chunk" {
        return redact(e);
    }
    let copy = e.detached();
    let redacted = redact(&copy);
    if redacted.ptr_eq(&copy) {
        e.clone()
    } else {
        redacted
    }
}

/// The length in bytes of a chunk's `chunk.text` (or `chunk.delta`) string, 0 when it has
/// neither; a compact member's is read without building its `data` ([`chunk_delta`]).
fn chunk_text_len(e: &Event) -> u64 {
    let len = match chunk_delta(e) {
        Some((tag, text)) => match tag {
            RowTag::ToolCallChunks => 0,
            RowTag::TextChunks | RowTag::ReasoningChunks => text.len(),
        },
        None => e
            .data()
            .get("chunk")
            .and_then(|c| c.get("text").or_else(|| c.get("delta")))
            .and_then(Value::as_str)
            .map_or(0, str::len),
    };
    len as u64
}

/// One embedded record of [`for_each_record`].
enum Record<'a> {
    /// An event embedded as it is, with its JSON text.
    Event(&'a Event, String),
    /// A record built in its place: a summarised run of chunks, or an omitted event.
    Built(Value),
}

impl Record<'_> {
    fn into_value(self) -> Value {
        match self {
            Record::Event(e, _) => e.to_value(),
            Record::Built(v) => v,
        }
    }
}

/// Hands `each` one embedded record per event, a run of chunks summarised as one, in order;
/// returns whether the records stopped at [`ExportLimits::max_events`]. No record is kept, so
/// a caller that writes them holds one at a time.
fn for_each_record(
    events: &Events,
    limits: &ExportLimits,
    each: &mut dyn FnMut(Record<'_>) -> io::Result<()>,
) -> io::Result<bool> {
    let mut records = 0usize;
    let mut run: Option<(u64, u64, u64, u64)> = None; // first, last, count, text bytes
    let mut emit = |records: &mut usize, record: Record<'_>| {
        *records += 1;
        each(record)
    };
    let summary = |(first, last, count, text): (u64, u64, u64, u64)| {
        Record::Built(obj([
            ("type", Value::from("assistant/chunk")),
            ("seq", num(first)),
            ("lastSeq", num(last)),
            ("summarised", Value::from(true)),
            ("chunks", num(count)),
            ("textBytes", num(text)),
        ]))
    };
    for e in events {
        if records >= limits.max_events {
            return Ok(true);
        }
        if e.event_type() == "assistant/chunk" {
            let text = chunk_text_len(e);
            run = Some(match run {
                Some((first, _, n, t)) => (first, e.seq(), n + 1, t + text),
                None => (e.seq(), e.seq(), 1, text),
            });
            continue;
        }
        if let Some(r) = run.take() {
            emit(&mut records, summary(r))?;
        }
        // The event's JSON text is its value's (`to_value().to_json()`), written without
        // building the value (which would keep a long `sourceEventSeqs` array built on it).
        let json = e.to_json();
        if json.len() > limits.max_event_bytes {
            emit(
                &mut records,
                Record::Built(obj([
                    ("type", Value::from(e.event_type())),
                    ("seq", num(e.seq())),
                    ("time", crate::view::int(e.time())),
                    ("omittedBytes", num(json.len() as u64)),
                ])),
            )?;
        } else {
            emit(&mut records, Record::Event(e, json))?;
        }
    }
    if let Some(r) = run.take() {
        emit(&mut records, summary(r))?;
    }
    Ok(false)
}

/// One embedded record per event, a run of chunks summarised as one, and whether the list
/// was truncated.
fn event_records(events: &Events, limits: &ExportLimits) -> (Vec<Value>, bool) {
    let mut out = Vec::new();
    let truncated = for_each_record(events, limits, &mut |r| {
        out.push(r.into_value());
        Ok(())
    })
    .unwrap_or_default();
    (out, truncated)
}

/// The members of the bundle before its `events` (`mode`, `sessions`, `summary`, `timeline`).
fn bundle_head(view: &SessionView, limits: &ExportLimits) -> Vec<(&'static str, Value)> {
    let timeline = view.timeline_page(2, 0, limits.max_rows);
    let m = &view.meta;
    let row = obj([
        ("id", Value::from(&*m.id)),
        ("createdAt", num(m.created_at)),
        (
            "created",
            Value::from(session_core::clock::rfc3339(m.created_at)),
        ),
        ("cwd", m.cwd.as_deref().map_or(Value::Null, Value::from)),
        ("events", num(view.stored as u64)),
        (
            "parentSession",
            m.parent_session.as_deref().map_or(Value::Null, Value::from),
        ),
        ("seedLength", m.seed_length.map_or(Value::Null, num)),
        ("tornTail", Value::from(view.torn.is_some())),
    ]);
    vec![
        ("mode", Value::from("export")),
        ("sessions", Value::array([row])),
        ("summary", view.summary()),
        (
            "timeline",
            timeline.get("rows").cloned().unwrap_or_default(),
        ),
    ]
}

/// The members of the bundle after its `events` and `eventsTruncated` (`messages`,
/// `requests`).
fn bundle_tail(view: &SessionView, limits: &ExportLimits) -> Vec<(&'static str, Value)> {
    let mut messages: BTreeMap<u64, Value> = BTreeMap::new();
    let mut requests: Vec<(String, Value)> = Vec::new();
    let model_rows = view
        .rows
        .iter()
        .filter(|r| r.kind == crate::view::RowKind::Model)
        .take(limits.max_requests);
    for r in model_rows {
        let (Ok(doc), Ok(header)) = (
            view.messages_at(Some(r.start)),
            view.header_at(Some(r.start)),
        ) else {
            continue;
        };
        let mut seqs = Vec::new();
        for m in doc
            .get("messages")
            .and_then(Value::as_array)
            .into_iter()
            .flat_map(|a| a.iter())
        {
            if let (Some(seq), Some(message)) =
                (m.get("seq").and_then(Value::as_u64), m.get("message"))
            {
                messages.entry(seq).or_insert_with(|| message.clone());
                seqs.push(num(seq));
            }
        }
        requests.push((
            r.start.to_string(),
            obj([("seqs", Value::array(seqs)), ("header", header)]),
        ));
    }
    vec![
        (
            "messages",
            Value::object(messages.iter().map(|(k, v)| (k.to_string(), v.clone()))),
        ),
        ("requests", Value::object(requests)),
    ]
}

/// The bundle the exported page reads instead of the API.
pub fn bundle(view: &SessionView, limits: &ExportLimits) -> Value {
    let (events, truncated) = event_records(&view.events, limits);
    let mut members = bundle_head(view, limits);
    members.push(("events", Value::array(events)));
    members.push(("eventsTruncated", Value::from(truncated)));
    members.extend(bundle_tail(view, limits));
    obj(members)
}

/// Writes the JSON of [`bundle`] (`<` escaped, see [`write_bundle_json`]) with its events
/// written one record at a time as they are made, never held as one list.
fn write_bundle(view: &SessionView, limits: &ExportLimits, out: &mut dyn Write) -> io::Result<()> {
    let member = |i: usize, key: &str, out: &mut dyn Write| -> io::Result<()> {
        if i > 0 {
            out.write_all(b",")?;
        }
        write_escaped(&Value::from(key).to_json(), out)?;
        out.write_all(b":")
    };
    out.write_all(b"{")?;
    let mut i = 0;
    for (key, v) in bundle_head(view, limits) {
        member(i, key, out)?;
        write_bundle_json(&v, 1, out)?;
        i += 1;
    }
    member(i, "events", out)?;
    out.write_all(b"[")?;
    let mut first = true;
    let truncated = for_each_record(&view.events, limits, &mut |r| {
        if !std::mem::take(&mut first) {
            out.write_all(b",")?;
        }
        match r {
            Record::Event(_, json) => write_escaped(&json, out),
            Record::Built(v) => write_bundle_json(&v, 2, out),
        }
    })?;
    out.write_all(b"]")?;
    member(i + 1, "eventsTruncated", out)?;
    write_bundle_json(&Value::from(truncated), 1, out)?;
    i += 2;
    for (key, v) in bundle_tail(view, limits) {
        member(i, key, out)?;
        write_bundle_json(&v, 1, out)?;
        i += 1;
    }
    out.write_all(b"}")
}

/// The page of `view`: CSP, inline style, the bundle, the script.
pub fn render(view: &SessionView, limits: &ExportLimits) -> String {
    let mut page = Vec::new();
    render_to(view, limits, &mut page).expect("writing to a Vec cannot fail");
    String::from_utf8(page).expect("the page is UTF-8")
}

/// Writes the page of `view` (the bytes of [`render`]) to `out` as it is built: the bundle is
/// written member by member, so no copy of the whole page is held.
///
/// # Errors
///
/// The first error of `out`.
pub fn render_to(view: &SessionView, limits: &ExportLimits, out: &mut dyn Write) -> io::Result<()> {
    let script = APP_JS;
    let head = format!(
        "<meta http-equiv=\"Content-Security-Policy\" content=\"{}\">\n<style>{}</style>",
        export_csp(script),
        APP_CSS
    );
    let template = INDEX_HTML.replace("{{HEAD}}", &head);
    let mut parts = template.split("{{BODY_END}}");
    if let Some(first) = parts.next() {
        out.write_all(first.as_bytes())?;
    }
    for part in parts {
        out.write_all(b"<script type=\"application/json\" id=\"bundle\">")?;
        write_bundle(view, limits, out)?;
        out.write_all(b"</script>\n<script>")?;
        out.write_all(script.as_bytes())?;
        out.write_all(b"</script>")?;
        out.write_all(part.as_bytes())?;
    }
    Ok(())
}

/// Writes `text` (JSON) with every `<` as `\u003c` (see [`write_bundle_json`]).
fn write_escaped(text: &str, out: &mut dyn Write) -> io::Result<()> {
    let mut pieces = text.split('<');
    if let Some(first) = pieces.next() {
        out.write_all(first.as_bytes())?;
    }
    for piece in pieces {
        out.write_all(b"\\u003c")?;
        out.write_all(piece.as_bytes())?;
    }
    Ok(())
}

/// Writes `v.to_json()` with every `<` as `\u003c` (`<` never appears outside a JSON string,
/// and `\u003c` means `<` inside one, so the bundle cannot close its script element). The
/// bundle and its members are written a member at a time; deeper values are serialized whole
/// (each one is bounded by [`ExportLimits`]).
fn write_bundle_json(v: &Value, depth: usize, out: &mut dyn Write) -> io::Result<()> {
    match v {
        Value::Object(o) if depth < 2 => {
            out.write_all(b"{")?;
            for (i, (k, member)) in o.iter().enumerate() {
                if i > 0 {
                    out.write_all(b",")?;
                }
                write_escaped(&Value::from(k).to_json(), out)?;
                out.write_all(b":")?;
                write_bundle_json(member, depth + 1, out)?;
            }
            out.write_all(b"}")
        }
        Value::Array(items) if depth < 2 => {
            out.write_all(b"[")?;
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.write_all(b",")?;
                }
                write_bundle_json(item, depth + 1, out)?;
            }
            out.write_all(b"]")
        }
        _ => write_escaped(&v.to_json(), out),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(seq: u64, delta: &str) -> Event {
        let data = obj([(
            "chunk",
            obj([
                ("type", Value::from("text-delta")),
                ("delta", Value::from(delta)),
            ]),
        )]);
        Event::appended("assistant/chunk", seq, 0, data, None, None)
    }

    #[test]
    fn chunks_are_redacted_as_copies_and_summarised_with_their_masked_length() {
        let redact = mask_secrets();
        let plain = chunk(0, "hello ");
        let secret = chunk(1, "sk-abcdefghijklmnopqrstuvwxyz");
        let kept = redact_event(&redact, &plain);
        assert!(kept.ptr_eq(&plain), "an unchanged chunk is kept as it was");
        let masked = redact_event(&redact, &secret);
        let delta = |e: &Event| {
            e.data()
                .get("chunk")
                .and_then(|c| c.get("delta"))
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        let masked_delta = delta(&masked).unwrap();
        assert!(!masked_delta.contains("abcdefghijklmnop"), "{masked_delta}");
        assert_eq!(masked.to_json(), redact(&secret).to_json());
        let events = Events::from_vec(vec![kept, masked]);
        let (records, truncated) = event_records(&events, &ExportLimits::default());
        assert!(!truncated);
        assert_eq!(records.len(), 1);
        assert_eq!(
            records[0].get("textBytes").and_then(Value::as_u64),
            Some(("hello ".len() + masked_delta.len()) as u64)
        );
    }

    #[test]
    fn a_run_of_compact_members_counts_the_text_of_its_text_and_reasoning_deltas() {
        let mut decoder = session_core::chunk_rows::StorageDecoder::new();
        for line in [
            &br#"{"type":"text-chunks","seq0":0,"time0":10,"data":{"turn":1,"step":1,"index":0,"dt":[1],"texts":["h\u00e9","sk-abcdefghijklmnopqrstuvwxyz"]}}"#[..],
            br#"{"type":"tool-call-chunks","seq0":2,"time0":20,"data":{"turn":1,"step":1,"index":1,"dt":[1],"id":"c","args":["{\"a","\":1}"]}}"#,
            br#"{"type":"reasoning-chunks","seq0":4,"time0":30,"data":{"turn":1,"step":1,"index":2,"dt":[],"texts":["why"]}}"#,
        ] {
            decoder.decode_line(line);
        }
        let members = decoder.take_events();
        assert_eq!(members.len(), 5);
        let redact = mask_secrets();
        let redacted: Vec<Event> = members.iter().map(|e| redact_event(&redact, e)).collect();
        for (i, (r, e)) in redacted.iter().zip(&members).enumerate() {
            // Only the secret is a new event; its copy was redacted as the parsed event is.
            assert_eq!(r.ptr_eq(e), i != 1, "seq {i}");
            let parsed = Event::parse(&e.to_json()).unwrap();
            assert_eq!(r.to_json(), redact(&parsed).to_json(), "seq {i}");
        }
        let masked_len = match redacted[1].data().get("chunk").and_then(|c| c.get("text")) {
            Some(Value::String(s)) => s.len(),
            other => panic!("{other:?}"),
        };
        let (records, _) = event_records(&Events::from_vec(redacted), &ExportLimits::default());
        assert_eq!(records.len(), 1);
        assert_eq!(
            records[0].get("textBytes").and_then(Value::as_u64),
            Some(("h\u{e9}".len() + masked_len + "why".len()) as u64)
        );
        assert_eq!(records[0].get("chunks").and_then(Value::as_u64), Some(5));
    }

    #[test]
    fn the_bundle_is_written_as_its_json_with_lt_escaped() {
        let v = obj([
            (
                "a",
                Value::array([Value::from("<x>"), obj([("k<", num(1))])]),
            ),
            ("b", obj([("c", Value::array([Value::from("</script>")]))])),
            ("d", Value::object(Vec::<(String, Value)>::new())),
            ("e", Value::array(Vec::<Value>::new())),
        ]);
        let mut out = Vec::new();
        write_bundle_json(&v, 0, &mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            v.to_json().replace('<', "\\u003c")
        );
    }
}
