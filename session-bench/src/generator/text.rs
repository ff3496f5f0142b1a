//! Seeded synthetic text: English-like prose, markdown, Rust and TypeScript code, and the
//! output of the tools a coding agent runs (file reads, cargo, git, grep, ls).
//!
//! Word choice follows Zipf-like weights over fixed vocabularies, and a synthetic codebase
//! (identifiers, types, crates, files with stable contents) gives tool output realistic
//! repetition, so compression ratios are those of real sessions rather than of random bytes.

#![allow(clippy::many_single_char_names)] // short names for drawn numbers keep the templates readable

use std::collections::HashMap;
use std::fmt::Write as _;

use super::rng::Rng;
use super::words;

/// A vocabulary with cumulative Zipf-like weights.
struct Table {
    words: Vec<&'static str>,
    cum: Vec<f64>,
}

impl Table {
    fn zipf(rng: &mut Rng, list: &'static str) -> Table {
        let mut words: Vec<&'static str> = list.split_whitespace().collect();
        rng.shuffle(&mut words);
        let mut acc = 0.0;
        let cum = (0..words.len())
            .map(|i| {
                acc += 1.0 / (i as f64 + 6.0).powf(0.85);
                acc
            })
            .collect();
        Table { words, cum }
    }

    fn draw(&self, rng: &mut Rng) -> &'static str {
        self.words[rng.weighted(&self.cum)]
    }
}

/// Harmonic cumulative weights `1 / (i + 3)` for `n` items.
fn harmonic(n: usize) -> Vec<f64> {
    let mut acc = 0.0;
    (0..n)
        .map(|i| {
            acc += 1.0 / (i as f64 + 3.0);
            acc
        })
        .collect()
}

fn capitalize(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

/// Trims trailing `.`, `:`, `?`, newlines and spaces.
fn trim_end_punct(s: &str) -> &str {
    s.trim_end_matches(['.', ':', '?', '\n', ' '])
}

/// Which language a code snippet is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lang {
    Rust,
    Ts,
    Bash,
}

/// The text source: vocabularies, the synthetic codebase and the random stream.
pub(crate) struct TextGen {
    pub(crate) rng: Rng,
    nouns: Table,
    verbs: Table,
    adjs: Table,
    func: Table,
    general: Table,
    idents: Vec<String>,
    ident_cum: Vec<f64>,
    types: Vec<String>,
    type_cum: Vec<f64>,
    pub(crate) crates: Vec<String>,
    pub(crate) files: Vec<String>,
    file_cum: Vec<f64>,
    file_cache: HashMap<String, Vec<String>>,
    /// Multiplier on tool output sizes.
    pub(crate) scale: f64,
}

impl TextGen {
    pub(crate) fn new(mut rng: Rng, scale: f64) -> TextGen {
        let nouns = Table::zipf(&mut rng, words::NOUN);
        let verbs = Table::zipf(&mut rng, words::VERB);
        let adjs = Table::zipf(&mut rng, words::ADJ);
        let func = Table::zipf(&mut rng, words::FUNCTION);
        let general = Table::zipf(&mut rng, words::GENERAL);
        let mut t = TextGen {
            rng,
            nouns,
            verbs,
            adjs,
            func,
            general,
            idents: Vec::new(),
            ident_cum: Vec::new(),
            types: Vec::new(),
            type_cum: Vec::new(),
            crates: Vec::new(),
            files: Vec::new(),
            file_cum: Vec::new(),
            file_cache: HashMap::new(),
            scale,
        };
        t.idents = (0..900).map(|_| t.make_ident()).collect();
        let mut types: Vec<String> = (0..260).map(|_| t.make_type()).collect();
        types.sort();
        types.dedup();
        t.rng.shuffle(&mut types);
        t.types = types;
        let mut crates: Vec<String> = (0..14)
            .map(|_| format!("{}-{}", t.word(), t.word()))
            .collect();
        crates.sort();
        crates.dedup();
        t.crates = crates;
        let mut files = Vec::new();
        for c in t.crates.clone() {
            for _ in 0..t.rng.int(6, 26) {
                let sub = *t
                    .rng
                    .pick(&["src", "src", "src", "tests", "benches", "src/bin"]);
                files.push(format!("crates/{c}/{sub}/{}.rs", t.word()));
            }
            files.push(format!("crates/{c}/Cargo.toml"));
        }
        for _ in 0..40 {
            let c = t.rng.pick(&t.crates).clone();
            files.push(format!("packages/{c}/src/{}.ts", t.word()));
        }
        files.sort();
        files.dedup();
        t.files = files;
        t.ident_cum = harmonic(t.idents.len());
        t.type_cum = harmonic(t.types.len());
        t.file_cum = harmonic(t.files.len());
        t
    }

