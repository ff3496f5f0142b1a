//! `sessionctl serve` and `view` as processes: the API over JSONL, `SQLite` and `PostgreSQL`
//! stores changes no file and no row; a non-loopback bind is a usage error; `--allow-remote`
//! requires the token; hostile requests get typed errors; the exported page masks secrets.
//!
//! The `PostgreSQL` part uses `SESSION_PG_CLI_URL` (default
//! `postgres://postgres@127.0.0.1:5432/test`) in a schema of its own; without a server it says
//! so on standard error and is left out, unless `SESSION_PG_REQUIRED=1`.

#![allow(clippy::unwrap_used, clippy::missing_panics_doc)]

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::common::stores::{Schema, with_pg};
use crate::common::{BIN, Temp, corpus, place, run, run_in};
use serde_json::Value;

/// A crash variant whose log ends after a model's tool-call message: `load` would append
/// closers, `inspect` only shows them.
const CRASHED: &str = "logs/acp.bash-tool-turn__session/crash-04";

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `sessionctl ARGS… serve EXTRA…` and returns it with its URL and stdout lines.
fn serve(store: &[&str], extra: &[&str]) -> (Killed, String, Vec<String>) {
    let mut child = Command::new(BIN)
        .args(store)
        .arg("serve")
        .args(["--bind", "127.0.0.1:0"])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut lines = Vec::new();
    loop {
        let mut line = String::new();
        assert!(
            out.read_line(&mut line).unwrap() > 0,
            "serve exited: {lines:?}"
        );
        let done = line.starts_with("press Ctrl-C");
        lines.push(line.trim_end().to_owned());
        if done {
            break;
        }
    }
    let url = lines[0]
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap()
        .to_owned();
    (Killed(child), url, lines)
}

/// One HTTP/1.1 GET; returns the status and the body.
fn get(url: &str, path: &str, headers: &[(&str, &str)]) -> (u16, String) {
    let authority = url
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap()
        .to_owned();
    let mut s = TcpStream::connect(&authority).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut req = format!("GET {path} HTTP/1.1\r\nConnection: close\r\n");
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        let _ = write!(req, "Host: {authority}\r\n");
    }
    for (k, v) in headers {
        let _ = write!(req, "{k}: {v}\r\n");
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    (status, body.to_owned())
}

fn get_json(url: &str, path: &str) -> Value {
    let (status, body) = get(url, path, &[]);
    assert_eq!(status, 200, "GET {path}: {body}");
    serde_json::from_str(&body).unwrap()
}

/// Every file under `dir` with its bytes.
fn files(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.insert(p.clone(), std::fs::read(&p).unwrap());
            }
        }
    }
    out
}

/// Reads every endpoint of every session the store lists; returns the list.
fn read_everything(url: &str) -> Value {
    let list = get_json(url, "/api/sessions");
    for s in list["sessions"].as_array().unwrap() {
        let id = s["id"].as_str().unwrap();
        let base = format!("/api/sessions/{id}");
        let summary = get_json(url, &base);
        let n = summary["eventCount"].as_u64().unwrap();
        for depth in 0..3 {
            get_json(
                url,
                &format!("{base}/timeline?depth={depth}&from=0&limit=50"),
            );
        }
        let mut from = 0;
        while from < n {
            let page = get_json(url, &format!("{base}/events?from={from}&limit=40"));
            assert_eq!(page["events"][0]["seq"], from);
            from = page["next"].as_u64().unwrap_or(n);
        }
        for at in [0, n / 2, n - 1] {
            get_json(url, &format!("{base}/messages?at={at}"));
            get_json(url, &format!("{base}/header?at={at}"));
        }
        get_json(url, &format!("{base}/compactions"));
        get_json(url, &format!("{base}/closers"));
    }
    list
}

/// A root with the demo sessions and a crashed corpus log; returns the crashed id.
fn stage(root: &Path) -> String {
    run(&["--root", root.to_str().unwrap(), "demo"]).ok();
    let dir = corpus().join(CRASHED);
    let expected = crate::common::read_json(&dir.join("expected.json"));
    let rel = expected["jsonl"]["relativePath"].as_str().unwrap();
    place(
        &dir.join("session.jsonl.zstd"),
        root,
        &format!("{rel}.zstd"),
    );
    rel.split('/').nth(1).unwrap().to_owned()
}

/// Every table of `schema` with its row count and a digest of its rows.
fn pg_rows(schema: &str) -> Vec<(String, i64, Option<String>)> {
    let schema = schema.to_owned();
    with_pg(async move |c| {
        let tables = c
            .query(
                "SELECT table_name::text FROM information_schema.tables WHERE table_schema = $1 ORDER BY 1",
                &[&schema],
            )
            .await?;
        let mut out = Vec::new();
        for t in tables {
            let name: String = t.get(0);
            let row = c
                .query_one(
                    &format!(
                        "SELECT count(*), md5(string_agg(t::text, '|' ORDER BY t::text)) FROM \"{schema}\".\"{name}\" t"
                    ),
                    &[],
                )
                .await?;
            out.push((name, row.get(0), row.get(1)));
        }
        Ok(out)
    })
    .unwrap()
}

