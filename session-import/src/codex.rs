//! Codex CLI rollouts (`rollout-*.jsonl`, `.jsonl.zst`): `{timestamp, type, payload}` lines.
//! The mapping is documented in `docs/import.md`.

use serde_json::Value as J;
use session_core::json::Value;
use session_core::vocab::{Bare, ContentBlock, Message, MessageSource, PluginSource, Role, Usage};

use crate::build::{Builder, Route, ViewItem, derived_id, parse_time, reasoning_block, to_value};
use crate::core::{Imported, Source, SourceLine};
use crate::error::ImportError;

fn s<'a>(v: &'a J, key: &str) -> Option<&'a str> {
    v.get(key).and_then(J::as_str)
}

/// The record kind named in reports: `type`, or `type:payload.type`.
pub fn record_kind(record: &J) -> String {
    let ty = s(record, "type").unwrap_or("(no type)");
    match record.get("payload").and_then(|p| s(p, "type")) {
        Some(sub) if ty == "response_item" || ty == "event_msg" => format!("{ty}:{sub}"),
        _ => ty.to_owned(),
    }
}

/// Whether a user-role text is context Codex injects (AGENTS.md, environment, instructions).
fn injected(text: &str) -> bool {
    let t = text.trim_start();
    t.starts_with("<environment_context>")
        || t.starts_with("<user_instructions>")
        || t.starts_with("# AGENTS.md")
        || t.starts_with("<permissions")
        || t.starts_with("<collaboration_mode>")
}

/// Content blocks of a Responses `message` item.
fn message_blocks(content: Option<&J>) -> Vec<ContentBlock> {
    let mut out = Vec::new();
    match content {
        Some(J::String(t)) => out.push(ContentBlock::text(t.clone())),
        Some(J::Array(parts)) => {
            for part in parts {
                match s(part, "type") {
                    Some("input_text" | "output_text" | "text") => {
                        out.push(ContentBlock::text(s(part, "text").unwrap_or("")));
                    }
                    Some("input_image") => {
                        let url = s(part, "image_url").unwrap_or("");
                        out.push(crate::core::image_block(url));
                    }
                    _ => out.push(ContentBlock::text(part.to_string())),
                }
            }
        }
        _ => {}
    }
    out
}

/// The text of a tool output (`output` string, parts, or an object as JSON text).
fn output_blocks(output: Option<&J>) -> Vec<ContentBlock> {
    match output {
        Some(J::String(t)) => vec![ContentBlock::text(t.clone())],
        Some(J::Array(parts)) => message_blocks(Some(&J::Array(parts.clone()))),
        Some(J::Null) | None => vec![],
        Some(other) => vec![ContentBlock::text(other.to_string())],
    }
}

fn reasoning_text(item: &J) -> String {
    let mut parts = Vec::new();
    for key in ["summary", "content"] {
        if let Some(J::Array(list)) = item.get(key) {
            for p in list {
                if let Some(t) = s(p, "text") {
                    parts.push(t.to_owned());
                }
            }
        }
    }
    parts.join("\n\n")
}

/// Codex token usage (`last_token_usage`).
pub fn usage_of(u: &J) -> Usage {
    let n = |k: &str| u.get(k).and_then(J::as_u64);
    Usage {
        input_tokens: n("input_tokens").unwrap_or(0),
        output_tokens: n("output_tokens").unwrap_or(0),
        cache_read_tokens: n("cached_input_tokens"),
        reasoning_tokens: n("reasoning_output_tokens"),
        ..Usage::default()
    }
}

/// The `{id, role, content}` replacement of one Responses item, for a compaction view.
fn view_item(item: &J, id: String) -> Option<ViewItem> {
    if s(item, "type") != Some("message") {
        return None;
    }
    let blocks = message_blocks(item.get("content"));
    match s(item, "role") {
        Some("assistant") => Some(ViewItem::Assistant(id, blocks)),
        Some("developer" | "system") => Some(ViewItem::User(Message::new(
            id,
            Role::User,
            blocks,
            MessageSource::Plugin(PluginSource {
                plugin: "codex".into(),
                form: Some("instructions".into()),
                ..PluginSource::default()
            }),
        ))),
        _ => Some(ViewItem::User(Message::new(
            id,
            Role::User,
            blocks,
            MessageSource::User(Bare::default()),
        ))),
    }
}