    // -- primitives --------------------------------------------------------

    /// An invented word of 2–3 syllables.
    pub(crate) fn word(&mut self) -> String {
        let syllables: Vec<&str> = words::SYLLABLES.split_whitespace().collect();
        let n = self.rng.int(2, 3);
        (0..n).map(|_| *self.rng.pick(&syllables)).collect()
    }

    fn make_ident(&mut self) -> String {
        let pool: Vec<&str> = words::NOUN
            .split_whitespace()
            .chain(words::VERB_BASE.split_whitespace())
            .chain(words::ADJ.split_whitespace())
            .collect();
        let n = self.rng.int(1, 3);
        let mut parts: Vec<String> = (0..n).map(|_| (*self.rng.pick(&pool)).to_owned()).collect();
        if self.rng.random() < 0.25 {
            parts.push(self.word());
        }
        parts.join("_")
    }

    fn make_type(&mut self) -> String {
        let pool: Vec<&str> = words::ADJ
            .split_whitespace()
            .chain(words::NOUN.split_whitespace())
            .collect();
        let nouns: Vec<&str> = words::NOUN.split_whitespace().collect();
        let n = self.rng.int(1, 2);
        let mut out = String::new();
        for _ in 0..n {
            let w = *self.rng.pick(&pool);
            out.push_str(&capitalize(w));
        }
        let w = *self.rng.pick(&nouns);
        out.push_str(&capitalize(w));
        out
    }

    pub(crate) fn ident(&mut self) -> String {
        let i = self.rng.weighted(&self.ident_cum);
        self.idents[i].clone()
    }

    pub(crate) fn typ(&mut self) -> String {
        let i = self.rng.weighted(&self.type_cum);
        self.types[i].clone()
    }

    pub(crate) fn path(&mut self) -> String {
        let i = self.rng.weighted(&self.file_cum);
        self.files[i].clone()
    }

    fn camel(&mut self) -> String {
        let id = self.ident();
        let mut parts = id.split('_');
        let mut out = parts.next().unwrap_or_default().to_owned();
        for p in parts {
            out.push_str(&capitalize(p));
        }
        out
    }

    // -- prose ---------------------------------------------------------------

    fn noun_phrase(&mut self) -> String {
        let x = self.rng.random();
        if x < 0.18 {
            return format!("`{}`", self.ident());
        }
        if x < 0.26 {
            return format!("`{}`", self.typ());
        }
        if x < 0.31 {
            return format!("`{}`", self.path());
        }
        let det = *self.rng.pick(&[
            "the", "the", "the", "a", "this", "that", "each", "every", "our", "its", "any", "some",
        ]);
        let y = self.rng.random();
        let r = &mut self.rng;
        if y < 0.3 {
            format!("{det} {} {}", self.adjs.draw(r), self.nouns.draw(r))
        } else if y < 0.55 {
            format!("{det} {} {}", self.general.draw(r), self.nouns.draw(r))
        } else if y < 0.75 {
            format!("{det} {}", self.general.draw(r))
        } else if y < 0.85 {
            format!(
                "{det} {} of {} {}",
                self.general.draw(r),
                self.func.draw(r),
                self.general.draw(r)
            )
        } else {
            format!("{det} {}", self.nouns.draw(r))
        }
    }