/// Serving (and exporting) reads only: over a JSONL root, a `SQLite` database and a
/// `PostgreSQL` schema, reading every endpoint of every session leaves every file byte and
/// every row as it was; the crashed session's closers are shown as pending, not written.
#[test]
fn serving_every_store_changes_no_file_and_no_row() {
    let root = Temp::new("web-ro");
    let crashed = stage(root.path());
    let r = root.str();
    let db = root.path().join("sessions.db");
    let db_spec = format!("sqlite:{}", db.display());
    for id in ["demo", "demo-crashed", "demo-fork", crashed.as_str()] {
        run(&["--root", r, "convert", id, &db_spec]).ok();
    }
    let pg = Schema::create("serving_every_store_changes_no_file_and_no_row");
    if let Some(schema) = &pg {
        for id in ["demo", "demo-crashed", "demo-fork", crashed.as_str()] {
            run(&["--root", r, "convert", id, &schema.store()]).ok();
        }
    }
    let before_files = files(root.path());
    let before_rows = pg.as_ref().map(|schema| pg_rows(&schema.0));

    let mut stores = vec![
        vec!["--root".to_owned(), r.to_owned()],
        vec!["--store".to_owned(), db_spec.clone()],
    ];
    if let Some(schema) = &pg {
        stores.push(vec!["--store".to_owned(), schema.store()]);
    }
    let html = Temp::new("web-ro-out");
    for store in &stores {
        let store: Vec<&str> = store.iter().map(String::as_str).collect();
        let (server, url, _) = serve(&store, &[]);
        let list = read_everything(&url);
        let ids: Vec<&str> = list["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["id"].as_str().unwrap())
            .collect();
        // The demo leaves `demo`, its fork and `demo-crashed` (unrepaired); plus the corpus crash.
        assert_eq!(ids.len(), 4, "{store:?}: {ids:?}");
        let summary = get_json(&url, &format!("/api/sessions/{crashed}"));
        let closers = summary["closers"].as_array().unwrap();
        assert!(!closers.is_empty(), "{store:?}: no closers shown");
        assert!(closers.iter().all(|c| c["pending"] == true), "{closers:?}");
        assert!(summary["eventCount"].as_u64() > summary["storedEventCount"].as_u64());
        drop(server);
        let mut args = store.clone();
        let out = html.path().join("crashed.html");
        args.extend(["view", crashed.as_str(), "-o", out.to_str().unwrap()]);
        run(&args).ok();
    }
    assert!(
        before_files == files(root.path()),
        "serving or exporting changed a file of the JSONL root or the SQLite database"
    );
    if let Some(schema) = &pg {
        assert_eq!(
            Some(pg_rows(&schema.0)),
            before_rows,
            "serving changed a row"
        );
    }
}

#[test]
fn a_non_loopback_bind_is_a_usage_error() {
    let root = Temp::new("web-bind");
    run(&["--root", root.str(), "demo"]).ok();
    for bind in ["0.0.0.0:0", "192.0.2.1:8080", "[::]:0"] {
        let r = run(&["--root", root.str(), "serve", "--bind", bind]);
        assert_eq!(r.code, 2, "{bind}: {}", r.stderr);
        assert!(r.stderr.contains("--allow-remote"), "{}", r.stderr);
    }
    for bad in ["localhost", "127.0.0.1", "127.0.0.1:99999"] {
        let r = run(&["--root", root.str(), "serve", "--bind", bad]);
        assert_eq!(r.code, 2, "{bad}: {}", r.stderr);
        assert!(r.stderr.contains("--bind expects"), "{}", r.stderr);
    }
    let r = run(&["--root", root.str(), "serve", "--bind", ""]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("--bind is empty"), "{}", r.stderr);
}

#[test]
fn allow_remote_requires_the_generated_token_on_every_request() {
    let root = Temp::new("web-token");
    run(&["--root", root.str(), "demo"]).ok();
    let (_server, url, lines) = serve(&["--root", root.str()], &["--allow-remote"]);
    let token = lines
        .iter()
        .find_map(|l| l.strip_prefix("token: "))
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .to_owned();
    assert!(token.len() >= 32);
    let base = url.split('?').next().unwrap().to_owned();
    for path in ["/", "/app.js", "/api/sessions", "/api/sessions/demo"] {
        let (status, body) = get(&base, path, &[]);
        assert_eq!(status, 401, "{path} without a token: {body}");
        let (status, _) = get(&base, path, &[("Authorization", "Bearer wrong")]);
        assert_eq!(status, 401);
        let (status, _) = get(
            &base,
            path,
            &[("Authorization", &format!("Bearer {token}"))],
        );
        assert_eq!(status, 200, "{path} with the token");
        let sep = if path.contains('?') { '&' } else { '?' };
        let (status, _) = get(&base, &format!("{path}{sep}token={token}"), &[]);
        assert_eq!(status, 200);
        let cookie = format!("sessionctl_token={token}");
        let (status, _) = get(&base, path, &[("Cookie", &cookie)]);
        assert_eq!(status, 200);
    }
}

#[test]
fn hostile_requests_get_typed_errors_and_bounded_pages() {
    let root = Temp::new("web-hostile");
    run(&["--root", root.str(), "demo"]).ok();
    let (_server, url, _) = serve(&["--root", root.str()], &[]);
    let expect = |path: &str, status: u16, kind: &str, mention: &str| {
        let (got, body) = get(&url, path, &[]);
        assert_eq!(got, status, "{path}: {body}");
        let v: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["kind"], kind, "{path}: {body}");
        assert!(
            v["error"].as_str().unwrap().contains(mention),
            "{path}: {body}"
        );
    };
    expect("/api/sessions/nope", 404, "NotFound", "nope");
    expect("/api/sessions/..%2F..%2Fetc", 404, "NotFound", "");
    expect(
        "/api/sessions/demo/events?from=abc",
        400,
        "Invalid",
        "from=\"abc\"",
    );
    expect(
        "/api/sessions/demo/events?limit=-1",
        400,
        "Invalid",
        "limit",
    );
    expect(
        "/api/sessions/demo/messages?at=99999",
        404,
        "NotFound",
        "seq 99999",
    );
    expect(
        "/api/sessions/demo/header?at=18446744073709551616",
        400,
        "Invalid",
        "at=",
    );
    expect("/api/nothing", 404, "NotFound", "");
    let (status, body) = get(&url, "/api/sessions", &[("Host", "attacker.example:80")]);
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("not a loopback name"));
    // Pages are bounded whatever the query asks.
    let page = get_json(&url, "/api/sessions/demo/events?from=0&limit=1000000000000");
    assert_eq!(page["events"].as_array().unwrap().len(), 81);
    let page = get_json(
        &url,
        "/api/sessions/demo/events?from=18446744073709551615&limit=5",
    );
    assert_eq!(page["events"].as_array().unwrap().len(), 0);
    let page = get_json(&url, "/api/sessions/demo/timeline?depth=99&from=999999");
    assert_eq!(page["rows"].as_array().unwrap().len(), 0);
    // The page and every answer carry the CSP.
    let mut s =
        TcpStream::connect(url.trim_start_matches("http://").trim_end_matches('/')).unwrap();
    s.write_all(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut head = String::new();
    s.read_to_string(&mut head).unwrap();
    assert!(
        head.to_ascii_lowercase()
            .contains("content-security-policy: default-src 'none'")
    );
}

