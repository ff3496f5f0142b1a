//! Hostile input: session ids, symlinks, decompression bombs, huge and deeply nested lines,
//! invalid UTF-8, lone surrogates and unreadable files. Each case ends in a typed error or a
//! documented result, never a panic, and memory stays bounded where it is measured.
//!
//! Memory is measured as the growth of the peak resident set (`VmHWM`) of a fresh child process
//! that runs only the case (the test binary re-executed with `REL_HOSTILE_CHILD` set), so other
//! tests of this binary cannot raise or hide the peak.
#![allow(clippy::unwrap_used)] // helpers outside `#[test]` functions unwrap too

mod common;

use std::io::Write as _;
use std::path::{Path, PathBuf};

use common::{TempDir, ev, rt};
use session_core::SessionHeader;
use session_persist::jsonl::{MAX_RECORD_BYTES, PlaintextLimit, PlaintextLimitKind};
use session_persist::{Backend, Compression, Error, JsonlBackend, JsonlConfig};

const CHILD: &str = "REL_HOSTILE_CHILD";

fn open(root: &Path, compression: Compression) -> JsonlBackend {
    JsonlBackend::open(JsonlConfig::new(root).compression(compression)).unwrap()
}

fn meta(id: &str) -> SessionHeader {
    let mut m = SessionHeader::new(id, 1_000);
    m.cwd = Some("/proj".into());
    m
}