    fn clause(&mut self) -> String {
        const SUBJECTS: [&str; 7] = [
            "it",
            "this",
            "the code",
            "the test",
            "the loop",
            "the reader",
            "the writer",
        ];
        let k = self.rng.below(SUBJECTS.len() + 2);
        let subj = if k < SUBJECTS.len() {
            SUBJECTS[k].to_owned()
        } else {
            self.noun_phrase()
        };
        let verb = if self.rng.random() < 0.6 {
            self.verbs.draw(&mut self.rng).to_owned()
        } else {
            format!("{}s", self.general.draw(&mut self.rng))
        };
        let mut parts = vec![subj, verb, self.noun_phrase()];
        if self.rng.random() < 0.3 {
            parts.insert(1, (*self.rng.pick(words::ADV)).to_owned());
        }
        if self.rng.random() < 0.55 {
            parts.push(
                (*self.rng.pick(&[
                    "in", "for", "from", "after", "before", "when", "inside", "with", "until",
                    "without", "on",
                ]))
                .to_owned(),
            );
            parts.push(self.noun_phrase());
        }
        if self.rng.random() < 0.2 {
            parts.push((*self.rng.pick(words::ADV)).to_owned());
        }
        if self.rng.random() < 0.35 {
            parts.push(
                (*self.rng.pick(&[
                    "and",
                    "but",
                    "so",
                    "because",
                    "which means",
                    "although",
                    "unless",
                    "while",
                    "since",
                ]))
                .to_owned(),
            );
            parts.push(self.func.draw(&mut self.rng).to_owned());
            let w = if self.rng.random() < 0.5 {
                self.general.draw(&mut self.rng)
            } else {
                self.verbs.draw(&mut self.rng)
            };
            parts.push(w.to_owned());
            parts.push(self.noun_phrase());
        }
        if self.rng.random() < 0.08 {
            let a = *self.rng.pick(&["got", "expected", "was", "now"]);
            let n1 = self.rng.int(0, 99_999);
            let b = *self.rng.pick(&["not", "instead of", "vs", "after"]);
            let n2 = self.rng.int(0, 99_999);
            parts.push(format!("({a} {n1}, {b} {n2})"));
        }
        parts.join(" ")
    }

    fn sentence(&mut self) -> String {
        let x = self.rng.random();
        let mut s = if x < 0.3 {
            let opener = *self.rng.pick(words::OPENERS);
            let verb = *self
                .rng
                .pick(&words::VERB_BASE.split_whitespace().collect::<Vec<_>>());
            let mut s = format!("{opener} {verb} {}", self.noun_phrase());
            if self.rng.random() < 0.5 {
                let link = *self
                    .rng
                    .pick(&["in", "to see if", "so that", "before", "and then"]);
                let _ = write!(s, " {link} {}", self.clause());
            }
            s
        } else if x < 0.65 {
            let starter = *self.rng.pick(words::STARTERS);
            format!("{starter} {}", self.clause())
        } else {
            capitalize(&self.clause())
        };
        if self.rng.random() < 0.07 {
            let what = *self
                .rng
                .pick(&["line", "seq", "offset", "step", "turn", "around"]);
            let _ = write!(s, " ({what} {})", self.rng.int(1, 4000));
        }
        let ending = *self.rng.pick(words::ENDINGS);
        s.push_str(ending);
        s
    }

    /// At least `n_chars` characters of sentences.
    pub(crate) fn prose(&mut self, n_chars: usize) -> String {
        let mut out = String::with_capacity(n_chars + 120);
        while out.len() < n_chars {
            if !out.is_empty() {
                out.push(' ');
            }
            let s = self.sentence();
            out.push_str(&s);
        }
        out.replace("\n ", "\n")
    }

