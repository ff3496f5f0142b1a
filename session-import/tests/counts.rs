//! For every sample, counts taken from the raw file with plain `serde_json` match the
//! imported events: user and assistant messages, tool calls, tool results, token totals.

#![allow(clippy::unwrap_used, clippy::missing_panics_doc)]

use std::collections::{HashMap, HashSet};
use std::path::Path;

use conformance::import_samples as samples;
use serde_json::Value as J;
use session_import::{Format, ImportOptions, Imported, import_file};

#[derive(Debug, Default, PartialEq, Eq, Clone, Copy)]
struct Counts {
    user: u64,
    assistant: u64,
    calls: u64,
    results: u64,
    input: u64,
    output: u64,
    /// Calls without a result (raw), synthetic results (imported).
    closed: u64,
}

fn raw(path: &Path) -> Vec<J> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<J>(l).ok())
        .filter(J::is_object)
        .collect()
}

fn st<'a>(v: &'a J, k: &str) -> Option<&'a str> {
    v.get(k).and_then(J::as_str)
}

/// Text parts of a Responses message's content.
fn texts(content: &J) -> u64 {
    content.as_array().map_or(0, |v| {
        v.iter()
            .filter(|p| matches!(st(p, "type"), Some("output_text" | "input_text" | "text")))
            .count() as u64
    })
}

fn codex_raw(path: &Path) -> Counts {
    let recs = raw(path);
    let ty = |r: &J| {
        (
            st(r, "type").unwrap_or("").to_owned(),
            r.get("payload")
                .and_then(|p| st(p, "type"))
                .unwrap_or("")
                .to_owned(),
        )
    };
    let has_items = recs
        .iter()
        .any(|r| ty(r) == ("response_item".into(), "message".into()));
    let mut c = Counts::default();
    let mut calls = HashSet::new();
    let mut last_total: Option<J> = None;
    for r in &recs {
        let p = r.get("payload").cloned().unwrap_or(J::Null);
        match ty(r) {
            (a, b) if a == "response_item" && b == "message" => {
                if st(&p, "role") == Some("assistant") {
                    c.assistant += texts(&p["content"]);
                } else {
                    c.user += 1;
                }
            }
            (a, b) if a == "event_msg" && !has_items && b == "user_message" => c.user += 1,
            (a, b) if a == "event_msg" && !has_items && b == "agent_message" => c.assistant += 1,
            (a, b) if a == "response_item" && (b == "function_call" || b == "custom_tool_call") => {
                if let Some(id) = st(&p, "call_id") {
                    c.calls += 1;
                    calls.insert(id.to_owned());
                }
            }
            (a, b)
                if a == "response_item"
                    && (b == "function_call_output" || b == "custom_tool_call_output")
                    && st(&p, "call_id").is_some_and(|id| calls.remove(id)) =>
            {
                c.results += 1;
            }
            (a, _) if a == "compacted" => {
                for item in p["replacement_history"].as_array().into_iter().flatten() {
                    if st(item, "type") == Some("message") {
                        if st(item, "role") == Some("assistant") {
                            c.assistant += texts(&item["content"]);
                        } else {
                            c.user += 1;
                        }
                    }
                }
            }
            // A turn's end answers nothing after it: a late output is kept, not paired.
            (a, b)
                if a == "event_msg"
                    && (b == "turn_aborted" || b == "task_complete" || b == "task_started") =>
            {
                calls.clear();
            }
            (a, _) if a == "session_meta" => calls.clear(),
            (a, b) if a == "event_msg" && b == "token_count" => {
                let info = &p["info"];
                if info.is_null() {
                    continue;
                }
                let total = info.get("total_token_usage").cloned();
                if total.is_some() && total == last_total {
                    continue;
                }
                last_total = total;
                c.input += info["last_token_usage"]["input_tokens"]
                    .as_u64()
                    .unwrap_or(0);
                c.output += info["last_token_usage"]["output_tokens"]
                    .as_u64()
                    .unwrap_or(0);
            }
            _ => {}
        }
    }
    c
}

