//! Hostile files and directories through `sessionctl`: a file outside its layout path is read in
//! place (nothing staged in `$TMPDIR`, planted links and directories at the old predictable
//! staging paths are never followed, a killed read leaves nothing behind), group- or
//! world-writable store directories are refused, a decompression bomb, a plain line over the
//! record limit and a damaged frame are refused with their cause named, terminal escape sequences in ids and content are shown
//! escaped, and one very long word wraps in linear time.
#![allow(clippy::unwrap_used)] // helpers outside `#[test]` functions unwrap too

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{BIN, Temp, run, run_in};

/// One closed turn with a user message holding `text`.
fn turn(text: &str) -> String {
    let text = serde_json::to_string(text).unwrap();
    format!(
        "{}\n{}\n{}\n{}\n",
        r#"{"type":"turn/start","data":{"turn":1}}"#,
        format_args!(
            r#"{{"type":"user/message","data":{{"id":"u1","role":"user","content":[{{"type":"text","text":{text}}}],"source":{{"kind":"user"}}}},"surfaceOp":"append"}}"#
        ),
        r#"{"type":"turn/end","data":{"turn":1,"reason":{"kind":"completed"}}}"#,
        r#"{"flush":true}"#
    )
}

/// Creates session `id` under `root` holding [`turn`]`(text)`; returns its log file.
fn create(root: &Path, id: &str, text: &str, extra: &[&str]) -> PathBuf {
    let mut args = vec!["--root", root.to_str().unwrap()];
    args.extend_from_slice(extra);
    args.extend(["append", id, "--create", "--cwd", "/work/p"]);
    run_in(&args, Some(&turn(text))).ok();
    log_files(root).pop().unwrap()
}

/// Every `session.jsonl*` under `root/<project>/<session>/`.
fn log_files(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for project in std::fs::read_dir(root).unwrap().flatten() {
        let Ok(sessions) = std::fs::read_dir(project.path()) else {
            continue;
        };
        for session in sessions.flatten() {
            let Ok(files) = std::fs::read_dir(session.path()) else {
                continue;
            };
            for f in files.flatten() {
                if f.file_name().to_string_lossy().starts_with("session.jsonl") {
                    out.push(f.path());
                }
            }
        }
    }
    out.sort();
    out
}

/// The names in a directory, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// Runs `sessionctl` with `TMPDIR` set.
fn run_with_tmpdir(tmpdir: &Path, args: &[&str]) -> crate::common::Run {
    let out = Command::new(BIN)
        .args(args)
        .env("TMPDIR", tmpdir)
        .env_remove("NO_COLOR")
        .env_remove("COLUMNS")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    crate::common::Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path)
        .unwrap()
        .permissions()
        .mode()
        & 0o7777
}

