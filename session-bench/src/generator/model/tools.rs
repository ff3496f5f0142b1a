//! The simulated tool calls: which tool a step calls, its arguments and its result.

use super::{Arg, Lang, Model, ToolRun, args_json, take_chars};

impl Model {
    pub(super) fn call_id(&mut self, i: usize) -> String {
        const ALNUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
        let r = self.rng();
        let tail: String = (0..20).map(|_| char::from(*r.pick(ALNUM))).collect();
        let n = r.below(10_000);
        format!("call_{i:02}_{tail}{n:04}")
    }

    /// A tool call the model makes, with the output it gets.
    #[allow(clippy::many_single_char_names)]
    pub(super) fn make_tool_call(&mut self) -> ToolRun {
        let x = self.rng().random();
        let cwd = self.cwd.clone();
        let t = &mut self.text;
        if x < 0.36 {
            let path = t.path();
            let n = t.file_lines(&path).len();
            let off = if t.rng.random() < 0.6 {
                1
            } else {
                t.rng.size(1, n.saturating_sub(10).max(1))
            };
            let mut lim = *t.rng.pick(&[2000usize, 2000, 200, 120, 80, 400]);
            if lim != 2000 {
                lim = ((lim as f64 * t.scale) as usize).max(10);
            }
            let args = if off > 1 || lim != 2000 {
                args_json(&[
                    ("file_path", Arg::Str(path.clone())),
                    ("offset", Arg::Int(off as i64)),
                    ("limit", Arg::Int(lim as i64)),
                ])
            } else {
                args_json(&[("file_path", Arg::Str(path.clone()))])
            };
            let result = t.read_output(&cwd, &path, off, lim);
            let duration = t.rng.int(2, 40);
            return ToolRun {
                name: "read",
                args,
                result,
                duration,
                is_error: false,
            };
        }
        if x < 0.58 {
            let krate = t.rng.pick(&t.crates).clone();
            let y = t.rng.random();
            let (cmd, result, duration);
            if y < 0.45 {
                let suffix = match t.rng.below(4) {
                    0 => String::new(),
                    1 => " -- --nocapture".to_owned(),
                    2 => format!(" {}", t.ident()),
                    _ => " --lib".to_owned(),
                };
                cmd = format!("cargo test -p {krate}{suffix}");
                let fail = t.rng.random() < 0.35;
                let n = (t.rng.int(3, 90) as f64 * t.scale) as usize + 1;
                result = t.cargo_output(&krate, n, fail);
                duration = t.rng.int(800, 60_000);
            } else if y < 0.6 {
                cmd = format!("cargo build -p {krate} 2>&1 | tail -n 60");
                result = if t.rng.random() < 0.5 {
                    t.compile_error_output()
                } else {
                    let (s, cs) = (t.rng.int(0, 60), t.rng.int(0, 99));
                    format!(
                        "    Finished `dev` profile [unoptimized + debuginfo] target(s) in {s}.{cs:02}s"
                    )
                };
                duration = t.rng.int(500, 40_000);
            } else if y < 0.75 {
                let sub = *t.rng.pick(&[
                    "status --short",
                    "log --oneline -n 8",
                    "log -n 3",
                    "diff --stat",
                ]);
                cmd = format!("git {sub}");
                result = t.git_output();
                duration = t.rng.int(10, 300);
            } else if y < 0.9 {
                let dir = match t.rng.below(4) {
                    0 => "crates".to_owned(),
                    1 => format!("crates/{krate}/src"),
                    2 => "-la".to_owned(),
                    _ => "packages".to_owned(),
                };
                cmd = format!("ls {dir}");
                result = t.ls_output();
                duration = t.rng.int(3, 50);
            } else {
                cmd = format!("rg -n '{}' crates", t.ident());
                result = t.grep_output();
                duration = t.rng.int(10, 400);
            }
            let desc = take_chars(t.prose(30).trim().trim_end_matches(['.', ':', '?']), 80);
            return ToolRun {
                name: "bash",
                args: args_json(&[("command", Arg::Str(cmd)), ("description", Arg::Str(desc))]),
                result,
                duration,
                is_error: false,
            };
        }
        if x < 0.80 {
            let path = t.path();
            let k = t.rng.size(1, 8);
            let old = t.code_lines(k, Lang::Rust).join("\n");
            let k = t.rng.size(1, 10);
            let new = t.code_lines(k, Lang::Rust).join("\n");
            let args = args_json(&[
                ("file_path", Arg::Str(path.clone())),
                ("old_string", Arg::Str(old)),
                ("new_string", Arg::Str(new)),
            ]);
            if t.rng.random() < 0.06 {
                return ToolRun {
                    name: "edit",
                    args,
                    result: format!("Error: old_string was not found in {cwd}/{path}"),
                    duration: t.rng.int(2, 20),
                    is_error: true,
                };
            }
            return ToolRun {
                name: "edit",
                args,
                result: format!("The file {cwd}/{path} has been updated successfully."),
                duration: t.rng.int(2, 30),
                is_error: false,
            };
        }
        if x < 0.88 {
            let pat = t.ident();
            let dir = *t.rng.pick(&["crates", "packages", "."]);
            let args = args_json(&[
                ("pattern", Arg::Str(pat)),
                ("path", Arg::Str(dir.to_owned())),
            ]);
            return ToolRun {
                name: "grep",
                args,
                result: t.grep_output(),
                duration: t.rng.int(5, 300),
                is_error: false,
            };
        }
        if x < 0.91 {
            let base = t.path();
            let dir = base.rsplit_once('/').map_or(base.as_str(), |(d, _)| d);
            let path = format!("{dir}/{}.rs", t.word());
            let k = t.rng.size(15, 90);
            let content = t.code_lines(k, Lang::Rust).join("\n");
            return ToolRun {
                name: "write",
                args: args_json(&[
                    ("file_path", Arg::Str(path.clone())),
                    ("content", Arg::Str(content)),
                ]),
                result: format!(
                    "<path>{cwd}/{path}</path>\n<type>file</type>\n<content>\nCreated file\n</content>"
                ),
                duration: t.rng.int(2, 30),
                is_error: false,
            };
        }
        if x < 0.97 {
            let n = t.rng.size(2, 7);
            let todos: Vec<(String, &'static str)> = (0..n)
                .map(|_| {
                    let c = take_chars(t.prose(40).trim(), 90);
                    let s = *t.rng.pick(&["pending", "in_progress", "completed"]);
                    (c, s)
                })
                .collect();
            return ToolRun {
                name: "todo_write",
                args: args_json(&[("todos", Arg::Todos(todos))]),
                result: format!("Todos updated ({n} items)."),
                duration: t.rng.int(1, 5),
                is_error: false,
            };
        }
        let w = take_chars(&t.word(), 3);
        let args = args_json(&[
            ("pattern", Arg::Str(format!("**/*{w}*.rs"))),
            ("path", Arg::Str("crates".to_owned())),
        ]);
        let k = t.rng.size(0, 20);
        let files: Vec<String> = (0..k)
            .map(|_| {
                let i = t.rng.below(t.files.len());
                t.files[i].clone()
            })
            .collect();
        let result = if files.is_empty() {
            "(no matches)".to_owned()
        } else {
            files.join("\n")
        };
        ToolRun {
            name: "glob",
            args,
            result,
            duration: t.rng.int(3, 80),
            is_error: false,
        }
    }
}
