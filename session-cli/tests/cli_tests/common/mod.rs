//! Helpers for the `sessionctl` tests: running the built binary, temporary roots, the corpus.

#![allow(
    dead_code,
    unreachable_pub,
    clippy::missing_panics_doc,
    clippy::unwrap_used
)]

pub mod stores;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::Value;

/// The built binary.
pub const BIN: &str = env!("CARGO_BIN_EXE_sessionctl");

/// The golden corpus directory (`conformance::corpus::locate`: `$SESSION_CORPUS`, else
/// `../shared/corpus` beside the workspace).
pub fn corpus() -> PathBuf {
    conformance::corpus::locate()
}

/// The golden corpus and its index. Fails the test when the corpus is absent, unless
/// `SESSION_CORPUS_OPTIONAL=1` (then `None`: the caller returns).
pub fn corpus_index() -> Option<conformance::corpus::Corpus> {
    conformance::corpus::Corpus::require()
}

/// One run of the binary.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    fn from(o: &Output) -> Run {
        Run {
            code: o.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }

    /// Stdout parsed as one JSON document.
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| {
            panic!(
                "stdout is not JSON ({e}): {}\nstderr: {}",
                self.stdout, self.stderr
            )
        })
    }

    /// Stderr parsed as the JSON error document; returns its `error` object.
    pub fn json_error(&self) -> Value {
        let v: Value = serde_json::from_str(self.stderr.trim())
            .unwrap_or_else(|e| panic!("stderr is not JSON ({e}): {}", self.stderr));
        v["error"].clone()
    }

    /// Asserts success and returns self.
    pub fn ok(self) -> Run {
        assert_eq!(
            self.code, 0,
            "stdout: {}\nstderr: {}",
            self.stdout, self.stderr
        );
        self
    }
}

/// Runs `sessionctl args…` with `NO_COLOR` unset and no stdin.
pub fn run(args: &[&str]) -> Run {
    run_in(args, None)
}

/// Runs `sessionctl args…` feeding `stdin`.
pub fn run_in(args: &[&str], stdin: Option<&str>) -> Run {
    run_env(args, stdin, &[])
}

/// Runs `sessionctl args…` feeding `stdin`, with `env` set (`NO_COLOR`, `CLICOLOR_FORCE`
/// and `COLUMNS` are unset unless `env` sets them).
pub fn run_env(args: &[&str], stdin: Option<&str>, env: &[(&str, &str)]) -> Run {
    let mut cmd = Command::new(BIN);
    cmd.args(args)
        .env_remove("NO_COLOR")
        .env_remove("CLICOLOR_FORCE")
        .env_remove("COLUMNS")
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        });
    let mut child = cmd.spawn().expect("spawn sessionctl");
    if let Some(text) = stdin {
        let mut pipe = child.stdin.take().expect("stdin");
        pipe.write_all(text.as_bytes()).expect("write stdin");
    }
    Run::from(&child.wait_with_output().expect("wait"))
}

/// A fresh temporary directory, removed on drop.
pub struct Temp(pub PathBuf);