#[test]
fn a_file_outside_its_layout_is_read_in_place_and_planted_staging_paths_are_never_followed() {
    let base = Temp::new("hostile-in-place");
    let root = base.path().join("root");
    let log = create(&root, "s", "hello", &[]);
    let elsewhere = base.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    let copy = elsewhere.join("session.jsonl.zstd");
    std::fs::copy(&log, &copy).unwrap();
    let original = std::fs::read(&copy).unwrap();

    // The victims: a file any staging copy would overwrite, a directory it would write into.
    let victim = base.path().join("victim.txt");
    std::fs::write(&victim, "precious\n").unwrap();
    std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o644)).unwrap();
    let victim_dir = base.path().join("victim-dir");
    std::fs::create_dir(&victim_dir).unwrap();
    std::fs::write(victim_dir.join("keep"), "").unwrap();
    // Plant, for the next few hundred process ids, what an attacker would plant at the old
    // predictable staging path `$TMPDIR/sessionctl-<pid>-0`: a symlink to the victim directory,
    // a directory of the attacker's holding a file (a staging run would delete it), and a
    // symlink to the victim file.
    let tmpdir = base.path().join("tmp");
    std::fs::create_dir(&tmpdir).unwrap();
    let last: u32 = std::fs::read_to_string("/proc/sys/kernel/ns_last_pid")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    for pid in last + 1..last + 400 {
        // `verify`'s persistence round trip used predictable scratch roots too.
        for name in [
            format!("conformance-round-trip-{pid}-0"),
            format!("conformance-re-encode-{pid}-1"),
        ] {
            std::os::unix::fs::symlink(&victim_dir, tmpdir.join(name)).unwrap();
        }
        let planted = tmpdir.join(format!("sessionctl-{pid}-0"));
        match pid % 3 {
            0 => std::os::unix::fs::symlink(&victim_dir, &planted).unwrap(),
            1 => {
                std::fs::create_dir(&planted).unwrap();
                std::fs::write(planted.join("keep"), "").unwrap();
            }
            _ => std::os::unix::fs::symlink(&victim, &planted).unwrap(),
        }
    }
    let planted_before = names(&tmpdir);

    let file = copy.to_str().unwrap();
    for args in [
        vec!["inspect", file],
        vec!["--json", "inspect", file],
        vec!["messages", file],
        vec!["transcript", file],
        vec!["header", file],
        vec!["stats", file],
        vec!["repair", file, "--dry-run"],
        vec!["verify", file],
    ] {
        let r = run_with_tmpdir(&tmpdir, &args);
        assert_eq!(r.code, 0, "{args:?}: {}{}", r.stdout, r.stderr);
        if args[0] == "--json" {
            let doc: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
            assert_eq!(doc["inLayout"], false);
            assert_eq!(doc["file"], file);
        }
        if args[0] == "inspect" {
            assert!(
                r.stdout.contains("outside a store layout: read in place"),
                "{}",
                r.stdout
            );
        }
    }
    let dest = base.path().join("converted");
    let r = run_with_tmpdir(&tmpdir, &["convert", file, dest.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    // Writing commands still refuse the file.
    let r = run_with_tmpdir(&tmpdir, &["repair", file]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stderr.contains("is not at its layout path"),
        "{}",
        r.stderr
    );

    // Nothing was staged, followed, written or removed (verify's scratch roots are private
    // directories with random names, removed again).
    assert_eq!(names(&tmpdir), planted_before);
    for pid in last + 1..last + 400 {
        let planted = tmpdir.join(format!("sessionctl-{pid}-0"));
        if pid % 3 == 1 {
            assert_eq!(names(&planted), ["keep"], "{}", planted.display());
        }
    }
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
    assert_eq!(mode(&victim), 0o644);
    assert_eq!(names(&victim_dir), ["keep"]);
    assert_eq!(std::fs::read(&copy).unwrap(), original);
    assert_eq!(names(&elsewhere), ["session.jsonl.zstd"]);
}

/// A plain log of about `bytes` bytes for session `big`, outside any layout.
fn big_plain_log(dir: &Path, bytes: usize) -> PathBuf {
    use std::io::Write as _;
    let path = dir.join("session.jsonl");
    let mut f = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    writeln!(
        f,
        r#"{{"type":"session","version":0,"id":"big","createdAt":1,"cwd":"/work/p","delegationDepth":0}}"#
    )
    .unwrap();
    let pad = "x".repeat(400);
    let mut seq = 0u64;
    let mut written = 0;
    while written < bytes {
        let line =
            format!(r#"{{"type":"user/note","seq":{seq},"time":0,"data":{{"text":"{pad}"}}}}"#);
        writeln!(f, "{line}").unwrap();
        written += line.len() + 1;
        seq += 1;
    }
    f.flush().unwrap();
    path
}

/// Whether process `pid` has `file` open.
fn has_open(pid: u32, file: &Path) -> bool {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    fds.flatten()
        .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|t| t == file))
}

/// Whether this process ignores SIGINT (bit 2 of `SigIgn` in `/proc/self/status`).
fn sigint_ignored() -> bool {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("SigIgn:"))
        .and_then(|mask| u64::from_str_radix(mask.trim(), 16).ok())
        .is_some_and(|mask| mask & (1 << (2 - 1)) != 0)
}