#[test]
fn the_exported_page_masks_secrets_unless_no_redact() {
    let root = Temp::new("web-secret");
    let secret = "sk-live0123456789abcdefghijklmnop";
    let message = format!(
        r#"{{"type":"user/message","data":{{"id":"u1","role":"user","content":[{{"type":"text","text":"my key is {secret} </script><img src=x onerror=alert(1)>"}}],"source":{{"kind":"user"}}}},"surfaceOp":"append"}}"#
    );
    let lines = [
        r#"{"type":"turn/start","data":{"turn":1}}"#,
        &message,
        r#"{"type":"turn/end","data":{"turn":1,"reason":{"kind":"completed"}}}"#,
        r#"{"flush":true}"#,
    ]
    .join("\n")
        + "\n";
    run_in(
        &[
            "--root",
            root.str(),
            "append",
            "notes",
            "--create",
            "--cwd",
            "/w",
        ],
        Some(&lines),
    )
    .ok();
    let masked = root.path().join("masked.html");
    run(&[
        "--root",
        root.str(),
        "view",
        "notes",
        "-o",
        masked.to_str().unwrap(),
    ])
    .ok();
    let html = std::fs::read_to_string(&masked).unwrap();
    assert!(!html.contains(secret), "the secret is in the exported page");
    assert!(html.contains("my key is [redacted]"));
    // Text from the log cannot close the bundle's script element.
    assert!(!html.contains("</script><img"));
    assert_eq!(html.matches("</script>").count(), 2);
    let plain = root.path().join("plain.html");
    let r = run(&[
        "--root",
        root.str(),
        "view",
        "notes",
        "-o",
        plain.to_str().unwrap(),
        "--no-redact",
    ])
    .ok();
    assert!(r.stdout.contains("NOT masked"));
    assert!(std::fs::read_to_string(&plain).unwrap().contains(secret));
    // The store still holds the secret: masking is of the page only.
    let m = run(&["--root", root.str(), "messages", "notes", "--json"]).ok();
    assert!(m.stdout.contains(secret));
    // -o is required.
    let r = run(&["--root", root.str(), "view", "notes"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
}
