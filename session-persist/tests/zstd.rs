//! Backend-level cases of persistence §7.7 (`zstd.spec.ts`, Zstandard encoding).
#![allow(clippy::unwrap_used)] // helpers outside `#[test]` functions unwrap too

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::{EIO, FaultFs, Op, TempDir, ev, meta, open, rt, texts, turn};
use session_core::json::Value;
use session_core::{Event, SessionHeader};
use session_persist::jsonl::{scan_zstd_frames, to_header_line};
use session_persist::{Backend, Compression, Error, JsonlBackend, JsonlConfig, TornMarker};

fn seqs(events: &[Event]) -> Vec<u64> {
    events.iter().map(Event::seq).collect()
}

fn write_log(backend: &JsonlBackend, m: &SessionHeader, batches: &[&[Event]]) -> PathBuf {
    let rt = rt();
    for (i, batch) in batches.iter().enumerate() {
        rt.block_on(backend.append_batch(m, batch, i > 0)).unwrap();
    }
    backend.log_path(m).unwrap()
}

/// `(start, end, plaintext)` of every complete frame.
fn frames(buf: &[u8]) -> Vec<(usize, usize, String)> {
    scan_zstd_frames(buf, None)
        .unwrap()
        .frames
        .iter()
        .map(|f| {
            let plain = zstd::stream::decode_all(&buf[f.start..f.end]).unwrap();
            (f.start, f.end, String::from_utf8(plain).unwrap())
        })
        .collect()
}

/// One checksummed frame of `plain`.
fn frame(plain: &str) -> Vec<u8> {
    let mut enc = zstd::stream::write::Encoder::new(Vec::new(), 3).unwrap();
    enc.include_checksum(true).unwrap();
    std::io::Write::write_all(&mut enc, plain.as_bytes()).unwrap();
    enc.finish().unwrap()
}

fn lines(events: &[Event]) -> String {
    events.iter().fold(String::new(), |mut out, e| {
        out.push_str(&e.to_json());
        out.push('\n');
        out
    })
}

/// Text that does not compress (so frames span several blocks).
fn noise(len: usize) -> String {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            char::from(b'a' + (x % 26) as u8)
        })
        .collect()
}

// persistence §7.7 #9
#[test]
fn default_writes_two_checksummed_frames() {
    let tmp = TempDir::new("z9");
    let backend = open(&tmp.root());
    assert_eq!(backend.compression(), Compression::Zstd);
    let m = meta("s");
    let events = turn(1, 0);
    let path = write_log(&backend, &m, &[&events]);
    assert!(path.ends_with("--w--/s/session.jsonl.zstd"));
    assert_eq!(backend.locate(&m).unwrap().path, path);
    assert!(!path.with_file_name("session.jsonl").exists());
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(&bytes[..4], &[0x28, 0xB5, 0x2F, 0xFD]);
    let f = frames(&bytes);
    assert_eq!(f.len(), 2);
    assert_eq!(f[0].2, format!("{}\n", to_header_line(&m)));
    assert_eq!(f[1].2, lines(&events));
    for (start, _, _) in &f {
        assert_ne!(bytes[start + 4] & 0x04, 0, "checksum flag");
    }
}

// persistence §7.7 #10, #11
#[test]
fn read_raw_decodes_the_logical_text() {
    let tmp = TempDir::new("z10");
    let backend = open(&tmp.root());
    let m = meta("s");
    let events = turn(1, 0);
    let path = write_log(&backend, &m, &[&events[..2], &events[2..]]);
    let rt = rt();
    let raw = rt.block_on(backend.read_raw("s")).unwrap().unwrap();
    assert_eq!(raw.filename, "session.jsonl");
    assert_eq!(
        raw.content,
        format!("{}\n{}", to_header_line(&m), lines(&events))
    );
    std::fs::write(&path, b"").unwrap();
    assert_eq!(
        rt.block_on(backend.read_raw("s")).unwrap_err().to_string(),
        "empty or header-less Zstandard session log"
    );
}

