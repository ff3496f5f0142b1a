//! Compaction views, malformed lines, rollbacks and random well-formed inputs.

#![allow(clippy::unwrap_used, clippy::missing_panics_doc)]

use std::path::{Path, PathBuf};

use conformance::import_samples as samples;
use proptest::prelude::*;
use serde_json::{Value as J, json};
use session_check::{StoredLogChecks, check_stored_log};
use session_import::{Format, ImportOptions, Imported, import_file};
use session_persist::Compression;

fn texts(m: &session_core::json::Value) -> (String, String) {
    let role = m
        .get("role")
        .and_then(|r| r.as_str())
        .unwrap_or("")
        .to_owned();
    let text = m
        .get("content")
        .and_then(|c| c.as_array())
        .map(|c| {
            c.iter()
                .filter_map(|b| b.get("text").and_then(|t| t.as_str()).map(str::to_owned))
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default();
    (role, text)
}

fn verify(imported: &[Imported]) -> Result<(), String> {
    for i in imported {
        let events = i.session.events();
        for (name, check) in check_stored_log(
            i.session.id(),
            &events,
            i.session.header().to_value(),
            events.len(),
            StoredLogChecks {
                compression: Compression::None,
                strict: true,
            },
        ) {
            check.map_err(|v| format!("{}: {name}: {v}", i.session.id()))?;
        }
    }
    Ok(())
}

#[test]
fn codex_compaction_gives_the_replacement_history_as_the_view() {
    let Some(dir) = samples::require() else {
        return;
    };
    let path = dir.join("codex/madshn__localpush/src-tauri/tests/fixtures/codex/2026-02-23/raw/sessions/rollout-2026-02-23T12-54-34-019c8a59-e9dd-71f0-9ae3-4079fe9726a9.jsonl");
    let lines: Vec<J> = std::fs::read_to_string(&path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let at = lines.iter().position(|r| r["type"] == "compacted").unwrap();
    let history: Vec<(String, String)> = lines[at]["payload"]["replacement_history"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["type"] == "message")
        .map(|i| {
            let role = if i["role"] == "assistant" {
                "assistant"
            } else {
                "user"
            };
            let text = i["content"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|p| p["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n");
            (role.to_owned(), text)
        })
        .collect();
    assert!(history.len() >= 10);
    let imported = import_file(Format::Codex, &path, &ImportOptions::default()).unwrap();
    let view: Vec<(String, String)> = imported[0]
        .session
        .derive_messages()
        .iter()
        .map(texts)
        .collect();
    assert_eq!(
        &view[..history.len()],
        &history[..],
        "the view starts with the replacement history"
    );
    // Nothing from before the compaction is left in the view.
    let first_user_before = lines[..at]
        .iter()
        .find(|r| r["payload"]["type"] == "message" && r["payload"]["role"] == "user")
        .unwrap();
    let _ = first_user_before;
    assert_eq!(imported[0].report.compactions, 1);
    assert!(imported[0].session.replace_generation() >= 1);
}

#[test]
fn claude_code_compaction_starts_the_view_at_the_summary() {
    let Some(dir) = samples::require() else {
        return;
    };
    for rel in [
        "claude-code/marot__spotter/test/fixtures/transcripts/4d5611e5-241a-462a-8d15-5122611a9569.jsonl",
        "claude-code/entireio__cli/entire-checkpoints-v1/3f/603dd13c2c/0/full.jsonl",
    ] {
        let path = dir.join(rel);
        let lines: Vec<J> = std::fs::read_to_string(&path)
            .unwrap()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        let summary = lines
            .iter()
            .find(|r| r["isCompactSummary"] == true)
            .unwrap();
        let want = match &summary["message"]["content"] {
            J::String(s) => s.clone(),
            J::Array(b) => b
                .iter()
                .filter_map(|b| b["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n"),
            _ => unreachable!(),
        };
        let imported = import_file(Format::ClaudeCode, &path, &ImportOptions::default()).unwrap();
        let view: Vec<(String, String)> = imported[0]
            .session
            .derive_messages()
            .iter()
            .map(texts)
            .collect();
        assert_eq!(view[0], ("user".to_owned(), want), "{rel}");
        assert_eq!(imported[0].report.compactions, 1, "{rel}");
    }
}

#[test]
fn malformed_samples_report_line_and_offset_and_the_rest_imports() {
    let Some(dir) = samples::require() else {
        return;
    };
    for (format, rel, lines) in [
        (
            Format::Codex,
            "codex/daaain__claude-code-log/test/test_data/codex/malformed/rollout-66666666-6666-4666-8666-666666666666.jsonl",
            vec![3u64],
        ),
        (
            Format::Codex,
            "codex/crispierry__codex-log-viewer/fixtures/codex/sample-session.jsonl",
            vec![10],
        ),
        (
            Format::ClaudeCode,
            "claude-code/iansherr__claude-code-log/test/test_data/edge_cases.jsonl",
            vec![],
        ),
    ] {
        let path = dir.join(rel);
        let text = std::fs::read_to_string(&path).unwrap();
        // Independently: the lines that are not JSON objects, and where they start.
        let mut want = Vec::new();
        let mut offset = 0u64;
        for (i, l) in text.split('\n').enumerate() {
            if !l.trim().is_empty() && !serde_json::from_str::<J>(l).is_ok_and(|v| v.is_object()) {
                want.push((i as u64 + 1, offset));
            }
            offset += l.len() as u64 + 1;
        }
        if lines.is_empty() {
            assert_eq!(want.len(), 3, "{rel}: three non-object lines");
        } else {
            assert_eq!(want.iter().map(|w| w.0).collect::<Vec<_>>(), lines, "{rel}");
        }
        let imported = import_file(format, &path, &ImportOptions::default()).unwrap();
        let cut: Vec<(u64, u64)> = imported[0]
            .report
            .cut
            .iter()
            .map(|c| (c.error.line().unwrap(), c.error.offset().unwrap()))
            .collect();
        assert_eq!(cut, want, "{rel}");
        assert!(imported[0].report.cut.iter().all(|c| {
            c.error
                .to_string()
                .contains(&format!(":{} (byte ", c.error.line().unwrap()))
        }));
        assert!(
            imported[0].report.mapped_total() > 0,
            "{rel}: the valid part imports"
        );
        verify(&imported).unwrap();
    }
}

fn write(lines: &[J], name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("session-import-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    let mut text = String::new();
    for l in lines {
        text.push_str(&l.to_string());
        text.push('\n');
    }
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn a_rollback_removes_the_undone_turns_from_the_view() {
    let ts = "2026-01-01T00:00:00.000Z";
    let rec = |ty: &str, p: J| json!({"timestamp": ts, "type": ty, "payload": p});
    let user = |t: &str| {
        rec(
            "response_item",
            json!({"type":"message","role":"user","content":[{"type":"input_text","text":t}]}),
        )
    };
    let lines = vec![
        rec("session_meta", json!({"id":"rb","cwd":"/w"})),
        rec("event_msg", json!({"type":"task_started"})),
        user("one"),
        rec("event_msg", json!({"type":"task_complete"})),
        rec("event_msg", json!({"type":"task_started"})),
        user("two"),
        rec("event_msg", json!({"type":"task_complete"})),
        rec(
            "event_msg",
            json!({"type":"thread_rolled_back","num_turns":1}),
        ),
        rec("event_msg", json!({"type":"task_started"})),
        user("three"),
        rec("event_msg", json!({"type":"task_complete"})),
    ];
    let path = write(&lines, "rollback.jsonl");
    let imported = import_file(Format::Codex, &path, &ImportOptions::default()).unwrap();
    let view: Vec<String> = imported[0]
        .session
        .derive_messages()
        .iter()
        .map(|m| texts(m).1)
        .collect();
    assert_eq!(view, ["one", "three"]);
    assert_eq!(imported[0].report.rollbacks, 1);
    verify(&imported).unwrap();
}

#[test]
fn a_missing_file_is_an_io_error_naming_it() {
    let e = import_file(
        Format::Codex,
        Path::new("/nonexistent/rollout.jsonl"),
        &ImportOptions::default(),
    )
    .unwrap_err();
    assert_eq!(e.kind(), session_import::ImportErrorKind::Io);
    assert!(e.to_string().contains("/nonexistent/rollout.jsonl"));
    assert!(std::error::Error::source(&e).is_some());
}

#[test]
fn a_zstd_rollout_imports_like_the_plain_one() {
    let Some(dir) = samples::require() else {
        return;
    };
    let plain = dir.join("codex/daaain__claude-code-log/test/test_data/codex/sessions/2026/01/02/rollout-2026-01-02T03-04-05-11111111-1111-4111-8111-111111111111.jsonl");
    let bytes = std::fs::read(&plain).unwrap();
    let out = std::env::temp_dir().join(format!("session-import-zst-{}", std::process::id()));
    std::fs::create_dir_all(&out).unwrap();
    let zst = out.join("rollout.jsonl.zst");
    std::fs::write(&zst, zstd::encode_all(&bytes[..], 3).unwrap()).unwrap();
    let a = import_file(Format::Codex, &plain, &ImportOptions::default()).unwrap();
    let b = import_file(Format::Codex, &zst, &ImportOptions::default()).unwrap();
    let ev = |i: &[Imported]| {
        i[0].session
            .events()
            .iter()
            .map(session_core::Event::to_json)
            .collect::<Vec<_>>()
    };
    assert_eq!(ev(&a), ev(&b));
    // A corrupt stream is a decompress error, not a panic.
    std::fs::write(&zst, b"\x28\xb5\x2f\xfd garbage").unwrap();
    let e = import_file(Format::Codex, &zst, &ImportOptions::default()).unwrap_err();
    assert_eq!(e.kind(), session_import::ImportErrorKind::Decompress);
    std::fs::remove_dir_all(&out).unwrap();
}

fn codex_op() -> impl Strategy<Value = (u8, u8, String)> {
    (0u8..12, 0u8..4, "[a-z {}\"\\\\]{0,12}")
}

fn codex_lines(ops: &[(u8, u8, String)]) -> Vec<String> {
    let rec = |ty: &str, p: J| {
        json!({"timestamp": "2026-01-01T00:00:00.000Z", "type": ty, "payload": p}).to_string()
    };
    let mut out = vec![rec(
        "session_meta",
        json!({"id":"p","cwd":"/w","model_provider":"openai"}),
    )];
    for (k, n, text) in ops {
        let call = format!("c{n}");
        out.push(match k {
            0 => rec("event_msg", json!({"type":"task_started"})),
            1 => rec("event_msg", json!({"type":"task_complete"})),
            2 => rec("event_msg", json!({"type":"turn_aborted","reason":"interrupted"})),
            3 => rec("response_item", json!({"type":"message","role":"user","content":[{"type":"input_text","text":text}]})),
            4 => rec("response_item", json!({"type":"message","role":"assistant","content":[{"type":"output_text","text":text}]})),
            5 => rec("response_item", json!({"type":"reasoning","summary":[{"type":"summary_text","text":text}]})),
            6 => rec("response_item", json!({"type":"function_call","name":"sh","arguments":text,"call_id":call})),
            7 => rec("response_item", json!({"type":"function_call_output","call_id":call,"output":text})),
            8 => rec("event_msg", json!({"type":"token_count","info":{"total_token_usage":{"input_tokens":n},"last_token_usage":{"input_tokens":1,"output_tokens":2}}})),
            9 => rec("compacted", json!({"message":text,"replacement_history":[{"type":"message","role":"user","content":[{"type":"input_text","text":"u"}]},{"type":"message","role":"assistant","content":[{"type":"output_text","text":"a"}]}]})),
            10 => rec("event_msg", json!({"type":"thread_rolled_back","num_turns":n})),
            _ => format!("{{{text}"),
        });
    }
    out
}

fn claude_lines(ops: &[(u8, u8, String)]) -> Vec<String> {
    let mut out = Vec::new();
    let mut parent: Option<String> = None;
    for (i, (k, n, text)) in ops.iter().enumerate() {
        let uuid = format!("u{i}");
        let base = json!({"uuid": uuid, "parentUuid": parent, "sessionId": "s", "cwd": "/w", "version": "2.1.0", "timestamp": "2026-01-01T00:00:00.000Z"});
        let mut r = base.as_object().unwrap().clone();
        match k {
            0 | 1 => {
                r.insert("type".into(), json!("user"));
                r.insert("message".into(), json!({"role":"user","content":text}));
            }
            2 | 3 => {
                r.insert("type".into(), json!("assistant"));
                r.insert("requestId".into(), json!(format!("r{}", i / 2)));
                r.insert("message".into(), json!({"id": format!("m{}", i / 2), "model":"claude-x","role":"assistant","content":[{"type":"tool_use","id":format!("t{n}"),"name":"Bash","input":{"c":text}}],"usage":{"input_tokens":n,"output_tokens":1}}));
            }
            4 => {
                r.insert("type".into(), json!("assistant"));
                r.insert("message".into(), json!({"id": format!("m{i}"), "model":"claude-x","role":"assistant","content":[{"type":"text","text":text},{"type":"thinking","thinking":text,"signature":"x"}]}));
            }
            5 | 6 => {
                r.insert("type".into(), json!("user"));
                r.insert("message".into(), json!({"role":"user","content":[{"type":"tool_result","tool_use_id":format!("t{n}"),"content":text,"is_error":false}]}));
            }
            7 => {
                r.insert("type".into(), json!("system"));
                r.insert("subtype".into(), json!("compact_boundary"));
                r.insert("parentUuid".into(), J::Null);
                r.insert("logicalParentUuid".into(), json!(parent));
            }
            8 => {
                r.insert("type".into(), json!("user"));
                r.insert("isCompactSummary".into(), json!(true));
                r.insert("message".into(), json!({"role":"user","content":text}));
            }
            9 => {
                r.insert("type".into(), json!("user"));
                r.insert("message".into(), json!({"role":"user","content":[{"type":"text","text":"[Request interrupted by user]"}]}));
            }
            10 => {
                r.insert("type".into(), json!("progress"));
            }
            _ => {
                out.push(format!("[{text}"));
                continue;
            }
        }
        parent = Some(uuid);
        out.push(J::Object(r).to_string());
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn random_rollouts_import_and_verify(ops in proptest::collection::vec(codex_op(), 0..40), seed in 0u32..1000) {
        let lines = codex_lines(&ops);
        let path = write(&lines.iter().map(|l| J::String(l.clone())).collect::<Vec<_>>(), &format!("codex-{seed}.jsonl"));
        std::fs::write(&path, lines.join("\n")).unwrap();
        let imported = import_file(Format::Codex, &path, &ImportOptions::default()).unwrap();
        prop_assert!(verify(&imported).is_ok(), "{:?}", verify(&imported));
        prop_assert!(imported.iter().all(|i| i.report.refused.is_empty()), "{:?}", imported[0].report.refused);
    }

    #[test]
    fn random_transcripts_import_and_verify(ops in proptest::collection::vec(codex_op(), 1..40), seed in 0u32..1000) {
        let lines = claude_lines(&ops);
        let path = write(&[], &format!("claude-{seed}.jsonl"));
        std::fs::write(&path, lines.join("\n")).unwrap();
        match import_file(Format::ClaudeCode, &path, &ImportOptions::default()) {
            Ok(imported) => {
                prop_assert!(verify(&imported).is_ok(), "{:?}", verify(&imported));
                prop_assert!(imported.iter().all(|i| i.report.refused.is_empty()), "{:?}", imported[0].report.refused);
            }
            Err(e) => prop_assert_eq!(e.kind(), session_import::ImportErrorKind::Empty),
        }
    }

    #[test]
    fn a_reader_imports_like_the_file(ops in proptest::collection::vec(codex_op(), 0..30), claude in any::<bool>(), junk in 0usize..4, seed in 0u32..1000) {
        let (format, mut lines) = if claude {
            (Format::ClaudeCode, claude_lines(&ops))
        } else {
            (Format::Codex, codex_lines(&ops))
        };
        if junk > 0 {
            let at = junk.min(lines.len());
            lines.insert(at, "{not json".to_owned());
        }
        let text = lines.join("\n");
        let path = write(&[], &format!("reader-{seed}.jsonl"));
        std::fs::write(&path, &text).unwrap();
        let from_file = import_file(format, &path, &ImportOptions::default());
        let from_reader = session_import::import_reader(
            format,
            std::io::Cursor::new(text.into_bytes()),
            &path,
            &ImportOptions::default(),
        );
        match (from_file, from_reader) {
            (Ok(a), Ok(b)) => {
                prop_assert_eq!(a.len(), b.len());
                for (a, b) in a.iter().zip(&b) {
                    prop_assert_eq!(a.session.id(), b.session.id());
                    prop_assert_eq!(a.session.header(), b.session.header());
                    let lines = |i: &Imported| i.session.events().iter().map(session_core::Event::to_json).collect::<Vec<_>>();
                    prop_assert_eq!(lines(a), lines(b));
                    prop_assert_eq!(format!("{:?}", a.report), format!("{:?}", b.report));
                }
            }
            (Err(a), Err(b)) => prop_assert_eq!(a.to_string(), b.to_string()),
            (a, b) => prop_assert!(false, "the file gives {:?}, the reader {:?}", a.map(|v| v.len()), b.map(|v| v.len())),
        }
    }
}

#[test]
fn subagents_and_sidechains_become_child_sessions_with_lineage() {
    let Some(dir) = samples::require() else {
        return;
    };
    let cc = dir.join("claude-code/iansherr__claude-code-log/test/test_data");
    // 2.1.x: <session>/subagents/agent-*.jsonl beside the main file.
    let main =
        cc.join("real_projects/-experiments-worktrees/ef958aa1-0e93-49f0-bb71-150f63befcd1.jsonl");
    let imported = import_file(Format::ClaudeCode, &main, &ImportOptions::default()).unwrap();
    let parent = imported[0].session.id().to_string();
    assert_eq!(parent, "claude-code-ef958aa1-0e93-49f0-bb71-150f63befcd1");
    assert_eq!(imported.len(), 7, "the session and its 6 subagents");
    for child in &imported[1..] {
        let h = child.session.header();
        assert_eq!(h.parent_session.as_deref(), Some(parent.as_str()));
        assert_eq!(h.seed_length, Some(0));
        assert!(h.origin_subagent);
        assert_eq!(h.delegation_depth, Some(1));
        assert!(child.session.id().starts_with(&format!("{parent}-agent-")));
    }
    // 2.0.x: agent-*.jsonl siblings naming the session.
    let main = cc.join("real_projects/-Users-dain-workspace-coderabbit-review-helper/cb2e607c-c758-415a-8b45-c49e4631906a.jsonl");
    let imported = import_file(Format::ClaudeCode, &main, &ImportOptions::default()).unwrap();
    assert_eq!(
        imported.len(),
        4,
        "the session and its 3 sibling sidechains"
    );
    // 1.x: sidechain records inside the main file.
    let imported = import_file(
        Format::ClaudeCode,
        &cc.join("sidechain.jsonl"),
        &ImportOptions::default(),
    )
    .unwrap();
    assert!(imported.len() >= 2);
    assert!(imported[1].session.header().origin_subagent);
    verify(&imported).unwrap();
    // Codex: a subagent thread names its parent thread.
    let small = dir
        .join("codex/jazzyalex__agent-sessions/Resources/Fixtures/stage0/agents/codex/small.jsonl");
    let text = std::fs::read_to_string(&small).unwrap();
    let parents: Vec<String> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<J>(l).ok())
        .filter(|r| r["type"] == "session_meta")
        .filter_map(|r| {
            r["payload"]["source"]["subagent"]["thread_spawn"]["parent_thread_id"]
                .as_str()
                .map(|p| format!("codex-{p}"))
        })
        .collect();
    assert!(!parents.is_empty());
    let imported = import_file(Format::Codex, &small, &ImportOptions::default()).unwrap();
    let linked: Vec<String> = imported
        .iter()
        .filter(|i| i.session.header().origin_subagent)
        .filter_map(|i| {
            i.session
                .header()
                .parent_session
                .as_deref()
                .map(str::to_owned)
        })
        .collect();
    assert!(
        !linked.is_empty() && linked.iter().all(|p| parents.contains(p)),
        "{linked:?} / {parents:?}"
    );
}