#[test]
fn a_read_killed_by_sigterm_or_sigint_leaves_nothing_behind() {
    let base = Temp::new("hostile-killed");
    let dir = base.path().join("elsewhere");
    std::fs::create_dir(&dir).unwrap();
    let file = big_plain_log(&dir, 48 << 20);
    let tmpdir = base.path().join("tmp");
    std::fs::create_dir(&tmpdir).unwrap();
    let ignored = sigint_ignored();
    for (signal, number) in [("TERM", 15), ("INT", 2)] {
        // A run that ended before its signal arrived (a late `kill`) is retried with a shorter
        // wait; only a run stopped by the signal counts.
        let mut stopped = false;
        let mut ended = Vec::new();
        for wait_ms in [100, 50, 25, 12, 6] {
            // A process started in the background by a shell without job control (as CI may
            // run this suite) ignores SIGINT, and its children inherit that. Then sessionctl
            // starts through `env --default-signal=INT`, which execs it (same pid) with the
            // default disposition a terminal's Ctrl-C meets.
            let mut command = if ignored {
                let mut c = Command::new("env");
                c.args(["--default-signal=INT", BIN]);
                c
            } else {
                Command::new(BIN)
            };
            command
                .args(["messages", file.to_str().unwrap()])
                .env("TMPDIR", &tmpdir)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped());
            let child = command.spawn().unwrap();
            // Wait until the log is being read (the header read opens it first, the load after).
            let start = Instant::now();
            while !has_open(child.id(), &file) {
                assert!(
                    start.elapsed() < Duration::from_secs(30),
                    "sessionctl never opened {}",
                    file.display()
                );
                std::thread::sleep(Duration::from_millis(1));
            }
            std::thread::sleep(Duration::from_millis(wait_ms));
            let sent = Command::new("kill")
                .args([&format!("-{signal}"), &child.id().to_string()])
                .status()
                .unwrap();
            let out = child.wait_with_output().unwrap();
            assert!(names(&tmpdir).is_empty(), "{:?}", names(&tmpdir));
            assert_eq!(names(&dir), ["session.jsonl"]);
            if sent.success() && out.status.signal() == Some(number) {
                stopped = true;
                break;
            }
            ended.push(format!(
                "{wait_ms} ms: {:?}: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        assert!(
            stopped,
            "sessionctl was never still reading when SIG{signal} arrived; the log is too small: {ended:#?}"
        );
    }
}

/// A real Zstandard frame of `blocks` RLE blocks of 128 KiB of `a` each (about 4 bytes a block,
/// what libzstd itself emits for a run of one byte), with no newline, content size or checksum.
fn rle_bomb(blocks: u32) -> Vec<u8> {
    const BLOCK: u32 = 128 * 1024;
    // Magic; descriptor 0 (window byte, no content size, no checksum); window 2^20.
    let mut out = vec![0x28, 0xB5, 0x2F, 0xFD, 0x00, 0x50];
    for i in 0..blocks {
        let last = u32::from(i + 1 == blocks);
        out.extend_from_slice(&((BLOCK << 3) | (1 << 1) | last).to_le_bytes()[..3]);
        out.push(b'a');
    }
    out
}

/// The bomb is refused at the record limit, and the error says so: the limit is its `cause:`
/// and the hint does not call the frame a damaged write.
#[test]
fn a_decompression_bomb_is_refused_naming_the_limit_as_its_cause() {
    let tmp = Temp::new("hostile-bomb");
    let log = create(tmp.path(), "bomb", "before the bomb", &[]);
    assert_eq!(log.extension().unwrap(), "zstd", "{}", log.display());
    let frame_at = std::fs::metadata(&log).unwrap().len();
    let mut bytes = std::fs::read(&log).unwrap();
    bytes.extend_from_slice(&rle_bomb(5 * 8 * 1024)); // 5 GiB of one unterminated line
    std::fs::write(&log, bytes).unwrap();

    let r = run(&["--root", tmp.str(), "inspect", "bomb"]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    let cause = "a record decompresses to more than 536870912 bytes without a newline \
                 (MAX_RECORD_BYTES)";
    assert!(
        r.stderr
            .contains(&format!("frame at byte {frame_at} failed validation")),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr.contains(&format!("  cause: {cause}\n")),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr.contains(&format!(
            "  hint: the frame at byte {frame_at} expands to a line longer than any harness writes"
        )),
        "{}",
        r.stderr
    );
    assert!(!r.stderr.contains("damaged"), "{}", r.stderr);

    let r = run(&["--root", tmp.str(), "--json", "inspect", "bomb"]);
    let err = r.json_error();
    assert_eq!(err["cause"], cause, "{err}");
    assert_eq!(err["offset"], frame_at, "{err}");
    assert!(
        err["hint"].as_str().unwrap().contains("decompression bomb"),
        "{err}"
    );
}

/// A plain log whose last line runs on for 600 MiB without a newline (a sparse file of NUL
/// bytes) is refused at the record limit, naming the line's byte and how to keep what precedes
/// it.
#[test]
fn a_plain_line_over_the_record_limit_is_refused_naming_its_byte() {
    let tmp = Temp::new("hostile-plain-long-line");
    let log = create(
        tmp.path(),
        "long",
        "before the long line",
        &["--compression", "none"],
    );
    let at = std::fs::metadata(&log).unwrap().len();
    // 600 MiB of NUL bytes, a sparse file: nothing is written.
    std::fs::OpenOptions::new()
        .write(true)
        .open(&log)
        .unwrap()
        .set_len(at + (600 << 20))
        .unwrap();
    let r = run(&[
        "--root",
        tmp.str(),
        "--compression",
        "none",
        "inspect",
        "long",
    ]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stderr.contains(&format!(
            "corrupt session log: record at byte {at} is longer than 536870912 bytes without a \
             newline (MAX_RECORD_BYTES)\n  where: {}, byte {at}\n",
            log.display()
        )),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr.contains(&format!(
            "cut the file at byte {at}, then run `sessionctl repair`"
        )),
        "{}",
        r.stderr
    );
}

/// A complete frame that fails libzstd's checks names libzstd's error as its cause.
#[test]
fn a_damaged_frame_names_the_decoders_error_as_its_cause() {
    let tmp = Temp::new("hostile-damaged-frame");
    let log = create(tmp.path(), "damaged", "checksummed", &[]);
    let mut bytes = std::fs::read(&log).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xFF; // the last frame's checksum
    std::fs::write(&log, bytes).unwrap();

    let r = run(&["--root", tmp.str(), "inspect", "damaged"]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("failed validation"), "{}", r.stderr);
    assert!(
        r.stderr
            .contains("  cause: Restored data doesn't match checksum\n"),
        "{}",
        r.stderr
    );
    let r = run(&["--root", tmp.str(), "--json", "inspect", "damaged"]);
    assert_eq!(
        r.json_error()["cause"],
        "Restored data doesn't match checksum",
        "{}",
        r.stderr
    );
}

#[test]
fn a_group_or_world_writable_root_project_or_session_directory_is_refused_unless_allowed() {
    let base = Temp::new("hostile-permissive");
    let root = base.path().join("root");
    create(&root, "s", "hello", &[]);
    let r = root.to_str().unwrap();
    assert_eq!(run(&["--root", r, "list"]).code, 0);
    for (dir, mode) in [
        (root.clone(), 0o777),
        (root.clone(), 0o770),
        (
            log_files(&root)[0]
                .parent()
                .unwrap()
                .parent()
                .unwrap()
                .to_path_buf(),
            0o777,
        ),
        (
            log_files(&root)[0]
                .parent()
                .unwrap()
                .parent()
                .unwrap()
                .to_path_buf(),
            0o720,
        ),
        (log_files(&root)[0].parent().unwrap().to_path_buf(), 0o777),
        (log_files(&root)[0].parent().unwrap().to_path_buf(), 0o770),
    ] {
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(mode)).unwrap();
        let before = std::fs::read(&log_files(&root)[0]).unwrap();
        for args in [
            vec!["--root", r, "list"],
            vec!["--root", r, "inspect", "s"],
            vec!["--root", r, "messages", "s"],
            vec!["--root", r, "repair", "s"],
            vec!["--root", r, "fork", "s", "--id", "f"],
        ] {
            let out = run(&args);
            assert_eq!(out.code, 1, "{args:?} with {} at {mode:o}", dir.display());
            let want = format!(
                "session directory \"{}\" must not be group/world-writable (mode {mode:04o})",
                dir.display()
            );
            assert!(out.stderr.contains(&want), "{}", out.stderr);
        }
        let out = run_in(
            &["--root", r, "append", "s"],
            Some("{\"type\":\"x/note\",\"data\":{},\"ignorable\":true}\n"),
        );
        assert_eq!(out.code, 1, "append with {} at {mode:o}", dir.display());
        assert!(
            out.stderr.contains("must not be group/world-writable"),
            "{}",
            out.stderr
        );
        assert_eq!(log_files(&root).len(), 1);
        assert_eq!(std::fs::read(&log_files(&root)[0]).unwrap(), before);
        let err = run(&["--json", "--root", r, "list"]).json_error();
        assert!(
            err["message"]
                .as_str()
                .unwrap()
                .contains(&format!("{mode:04o}")),
            "{err}"
        );
        // The documented opt-outs.
        run(&["--allow-permissive-dirs", "--root", r, "messages", "s"]).ok();
        let out = Command::new(BIN)
            .args(["--root", r, "list"])
            .env("SESSIONCTL_ALLOW_PERMISSIVE_DIRS", "1")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    }
    // Writing into a permissive root is refused before anything is written (a fork too).
    std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o777)).unwrap();
    // (No input: the store is refused when it opens, before stdin is read.)
    let out = run(&["--root", r, "append", "t", "--create", "--cwd", "/work/q"]);
    assert_ne!(out.code, 0);
    assert!(
        out.stderr.contains("must not be group/world-writable"),
        "{}",
        out.stderr
    );
    let out = run(&["--root", r, "fork", "s", "--id", "f"]);
    assert_ne!(out.code, 0);
    assert!(
        out.stderr.contains("must not be group/world-writable"),
        "{}",
        out.stderr
    );
    assert_eq!(log_files(&root).len(), 1);
    std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o700)).unwrap();
}