    /// At least `n_chars` characters of markdown: headings, bullet lists, fenced code, prose.
    pub(crate) fn markdown(&mut self, n_chars: usize) -> String {
        let mut parts: Vec<String> = Vec::new();
        let mut n = 0;
        while n < n_chars {
            let x = self.rng.random();
            let s = if x < 0.12 {
                let h = *self.rng.pick(&["##", "###", "**"]);
                format!("{h} {}", trim_end_punct(&self.prose(20)))
            } else if x < 0.45 {
                let k = self.rng.int(2, 5);
                (0..k)
                    .map(|_| format!("- {}", self.prose(40).trim()))
                    .collect::<Vec<_>>()
                    .join("\n")
            } else if x < 0.6 {
                let lang = *self.rng.pick(&[Lang::Rust, Lang::Ts, Lang::Bash]);
                let name = match lang {
                    Lang::Rust => "rust",
                    Lang::Ts => "ts",
                    Lang::Bash => "bash",
                };
                let k = self.rng.size(2, 10);
                format!("```{name}\n{}\n```", self.code_lines(k, lang).join("\n"))
            } else {
                let k = self.rng.size(120, 400);
                self.prose(k)
            };
            n += s.len() + 2;
            parts.push(s);
        }
        parts.join("\n\n")
    }

    // -- code ----------------------------------------------------------------

    fn expr(&mut self, lang: Lang) -> String {
        let x = self.rng.random();
        if x < 0.3 {
            let k = self.rng.int(0, 2);
            let args: Vec<String> = (0..k).map(|_| self.ident()).collect();
            return format!("{}.{}({})", self.ident(), self.ident(), args.join(", "));
        }
        if x < 0.45 {
            let n = self.rng.int(0, 100_000);
            return self
                .rng
                .pick(&[0, 1, 2, 8, 16, 64, 256, 1024, 4096, n])
                .to_string();
        }
        if x < 0.6 {
            let k = self.rng.size(8, 40);
            return format!("\"{}\"", trim_end_punct(&self.prose(k)).replace('"', "'"));
        }
        if x < 0.75 {
            let op = *self
                .rng
                .pick(&["+", "-", "*", "==", "!=", "<", ">=", "&&", "||"]);
            return format!("{} {op} {}", self.ident(), self.ident());
        }
        if lang == Lang::Rust {
            let ctor = *self
                .rng
                .pick(&["new", "from", "default", "with_capacity", "parse"]);
            return format!("{}::{ctor}({})", self.typ(), self.ident());
        }
        format!("new {}({})", self.typ(), self.ident())
    }

