//! Claude Code session transcripts (`<session>.jsonl`, sidechain `agent-*.jsonl`): one record
//! per line, conversation records chained by `parentUuid`. The mapping is documented in
//! `docs/import.md`.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use serde_json::Value as J;
use session_core::json::Value;
use session_core::vocab::{Bare, ContentBlock, Message, MessageSource, PluginSource, Role, Usage};

use crate::build::{Builder, Route, ViewItem, derived_id, parse_time, reasoning_block, to_value};
use crate::core::{Imported, Source, SourceLine, base64_len, image, read_lines};
use crate::error::ImportError;

fn s<'a>(v: &'a J, key: &str) -> Option<&'a str> {
    v.get(key).and_then(J::as_str)
}

/// The record kind named in reports: `type`, or `type:subtype` for `system`.
pub fn record_kind(record: &J) -> String {
    let ty = s(record, "type").unwrap_or("(no type)");
    match s(record, "subtype") {
        Some(sub) if ty == "system" => format!("system:{sub}"),
        _ => ty.to_owned(),
    }
}

/// The texts Claude Code writes when the user interrupts a request.
pub const INTERRUPT_TEXTS: [&str; 2] = [
    "[Request interrupted by user]",
    "[Request interrupted by user for tool use]",
];

/// Whether a record takes part in the conversation (user and assistant records).
fn conversational(r: &J) -> bool {
    matches!(s(r, "type"), Some("user" | "assistant"))
}

/// The records on the branch that ends at the last conversation record: walks `parentUuid`
/// (or `logicalParentUuid` across a compaction) back from it, stopping at a cycle. A link to a
/// uuid the file does not hold (a compaction whose pre-compaction record was not written)
/// continues at the record with a uuid just before, in file order. A user record of tool
/// results whose parent is on the branch is on it too (parallel calls answer beside the chain).
pub fn branch(records: &[&J]) -> HashSet<String> {
    let mut parent: HashMap<&str, (Option<&str>, Option<&str>)> = HashMap::new();
    let mut previous: Option<&str> = None;
    for r in records {
        if let Some(u) = s(r, "uuid") {
            let p = s(r, "parentUuid").or_else(|| s(r, "logicalParentUuid"));
            parent.insert(u, (p, previous));
            previous = Some(u);
        }
    }
    let mut on = HashSet::new();
    let last = records
        .iter()
        .rev()
        .find(|r| conversational(r))
        .and_then(|r| s(r, "uuid"));
    let mut at = last;
    while let Some(u) = at {
        if !on.insert(u.to_owned()) {
            break;
        }
        at = match parent.get(u) {
            Some((Some(p), _)) if parent.contains_key(p) => Some(p),
            Some((Some(_), before)) => *before,
            _ => None,
        };
    }
    // Parallel tool calls: each result record hangs off its call's record, beside the chain.
    for r in records {
        if let (Some(u), Some(p)) = (s(r, "uuid"), s(r, "parentUuid"))
            && on.contains(p)
            && only_tool_results(r)
        {
            on.insert(u.to_owned());
        }
    }
    on
}

/// Whether a record is a user record holding only `tool_result` blocks.
fn only_tool_results(r: &J) -> bool {
    s(r, "type") == Some("user")
        && r.get("message")
            .and_then(|m| m.get("content"))
            .and_then(J::as_array)
            .is_some_and(|b| !b.is_empty() && b.iter().all(|b| s(b, "type") == Some("tool_result")))
}

fn blocks_of(content: Option<&J>) -> Vec<ContentBlock> {
    match content {
        Some(J::String(t)) => vec![ContentBlock::text(t.clone())],
        Some(J::Array(list)) => list.iter().filter_map(block_of).collect(),
        _ => Vec::new(),
    }
}

fn block_of(b: &J) -> Option<ContentBlock> {
    Some(match s(b, "type") {
        Some("text") => ContentBlock::text(s(b, "text").unwrap_or("")),
        Some("image") => {
            let src = b.get("source").unwrap_or(&J::Null);
            let data = s(src, "data").unwrap_or("");
            image(
                s(src, "media_type").unwrap_or(""),
                base64_len(data),
                &format!("{}{}", data.len(), &data[..data.len().min(256)]),
            )
        }
        Some("tool_result" | "tool_use") => return None,
        _ => ContentBlock::text(b.to_string()),
    })
}

/// Claude Code usage.
pub fn usage_of(u: &J) -> Usage {
    let n = |k: &str| u.get(k).and_then(J::as_u64);
    Usage {
        input_tokens: n("input_tokens").unwrap_or(0),
        output_tokens: n("output_tokens").unwrap_or(0),
        cache_read_tokens: n("cache_read_input_tokens"),
        cache_write_tokens: n("cache_creation_input_tokens"),
        ..Usage::default()
    }
}