#[test]
fn terminal_escape_sequences_in_ids_and_content_are_shown_escaped() {
    let base = Temp::new("hostile-escapes");
    let root = base.path().join("root");
    let id = "evil\u{1b}]0;owned\u{7}\u{1b}[2J";
    let text = "hi \u{1b}]8;;http://x\u{7}link\u{1b}]8;;\u{7} \u{9b}31m red \r\u{8}";
    create(&root, id, text, &[]);
    let r = root.to_str().unwrap();
    for args in [
        vec!["--root", r, "list"],
        vec!["--root", r, "inspect", id],
        vec!["--root", r, "messages", id],
        vec!["--root", r, "transcript", id],
        vec!["--root", r, "stats", id],
        vec!["--root", r, "header", id],
        vec!["--root", r, "repair", id, "--dry-run"],
    ] {
        let out = run(&args);
        assert_eq!(out.code, 0, "{args:?}: {}", out.stderr);
        let hostile = |c: char| matches!(c, '\0'..='\x1f' | '\x7f'..='\u{9f}') && c != '\n';
        assert!(
            !out.stdout.chars().any(hostile),
            "{args:?} printed a raw control character: {:?}",
            out.stdout
        );
        if args[2] != "header" {
            assert!(
                out.stdout.contains(r"evil\x1b]0;owned\x07\x1b[2J"),
                "{args:?}: {}",
                out.stdout
            );
        }
        if matches!(args[2], "messages" | "transcript") {
            assert!(
                out.stdout
                    .contains(r"hi \x1b]8;;http://x\x07link\x1b]8;;\x07 \u{9b}31m red \x0d\x08"),
                "{}",
                out.stdout
            );
        }
    }
    // Errors naming the id are escaped too.
    let out = run(&["--root", r, "messages", id, "--at", "99"]);
    assert_eq!(out.code, 1);
    assert!(!out.stderr.contains('\u{1b}'), "{:?}", out.stderr);
    assert!(out.stderr.contains(r"evil\x1b]0;owned"), "{}", out.stderr);
    // JSON output keeps the exact id (JSON escapes it).
    let doc = run(&["--json", "--root", r, "inspect", id]).ok().json();
    assert_eq!(doc["id"], id);
}

#[test]
fn an_800_000_character_word_is_wrapped_through_messages() {
    let base = Temp::new("hostile-long-word");
    let root = base.path().join("root");
    let word = "w".repeat(800_000);
    create(&root, "s", &word, &[]);
    let start = Instant::now();
    let out = Command::new(BIN)
        .args(["--root", root.to_str().unwrap(), "messages", "s", "--full"])
        .env("COLUMNS", "100")
        .output()
        .unwrap();
    let took = start.elapsed();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    let body: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("    "))
        .filter(|l| l.starts_with('w'))
        .collect();
    assert_eq!(body.len(), 800_000usize.div_ceil(96));
    assert_eq!(body.concat(), word);
    // The work bound is checked by `output.rs`'s unit test; this only catches a gross
    // regression (the quadratic wrap took 12.8 s in a release build).
    assert!(took < Duration::from_secs(10), "took {took:?}");
}