// persistence §7.7 #12
#[test]
fn programmatic_defaults_are_zstd_with_packing() {
    let tmp = TempDir::new("z12");
    let backend = JsonlBackend::open(JsonlConfig::new(tmp.root())).unwrap();
    assert!(backend.packs_chunks());
    let m = meta("s");
    let chunks: Vec<Event> = (0..4)
        .map(|i| {
            ev(
                "assistant/chunk",
                i,
                &format!(
                    r#"{{"turn":1,"step":1,"chunk":{{"type":"text-delta","index":0,"text":"{i}"}}}}"#
                ),
            )
        })
        .collect();
    write_log(&backend, &m, &[&chunks]);
    let raw = rt().block_on(backend.read_raw("s")).unwrap().unwrap();
    assert!(raw.content.contains("\"type\":\"text-chunks\""));
}

// persistence §7.7 #13
#[test]
fn each_append_adds_one_frame_and_keeps_earlier_bytes() {
    let tmp = TempDir::new("z13");
    let backend = open(&tmp.root());
    let m = meta("s");
    let path = write_log(&backend, &m, &[&turn(1, 0)]);
    let before = std::fs::read(&path).unwrap();
    rt().block_on(backend.append_batch(&m, &turn(2, 5), true))
        .unwrap();
    let after = std::fs::read(&path).unwrap();
    assert!(after.starts_with(&before));
    assert_eq!(frames(&after).len(), 3);
    let stored = rt().block_on(backend.load_stored("s")).unwrap().unwrap();
    assert_eq!(seqs(&stored.events), (0..10).collect::<Vec<_>>());
}

// persistence §7.7 #14
#[test]
fn listing_reads_a_multi_chunk_header_frame_despite_a_corrupt_event_frame() {
    let tmp = TempDir::new("z14");
    let backend = open(&tmp.root());
    let mut m = meta("s");
    m.cwd = Some(format!("/{}", noise(24_000)).into());
    let path = write_log(&backend, &m, &[&turn(1, 0)]);
    let mut bytes = std::fs::read(&path).unwrap();
    let f = frames(&bytes);
    assert!(f[0].1 > 8192, "the header frame spans several read chunks");
    let last = f[1].1 - 1;
    bytes[last] ^= 0xFF;
    std::fs::write(&path, &bytes).unwrap();
    let rt = rt();
    let listed = rt.block_on(backend.list()).unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].cwd, m.cwd);
    assert_eq!(
        rt.block_on(backend.load_stored("s"))
            .unwrap_err()
            .to_string(),
        format!(
            "corrupt Zstandard session log: frame at byte {} failed validation",
            f[1].0
        )
    );
}

fn closers(from: u64, turn: u64) -> Vec<Event> {
    vec![
        ev("step/end", from, &format!("{{\"turn\":{turn},\"step\":1}}")),
        ev(
            "turn/end",
            from + 1,
            &format!("{{\"turn\":{turn},\"reason\":{{\"kind\":\"interrupted\"}}}}"),
        ),
    ]
}