    /// About `n` lines of roughly syntactic Rust or TypeScript with nested blocks.
    pub(crate) fn code_lines(&mut self, n: usize, lang: Lang) -> Vec<String> {
        let lang = if lang == Lang::Bash { Lang::Rust } else { lang };
        let rust = lang == Lang::Rust;
        let mut lines: Vec<String> = Vec::new();
        let mut depth = 0usize;
        while lines.len() < n {
            let ind = "    ".repeat(depth);
            let x = self.rng.random();
            if depth == 0 {
                if x < 0.15 {
                    lines.push(if rust {
                        format!("use crate::{}::{};", self.ident(), self.typ())
                    } else {
                        format!("import {{ {} }} from './{}'", self.typ(), self.ident())
                    });
                } else if x < 0.25 {
                    lines.push(String::new());
                    let doc = self.prose(60);
                    lines.push(if rust {
                        format!("/// {}", doc.trim())
                    } else {
                        format!("/** {} */", doc.trim())
                    });
                } else if x < 0.35 && rust {
                    lines.push("#[derive(Debug, Clone, PartialEq, Eq)]".to_owned());
                    lines.push(format!("pub struct {} {{", self.typ()));
                    for _ in 0..self.rng.int(2, 6) {
                        let f = self.ident();
                        let ty = *self.rng.pick(words::RUST_TYPES);
                        lines.push(format!("    pub {f}: {ty},"));
                    }
                    lines.push("}".to_owned());
                } else {
                    let k = self.rng.int(0, 3);
                    if rust {
                        let args: Vec<String> = (0..k)
                            .map(|_| {
                                format!("{}: {}", self.ident(), self.rng.pick(words::RUST_TYPES))
                            })
                            .collect();
                        let ret = *self.rng.pick(words::RUST_TYPES);
                        lines.push(format!(
                            "pub fn {}({}) -> {ret} {{",
                            self.ident(),
                            args.join(", ")
                        ));
                    } else {
                        let args: Vec<String> = (0..k)
                            .map(|_| {
                                format!("{}: {}", self.camel(), self.rng.pick(words::TS_TYPES))
                            })
                            .collect();
                        let asy = *self.rng.pick(&["", "async "]);
                        let ret = *self.rng.pick(words::TS_TYPES);
                        lines.push(format!(
                            "export {asy}function {}({}): {ret} {{",
                            self.camel(),
                            args.join(", ")
                        ));
                    }
                    depth = 1;
                }
                continue;
            }
            if x < 0.3 {
                if rust {
                    let m = *self.rng.pick(&["", "mut "]);
                    let name = self.ident();
                    let e = self.expr(lang);
                    let q = *self.rng.pick(&["", "?", ""]);
                    lines.push(format!("{ind}let {m}{name} = {e}{q};"));
                } else {
                    let name = self.camel();
                    let aw = *self.rng.pick(&["", "await "]);
                    let e = self.expr(lang);
                    lines.push(format!("{ind}const {name} = {aw}{e}"));
                }
            } else if x < 0.42 && depth < 4 {
                let cond = self.expr(lang);
                lines.push(if rust {
                    format!("{ind}if {cond} {{")
                } else {
                    format!("{ind}if ({cond}) {{")
                });
                depth += 1;
            } else if x < 0.5 && depth < 4 {
                lines.push(if rust {
                    format!("{ind}for {} in {}.iter() {{", self.ident(), self.ident())
                } else {
                    format!("{ind}for (const {} of {}) {{", self.camel(), self.camel())
                });
                depth += 1;
            } else if x < 0.58 {
                let k = self.rng.size(30, 90);
                lines.push(format!("{ind}// {}", self.prose(k).trim()));
            } else if x < 0.66 {
                if rust {
                    let v = *self.rng.pick(words::ERR_VARIANTS);
                    let msg = trim_end_punct(&self.prose(30)).replace('"', "'");
                    let id = self.ident();
                    lines.push(format!(
                        "{ind}return Err(Error::{v}(format!(\"{msg} {{}}\", {id})));"
                    ));
                } else {
                    let msg = trim_end_punct(&self.prose(30)).replace('`', "'");
                    let id = self.camel();
                    lines.push(format!("{ind}throw new Error(`{msg} ${{{id}}}`)"));
                }
            } else if x < 0.8 || (depth == 1 && x < 0.86) {
                let e = self.expr(lang);
                lines.push(if rust {
                    format!("{ind}{e};")
                } else {
                    format!("{ind}{e}")
                });
            } else {
                depth -= 1;
                lines.push(format!("{}}}", "    ".repeat(depth)));
            }
        }
        while depth > 0 && lines.len() < n + 6 {
            depth -= 1;
            lines.push(format!("{}}}", "    ".repeat(depth)));
        }
        lines
    }

    /// The stable contents of a file of the synthetic codebase (generated on first use).
    pub(crate) fn file_lines(&mut self, path: &str) -> Vec<String> {
        if let Some(got) = self.file_cache.get(path) {
            return got.clone();
        }
        let ext = std::path::Path::new(path)
            .extension()
            .and_then(|e| e.to_str())
            .unwrap_or("")
            .to_owned();
        let got = if ext == "toml" {
            let name = path.split('/').nth(1).unwrap_or("crate");
            let mut v = vec![
                "[package]".to_owned(),
                format!("name = \"{name}\""),
                "version = \"0.1.0\"".to_owned(),
                "edition = \"2021\"".to_owned(),
                String::new(),
                "[dependencies]".to_owned(),
            ];
            for _ in 0..self.rng.int(3, 12) {
                let w = self.word();
                let a = self.rng.int(0, 3);
                let b = self.rng.int(0, 40);
                v.push(format!("{w} = \"{a}.{b}\""));
            }
            v
        } else {
            let n = (self.rng.lognormal(5.3, 0.7) * self.scale) as usize + 20;
            let lang = if ext == "ts" { Lang::Ts } else { Lang::Rust };
            self.code_lines(n, lang)
        };
        self.file_cache.insert(path.to_owned(), got.clone());
        got
    }

