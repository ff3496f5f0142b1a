//! The web view in a real browser: headless Chromium (Debian's `chromium` and
//! `chromium-driver`) driven over `WebDriver` (fantoccini) against `sessionctl serve`, and the
//! page `sessionctl view -o` writes, opened from `file://`. Screenshots go to
//! `target/web-screenshots/`. Without Chromium the test fails unless
//! `SESSION_TEST_ALLOW_NO_BROWSER=1`.

#![allow(
    clippy::unwrap_used,
    clippy::missing_panics_doc,
    clippy::result_large_err
)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{BIN, Temp, corpus, place, run};
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};

const ALLOW_SKIP: &str = "SESSION_TEST_ALLOW_NO_BROWSER";
/// The corpus log with a compaction the test opens.
const COMPACTED_LOG: &str = "acp.agent-instructions__session";

/// A child process killed (by its handle) when dropped.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn have(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Whether the browser is there; otherwise fails, or skips loudly when allowed.
fn browser_available() -> bool {
    conformance::skip::unless_allowed(
        ALLOW_SKIP,
        "chromium or chromedriver is not installed (apt-get install chromium chromium-driver) [web_browser]",
        || have("chromium") && have("chromedriver"),
    )
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn screenshots() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/web-screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Starts `sessionctl serve` on a free loopback port; returns the process and its URL.
fn start_server(root: &Path) -> (Killed, String) {
    let mut child = Command::new(BIN)
        .args([
            "--root",
            root.to_str().unwrap(),
            "serve",
            "--bind",
            "127.0.0.1:0",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("no URL in {line:?}"))
        .to_owned();
    (Killed(child), url)
}

async fn connect_browser() -> (Killed, Client) {
    let port = free_port();
    let driver = Killed(
        Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let mut caps = serde_json::Map::new();
    caps.insert(
        "goog:chromeOptions".into(),
        json!({"args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                        "--disable-dev-shm-usage", "--window-size=1280,1000",
                        "--no-first-run", "--disable-background-networking"]}),
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        match ClientBuilder::new(connector)
            .capabilities(caps.clone())
            .connect(&format!("http://127.0.0.1:{port}"))
            .await
        {
            Ok(c) => return (driver, c),
            Err(e) if Instant::now() > deadline => panic!("chromedriver did not start: {e}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

/// Waits until the page marks `hash` as rendered.
async fn wait_ready(c: &Client, hash: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let ready = c
            .execute("return document.body.dataset.ready || null;", vec![])
            .await
            .unwrap();
        if ready.as_str() == Some(hash) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "page never became ready for {hash} (ready: {ready})"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn wait_css(c: &Client, css: &str) -> fantoccini::elements::Element {
    tokio::time::timeout(
        Duration::from_secs(30),
        c.wait().for_element(Locator::Css(css)),
    )
    .await
    .unwrap_or_else(|_| panic!("no {css} within 30 s"))
    .unwrap()
}

async fn shot(c: &Client, name: &str) {
    let png = c.screenshot().await.unwrap();
    std::fs::write(screenshots().join(name), png).unwrap();
}

async fn js(c: &Client, script: &str) -> Value {
    c.execute(script, vec![]).await.unwrap()
}

async fn fetch_json(c: &Client, path: &str) -> Value {
    c.execute_async(
        "const done = arguments[arguments.length - 1];\
         fetch(arguments[0]).then(r => r.json()).then(done, e => done({fetchError: String(e)}));",
        vec![json!(path)],
    )
    .await
    .unwrap()
}

/// Every resource the page loaded, as URLs.
async fn resources(c: &Client) -> Vec<String> {
    let v = js(
        c,
        "return performance.getEntriesByType('resource').map(e => e.name);",
    )
    .await;
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn the_web_view_in_a_real_browser() {
    if !browser_available() {
        return;
    }
    let root = Temp::new("web");
    run(&["--root", root.str(), "demo"]).ok();
    let dir = corpus().join("logs").join(COMPACTED_LOG);
    let expected = crate::common::read_json(&dir.join("expected.json"));
    let rel = expected["writer"]["relativePath"]["zstd"].as_str().unwrap();
    place(&dir.join("session.jsonl.zstd"), root.path(), rel);
    let compacted_id = rel.split('/').nth(1).unwrap().to_owned();
    let (_server, url) = start_server(root.path());
    let origin = url.trim_end_matches('/').to_owned();
    let export = root.path().join("demo.html");
    run(&[
        "--root",
        root.str(),
        "view",
        "demo",
        "-o",
        export.to_str().unwrap(),
    ])
    .ok();

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let (_driver, c) = connect_browser().await;

        // The list, and its filter.
        c.goto(&url).await.unwrap();
        wait_ready(&c, "#/").await;
        let ids: Vec<String> = {
            let rows = c.find_all(Locator::Css("tr.session-row")).await.unwrap();
            let mut ids = Vec::new();
            for r in rows {
                ids.push(r.attr("data-id").await.unwrap().unwrap());
            }
            ids
        };
        for id in ["demo", "demo-fork", compacted_id.as_str()] {
            assert!(ids.iter().any(|i| i == id), "{id} not listed in {ids:?}");
        }
        c.find(Locator::Css("#filter"))
            .await
            .unwrap()
            .send_keys("fork")
            .await
            .unwrap();
        let visible = js(
            &c,
            "return [...document.querySelectorAll('tr.session-row')].filter(r => !r.hidden).map(r => r.dataset.id);",
        )
        .await;
        assert_eq!(visible, json!(["demo-fork"]));
        shot(&c, "list.png").await;

        // A corpus session with a compaction: expand it and see its originals.
        let hash = format!("#/s/{compacted_id}");
        c.goto(&format!("{url}{hash}")).await.unwrap();
        wait_ready(&c, &hash).await;
        let api = fetch_json(&c, &format!("/api/sessions/{compacted_id}/compactions")).await;
        let first = &api["compactions"][0];
        let shadowed = first["resolved"].as_array().unwrap().len();
        assert!(shadowed > 0, "the corpus compaction shadows nothing: {api}");
        wait_css(&c, ".compaction .expand").await.click().await.unwrap();
        wait_css(&c, ".compaction .original").await;
        let originals = js(
            &c,
            "return [...document.querySelectorAll('.compaction .originals:not([hidden]) .original')].map(o => Number(o.dataset.seq));",
        )
        .await;
        assert_eq!(originals, first["resolved"]);
        // The endpoint is `sessionctl compactions --json`'s list.
        let cli = run(&["--root", root.str(), "compactions", &compacted_id, "--json"])
            .ok()
            .json();
        assert_eq!(api["compactions"], cli["compactions"]);
        shot(&c, "compaction.png").await;

        // The demo session: its crash closers are highlighted with their explanation.
        c.goto(&format!("{url}#/s/demo")).await.unwrap();
        wait_ready(&c, "#/s/demo").await;
        let closer = wait_css(&c, ".closer.code-TOOL_OUTCOME_UNKNOWN").await;
        assert!(closer.text().await.unwrap().contains("outcome is unknown"));
        wait_css(&c, ".closer.code-TOOL_NOT_STARTED").await;
        wait_css(&c, "#timeline .row.kind-model").await;
        shot(&c, "demo.png").await;

        // A model request: the messages shown are `sessionctl messages --at`'s.
        let model = wait_css(&c, "#timeline .row.kind-model").await;
        let at: u64 = model.attr("data-start").await.unwrap().unwrap().parse().unwrap();
        model.click().await.unwrap();
        let hash = format!("#/s/demo/at/{at}");
        wait_ready(&c, &hash).await;
        let shown = js(
            &c,
            "return [...document.querySelectorAll('pre.message-json')].map(p => JSON.parse(p.textContent));",
        )
        .await;
        let cli = run(&[
            "--root",
            root.str(),
            "messages",
            "demo",
            "--at",
            &at.to_string(),
            "--json",
        ])
        .ok()
        .json();
        let want: Vec<Value> = cli["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["message"].clone())
            .collect();
        assert!(!want.is_empty());
        assert_eq!(shown, Value::Array(want));
        shot(&c, "request.png").await;

        // Follow a fork link to the child, and back to its parent.
        c.goto(&format!("{url}#/s/demo")).await.unwrap();
        wait_ready(&c, "#/s/demo").await;
        wait_css(&c, "a.fork-link.child").await.click().await.unwrap();
        wait_ready(&c, "#/s/demo-fork").await;
        wait_css(&c, "a.fork-link.parent").await;
        shot(&c, "fork.png").await;

        // Nothing left loopback: every resource came from the server, no CSP violation.
        let loaded = resources(&c).await;
        assert!(!loaded.is_empty());
        for r in &loaded {
            assert!(r.starts_with(&origin), "a request left the server: {r}");
        }
        let reports = fetch_json(&c, "/api/csp-reports").await;
        assert_eq!(reports["reports"], json!(0), "CSP violations reported");

        // The exported page from file://: zero requests, the crash's TOOL_OUTCOME_UNKNOWN.
        c.goto(&format!("file://{}", export.display())).await.unwrap();
        wait_ready(&c, "#/s/demo").await;
        wait_css(&c, ".closer.code-TOOL_OUTCOME_UNKNOWN").await;
        let text = js(&c, "return document.body.innerText;").await;
        assert!(text.as_str().unwrap().contains("TOOL_OUTCOME_UNKNOWN"));
        assert_eq!(resources(&c).await, Vec::<String>::new());
        shot(&c, "export.png").await;
        c.close().await.unwrap();
    });
}

/// The exported page forbids every request and inlines its assets.
#[test]
fn the_exported_page_is_self_contained_and_masks_secrets() {
    let root = Temp::new("web-export");
    run(&["--root", root.str(), "demo"]).ok();
    let page = root.path().join("demo.html");
    run(&[
        "--root",
        root.str(),
        "view",
        "demo",
        "-o",
        page.to_str().unwrap(),
    ])
    .ok();
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("content=\"default-src 'none'; script-src 'sha256-"));
    assert!(!html.contains(" src="), "an asset is loaded, not inlined");
    assert!(!html.contains("href=\"http"), "a link leaves the page");
    assert!(html.contains("TOOL_OUTCOME_UNKNOWN"));
    // Chunk streams are summarised: no assistant/chunk event is embedded one by one.
    assert!(!html.contains("\"type\":\"assistant/chunk\",\"seq\":5,\"time\""));
    assert!(html.contains("\"summarised\":true"));
}
