//! `fork` and `convert` write in the batches a live loop writes (one per turn/start and
//! step/start), never the whole session as one frame.
#![allow(clippy::unwrap_used)] // helpers outside `#[test]` functions unwrap too

use crate::common::{Temp, run};

fn frames(root: &str, id: &str) -> u64 {
    let stats = run(&["--root", root, "stats", id, "--json"]).ok().json();
    stats["frames"].as_u64().unwrap()
}

#[test]
fn fork_and_convert_write_one_frame_per_live_batch() {
    let root = Temp::new("batches");
    run(&["--root", root.str(), "demo"]).ok();
    let forked = run(&[
        "--root",
        root.str(),
        "fork",
        "demo",
        "--at",
        "62",
        "--id",
        "child",
        "--json",
    ])
    .ok()
    .json();
    assert_eq!(forked["child"]["seedLength"], 63);
    let events = forked["child"]["events"].as_u64().unwrap();
    let messages = run(&["--root", root.str(), "messages", "child", "--json"]).ok();
    assert!(messages.stdout.contains("\"count\""), "{}", messages.stdout);
    // 2 turns with their steps before seq 62, plus the end-seed marker: several frames
    let child_frames = frames(root.str(), "child");
    assert!(
        child_frames >= 4,
        "{child_frames} frames for {events} events"
    );
    // and the child reads back as a fork of its parent
    let header = run(&["--root", root.str(), "inspect", "child", "--json"])
        .ok()
        .json();
    assert_eq!(header["header"]["parentSession"], "demo", "{header}");
    run(&["verify", "--strict", root.str()]).ok();

    let dest = Temp::new("batches-dest");
    run(&[
        "--root",
        root.str(),
        "convert",
        "demo",
        dest.str(),
        "--to",
        "zstd",
    ])
    .ok();
    assert!(frames(dest.str(), "demo") >= 8);
}