    // -- tool output -------------------------------------------------------

    /// The `read` tool's output for `limit` lines from `offset` (1-based).
    pub(crate) fn read_output(
        &mut self,
        cwd: &str,
        path: &str,
        offset: usize,
        limit: usize,
    ) -> String {
        let lines = self.file_lines(path);
        let from = offset.saturating_sub(1).min(lines.len());
        let to = (from + limit).min(lines.len());
        let mut text = String::new();
        for (i, l) in lines[from..to].iter().enumerate() {
            if i > 0 {
                text.push('\n');
            }
            let _ = write!(text, "{}: {l}", offset + i);
        }
        let mut more = String::new();
        if from + limit < lines.len() {
            let shown = to - from;
            let _ = write!(
                more,
                "\n(Showing lines {offset}-{} of {}. Use offset={} to continue.)",
                offset + shown - 1,
                lines.len(),
                offset + shown
            );
        }
        format!("<path>{cwd}/{path}</path>\n<type>file</type>\n<content>\n{text}\n</content>{more}")
    }

    /// `cargo test` output with `n_tests` tests, some failing when `fail`.
    pub(crate) fn cargo_output(&mut self, krate: &str, n_tests: usize, fail: bool) -> String {
        let mut out: Vec<String> = Vec::new();
        let k = self.rng.size(1, 5);
        for i in self.rng.sample_indices(self.crates.len(), k) {
            let c = self.crates[i].clone();
            let a = self.rng.int(0, 3);
            let b = self.rng.int(0, 20);
            out.push(format!("   Compiling {c} v0.{a}.{b} (/home/dev/work/{c})"));
        }
        if self.rng.random() < 0.3 {
            for _ in 0..self.rng.int(1, 3) {
                let p = self.path();
                let ln = self.rng.int(1, 600);
                let id = self.ident();
                let col = self.rng.int(1, 40);
                let code = self.code_lines(1, Lang::Rust);
                out.push(format!("warning: unused variable: `{id}`"));
                out.push(format!("  --> {p}:{ln}:{col}"));
                out.push("   |".to_owned());
                out.push(format!("{ln} |     {}", code[0].trim()));
                out.push(
                    "   |         ^^^^ help: if this is intentional, prefix it with an underscore"
                        .to_owned(),
                );
                out.push("   |".to_owned());
                out.push("   = note: `#[warn(unused_variables)]` on by default".to_owned());
                out.push(String::new());
            }
        }
        let (s, cs) = (self.rng.int(0, 90), self.rng.int(0, 99));
        out.push(format!(
            "    Finished `test` profile [unoptimized + debuginfo] target(s) in {s}.{cs:02}s"
        ));
        let hash = self.rng.next_u64();
        out.push(format!(
            "     Running unittests src/lib.rs (target/debug/deps/{}-{hash:016x})",
            krate.replace('-', "_")
        ));
        out.push(String::new());
        out.push(format!("running {n_tests} tests"));
        let mut failed = Vec::new();
        for _ in 0..n_tests {
            let name = format!("{}::{}", self.ident(), self.ident());
            let bad = fail && self.rng.random() < 0.08;
            let status = if bad {
                "\u{1b}[31mFAILED\u{1b}[0m"
            } else {
                "\u{1b}[32mok\u{1b}[0m"
            };
            out.push(format!("test {name} ... {status}"));
            if bad {
                failed.push(name);
            }
        }
        out.push(String::new());
        if !failed.is_empty() {
            out.push("failures:".to_owned());
            out.push(String::new());
            for name in &failed {
                let p = self.path();
                let (l, c) = (self.rng.int(1, 900), self.rng.int(1, 60));
                let (a, b) = (self.rng.int(0, 5000), self.rng.int(0, 5000));
                out.push(format!("---- {name} stdout ----"));
                out.push(format!("thread '{name}' panicked at {p}:{l}:{c}:"));
                out.push("assertion `left == right` failed".to_owned());
                out.push(format!("  left: {a}"));
                out.push(format!(" right: {b}"));
                out.push(
                    "note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace"
                        .to_owned(),
                );
                out.push(String::new());
            }
            out.push("failures:".to_owned());
            for name in &failed {
                out.push(format!("    {name}"));
            }
            out.push(String::new());
        }
        let (s, cs) = (self.rng.int(0, 9), self.rng.int(0, 99));
        out.push(format!(
            "test result: {}. {} passed; {} failed; 0 ignored; 0 measured; 0 filtered out; finished in {s}.{cs:02}s",
            if failed.is_empty() { "ok" } else { "FAILED" },
            n_tests - failed.len(),
            failed.len()
        ));
        if !failed.is_empty() {
            out.push(format!(
                "\n[stderr]\nerror: test failed, to rerun pass `-p {krate} --lib`\n[exit code: 101]"
            ));
        }
        out.join("\n")
    }