/// Imports one transcript: its session, a child session per group of inline sidechain
/// records, and a child session per subagent transcript found beside it.
pub(crate) fn import(
    source: &Source,
    lines: Vec<SourceLine>,
    id: Option<&str>,
) -> Result<Vec<Imported>, ImportError> {
    let mut cut = Vec::new();
    let mut records: Vec<(u64, u64, String, J)> = Vec::new();
    for l in lines {
        match l.record {
            Some(r) => records.push((l.number, l.offset, l.text, r)),
            None => cut.extend(l.cut),
        }
    }
    if records.is_empty() {
        return Err(crate::core::empty(source, cut));
    }
    let session_id = records
        .iter()
        .find_map(|r| s(&r.3, "sessionId"))
        .map(str::to_owned);
    let convo: Vec<&J> = records
        .iter()
        .map(|r| &r.3)
        .filter(|r| conversational(r))
        .collect();
    let sidechain_file = !convo.is_empty()
        && convo
            .iter()
            .all(|r| r.get("isSidechain").and_then(J::as_bool) == Some(true));
    let base = session_id
        .clone()
        .unwrap_or_else(|| derived_id(&[source.digest.as_str()]));
    let main_id = match id {
        Some(id) => id.to_owned(),
        None => format!("claude-code-{base}"),
    };
    let mut out = Vec::new();
    if sidechain_file {
        let agent = records
            .iter()
            .find_map(|r| s(&r.3, "agentId"))
            .map_or_else(|| derived_id(&[source.digest.as_str()]), str::to_owned);
        let parent = match id {
            Some(_) => None,
            None => Some(format!("claude-code-{base}")),
        };
        let child_id = match id {
            Some(id) => id.to_owned(),
            None => format!("claude-code-{base}-agent-{agent}"),
        };
        let all: Vec<usize> = (0..records.len()).collect();
        out.push(build(
            source,
            &records,
            &all,
            &child_id,
            parent.as_deref(),
            cut,
        )?);
        return Ok(out);
    }
    // The main conversation, then inline sidechains grouped by agent.
    let mut main = Vec::new();
    let mut side: Vec<(String, Vec<usize>)> = Vec::new();
    for (i, r) in records.iter().enumerate() {
        if r.3.get("isSidechain").and_then(J::as_bool) == Some(true) {
            let agent = s(&r.3, "agentId").unwrap_or("sidechain").to_owned();
            match side.iter_mut().find(|(a, _)| *a == agent) {
                Some((_, v)) => v.push(i),
                None => side.push((agent, vec![i])),
            }
        } else {
            main.push(i);
        }
    }
    out.push(build(source, &records, &main, &main_id, None, cut)?);
    for (agent, idx) in side {
        let child = format!("{main_id}-agent-{agent}");
        out.push(build(
            source,
            &records,
            &idx,
            &child,
            Some(&main_id),
            Vec::new(),
        )?);
    }
    // Subagent transcripts beside the file.
    if let Some(sid) = session_id.as_ref().filter(|_| source.on_disk) {
        for path in subagent_files(&source.path, sid) {
            let Ok((sub_source, sub_lines)) = read_lines(&path) else {
                continue;
            };
            let agent = path
                .file_stem()
                .and_then(|s| s.to_str())
                .and_then(|s| s.strip_prefix("agent-"))
                .unwrap_or("agent")
                .to_owned();
            let child = format!("{main_id}-agent-{agent}");
            if out
                .iter()
                .any(|o: &Imported| o.session.id().as_ref() == child)
            {
                continue;
            }
            let mut sub_records = Vec::new();
            let mut sub_cut = Vec::new();
            for l in sub_lines {
                match l.record {
                    Some(r) => sub_records.push((l.number, l.offset, l.text, r)),
                    None => sub_cut.extend(l.cut),
                }
            }
            if sub_records.is_empty() {
                continue;
            }
            let all: Vec<usize> = (0..sub_records.len()).collect();
            out.push(build(
                &sub_source,
                &sub_records,
                &all,
                &child,
                Some(&main_id),
                sub_cut,
            )?);
        }
    }
    Ok(out)
}

