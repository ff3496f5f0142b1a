//! `sessionctl view SESSION -o FILE.html`: one self-contained page for sharing. The same
//! script as the served pages reads an embedded bundle instead of the API; a
//! Content-Security-Policy with `default-src 'none'` forbids every network request.

use std::collections::BTreeMap;
use std::io::{self, Write};

use base64::Engine as _;
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
/// (most of a large session). A chunk is redacted as a detached copy instead, and the member is
/// kept when the redactor returned that copy unchanged.
fn redact_event(redact: &Redactor, e: &Event) -> Event {
    if e.event_type() != "assistant/chunk" {
        return redact(e);
    }
    let copy = detached(e);
    let redacted = redact(&copy);
    if redacted.ptr_eq(&copy) {
        e.clone()
    } else {
        redacted
    }
}

/// A copy of a chunk event that shares nothing with it (parsed from its JSON line, which a
/// compact member writes without building its `data`), dropped after use.
fn detached(e: &Event) -> Event {
    Event::parse(&e.to_json()).unwrap_or_else(|_| e.clone())
}

/// One embedded record per event, a run of chunks summarised as one.
fn event_records(events: &Events, limits: &ExportLimits) -> (Vec<Value>, bool) {
    let mut out = Vec::new();
    let mut run: Option<(u64, u64, u64, u64)> = None; // first, last, count, text bytes
    let flush = |out: &mut Vec<Value>, run: &mut Option<(u64, u64, u64, u64)>| {
        if let Some((first, last, count, text)) = run.take() {
            out.push(obj([
                ("type", Value::from("assistant/chunk")),
                ("seq", num(first)),
                ("lastSeq", num(last)),
                ("summarised", Value::from(true)),
                ("chunks", num(count)),
                ("textBytes", num(text)),
            ]));
        }
    };
    for e in events.iter() {
        if out.len() >= limits.max_events {
            return (out, true);
        }
        if e.event_type() == "assistant/chunk" {
            let text = detached(e)
                .data()
                .get("chunk")
                .and_then(|c| c.get("text").or_else(|| c.get("delta")))
                .and_then(Value::as_str)
                .map_or(0, str::len) as u64;
            run = Some(match run {
                Some((first, _, n, t)) => (first, e.seq(), n + 1, t + text),
                None => (e.seq(), e.seq(), 1, text),
            });
            continue;
        }
        flush(&mut out, &mut run);
        let v = e.to_value();
        let len = v.to_json().len();
        if len > limits.max_event_bytes {
            out.push(obj([
                ("type", Value::from(e.event_type())),
                ("seq", num(e.seq())),
                ("time", crate::view::int(e.time())),
                ("omittedBytes", num(len as u64)),
            ]));
        } else {
            out.push(v);
        }
    }
    flush(&mut out, &mut run);
    (out, false)
}

/// The bundle the exported page reads instead of the API.
pub fn bundle(view: &SessionView, limits: &ExportLimits) -> Value {
    let (events, truncated) = event_records(&view.events, limits);
    let timeline = view.timeline_page(2, 0, limits.max_rows);
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
    obj([
        ("mode", Value::from("export")),
        ("sessions", Value::array([row])),
        ("summary", view.summary()),
        (
            "timeline",
            timeline.get("rows").cloned().unwrap_or_default(),
        ),
        ("events", Value::array(events)),
        ("eventsTruncated", Value::from(truncated)),
        (
            "messages",
            Value::object(messages.iter().map(|(k, v)| (k.to_string(), v.clone()))),
        ),
        ("requests", Value::object(requests)),
    ])
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
    let bundle = bundle(view, limits);
    let mut parts = template.split("{{BODY_END}}");
    if let Some(first) = parts.next() {
        out.write_all(first.as_bytes())?;
    }
    for part in parts {
        out.write_all(b"<script type=\"application/json\" id=\"bundle\">")?;
        write_bundle_json(&bundle, 0, out)?;
        out.write_all(b"</script>\n<script>")?;
        out.write_all(script.as_bytes())?;
        out.write_all(b"</script>")?;
        out.write_all(part.as_bytes())?;
    }
    Ok(())
}

/// Writes `v.to_json()` with every `<` as `\u003c` (`<` never appears outside a JSON string,
/// and `\u003c` means `<` inside one, so the bundle cannot close its script element). The
/// bundle and its members are written a member at a time; deeper values are serialized whole
/// (each one is bounded by [`ExportLimits`]).
fn write_bundle_json(v: &Value, depth: usize, out: &mut dyn Write) -> io::Result<()> {
    let escaped = |text: &str, out: &mut dyn Write| -> io::Result<()> {
        let mut pieces = text.split('<');
        if let Some(first) = pieces.next() {
            out.write_all(first.as_bytes())?;
        }
        for piece in pieces {
            out.write_all(b"\\u003c")?;
            out.write_all(piece.as_bytes())?;
        }
        Ok(())
    };
    match v {
        Value::Object(o) if depth < 2 => {
            out.write_all(b"{")?;
            for (i, (k, member)) in o.iter().enumerate() {
                if i > 0 {
                    out.write_all(b",")?;
                }
                escaped(&Value::from(k).to_json(), out)?;
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
        _ => escaped(&v.to_json(), out),
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