fn turn() -> Vec<session_core::Event> {
    vec![
        ev("turn/start", 0, r#"{"turn":1}"#),
        ev("turn/end", 1, r#"{"turn":1,"reason":{"kind":"completed"}}"#),
    ]
}

/// Publishes a one-turn log for `id` and returns its path.
fn publish(backend: &JsonlBackend, id: &str) -> PathBuf {
    let m = meta(id);
    rt().block_on(backend.append_batch(&m, &turn(), false))
        .unwrap();
    backend.log_path(&m).unwrap()
}

/// Appends raw bytes to a log.
fn append_bytes(path: &Path, bytes: &[u8]) {
    let mut f = std::fs::OpenOptions::new().append(true).open(path).unwrap();
    f.write_all(bytes).unwrap();
}

fn load(backend: &JsonlBackend, id: &str) -> Result<usize, Error> {
    rt().block_on(backend.load_stored(id))
        .map(|s| s.map_or(0, |s| s.events.len()))
}

/// Peak resident set of this process, in KiB.
fn vm_hwm_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// Runs `case` in a fresh child process (this test binary, only `name`), so its memory peak is
/// its own. Returns `true` in the child (the caller then runs the case).
fn in_child(name: &str) -> bool {
    if std::env::var(CHILD).as_deref() == Ok(name) {
        return true;
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", name, "--nocapture", "--test-threads=1"])
        .env(CHILD, name)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "child case {name} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    false
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .map(|l| l.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false)
}

// ---- Session ids ----

#[test]
fn ids_with_separators_dots_nul_and_non_ascii_stay_under_the_root() {
    let tmp = TempDir::new("hostile-ids");
    let root = tmp.root();
    let backend = open(&root, Compression::None);
    for id in [
        "a/b",
        "../../escape",
        "..",
        ".",
        "a\0b",
        "séssion-日本-🦀",
        "back\\slash",
        "~0041",
    ] {
        let path = publish(&backend, id);
        assert!(path.starts_with(&root), "{id:?} -> {}", path.display());
        let dir = path.parent().unwrap();
        assert_eq!(
            dir.parent().unwrap(),
            root.join("--proj--"),
            "{id:?} is one segment"
        );
        assert_eq!(load(&backend, id).unwrap(), 2, "{id:?}");
    }
    // `~0041` and `A` are different sessions (the encoding is injective).
    assert!(matches!(load(&backend, "A"), Ok(0)));
    // Nothing escaped the temporary directory.
    let mut names: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    names.sort();
    assert_eq!(names, ["root"]);
}

#[test]
fn a_ten_thousand_character_id_is_a_clean_name_too_long_error() {
    let tmp = TempDir::new("hostile-long-id");
    let root = tmp.root();
    let backend = open(&root, Compression::None);
    let id = "x".repeat(10_000);
    let err = rt()
        .block_on(backend.append_batch(&meta(&id), &turn(), false))
        .unwrap_err();
    assert_eq!(err.code(), Some("ENAMETOOLONG"), "{err}");
    assert!(backend.log_path(&meta(&id)).unwrap().starts_with(&root));
    // Reading it is a clean absence or the same typed error, never a panic.
    match load(&backend, &id) {
        Ok(0) => {}
        Ok(n) => panic!("{n} events for an unpublishable id"),
        Err(e) => assert_eq!(e.code(), Some("ENAMETOOLONG"), "{e}"),
    }
}

// ---- Symlinks ----

#[cfg(unix)]
#[test]
fn a_symlinked_session_directory_is_followed() {
    let tmp = TempDir::new("hostile-symlink-dir");
    let root = tmp.root();
    let backend = open(&root, Compression::None);
    let path = publish(&backend, "s");
    rt().block_on(backend.close()).unwrap();
    let dir = path.parent().unwrap().to_path_buf();
    let elsewhere = tmp.path().join("elsewhere");
    std::fs::rename(&dir, &elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &dir).unwrap();
    let backend = open(&root, Compression::None);
    assert_eq!(load(&backend, "s").unwrap(), 2);
    let more = [
        ev("turn/start", 2, r#"{"turn":2}"#),
        ev("turn/end", 3, r#"{"turn":2,"reason":{"kind":"completed"}}"#),
    ];
    rt().block_on(backend.append_batch(&meta("s"), &more, true))
        .unwrap();
    assert_eq!(load(&backend, "s").unwrap(), 4);
    assert!(elsewhere.join("session.jsonl").is_file());
}

#[cfg(unix)]
#[test]
fn a_symlinked_session_file_is_followed() {
    let tmp = TempDir::new("hostile-symlink-file");
    let root = tmp.root();
    let backend = open(&root, Compression::None);
    let path = publish(&backend, "s");
    rt().block_on(backend.close()).unwrap();
    let target = tmp.path().join("target.jsonl");
    std::fs::rename(&path, &target).unwrap();
    std::os::unix::fs::symlink(&target, &path).unwrap();
    let backend = open(&root, Compression::None);
    assert_eq!(load(&backend, "s").unwrap(), 2);
    let more = [
        ev("turn/start", 2, r#"{"turn":2}"#),
        ev("turn/end", 3, r#"{"turn":2,"reason":{"kind":"completed"}}"#),
    ];
    rt().block_on(backend.append_batch(&meta("s"), &more, true))
        .unwrap();
    assert_eq!(load(&backend, "s").unwrap(), 4);
    assert!(
        std::fs::symlink_metadata(&path)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(std::fs::read_to_string(&target).unwrap().lines().count(), 5);
}

// ---- Decompression bomb ----

/// A zstd frame whose header declares `declared` bytes of content but carries one raw block
/// of `body`.
fn lying_frame(declared: u64, body: &[u8]) -> Vec<u8> {
    let mut out = vec![0x28, 0xB5, 0x2F, 0xFD];
    // Frame header descriptor: 8-byte content size, single segment, checksum.
    out.push(0b1110_0100);
    out.extend_from_slice(&declared.to_le_bytes());
    let header = (u32::try_from(body.len()).unwrap() << 3) | 1; // raw, last block
    out.extend_from_slice(&header.to_le_bytes()[..3]);
    out.extend_from_slice(body);
    out.extend_from_slice(&[0, 0, 0, 0]);
    out
}

#[test]
fn a_zstd_frame_declaring_a_huge_content_size_is_not_preallocated() {
    const NAME: &str = "a_zstd_frame_declaring_a_huge_content_size_is_not_preallocated";
    if !in_child(NAME) {
        return;
    }
    let tmp = TempDir::new("hostile-bomb");
    let backend = open(&tmp.root(), Compression::Zstd);
    let path = publish(&backend, "s");
    let line = br#"{"type":"turn/start","seq":2,"time":0,"data":{"turn":2}}
"#;
    // 1 TiB declared, after the published frames.
    let frame_at = std::fs::metadata(&path).unwrap().len();
    append_bytes(&path, &lying_frame(1 << 40, line));
    let before = vm_hwm_kib();
    let result = load(&backend, "s");
    let grown = vm_hwm_kib().saturating_sub(before);
    eprintln!("huge declared content size: peak grew by {grown} KiB, result {result:?}");
    assert!(grown < 64 * 1024, "peak grew by {grown} KiB");
    // The decoder refuses the frame's window instead of allocating it: a typed frame error.
    match result {
        Err(Error::ZstdFrame { offset, .. }) => {
            assert_eq!(offset, frame_at, "the error names the frame's byte offset");
        }
        other => panic!("{other:?}"),
    }
}

/// A real Zstandard frame that expands to `blocks` × 128 KiB of `byte` from about 4 bytes a
/// block: a raw block holding `prefix`, then RLE blocks (what libzstd itself emits for a run of
/// one byte), without a content size or checksum. With `complete` false the last block is not
/// marked last, so the frame is torn at the end of the file.
fn rle_bomb(prefix: &[u8], byte: u8, blocks: u32, complete: bool) -> Vec<u8> {
    const BLOCK: u32 = 128 * 1024;
    // Magic; descriptor 0 (window byte, no content size, no checksum); window 2^20.
    let mut out = vec![0x28, 0xB5, 0x2F, 0xFD, 0x00, 0x50];
    let raw = u32::try_from(prefix.len()).unwrap() << 3;
    out.extend_from_slice(&raw.to_le_bytes()[..3]);
    out.extend_from_slice(prefix);
    for i in 0..blocks {
        let last = u32::from(complete && i + 1 == blocks);
        let header = (BLOCK << 3) | (1 << 1) | last; // RLE block of 128 KiB
        out.extend_from_slice(&header.to_le_bytes()[..3]);
        out.push(byte);
    }
    out
}

/// The limit a load error names, when it is a frame error whose source is a [`PlaintextLimit`].
fn limit_of(e: &Error) -> Option<(u64, PlaintextLimit)> {
    match e {
        Error::ZstdFrame { offset, source } => source
            .get_ref()
            .and_then(|s| s.downcast_ref::<PlaintextLimit>())
            .map(|l| (*offset, *l)),
        _ => None,
    }
}

#[test]
fn a_zstd_expansion_bomb_is_refused_naming_its_frame_with_bounded_memory() {
    const NAME: &str = "a_zstd_expansion_bomb_is_refused_naming_its_frame_with_bounded_memory";
    const GIB3_BLOCKS: u32 = 3 * 8 * 1024; // 3 GiB in 128 KiB blocks
    if !in_child(NAME) {
        return;
    }
    let bomb = rle_bomb(b"", 0, GIB3_BLOCKS, true);
    assert!(bomb.len() < 100_000, "the bomb is {} bytes", bomb.len());
    // It is a genuine frame: libzstd's own streaming decoder expands it to zeros.
    {
        use std::io::Read as _;
        let mut head = vec![1u8; 1 << 20];
        zstd::stream::read::Decoder::new(&bomb[..])
            .unwrap()
            .read_exact(&mut head)
            .unwrap();
        assert!(head.iter().all(|b| *b == 0));
    }
    let tmp = TempDir::new("hostile-expansion-bomb");
    let backend = open(&tmp.root(), Compression::Zstd);
    let path = publish(&backend, "s");
    let frame_at = std::fs::metadata(&path).unwrap().len();
    append_bytes(&path, &bomb);
    let torn_path = publish(&backend, "torn");
    let torn_at = std::fs::metadata(&torn_path).unwrap().len();
    // A torn final frame whose complete blocks expand to 3 GiB of one unterminated string.
    let prefix = br#"{"type":"user/note","seq":2,"time":0,"data":{"text":""#;
    append_bytes(&torn_path, &rle_bomb(prefix, b'a', GIB3_BLOCKS, false));
    // A header frame that expands to 3 GiB of one unterminated header record, in a root of its
    // own (listing reads every header).
    let headers = TempDir::new("hostile-header-bomb");
    let header_backend = open(&headers.root(), Compression::Zstd);
    let header_path = publish(&header_backend, "h");
    let prefix = br#"{"type":"session","version":0,"id":"h","createdAt":1,"x":""#;
    std::fs::write(&header_path, rle_bomb(prefix, b'a', GIB3_BLOCKS, true)).unwrap();

    let before = vm_hwm_kib();
    let loaded = load(&backend, "s").unwrap_err();
    let raw = rt().block_on(backend.read_raw("s")).unwrap_err();
    let torn = load(&backend, "torn").unwrap_err();
    // A listing leaves the session out and reports it with its error.
    let listed = rt().block_on(header_backend.list_entries()).unwrap();
    let listed = listed
        .into_iter()
        .find_map(|entry| entry.header.err())
        .expect("the bomb's session is reported as unreadable");
    let grown = vm_hwm_kib().saturating_sub(before);
    eprintln!("3 GiB expansion bombs: peak grew by {grown} KiB; {loaded}: {loaded:?}");
    let record = PlaintextLimit {
        kind: PlaintextLimitKind::Record,
        limit: MAX_RECORD_BYTES,
    };
    assert_eq!(limit_of(&loaded), Some((frame_at, record)), "{loaded:?}");
    assert_eq!(limit_of(&raw), Some((frame_at, record)), "{raw:?}");
    assert_eq!(limit_of(&torn), Some((torn_at, record)), "{torn:?}");
    match &listed {
        Error::ZstdHeaderFrame { source } => assert_eq!(
            source
                .get_ref()
                .and_then(|s| s.downcast_ref::<PlaintextLimit>()),
            Some(&record)
        ),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        loaded.to_string(),
        format!("corrupt Zstandard session log: frame at byte {frame_at} failed validation")
    );
    // At most one record's limit is buffered, never the frame's 3 GiB.
    let limit_kib = MAX_RECORD_BYTES / 1024;
    assert!(
        grown < limit_kib + 128 * 1024,
        "peak grew by {grown} KiB (record limit {limit_kib} KiB)"
    );
}

// ---- A very long line ----

#[test]
fn a_64_mib_line_loads_with_memory_bounded_by_a_few_copies() {
    const NAME: &str = "a_64_mib_line_loads_with_memory_bounded_by_a_few_copies";
    const LEN: usize = 64 << 20;
    if !in_child(NAME) {
        return;
    }
    let tmp = TempDir::new("hostile-long-line");
    let backend = open(&tmp.root(), Compression::None);
    let path = publish(&backend, "s");
    {
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        f.write_all(br#"{"type":"user/note","seq":2,"time":0,"data":{"text":""#)
            .unwrap();
        let block = vec![b'a'; 1 << 20];
        for _ in 0..(LEN >> 20) {
            f.write_all(&block).unwrap();
        }
        f.write_all(b"\"}}\n").unwrap();
    }
    let before = vm_hwm_kib();
    let stored = rt().block_on(backend.load_stored("s")).unwrap().unwrap();
    let grown = vm_hwm_kib().saturating_sub(before);
    assert_eq!(stored.events.len(), 3);
    let text = stored.events[2]
        .data()
        .get("text")
        .unwrap()
        .as_str()
        .unwrap()
        .len();
    assert_eq!(text, LEN);
    let line_kib = (LEN / 1024) as u64;
    eprintln!("64 MiB line: peak grew by {grown} KiB");
    assert!(
        grown < 4 * line_kib,
        "peak grew by {grown} KiB for a {line_kib} KiB line"
    );
}

/// Extends the file at `path` to `len` bytes of NUL (a sparse file: nothing is written).
fn grow_sparse(path: &Path, len: u64) {
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .unwrap()
        .set_len(len)
        .unwrap();
}

/// A plain log's line longer than `MAX_RECORD_BYTES` is refused naming its byte, before more
/// than the limit of it is held: the final fragment of a log (600 MiB of NUL bytes without a
/// newline, a sparse file), the same line with a newline and a turn after it, and a header line
/// that long, which a listing reports as that session's error. Before, the reader buffered the
/// whole fragment and copied it (2 GiB of peak memory for a 700 MB tail).
#[test]
fn a_plain_line_over_the_record_limit_is_refused_naming_its_byte_with_bounded_memory() {
    const NAME: &str =
        "a_plain_line_over_the_record_limit_is_refused_naming_its_byte_with_bounded_memory";
    const LONG: u64 = 600 << 20;
    if !in_child(NAME) {
        return;
    }
    let tmp = TempDir::new("hostile-plain-long-line");
    let backend = open(&tmp.root(), Compression::None);
    // The final fragment.
    let torn = publish(&backend, "torn");
    let torn_at = std::fs::metadata(&torn).unwrap().len();
    grow_sparse(&torn, torn_at + LONG);
    // The same line, ended, and the log's own turn again after it.
    let ended = publish(&backend, "ended");
    let ended_at = std::fs::metadata(&ended).unwrap().len();
    let logged = std::fs::read(&ended).unwrap();
    let turn_lines = logged.splitn(2, |b| *b == b'\n').nth(1).unwrap().to_vec();
    grow_sparse(&ended, ended_at + LONG);
    append_bytes(&ended, b"\n");
    append_bytes(&ended, &turn_lines);
    // A header line that long: the log's first byte.
    let header = publish(&backend, "header");
    std::fs::write(&header, b"").unwrap();
    grow_sparse(&header, LONG);

    let before = vm_hwm_kib();
    let refused = [
        (load(&backend, "torn").unwrap_err(), torn_at),
        (load(&backend, "ended").unwrap_err(), ended_at),
        (load(&backend, "header").unwrap_err(), 0),
    ];
    // A listing reads the headers alone: the long one is that session's error, read in a
    // logarithmic number of steps (it used to search the whole buffer again after every 8 KiB).
    let listed = rt().block_on(backend.list_entries()).unwrap();
    let grown = vm_hwm_kib().saturating_sub(before);
    assert_eq!(listed.len(), 3);
    let errors: Vec<&Error> = listed
        .iter()
        .filter_map(|e| e.header.as_ref().err())
        .collect();
    assert!(
        matches!(errors[..], [Error::RecordTooLong { offset: 0, .. }]),
        "{errors:?}"
    );
    eprintln!("600 MiB plain lines: peak grew by {grown} KiB");
    for (err, at) in &refused {
        assert!(
            matches!(err, Error::RecordTooLong { offset, limit } if offset == at && *limit == MAX_RECORD_BYTES),
            "{err:?}"
        );
        assert_eq!(
            err.to_string(),
            format!(
                "corrupt session log: record at byte {at} is longer than {MAX_RECORD_BYTES} bytes \
                 without a newline (MAX_RECORD_BYTES)"
            )
        );
        assert_eq!(err.position().and_then(|p| p.offset), Some(*at));
    }
    let limit_kib = MAX_RECORD_BYTES / 1024;
    assert!(
        grown < limit_kib + 128 * 1024,
        "peak grew by {grown} KiB (record limit {limit_kib} KiB)"
    );
}

// ---- Deep nesting ----

#[test]
fn deeply_nested_json_is_refused_with_the_depth_error() {
    let depth = 200_000;
    assert!(depth > session_core::json::MAX_DEPTH);
    let tmp = TempDir::new("hostile-deep");
    let backend = open(&tmp.root(), Compression::None);
    let path = publish(&backend, "s");
    let mut line = String::from(r#"{"type":"user/note","seq":2,"time":0,"data":"#);
    line.push_str(&"[".repeat(depth));
    line.push_str(&"]".repeat(depth));
    line.push_str("}\n");
    append_bytes(&path, line.as_bytes());
    append_bytes(
        &path,
        b"{\"type\":\"turn/start\",\"seq\":3,\"time\":0,\"data\":{\"turn\":2}}\n",
    );
    // The parser refuses the line with its depth error (iteratively: no stack overflow)...
    let record = &line[..line.len() - 1];
    let err = session_core::json::Value::parse(record).unwrap_err();
    assert!(
        err.to_string().contains(&format!(
            "JSON nesting deeper than {} levels",
            session_core::json::MAX_DEPTH
        )),
        "{err}"
    );
    // ...so the backend reports the valid prefix before it and marks the rest as the torn
    // region a repair cuts, exactly as for any other unparseable line.
    let stored = rt().block_on(backend.load_stored("s")).unwrap().unwrap();
    assert_eq!(stored.events.len(), 2);
    assert!(stored.torn.is_some());
}

// ---- Invalid UTF-8 and lone surrogates ----

#[test]
fn invalid_utf8_in_a_line_is_decoded_lossily() {
    let tmp = TempDir::new("hostile-utf8");
    let backend = open(&tmp.root(), Compression::None);
    let path = publish(&backend, "s");
    append_bytes(
        &path,
        b"{\"type\":\"user/note\",\"seq\":2,\"time\":0,\"data\":{\"text\":\"a\xff\xfeb\"}}\n",
    );
    let stored = rt().block_on(backend.load_stored("s")).unwrap().unwrap();
    assert_eq!(stored.events.len(), 3);
    assert_eq!(
        stored.events[2]
            .data()
            .get("text")
            .unwrap()
            .as_str()
            .unwrap(),
        "a\u{FFFD}\u{FFFD}b"
    );
}

#[test]
fn a_lone_surrogate_escape_is_refused_with_line_and_offset() {
    let tmp = TempDir::new("hostile-surrogate");
    let backend = open(&tmp.root(), Compression::None);
    let path = publish(&backend, "s");
    let before = std::fs::metadata(&path).unwrap().len();
    let line = br#"{"type":"user/note","seq":2,"time":0,"data":{"text":"x\ud800y"}}
"#;
    append_bytes(&path, line);
    let err = load(&backend, "s").unwrap_err();
    match err {
        Error::LoneSurrogate { line, offset } => {
            assert_eq!(line, Some(3));
            let escape = line_offset(&std::fs::read(&path).unwrap(), br"\ud800");
            assert_eq!(offset, escape as u64);
            assert!(offset >= before);
        }
        other => panic!("{other:?}"),
    }
}

fn line_offset(bytes: &[u8], needle: &[u8]) -> usize {
    bytes
        .windows(needle.len())
        .position(|w| w == needle)
        .unwrap()
}

// ---- Permissions ----

/// The root a privilege-dropped child of [`an_unreadable_log_is_an_eacces_error`] reads.
const EACCES_ROOT: &str = "REL_HOSTILE_EACCES_ROOT";

/// The unprivileged user and group the root case drops to (`nobody` / `nogroup`).
const UNPRIVILEGED: u32 = 65_534;

/// `setpriv`, if installed.
fn setpriv() -> Option<PathBuf> {
    [
        "/usr/bin/setpriv",
        "/bin/setpriv",
        "/usr/sbin/setpriv",
        "/sbin/setpriv",
    ]
    .into_iter()
    .map(PathBuf::from)
    .find(|p| p.is_file())
}

/// Chowns `path` and everything below it.
#[cfg(unix)]
fn chown_tree(path: &Path, uid: u32, gid: u32) {
    std::os::unix::fs::chown(path, Some(uid), Some(gid)).unwrap();
    if path.is_dir() {
        for entry in std::fs::read_dir(path).unwrap() {
            chown_tree(&entry.unwrap().path(), uid, gid);
        }
    }
}

#[cfg(unix)]
#[test]
fn an_unreadable_log_is_an_eacces_error() {
    use std::os::unix::fs::PermissionsExt;
    const NAME: &str = "an_unreadable_log_is_an_eacces_error";
    if let Some(root) = std::env::var_os(EACCES_ROOT) {
        // The child, running as an unprivileged user: the log is its own, with mode 000.
        assert!(!is_root(), "the child must not run as root");
        let backend = open(Path::new(&root), Compression::None);
        let err = load(&backend, "s").unwrap_err();
        assert_eq!(err.code(), Some("EACCES"), "{err}");
        return;
    }
    let tmp = TempDir::new("hostile-eacces");
    let backend = open(&tmp.root(), Compression::None);
    let path = publish(&backend, "s");
    rt().block_on(backend.close()).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o000)).unwrap();
    if !is_root() {
        let backend = open(&tmp.root(), Compression::None);
        let err = load(&backend, "s").unwrap_err();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(err.code(), Some("EACCES"), "{err}");
        return;
    }
    // Root bypasses permission checks: re-run this test as an unprivileged user that owns the
    // root, its directories and the mode-000 log, from a copy of this test binary it can
    // execute wherever the build put the original.
    let Some(setpriv) = setpriv() else {
        // The test cannot run, and that fails unless skipping is asked for explicitly.
        const ALLOW_SKIP: &str = "SESSION_TEST_ALLOW_NO_SETPRIV";
        assert!(
            std::env::var(ALLOW_SKIP).as_deref() == Ok("1"),
            "{NAME}: running as root (which bypasses file permission checks) and setpriv is \
             not installed, so privileges cannot be dropped; set {ALLOW_SKIP}=1 to skip"
        );
        return;
    };
    chown_tree(&tmp.root(), UNPRIVILEGED, UNPRIVILEGED);
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let exe = tmp.path().join("reliability_hostile");
    std::fs::copy(std::env::current_exe().unwrap(), &exe).unwrap();
    std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = std::process::Command::new(&setpriv)
        .args([
            format!("--reuid={UNPRIVILEGED}"),
            format!("--regid={UNPRIVILEGED}"),
            "--clear-groups".to_owned(),
        ])
        .arg(&exe)
        .args(["--exact", NAME, "--nocapture", "--test-threads=1"])
        .env(EACCES_ROOT, tmp.root())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "the unprivileged run of {NAME} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