struct State {
    b: Builder,
    thread: String,
    /// The `source` and `forked_from_id` of the thread's `session_meta`.
    lineage: String,
    last_total: Option<J>,
    event_messages: bool,
}

/// Imports one rollout file: one session per thread it holds (usually one).
pub(crate) fn import(
    source: &Source,
    lines: Vec<SourceLine>,
    id: Option<&str>,
) -> Result<Vec<Imported>, ImportError> {
    // Files without any response_item message (event stream only) take their messages from
    // `event_msg` user_message / agent_message instead.
    let event_messages = !lines.iter().any(|l| {
        l.record.as_ref().is_some_and(|r| {
            s(r, "type") == Some("response_item")
                && r.get("payload").and_then(|p| s(p, "type")) == Some("message")
        })
    });
    let mut out: Vec<Imported> = Vec::new();
    let mut state: Option<State> = None;
    let mut cut = Vec::new();
    let mut count = 0u64;
    for line in lines {
        count += 1;
        let Some(record) = line.record else {
            if let Some(c) = line.cut {
                match &mut state {
                    Some(st) => st.b.report.cut.push(c),
                    None => cut.push(c),
                }
            }
            continue;
        };
        let kind = record_kind(&record);
        let time = s(&record, "timestamp").and_then(parse_time);
        let payload = record.get("payload").cloned().unwrap_or(J::Null);
        if s(&record, "type") == Some("session_meta") {
            let thread = s(&payload, "id").unwrap_or("").to_owned();
            let lineage = lineage_of(&payload);
            let same = state.as_ref().is_some_and(|st| {
                thread.is_empty() || (st.thread == thread && st.lineage == lineage)
            });
            if !same {
                if let Some(st) = state.take() {
                    out.push(Imported::finish(st.b, source));
                }
                let taken: Vec<&str> = out.iter().map(|o| o.session.id().as_ref()).collect();
                let st = start(source, &payload, &thread, time, id, &taken, event_messages)?;
                state = Some(st);
                let st = state.as_mut().map(|s| &mut s.b);
                if let Some(b) = st {
                    b.report.cut.append(&mut cut);
                    b.report.lines = count;
                    b.at_record(line.number, &kind);
                    // Its fields are in the header; the record itself is kept too, so every
                    // session has an event (a session without one is never stored).
                    b.keep(line.number, line.offset, &kind, &line.text);
                }
                continue;
            }
        }
        if state.is_none() {
            let thread = derived_id(&[source.digest.as_str()]);
            state = Some(start(
                source,
                &J::Null,
                &thread,
                time,
                id,
                &[],
                event_messages,
            )?);
            if let Some(st) = state.as_mut() {
                st.b.report.cut.append(&mut cut);
            }
        }
        let Some(st) = state.as_mut() else { continue };
        st.b.report.lines += 1;
        st.b.at_record(line.number, &kind);
        st.b.set_time(time);
        if map(st, &kind, &payload, line.number) {
            st.b.report.mapped(&kind);
        } else {
            st.b.keep(line.number, line.offset, &kind, &line.text);
        }
    }
    match state {
        Some(st) => out.push(Imported::finish(st.b, source)),
        None => {
            if out.is_empty() {
                return Err(crate::core::empty(source, cut));
            }
        }
    }
    Ok(out)
}

