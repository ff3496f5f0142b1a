//! `gen_session`: writes a large, realistic session in the reference's on-disk format through
//! our session and JSONL backend, plus `gen-manifest.json` (see `session_bench::generator`).
//!
//! Usage: `gen_session --out DIR [--events N] [--seed S] [--batch writebehind|turn]
//! [--compression zstd|none|both] [--interrupted] [--fsync] [--manifest PATH] [--quiet]`

use std::path::PathBuf;
use std::process::ExitCode;

use session_bench::generator::{BatchMode, Encodings, GenOptions, generate};

const USAGE: &str = "usage: gen_session --out DIR [--events N] [--seed S] [--batch writebehind|turn] \
[--compression zstd|none|both] [--interrupted] [--fsync] [--manifest PATH] [--quiet]";

fn parse(args: &[String]) -> Result<GenOptions, String> {
    let mut opts = GenOptions::new(1_307_073, PathBuf::new());
    let mut out = None;
    let mut quiet = false;
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let mut value = || {
            it.next()
                .cloned()
                .ok_or_else(|| format!("{flag} needs a value"))
        };
        match flag.as_str() {
            "--out" => out = Some(PathBuf::from(value()?)),
            "--events" => {
                let v = value()?;
                opts.events = v
                    .parse()
                    .map_err(|_| format!("--events: not a count: {v}"))?;
            }
            "--seed" => {
                let v = value()?;
                opts.seed = v
                    .parse()
                    .map_err(|_| format!("--seed: not an integer: {v}"))?;
            }
            "--batch" => {
                opts.batch = match value()?.as_str() {
                    "writebehind" => BatchMode::WriteBehind,
                    "turn" => BatchMode::Turn,
                    other => return Err(format!("--batch: unknown mode {other}")),
                };
            }
            "--compression" => {
                opts.compression = match value()?.as_str() {
                    "zstd" => Encodings::Zstd,
                    "none" => Encodings::None,
                    "both" => Encodings::Both,
                    other => return Err(format!("--compression: unknown encoding {other}")),
                };
            }
            "--manifest" => opts.manifest = Some(PathBuf::from(value()?)),
            "--interrupted" => opts.interrupted = true,
            "--fsync" => opts.fsync = true,
            "--quiet" => quiet = true,
            other => return Err(format!("unknown argument {other}")),
        }
    }
    opts.out = out.ok_or("--out is required")?;
    opts.progress = !quiet;
    Ok(opts)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let opts = match parse(&args) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("gen_session: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match generate(&opts) {
        Ok(m) => {
            if opts.progress {
                eprintln!(
                    "{{\"events\":{},\"turns\":{},\"steps\":{},\"compactions\":{},\"storageRecords\":{},\"durableBatches\":{},\"plaintextBytes\":{},\"fileBytes\":{:?},\"seconds\":{:.1}}}",
                    m.events,
                    m.turns,
                    m.steps,
                    m.compactions,
                    m.storage_records,
                    m.durable_batches,
                    m.plaintext_bytes,
                    m.file_bytes,
                    m.generate_seconds
                );
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("gen_session: {e}");
            ExitCode::from(1)
        }
    }
}