    /// A failed `cargo build` (compiler errors on stderr).
    pub(crate) fn compile_error_output(&mut self) -> String {
        let mut out: Vec<String> = Vec::new();
        for _ in 0..self.rng.int(1, 4) {
            let p = self.path();
            let ln = self.rng.int(1, 700);
            let code = *self
                .rng
                .pick(&["E0308", "E0382", "E0502", "E0599", "E0425", "E0277"]);
            let msg = trim_end_punct(&self.prose(40)).to_lowercase();
            let col = self.rng.int(1, 50);
            let line = self.code_lines(1, Lang::Rust);
            let carets = "^".repeat(self.rng.size(3, 20));
            let note = trim_end_punct(&self.prose(30)).to_lowercase();
            out.push(format!("error[{code}]: {msg}"));
            out.push(format!("  --> {p}:{ln}:{col}"));
            out.push("   |".to_owned());
            out.push(format!("{ln} |     {}", line[0].trim()));
            out.push(format!("   |     {carets} {note}"));
            out.push(String::new());
        }
        let c = self.rng.pick(&self.crates).clone();
        let n = self.rng.int(1, 4);
        out.push(format!(
            "error: could not compile `{c}` (lib) due to {n} previous errors"
        ));
        format!("[stderr]\n{}\n[exit code: 101]", out.join("\n"))
    }

    /// `rg -n` output: matching lines of the synthetic codebase.
    pub(crate) fn grep_output(&mut self) -> String {
        let n = (self.rng.int(1, 40) as f64 * self.scale) as usize + 1;
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            let p = self.path();
            let lines = self.file_lines(&p);
            let i = self.rng.below(lines.len());
            out.push(format!(
                "{p}:{}:{}",
                i + 1,
                lines.get(i).map_or("", String::as_str)
            ));
        }
        out.join("\n")
    }

    /// `ls` output: a run of file names.
    pub(crate) fn ls_output(&mut self) -> String {
        let n = self.rng.size(3, 60);
        let start = self.rng.below(self.files.len());
        let end = (start + n).min(self.files.len());
        let mut s = self.files[start..end].join("\n");
        s.push('\n');
        s
    }

    /// `git status --short` or `git log` output.
    pub(crate) fn git_output(&mut self) -> String {
        if self.rng.random() < 0.5 {
            let n = self.rng.int(1, 12);
            let mut out = Vec::new();
            for _ in 0..n {
                let st = *self.rng.pick(&[" M", "M ", "??", " D", "A "]);
                out.push(format!("{st} {}", self.path()));
            }
            return out.join("\n");
        }
        let mut out: Vec<String> = Vec::new();
        for _ in 0..self.rng.int(1, 8) {
            let (h1, h2, h3) = (
                self.rng.next_u64(),
                self.rng.next_u64(),
                self.rng.next_u64() as u32,
            );
            out.push(format!("commit {h1:016x}{h2:016x}{h3:08x}"));
            out.push("Author: Dev <dev@example.com>".to_owned());
            let (d, h, m, s) = (
                self.rng.int(1, 28),
                self.rng.int(0, 23),
                self.rng.int(0, 59),
                self.rng.int(0, 59),
            );
            out.push(format!(
                "Date:   Mon Aug {d} {h:02}:{m:02}:{s:02} 2026 +0800"
            ));
            out.push(String::new());
            out.push(format!("    {}", self.prose(50).trim()));
            out.push(String::new());
        }
        out.join("\n")
    }
}