// persistence §7.7 #18
#[test]
fn torn_frame_keeps_its_complete_records() {
    let tmp = TempDir::new("z18");
    let backend = open(&tmp.root());
    let m = meta("s");
    let big = ev(
        "assistant/chunk",
        8,
        &format!(
            r#"{{"turn":2,"step":1,"chunk":{{"type":"text-delta","index":0,"text":"{}"}}}}"#,
            noise(300_000)
        ),
    );
    let tail = [
        ev("turn/start", 5, r#"{"turn":2}"#),
        ev("step/start", 6, r#"{"turn":2,"step":1}"#),
        ev("user/message", 7, r#"{"text":"more"}"#),
        big,
    ];
    let path = write_log(&backend, &m, &[&turn(1, 0), &tail]);
    let bytes = std::fs::read(&path).unwrap();
    let f = frames(&bytes);
    let (start, end, _) = f[2];
    // Cut inside the last block: the complete blocks hold lines 5..7 and part of the chunk.
    let cut = end - 1_000;
    std::fs::write(&path, &bytes[..cut]).unwrap();
    rt().block_on(backend.close()).unwrap();

    let backend = open(&tmp.root());
    let rt = rt();
    let stored = rt.block_on(backend.load_stored("s")).unwrap().unwrap();
    assert_eq!(seqs(&stored.events), (0..8).collect::<Vec<_>>());
    let Some(TornMarker::Truncate {
        truncate_to,
        recovered,
    }) = stored.torn.clone()
    else {
        panic!("no torn marker")
    };
    assert_eq!(truncate_to, start as u64);
    assert_eq!(texts(&recovered), texts(&tail[..3]));

    let closers = closers(8, 2);
    rt.block_on(backend.commit_repair(&stored.meta, stored.torn.clone(), &closers))
        .unwrap();
    let repaired = std::fs::read(&path).unwrap();
    assert_eq!(&repaired[..start], &bytes[..start], "committed prefix kept");
    let rf = frames(&repaired);
    assert_eq!(rf.len(), 3);
    assert_eq!(scan_zstd_frames(&repaired, None).unwrap().torn_start, None);
    let all: Vec<Event> = tail[..3].iter().cloned().chain(closers).collect();
    assert_eq!(rf[2].2, lines(&all));
    let again = rt.block_on(backend.load_stored("s")).unwrap().unwrap();
    assert!(again.torn.is_none());
    assert_eq!(seqs(&again.events), (0..10).collect::<Vec<_>>());
}

// persistence §7.7 #19
#[test]
fn a_frame_torn_inside_its_magic_is_dropped() {
    let tmp = TempDir::new("z19");
    let backend = open(&tmp.root());
    let m = meta("s");
    let path = write_log(&backend, &m, &[&turn(1, 0)]);
    let committed = std::fs::read(&path).unwrap();
    let mut bytes = committed.clone();
    bytes.extend_from_slice(&[0x28, 0xB5]);
    std::fs::write(&path, &bytes).unwrap();
    rt().block_on(backend.close()).unwrap();
    let backend = open(&tmp.root());
    let rt = rt();
    let stored = rt.block_on(backend.load_stored("s")).unwrap().unwrap();
    assert_eq!(seqs(&stored.events), (0..5).collect::<Vec<_>>());
    assert_eq!(
        stored.torn,
        Some(TornMarker::Truncate {
            truncate_to: committed.len() as u64,
            recovered: vec![]
        })
    );
    // Balanced: no closers.
    rt.block_on(backend.commit_repair(&stored.meta, stored.torn.clone(), &[]))
        .unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), committed);
}

// persistence §7.7 #20
#[test]
fn a_tear_in_the_checksum_recovers_every_event() {
    let tmp = TempDir::new("z20");
    let backend = open(&tmp.root());
    let m = meta("s");
    let path = write_log(&backend, &m, &[&turn(1, 0), &turn(2, 5)]);
    let full = std::fs::read(&path).unwrap();
    std::fs::write(&path, &full[..full.len() - 1]).unwrap();
    rt().block_on(backend.close()).unwrap();
    let backend = open(&tmp.root());
    let rt = rt();
    let stored = rt.block_on(backend.load_stored("s")).unwrap().unwrap();
    assert_eq!(seqs(&stored.events), (0..10).collect::<Vec<_>>());
    let Some(TornMarker::Truncate { recovered, .. }) = &stored.torn else {
        panic!("no marker")
    };
    assert_eq!(seqs(recovered), (5..10).collect::<Vec<_>>());
    rt.block_on(backend.commit_repair(&stored.meta, stored.torn.clone(), &[]))
        .unwrap();
    // Re-encoded as one complete frame: the same bytes the writer produced.
    assert_eq!(std::fs::read(&path).unwrap(), full);
}

// persistence §7.7 #21 and §8 question 4 (zstd tolerates only a torn final frame)
#[test]
fn damage_inside_a_complete_frame_is_corruption() {
    let tmp = TempDir::new("z21");
    let backend = open(&tmp.root());
    let m = meta("s");
    let path = write_log(&backend, &m, &[&turn(1, 0)]);
    let committed = std::fs::read(&path).unwrap();
    let rt = rt();
    for extra in [
        // A record cut short inside a complete frame.
        frame(r#"{"type":"turn/start","seq":5,"ti"#),
        // A garbage line after the last turn/end: a plain log would drop it as torn.
        frame("{garbage\n"),
        // A seq gap after the last turn/end.
        frame(&lines(&[ev("turn/start", 9, r#"{"turn":2}"#)])),
    ] {
        let mut bytes = committed.clone();
        bytes.extend_from_slice(&extra);
        std::fs::write(&path, &bytes).unwrap();
        assert_eq!(
            rt.block_on(backend.load_stored("s"))
                .unwrap_err()
                .to_string(),
            "corrupt Zstandard session log: complete frame contains a torn JSONL record"
        );
    }
    // Lines may cross frame boundaries (the reader tolerates what the writer never produces).
    let line = lines(&[ev("turn/start", 5, r#"{"turn":2}"#)]);
    let (a, b) = line.split_at(7);
    let mut bytes = committed.clone();
    bytes.extend_from_slice(&frame(a));
    bytes.extend_from_slice(&frame(b));
    std::fs::write(&path, &bytes).unwrap();
    let stored = rt.block_on(backend.load_stored("s")).unwrap().unwrap();
    assert_eq!(seqs(&stored.events), (0..6).collect::<Vec<_>>());
}

// persistence §7.7 #22
#[test]
fn fsync_failure_rolls_back_to_identical_bytes() {
    let tmp = TempDir::new("z22");
    let fs = FaultFs::new();
    let backend =
        JsonlBackend::open_with_fs(JsonlConfig::new(tmp.root()), Arc::new(fs.clone())).unwrap();
    let m = meta("s");
    let path = write_log(&backend, &m, &[&turn(1, 0)]);
    let before = std::fs::read(&path).unwrap();
    fs.fail_next(Op::Sync, "session.jsonl.zstd", EIO);
    let rt = rt();
    assert!(
        rt.block_on(backend.append_batch(&m, &turn(2, 5), true))
            .is_err()
    );
    assert_eq!(std::fs::read(&path).unwrap(), before);
    rt.block_on(backend.append_batch(&m, &turn(2, 5), true))
        .unwrap();
    let stored = rt.block_on(backend.load_stored("s")).unwrap().unwrap();
    assert_eq!(seqs(&stored.events), (0..10).collect::<Vec<_>>());
}

fn plant(root: &Path, id: &str, bytes: &[u8]) -> PathBuf {
    let path = root.join("--w--").join(id).join("session.jsonl.zstd");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, bytes).unwrap();
    path
}

// persistence §7.7 #23
#[test]
fn listing_skips_unpublished_logs_and_refuses_multi_line_header_frames() {
    let tmp = TempDir::new("z23");
    let root = tmp.root();
    plant(&root, "empty", b"");
    plant(&root, "magic", &[0x28, 0xB5, 0x2F, 0xFD]);
    plant(
        &root,
        "event-frame",
        &frame("{\"type\":\"turn/start\",\"seq\":0}\n"),
    );
    let backend = open(&root);
    let good = meta("good");
    write_log(&backend, &good, &[&turn(1, 0)]);
    let rt = rt();
    let listed = rt.block_on(backend.list()).unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(&*listed[0].id, "good");

    let two = meta("two");
    plant(
        &root,
        "two",
        &frame(&format!("{}\n{}\n", to_header_line(&two), "{}")),
    );
    let want = "corrupt Zstandard session log: first frame is not exactly one header line";
    // Listed with its error (the reference's `list` throws): the other sessions still list.
    let listed = rt.block_on(backend.list()).unwrap();
    assert_eq!(listed.len(), 1);
    let entries = rt.block_on(backend.list_entries()).unwrap();
    let errors: Vec<String> = entries
        .iter()
        .filter_map(|e| e.header.as_ref().err().map(ToString::to_string))
        .collect();
    assert!(errors.iter().any(|e| e == want), "{errors:?}");
    assert_eq!(
        rt.block_on(backend.load_stored("two"))
            .unwrap_err()
            .to_string(),
        want
    );
}

// persistence §7.7 #24
#[test]
fn targeted_reads_of_damaged_header_frames() {
    let tmp = TempDir::new("z24");
    let root = tmp.root();
    let backend = open(&root);
    let rt = rt();
    plant(&root, "magic", &[0x28, 0xB5, 0x2F, 0xFD]);
    assert_eq!(
        rt.block_on(backend.load_stored("magic"))
            .unwrap_err()
            .to_string(),
        "empty or header-less Zstandard session log"
    );
    std::fs::remove_dir_all(root.join("--w--/magic")).unwrap();
    plant(&root, "empty-frame", &frame(""));
    assert_eq!(
        rt.block_on(backend.load_stored("empty-frame"))
            .unwrap_err()
            .to_string(),
        "corrupt Zstandard session log: first frame is not exactly one header line"
    );
    std::fs::remove_dir_all(root.join("--w--/empty-frame")).unwrap();
    let m = meta("sum");
    let mut header = frame(&format!("{}\n", to_header_line(&m)));
    let last = header.len() - 1;
    header[last] ^= 0xFF;
    let path = plant(&root, "sum", &header);
    assert_eq!(rt.block_on(backend.list()).unwrap(), vec![]);
    let entries = rt.block_on(backend.list_entries()).unwrap();
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].location.as_ref().unwrap().path, path);
    let err = entries.into_iter().next().unwrap().header.unwrap_err();
    assert_eq!(
        err.to_string(),
        "corrupt Zstandard session log: header frame failed validation"
    );
    assert!(std::error::Error::source(&err).is_some());
}

// persistence §7.7 #25
#[test]
fn a_root_belongs_to_one_encoding() {
    for configured in [Compression::Zstd, Compression::None] {
        let tmp = TempDir::new("z25");
        let root = tmp.root();
        let writer =
            JsonlBackend::open(JsonlConfig::new(&root).compression(configured.opposite())).unwrap();
        let m = meta("s");
        let path = write_log(&writer, &m, &[&turn(1, 0)]);
        let backend = JsonlBackend::open(JsonlConfig::new(&root).compression(configured)).unwrap();
        let (suffix, mode) = match configured {
            Compression::Zstd => (".jsonl", "zstd"),
            Compression::None => (".jsonl.zstd", "none"),
        };
        let want = format!(
            "session artifact \"{}\" uses {suffix}, but this backend is configured for \
             compression \"{mode}\"; use a separate root or select the matching compression mode",
            path.display()
        );
        let rt = rt();
        assert_eq!(rt.block_on(backend.list()).unwrap_err().to_string(), want);
        // The rejection is kept.
        assert_eq!(
            rt.block_on(backend.load_stored("other"))
                .unwrap_err()
                .to_string(),
            want
        );
        assert_eq!(
            rt.block_on(backend.append_batch(&meta("new"), &turn(1, 0), false))
                .unwrap_err()
                .to_string(),
            want
        );
    }
}

// persistence §7.7 #26
#[test]
fn late_artifacts_of_the_other_encoding_are_caught() {
    let tmp = TempDir::new("z26");
    let root = tmp.root();
    let backend = open(&root);
    let rt = rt();
    assert!(
        rt.block_on(backend.list()).unwrap().is_empty(),
        "preflight passes"
    );
    let raw = JsonlBackend::open(JsonlConfig::new(&root).compression(Compression::None)).unwrap();
    write_log(&raw, &meta("s"), &[&turn(1, 0)]);
    let stored_err = rt.block_on(backend.load_stored("s")).unwrap_err();
    assert!(matches!(stored_err, Error::EncodingMismatch { .. }));
    assert!(
        stored_err.to_string().contains("uses .jsonl,"),
        "{stored_err}"
    );
    let list_err = rt.block_on(backend.list()).unwrap_err();
    assert!(list_err.to_string().contains("uses .jsonl,"), "{list_err}");
    assert!(
        rt.block_on(backend.read_stored_revision("s"))
            .unwrap_err()
            .to_string()
            .contains("uses .jsonl,")
    );
}

// persistence §7.7 #27
#[test]
fn publication_is_refused_when_the_other_encoding_appears() {
    let tmp = TempDir::new("z27");
    let root = tmp.root();
    let backend = open(&root);
    let rt = rt();
    assert!(rt.block_on(backend.list()).unwrap().is_empty());
    let m = meta("s");
    let zstd_path = backend.log_path(&m).unwrap();
    let raw_path = zstd_path.with_file_name("session.jsonl");
    std::fs::create_dir_all(raw_path.parent().unwrap()).unwrap();
    std::fs::write(&raw_path, format!("{}\n", to_header_line(&m))).unwrap();
    let err = rt
        .block_on(backend.append_batch(&m, &turn(1, 0), false))
        .unwrap_err();
    assert!(matches!(err, Error::EncodingMismatch { .. }), "{err}");
    assert!(!zstd_path.exists());
}

#[test]
fn header_frames_with_foreign_versions_are_refused_on_open_and_listed_as_stored() {
    let tmp = TempDir::new("zv");
    let root = tmp.root();
    let m = meta("s");
    let line = to_header_line(&m).replacen("\"version\":0", "\"version\":2", 1);
    let path = plant(&root, "s", &frame(&format!("{line}\n")));
    let backend = open(&root);
    let rt = rt();
    let err = rt.block_on(backend.load_stored("s")).unwrap_err();
    assert_eq!(err.name(), "SessionFormatUnsupportedError");
    assert!(
        err.to_string()
            .ends_with(&format!("(raw log: {})", path.display()))
    );
    // Listing returns it as stored: only opening it refuses.
    let listed = rt.block_on(backend.list()).unwrap();
    assert_eq!(
        listed[0].to_value().to_json(),
        r#"{"version":2,"id":"s","createdAt":1000,"cwd":"/w","delegationDepth":0}"#
    );
    let _ = Value::Null;
}

// Structural errors name the byte of the offending field, not the frame's first byte.
#[test]
fn structural_errors_name_the_descriptor_and_the_block_header() {
    let tmp = TempDir::new("zpos");
    let backend = open(&tmp.root());
    let m = meta("s");
    let path = write_log(&backend, &m, &[&turn(1, 0)]);
    let bytes = std::fs::read(&path).unwrap();
    let second = frames(&bytes)[1].0;
    let rt = rt();
    let load = |bytes: &[u8]| {
        std::fs::write(&path, bytes).unwrap();
        rt.block_on(backend.load_stored("s"))
            .unwrap_err()
            .to_string()
    };

    // Bit 0x08 of the second frame's descriptor (4 bytes after its magic) is reserved.
    let mut reserved_bit = bytes.clone();
    reserved_bit[second + 4] |= 0x08;
    assert_eq!(
        load(&reserved_bit),
        format!(
            "corrupt Zstandard session log: reserved frame-header bit at byte {}",
            second + 4
        )
    );

    // Block type 3 in the second frame's first block header, which follows the frame header.
    let descriptor = bytes[second + 4];
    let single_segment = descriptor & 0x20 != 0;
    let fcs_flag = descriptor >> 6;
    let fcs = if fcs_flag == 0 {
        usize::from(single_segment)
    } else {
        1 << fcs_flag
    };
    let dict = [0, 1, 2, 4][usize::from(descriptor & 3)];
    let block = second + 5 + usize::from(!single_segment) + dict + fcs;
    assert!(
        block > second + 5,
        "the frame header has more than its descriptor"
    );
    let mut reserved_block = bytes.clone();
    reserved_block[block] |= 0b110;
    assert_eq!(
        load(&reserved_block),
        format!("corrupt Zstandard session log: reserved block type at byte {block}")
    );
}