fn start(
    source: &Source,
    meta: &J,
    thread: &str,
    time: Option<i64>,
    id: Option<&str>,
    taken: &[&str],
    event_messages: bool,
) -> Result<State, ImportError> {
    let base = match id {
        Some(id) => id.to_owned(),
        None => format!("codex-{thread}"),
    };
    // A later session of the same file whose id is taken (`--id`, or a repeated thread id
    // with another lineage) gets `-<n>`, n its position in the file.
    let session_id = if taken.contains(&base.as_str()) {
        format!("{base}-{}", taken.len())
    } else {
        base
    };
    let created = s(meta, "timestamp")
        .and_then(parse_time)
        .or(time)
        .unwrap_or(0);
    let parent_thread = meta
        .get("source")
        .and_then(|v| v.get("subagent"))
        .and_then(|v| v.get("thread_spawn"))
        .and_then(|v| s(v, "parent_thread_id"));
    let parent = match (parent_thread, s(meta, "forked_from_id")) {
        (Some(p), _) => Some((format!("codex-{p}"), true)),
        (None, Some(f)) => Some((format!("codex-{f}"), false)),
        _ => None,
    };
    let imported_from = Value::object([
        ("format", Value::from("codex")),
        ("file", Value::from(source.name.as_str())),
        ("threadId", Value::from(thread)),
        (
            "cliVersion",
            Value::from(s(meta, "cli_version").unwrap_or("")),
        ),
        (
            "originator",
            Value::from(s(meta, "originator").unwrap_or("")),
        ),
    ]);
    let header = Builder::header(
        &session_id,
        created,
        s(meta, "cwd"),
        parent.as_ref().map(|(p, sub)| (p.as_str(), *sub)),
        imported_from,
    );
    let mut b = Builder::new(&session_id, header, created, "codex")
        .map_err(|e| crate::core::relocate(e, source))?;
    b.report.files.push(source.path.clone());
    let system = meta
        .get("base_instructions")
        .and_then(|v| s(v, "text"))
        .or_else(|| s(meta, "instructions"))
        .map(str::to_owned);
    b.set_route(Route {
        provider: s(meta, "model_provider")
            .filter(|p| !p.is_empty())
            .unwrap_or("openai")
            .to_owned(),
        model: "unknown".into(),
        system,
        ..Route::default()
    });
    Ok(State {
        b,
        thread: thread.to_owned(),
        lineage: lineage_of(meta),
        last_total: None,
        event_messages,
    })
}

/// What tells two threads with one id apart: the `source` and `forked_from_id` of their
/// `session_meta`.
fn lineage_of(meta: &J) -> String {
    format!(
        "{}|{}",
        meta.get("source").map(J::to_string).unwrap_or_default(),
        s(meta, "forked_from_id").unwrap_or("")
    )
}