// -- token splitting ----------------------------------------------------------

#[derive(Clone, Copy, PartialEq, Eq)]
enum Class {
    Alpha,
    Digit,
    Newline,
    Blank,
    Other,
}

fn class(c: char) -> Class {
    if c.is_ascii_alphabetic() {
        Class::Alpha
    } else if c.is_ascii_digit() {
        Class::Digit
    } else if c == '\n' {
        Class::Newline
    } else if c == ' ' || c == '\t' {
        Class::Blank
    } else {
        Class::Other
    }
}

/// Splits text into roughly BPE-sized pieces, as a model streams them: an optional leading
/// space with a run of letters or of up to three digits, runs of newlines, runs of blanks, and
/// single other characters; pieces longer than 7 characters are cut into 4–6 character parts.
/// The pieces concatenate back to `text`.
pub(crate) fn tokenize(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::with_capacity(text.len() / 3 + 1);
    let mut i = 0;
    while i < chars.len() {
        let start = i;
        let c = chars[i];
        let lead_space = c == ' '
            && chars
                .get(i + 1)
                .is_some_and(|&n| matches!(class(n), Class::Alpha | Class::Digit));
        let k = if lead_space { i + 1 } else { i };
        match class(chars[k]) {
            Class::Alpha => {
                i = k;
                while i < chars.len() && class(chars[i]) == Class::Alpha {
                    i += 1;
                }
            }
            Class::Digit => {
                i = k;
                while i < chars.len() && i < k + 3 && class(chars[i]) == Class::Digit {
                    i += 1;
                }
            }
            Class::Newline => {
                while i < chars.len() && chars[i] == '\n' {
                    i += 1;
                }
            }
            Class::Blank => {
                while i < chars.len() && class(chars[i]) == Class::Blank {
                    i += 1;
                }
            }
            Class::Other => i += 1,
        }
        let piece: Vec<char> = chars[start..i].to_vec();
        let mut rest: &[char] = &piece;
        if rest.len() > 7 {
            let cut = 4 + rest.len() % 3;
            while rest.len() > 7 {
                out.push(rest[..cut].iter().collect());
                rest = &rest[cut..];
            }
        }
        out.push(rest.iter().collect());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{Lang, Rng, TextGen, tokenize};

    #[test]
    fn tokens_concatenate_back_and_are_short() {
        let mut t = TextGen::new(Rng::from_label("t"), 0.4);
        for _ in 0..50 {
            let s = t.markdown(600) + &t.code_lines(12, Lang::Ts).join("\n") + "。 12345 \t\tx";
            let toks = tokenize(&s);
            assert_eq!(toks.concat(), s);
            assert!(toks.iter().all(|p| !p.is_empty() && p.chars().count() <= 7));
        }
        assert_eq!(
            tokenize(" hello  world\n\n42"),
            [" hello", "  ", "world", "\n\n", "42"]
        );
    }

    #[test]
    fn prose_is_english_sized() {
        let mut t = TextGen::new(Rng::from_label("p"), 0.4);
        let text = t.prose(100_000);
        let pieces = tokenize(&text).len();
        let per = text.len() as f64 / pieces as f64;
        assert!((2.5..5.0).contains(&per), "{per} chars per piece");
    }
}