/// Subagent transcripts of session `sid` beside `path`: `<stem>/subagents/agent-*.jsonl`
/// (2.1.x) and sibling `agent-*.jsonl` files whose records name `sid` (2.0.x), in name order.
pub fn subagent_files(path: &Path, sid: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let is_agent = |p: &Path| {
        p.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
            n.starts_with("agent-")
                && Path::new(n)
                    .extension()
                    .is_some_and(|e| e.eq_ignore_ascii_case("jsonl"))
        })
    };
    if let (Some(dir), Some(stem)) = (path.parent(), path.file_stem()) {
        if let Ok(entries) = std::fs::read_dir(dir.join(stem).join("subagents")) {
            found.extend(entries.flatten().map(|e| e.path()).filter(|p| is_agent(p)));
        }
        if !is_agent(path)
            && let Ok(entries) = std::fs::read_dir(dir)
        {
            for p in entries.flatten().map(|e| e.path()).filter(|p| is_agent(p)) {
                if first_session_id(&p).as_deref() == Some(sid) {
                    found.push(p);
                }
            }
        }
    }
    found.sort();
    found
}

fn first_session_id(path: &Path) -> Option<String> {
    use std::io::{BufRead, Read};
    let f = std::fs::File::open(path).ok()?;
    let mut first = String::new();
    std::io::BufReader::new(f.take(1 << 20))
        .read_line(&mut first)
        .ok()?;
    let v: J = serde_json::from_str(first.trim()).ok()?;
    s(&v, "sessionId").map(str::to_owned)
}

struct State {
    b: Builder,
    awaiting_summary: bool,
    /// The usage of the request whose first record is being mapped.
    final_usage: Option<Usage>,
}

fn build(
    source: &Source,
    records: &[(u64, u64, String, J)],
    idx: &[usize],
    id: &str,
    parent: Option<&str>,
    cut: Vec<crate::report::CutLine>,
) -> Result<Imported, ImportError> {
    let group: Vec<&J> = idx.iter().map(|&i| &records[i].3).collect();
    let on = branch(&group);
    let first_time = group
        .iter()
        .find_map(|r| s(r, "timestamp").and_then(parse_time))
        .unwrap_or(0);
    let cwd = group.iter().find_map(|r| s(r, "cwd"));
    let version = group.iter().find_map(|r| s(r, "version")).unwrap_or("");
    let imported_from = Value::object([
        ("format", Value::from("claude-code")),
        ("file", Value::from(source.name.as_str())),
        (
            "sessionId",
            Value::from(group.iter().find_map(|r| s(r, "sessionId")).unwrap_or("")),
        ),
        ("version", Value::from(version)),
    ]);
    let header = Builder::header(
        id,
        first_time,
        cwd,
        parent.map(|p| (p, true)),
        imported_from,
    );
    let b = Builder::new(id, header, first_time, "claude-code")
        .map_err(|e| crate::core::relocate(e, source))?;
    let mut st = State {
        b,
        awaiting_summary: false,
        final_usage: None,
    };
    st.b.report.files.push(source.path.clone());
    st.b.report.cut = cut;
    // The first model answering on the branch is the initial request header's.
    let first_model = group
        .iter()
        .filter(|r| {
            s(r, "type") == Some("assistant") && s(r, "uuid").is_none_or(|u| on.contains(u))
        })
        .find_map(|r| {
            r.get("message")
                .and_then(|m| s(m, "model"))
                .filter(|m| !m.is_empty() && !m.starts_with('<'))
        })
        .unwrap_or("unknown");
    st.b.set_route(Route {
        provider: "anthropic".into(),
        model: first_model.to_owned(),
        ..Route::default()
    });
    // Usage counts once per request id: the last record of a request carries its totals.
    let mut usage: HashMap<&str, &J> = HashMap::new();
    for r in &group {
        if let (Some(req), Some(u)) = (
            s(r, "requestId"),
            r.get("message").and_then(|m| m.get("usage")),
        ) && u.is_object()
            && s(r, "uuid").is_none_or(|u| on.contains(u))
        {
            usage.insert(req, u);
        }
    }
    let mut seen_requests: HashSet<&str> = HashSet::new();
    for &i in idx {
        let (number, offset, text, r) = &records[i];
        if s(r, "type") == Some("assistant")
            && let Some(req) = s(r, "requestId")
            && s(r, "uuid").is_none_or(|u| on.contains(u))
            && seen_requests.insert(req)
        {
            st.final_usage = usage.get(req).map(|u| usage_of(u));
        }
        let kind = record_kind(r);
        st.b.report.lines += 1;
        st.b.at_record(*number, &kind);
        st.b.set_time(s(r, "timestamp").and_then(parse_time));
        let on_branch = s(r, "uuid").is_none_or(|u| on.contains(u));
        let mapped = if conversational(r) && !on_branch {
            st.b.keep(*number, *offset, &format!("{kind}(off-branch)"), text);
            continue;
        } else {
            map(&mut st, &kind, r, *number)
        };
        if mapped {
            st.b.report.mapped(&kind);
        } else {
            st.b.keep(*number, *offset, &kind, text);
        }
    }
    if st.awaiting_summary {
        st.b.compaction(Vec::new(), &format!("{id}-compaction"));
    }
    let (session, report) = st.b.finish();
    Ok(Imported { session, report })
}