/// Maps one record; `false` when it is not mapped (the caller keeps it).
fn map(st: &mut State, kind: &str, p: &J, line: u64) -> bool {
    let msg_id = |n: u64| format!("{}:{n}", st.thread);
    match kind {
        "turn_context" => {
            let mut r: Route = st.b.route().clone();
            if let Some(m) = s(p, "model").filter(|m| !m.is_empty()) {
                m.clone_into(&mut r.model);
            }
            r.effort = s(p, "effort").map(str::to_owned).or(r.effort);
            st.b.set_route(r);
            true
        }
        "event_msg:task_started" => {
            let mut r = st.b.route().clone();
            if let Some(w) = p.get("model_context_window").and_then(J::as_u64) {
                r.context_window = Some(w);
                st.b.set_route(r);
            }
            st.b.begin_turn();
            true
        }
        "event_msg:task_complete" => {
            if !st.b.turn_open() {
                return false;
            }
            st.b.end_turn(session_core::vocab::TurnEndReason::Completed(
                Bare::default(),
            ));
            true
        }
        "event_msg:turn_aborted" => {
            if !st.b.turn_open() {
                return false;
            }
            st.b.abort_turn();
            true
        }
        "event_msg:thread_rolled_back" => {
            let n = p.get("num_turns").and_then(J::as_u64).unwrap_or(0);
            st.b.rollback(n)
        }
        "event_msg:token_count" => {
            let Some(info) = p.get("info").filter(|i| !i.is_null()) else {
                return false;
            };
            let total = info.get("total_token_usage").cloned();
            if total.is_some() && total == st.last_total {
                return false;
            }
            st.last_total = total;
            let Some(last) = info.get("last_token_usage") else {
                return false;
            };
            st.b.step_usage(&usage_of(last));
            true
        }
        "event_msg:user_message" if st.event_messages => {
            let text = s(p, "message").unwrap_or("");
            let m = Message::new(
                st.b.message_id(&msg_id(line)),
                Role::User,
                vec![ContentBlock::text(text)],
                MessageSource::User(Bare::default()),
            );
            let starts = !st.b.turn_open();
            st.b.user_message(m, starts);
            true
        }
        "event_msg:agent_message" if st.event_messages => {
            st.b.assistant_block(
                &msg_id(line),
                ContentBlock::text(s(p, "message").unwrap_or("")),
            );
            true
        }
        "response_item:message" => {
            let blocks = message_blocks(p.get("content"));
            match s(p, "role") {
                Some("assistant") => {
                    for b in blocks {
                        st.b.assistant_block(&msg_id(line), b);
                    }
                }
                role => {
                    let plugin = role != Some("user")
                        || blocks
                            .iter()
                            .any(|b| matches!(b, ContentBlock::Text(t) if injected(&t.text)));
                    let source = if plugin {
                        MessageSource::Plugin(PluginSource {
                            plugin: "codex".into(),
                            form: Some("instructions".into()),
                            ..PluginSource::default()
                        })
                    } else {
                        MessageSource::User(Bare::default())
                    };
                    let m =
                        Message::new(st.b.message_id(&msg_id(line)), Role::User, blocks, source);
                    let starts = !plugin && !st.b.turn_open();
                    st.b.user_message(m, starts);
                }
            }
            true
        }
        "response_item:reasoning" => {
            let mut fields = Vec::new();
            if let Some(e) = p.get("encrypted_content").filter(|e| !e.is_null()) {
                fields.push(("encryptedContent", to_value(e)));
            }
            st.b.assistant_block(&msg_id(line), reasoning_block(reasoning_text(p), fields));
            true
        }
        "response_item:function_call" | "response_item:custom_tool_call" => {
            let Some(call_id) = s(p, "call_id").filter(|c| !c.is_empty()) else {
                return false;
            };
            let name = s(p, "name").unwrap_or("tool");
            let args = match p.get("arguments").or_else(|| p.get("input")) {
                Some(J::String(t)) => t.clone(),
                Some(other) => other.to_string(),
                None => String::new(),
            };
            let block_args = serde_json::from_str::<J>(&args)
                .ok()
                .filter(J::is_object)
                .map_or_else(|| Value::from(args.as_str()), |v| to_value(&v));
            st.b.tool_call(&msg_id(line), call_id, name, args, block_args);
            true
        }
        "response_item:function_call_output" | "response_item:custom_tool_call_output" => {
            let Some(call_id) = s(p, "call_id") else {
                return false;
            };
            st.b.tool_result(call_id, output_blocks(p.get("output")), None, None)
        }
        "compacted" => {
            let mut items = Vec::new();
            if let Some(J::Array(history)) = p.get("replacement_history") {
                for (i, item) in history.iter().enumerate() {
                    let id = st.b.message_id(&format!("{}:{line}:{i}", st.thread));
                    if let Some(v) = view_item(item, id) {
                        items.push(v);
                    }
                }
            } else if let Some(text) = s(p, "message").filter(|t| !t.is_empty()) {
                items.push(ViewItem::User(Message::new(
                    st.b.message_id(&msg_id(line)),
                    Role::User,
                    vec![ContentBlock::text(text)],
                    MessageSource::User(Bare::default()),
                )));
            }
            st.b.compaction(items, &msg_id(line));
            true
        }
        _ => false,
    }
}