fn claude_raw(path: &Path) -> Counts {
    let recs = raw(path);
    let mut c = Counts::default();
    // Each group (the main conversation, each sidechain agent) has its own branch.
    let mut groups: HashMap<String, Vec<&J>> = HashMap::new();
    for r in &recs {
        let key = if r["isSidechain"].as_bool() == Some(true) {
            st(r, "agentId").unwrap_or("side").to_owned()
        } else {
            String::new()
        };
        groups.entry(key).or_default().push(r);
    }
    for group in groups.values() {
        // uuid -> (parent, the uuid record before it in the file)
        let mut parents: HashMap<&str, (Option<&str>, Option<&str>)> = HashMap::new();
        let mut before = None;
        for r in group {
            if let Some(u) = st(r, "uuid") {
                parents.insert(
                    u,
                    (
                        st(r, "parentUuid").or_else(|| st(r, "logicalParentUuid")),
                        before,
                    ),
                );
                before = Some(u);
            }
        }
        let mut on = HashSet::new();
        let mut at = group
            .iter()
            .rev()
            .find(|r| matches!(st(r, "type"), Some("user" | "assistant")))
            .and_then(|r| st(r, "uuid"));
        while let Some(u) = at {
            if !on.insert(u) {
                break;
            }
            at = match parents.get(u) {
                Some((Some(p), _)) if parents.contains_key(p) => Some(p),
                Some((Some(_), before)) => *before,
                _ => None,
            };
        }
        // Parallel tool calls answer beside the chain: a record of tool results whose parent
        // is on the branch is on it.
        let extra: Vec<&str> = group
            .iter()
            .filter(|r| {
                st(r, "type") == Some("user")
                    && st(r, "parentUuid").is_some_and(|p| on.contains(p))
                    && r["message"]["content"].as_array().is_some_and(|b| {
                        !b.is_empty() && b.iter().all(|b| st(b, "type") == Some("tool_result"))
                    })
            })
            .filter_map(|r| st(r, "uuid"))
            .collect();
        on.extend(extra);
        let mut ids = HashSet::new();
        let mut usage: HashMap<String, (u64, u64)> = HashMap::new();
        let mut calls = HashSet::new();
        for r in group {
            if !st(r, "uuid").is_some_and(|u| on.contains(u)) {
                continue;
            }
            let content = &r["message"]["content"];
            match st(r, "type") {
                Some("user") => {
                    if r["isCompactSummary"].as_bool() == Some(true) {
                        c.user += 1;
                        continue;
                    }
                    let blocks: Vec<&J> = content
                        .as_array()
                        .map(|v| v.iter().collect())
                        .unwrap_or_default();
                    for b in &blocks {
                        if st(b, "type") == Some("tool_result")
                            && st(b, "tool_use_id").is_some_and(|id| calls.remove(id))
                        {
                            c.results += 1;
                        }
                    }
                    let other = content.is_string()
                        || blocks
                            .iter()
                            .any(|b| !matches!(st(b, "type"), Some("tool_result" | "tool_use")));
                    if other {
                        c.user += 1;
                    }
                }
                Some("assistant") if r["isApiErrorMessage"].as_bool() != Some(true) => {
                    let id = st(&r["message"], "id")
                        .or_else(|| st(r, "uuid"))
                        .unwrap()
                        .to_owned();
                    ids.insert(id);
                    for b in content.as_array().into_iter().flatten() {
                        if st(b, "type") == Some("tool_use")
                            && st(b, "id").is_some_and(|i| !i.is_empty())
                        {
                            c.calls += 1;
                            calls.insert(st(b, "id").unwrap().to_owned());
                        }
                    }
                    let u = &r["message"]["usage"];
                    if u.is_object() {
                        let key = st(r, "requestId")
                            .map_or_else(|| format!("r{}", usage.len()), str::to_owned);
                        usage.insert(
                            key,
                            (
                                u["input_tokens"].as_u64().unwrap_or(0),
                                u["output_tokens"].as_u64().unwrap_or(0),
                            ),
                        );
                    }
                }
                _ => {}
            }
        }
        c.assistant += ids.len() as u64;
        for (i, o) in usage.values() {
            c.input += i;
            c.output += o;
        }
    }
    c
}

/// Counts from the imported events of the sessions read from `path` itself.
fn imported(sessions: &[Imported], path: &Path, format: Format) -> Counts {
    let mut c = Counts::default();
    for s in sessions
        .iter()
        .filter(|s| s.report.files.first().is_some_and(|f| f == path))
    {
        let mut assistant_ids = HashSet::new();
        for e in &s.session.events() {
            let d = e.data();
            match e.event_type() {
                "user/message" => c.user += 1,
                "assistant/message" => {
                    let content = d
                        .get("message")
                        .and_then(|m| m.get("content"))
                        .and_then(|c| c.as_array())
                        .map_or(0, |a| a.len());
                    if let Some(u) = d.get("usage") {
                        c.input += u.get("inputTokens").and_then(session_core_u64).unwrap_or(0);
                        c.output += u
                            .get("outputTokens")
                            .and_then(session_core_u64)
                            .unwrap_or(0);
                    }
                    let blocks = d
                        .get("message")
                        .and_then(|m| m.get("content"))
                        .and_then(|c| c.as_array());
                    match format {
                        Format::Codex => {
                            c.assistant += blocks.map_or(0, |b| {
                                b.iter()
                                    .filter(|b| {
                                        b.get("type").and_then(|t| t.as_str()) == Some("text")
                                    })
                                    .count() as u64
                            });
                        }
                        Format::ClaudeCode => {
                            if content > 0 {
                                let id = d
                                    .get("message")
                                    .and_then(|m| m.get("id"))
                                    .and_then(|i| i.as_str())
                                    .unwrap_or("");
                                assistant_ids.insert(id.split('#').next().unwrap_or("").to_owned());
                            }
                        }
                    }
                }
                "tool/call" => c.calls += 1,
                "tool/result" if d.get("error").is_none() => c.results += 1,
                "tool/result" => c.closed += 1,
                _ => {}
            }
        }
        c.assistant += assistant_ids.len() as u64;
    }
    c
}

fn session_core_u64(v: &session_core::json::Value) -> Option<u64> {
    v.as_f64().map(|f| f as u64)
}

#[test]
fn counts_match_an_independent_count_of_every_sample() {
    let Some(dir) = samples::require() else {
        return;
    };
    let mut failures = Vec::new();
    let mut checked = 0;
    for format in [Format::Codex, Format::ClaudeCode] {
        for path in samples::files(&dir, format) {
            let Ok(sessions) = import_file(format, &path, &ImportOptions::default()) else {
                continue;
            };
            let want = match format {
                Format::Codex => codex_raw(&path),
                Format::ClaudeCode => claude_raw(&path),
            };
            let mut want = want;
            want.closed = want.calls - want.results;
            let got = imported(&sessions, &path, format);
            let tokens: (u64, u64) = sessions
                .iter()
                .filter(|s| s.report.files.first().is_some_and(|f| f == &path))
                .fold((0, 0), |a, s| {
                    (a.0 + s.report.tokens.input, a.1 + s.report.tokens.output)
                });
            if got != want || tokens != (want.input, want.output) {
                failures.push(format!(
                    "{}:\n  raw      {want:?}\n  imported {got:?}\n  report tokens {tokens:?}",
                    path.display()
                ));
            }
            checked += 1;
        }
    }
    assert!(checked > 60);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