fn map(st: &mut State, kind: &str, r: &J, line: u64) -> bool {
    let msg = r.get("message").unwrap_or(&J::Null);
    let uuid = s(r, "uuid").map_or_else(|| format!("line-{line}"), str::to_owned);
    match kind {
        "system:compact_boundary" => {
            st.awaiting_summary = true;
            true
        }
        "user" => {
            if r.get("isCompactSummary").and_then(J::as_bool) == Some(true) {
                let m = Message::new(
                    st.b.message_id(&uuid),
                    Role::User,
                    blocks_of(msg.get("content")),
                    MessageSource::User(Bare::default()),
                );
                st.awaiting_summary = false;
                st.b.compaction(vec![ViewItem::User(m)], &uuid);
                return true;
            }
            if st.awaiting_summary {
                st.awaiting_summary = false;
                st.b.compaction(Vec::new(), &uuid);
            }
            let content = msg.get("content");
            let mut any = false;
            if let Some(J::Array(list)) = content {
                for b in list.iter().filter(|b| s(b, "type") == Some("tool_result")) {
                    let call = s(b, "tool_use_id").unwrap_or("");
                    let inner = blocks_of(b.get("content"));
                    let is_error = b.get("is_error").and_then(J::as_bool);
                    if st.b.tool_result(call, inner, is_error, None) {
                        any = true;
                    } else {
                        st.b.report.ignorable("user:tool_result(unpaired)");
                    }
                }
            }
            let blocks = blocks_of(content);
            if blocks.is_empty() {
                return any;
            }
            let interrupt = blocks.iter().any(|b| {
                matches!(b, ContentBlock::Text(t) if INTERRUPT_TEXTS.iter().any(|i| t.text.starts_with(i)))
            });
            let meta = r.get("isMeta").and_then(J::as_bool) == Some(true);
            let source = if meta {
                MessageSource::Plugin(PluginSource {
                    plugin: "claude-code".into(),
                    form: Some("notice".into()),
                    ..PluginSource::default()
                })
            } else {
                MessageSource::User(Bare::default())
            };
            let m = Message::new(st.b.message_id(&uuid), Role::User, blocks, source);
            let prompt = !meta && !interrupt && !any;
            st.b.user_message(m, prompt);
            if interrupt {
                st.b.abort_turn();
            }
            true
        }
        "assistant" => {
            if r.get("isApiErrorMessage").and_then(J::as_bool) == Some(true) {
                return false;
            }
            if st.awaiting_summary {
                st.awaiting_summary = false;
                st.b.compaction(Vec::new(), &uuid);
            }
            if let Some(model) = s(msg, "model").filter(|m| !m.is_empty() && !m.starts_with('<'))
                && st.b.route().model != model
            {
                let mut route = st.b.route().clone();
                model.clone_into(&mut route.model);
                st.b.ensure_turn();
                st.b.set_route(route);
            }
            let mid = s(msg, "id").map_or_else(|| uuid.clone(), str::to_owned);
            st.b.assistant_message(&mid, s(r, "requestId"));
            if let Some(J::Array(list)) = msg.get("content") {
                for b in list {
                    match s(b, "type") {
                        Some("text") => st
                            .b
                            .assistant_block(&mid, ContentBlock::text(s(b, "text").unwrap_or(""))),
                        Some("thinking") => {
                            let mut fields = Vec::new();
                            if let Some(sig) = b.get("signature").filter(|v| !v.is_null()) {
                                fields.push(("signature", to_value(sig)));
                            }
                            st.b.assistant_block(
                                &mid,
                                reasoning_block(s(b, "thinking").unwrap_or("").to_owned(), fields),
                            );
                        }
                        Some("redacted_thinking") => {
                            let fields = vec![("redacted", to_value(b))];
                            st.b.assistant_block(&mid, reasoning_block(String::new(), fields));
                        }
                        Some("tool_use") => {
                            let call = s(b, "id").unwrap_or("");
                            if call.is_empty() {
                                continue;
                            }
                            let input = b.get("input").cloned().unwrap_or(J::Null);
                            st.b.tool_call(
                                &mid,
                                call,
                                s(b, "name").unwrap_or("tool"),
                                input.to_string(),
                                to_value(&input),
                            );
                        }
                        _ => {
                            st.b.assistant_block(&mid, ContentBlock::text(b.to_string()));
                        }
                    }
                }
            }
            if s(r, "requestId").is_some() {
                if let Some(u) = st.final_usage.take() {
                    st.b.response_usage(u);
                }
            } else if let Some(u) = msg.get("usage").filter(|u| u.is_object()) {
                st.b.response_usage(usage_of(u));
            }
            true
        }
        _ => false,
    }
}
