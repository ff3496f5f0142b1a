//! Measures the web view on a large session: the time to first meaningful paint of its page
//! in headless Chromium (cold: the server reads the session on that request; warm: read
//! already), the time to repaint after scrolling to the middle, and the API's page latency
//! (p50, p99) over a bounded number of loopback requests.
//!
//! ```text
//! cargo build --release -p session-cli --bin sessionctl --example web_bench
//! target/release/examples/web_bench target/release/sessionctl ROOT SESSION_ID [REQUESTS]
//! ```
//!
//! Needs Debian's `chromium` and `chromium-driver`. Prints one line per measurement.

#![allow(clippy::unwrap_used, clippy::print_stdout, missing_docs)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::ClientBuilder;
use serde_json::json;

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn get(authority: &str, path: &str) -> (u16, usize) {
    let mut s = TcpStream::connect(authority).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let text = String::from_utf8_lossy(&raw);
    (
        text.split_whitespace().nth(1).unwrap().parse().unwrap(),
        raw.len(),
    )
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

async fn wait_paint(c: &fantoccini::Client) -> f64 {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let v = c
            .execute("return window.__firstTimelinePaint ?? null;", vec![])
            .await
            .unwrap();
        if let Some(ms) = v.as_f64() {
            return ms;
        }
        assert!(Instant::now() < deadline, "no paint within 120 s");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (bin, root, id) = (&args[1], &args[2], &args[3]);
    let requests: usize = args.get(4).map_or(2_000, |n| n.parse().unwrap());
    let mut child = Command::new(bin)
        .args(["--root", root, "serve", "--bind", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let _server = Killed(child);
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap()
        .to_owned();
    let authority = url
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_owned();

    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let _driver = Killed(
        Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut caps = serde_json::Map::new();
        caps.insert(
            "goog:chromeOptions".into(),
            json!({"args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                            "--disable-dev-shm-usage", "--window-size=1280,1000"]}),
        );
        let c = loop {
            let connector = hyper_util::client::legacy::connect::HttpConnector::new();
            if let Ok(c) = ClientBuilder::new(connector)
                .capabilities(caps.clone())
                .connect(&format!("http://127.0.0.1:{port}"))
                .await
            {
                break c;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        let page = format!("{url}#/s/{id}");
        for label in ["cold", "warm", "warm"] {
            c.goto("about:blank").await.unwrap();
            c.goto(&page).await.unwrap();
            let ms = wait_paint(&c).await;
            println!("first meaningful paint ({label}): {ms:.0} ms after navigation start");
        }
        let scroll = c
            .execute_async(
                "const done = arguments[arguments.length - 1];\
                 const t = document.getElementById('timeline');\
                 const obs = new MutationObserver(() => { obs.disconnect(); done(performance.now() - start); });\
                 obs.observe(t.firstChild, {childList: true});\
                 const start = performance.now();\
                 t.scrollTop = t.scrollHeight / 2;",
                vec![],
            )
            .await
            .unwrap();
        println!(
            "repaint after scrolling to the middle: {:.0} ms",
            scroll.as_f64().unwrap()
        );
        c.close().await.unwrap();
    });

    let summary_len = get(&authority, &format!("/api/sessions/{id}")).1;
    println!("session document: {summary_len} bytes");
    let n_events: u64 = {
        let mut s = TcpStream::connect(&authority).unwrap();
        write!(
            s,
            "GET /api/sessions/{id}/events?limit=1 HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut body = String::new();
        s.read_to_string(&mut body).unwrap();
        let body = body.split_once("\r\n\r\n").unwrap().1;
        let v: serde_json::Value = serde_json::from_str(body).unwrap();
        v["total"].as_u64().unwrap()
    };
    let rows: u64 = 2_000;
    for (name, make) in [
        (
            "events page (200 events)",
            Box::new(|i: u64| {
                format!(
                    "/api/sessions/{id}/events?from={}&limit=200",
                    (i * 7919) % n_events
                )
            }) as Box<dyn Fn(u64) -> String>,
        ),
        (
            "timeline page (200 rows)",
            Box::new(|i: u64| {
                format!(
                    "/api/sessions/{id}/timeline?depth=2&from={}&limit=200",
                    (i * 13) % rows
                )
            }),
        ),
    ] {
        let mut lat = Vec::with_capacity(requests);
        for i in 0..requests as u64 {
            let t = Instant::now();
            let (status, _) = get(&authority, &make(i));
            lat.push(t.elapsed());
            assert_eq!(status, 200);
        }
        lat.sort();
        println!(
            "{name}: {requests} requests, p50 {:.2} ms, p99 {:.2} ms",
            percentile(&lat, 0.5).as_secs_f64() * 1e3,
            percentile(&lat, 0.99).as_secs_f64() * 1e3
        );
    }
    let mut lat = Vec::new();
    for i in 0..20u64 {
        let at = (i * 65_537) % n_events;
        let t = Instant::now();
        let (status, _) = get(&authority, &format!("/api/sessions/{id}/messages?at={at}"));
        lat.push(t.elapsed());
        assert_eq!(status, 200);
    }
    lat.sort();
    println!(
        "messages as of a seq: 20 requests, p50 {:.0} ms, p99 {:.0} ms",
        percentile(&lat, 0.5).as_secs_f64() * 1e3,
        percentile(&lat, 0.99).as_secs_f64() * 1e3
    );
}