impl Temp {
    pub fn new(tag: &str) -> Temp {
        static N: AtomicU64 = AtomicU64::new(0);
        let p = std::env::temp_dir().join(format!(
            "sessionctl-test-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        Temp(p)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    pub fn str(&self) -> &str {
        self.0.to_str().unwrap()
    }
}

impl Drop for Temp {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Reads a JSON file.
pub fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Copies `src` to `root/rel`, creating directories.
pub fn place(src: &Path, root: &Path, rel: &str) -> PathBuf {
    let dest = root.join(rel);
    std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
    std::fs::copy(src, &dest).unwrap();
    dest
}

/// Resolves an event-list reference of an expected.json (`{"sameAs": P}`,
/// `{"prefixOf": P, "count": n}`) against `doc`.
pub fn events_of(doc: &Value, v: &Value) -> Vec<Value> {
    if let Some(list) = v.as_array() {
        return list.clone();
    }
    let lookup = |path: &str| {
        let mut cur = doc;
        for part in path.split('.') {
            cur = &cur[part];
        }
        events_of(doc, cur)
    };
    if let Some(p) = v.get("sameAs").and_then(Value::as_str) {
        return lookup(p);
    }
    if let Some(p) = v.get("prefixOf").and_then(Value::as_str) {
        let n = v["count"].as_u64().unwrap() as usize;
        let mut all = lookup(p);
        all.truncate(n);
        return all;
    }
    panic!("not an event list: {v}");
}

/// Runs `f` over `items` on `workers` threads; panics with every failure's message.
pub fn parallel<T: Sync>(items: &[T], workers: usize, f: impl Fn(&T) + Sync) {
    let next = AtomicU64::new(0);
    let failures = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed) as usize;
                    let Some(item) = items.get(i) else { break };
                    if let Err(e) =
                        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(item)))
                    {
                        let msg = e
                            .downcast_ref::<String>()
                            .cloned()
                            .or_else(|| e.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                            .unwrap_or_default();
                        failures.lock().unwrap().push(msg);
                    }
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap();
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n---\n")
    );
}

/// Decompresses every frame of a zstd file.
pub fn unzstd(path: &Path) -> Vec<u8> {
    zstd::stream::decode_all(std::fs::File::open(path).unwrap()).unwrap()
}

/// Writes a plain log `<root>/--big--/<id>/session.jsonl` of `turns` turns, each a user and
/// an assistant message of about `text_bytes` bytes; returns its size.
pub fn write_large(root: &Path, id: &str, turns: usize, text_bytes: usize) -> u64 {
    let dir = root.join("--big--").join(id);
    std::fs::create_dir_all(&dir).unwrap();
    let mut text = format!(
        r#"{{"type":"session","version":0,"id":"{id}","createdAt":1767225600000,"cwd":"/big","delegationDepth":0}}"#
    );
    text.push('\n');
    let filler: String = "lorem ipsum dolor sit amet ".repeat(text_bytes / 27);
    let mut seq = 0;
    for t in 1..=turns {
        let lines = [
            format!(r#"{{"type":"turn/start","seq":{seq},"time":0,"data":{{"turn":{t}}}}}"#),
            format!(
                r#"{{"type":"user/message","seq":{},"time":0,"data":{{"id":"u{t}","role":"user","content":[{{"type":"text","text":"question {t}: {filler}"}}],"source":{{"kind":"user"}}}},"surfaceOp":"append"}}"#,
                seq + 1
            ),
            format!(
                r#"{{"type":"assistant/message","seq":{},"time":0,"data":{{"turn":{t},"step":1,"message":{{"id":"a{t}","role":"assistant","content":[{{"type":"text","text":"answer {t}: {filler}"}}],"source":{{"kind":"model","provider":"p","model":"m"}}}}}},"surfaceOp":"append"}}"#,
                seq + 2
            ),
            format!(
                r#"{{"type":"turn/end","seq":{},"time":0,"data":{{"turn":{t},"reason":{{"kind":"completed"}}}}}}"#,
                seq + 3
            ),
        ];
        for l in lines {
            text.push_str(&l);
            text.push('\n');
        }
        seq += 4;
    }
    std::fs::write(dir.join("session.jsonl"), &text).unwrap();
    text.len() as u64
}

/// Starts `sessionctl --root ROOT --compression none append ID --create --cwd /w` with its
/// stdin, stdout and stderr piped, for tests that feed drafts while it runs; returns the
/// child and its stdin.
pub fn spawn_append(root: &Path, id: &str) -> (std::process::Child, std::process::ChildStdin) {
    let mut child = Command::new(BIN)
        .arg("--root")
        .arg(root)
        .args([
            "--compression",
            "none",
            "append",
            id,
            "--create",
            "--cwd",
            "/w",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdin = child.stdin.take().unwrap();
    (child, stdin)
}
