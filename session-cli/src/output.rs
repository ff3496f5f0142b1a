//! Human output: a buffered stdout, colour only on a terminal, aligned tables, wrapping and
//! truncation.

use std::io::{self, BufWriter, IsTerminal, Stdout, Write};

/// Whether colour is allowed for a stream: a terminal, `NO_COLOR` unset or empty, and no
/// `--no-color`.
pub(crate) fn colour_allowed(is_terminal: bool, no_color_flag: bool) -> bool {
    is_terminal && !no_color_flag && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// ANSI styling, or none.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Style {
    colour: bool,
}

impl Style {
    /// Styling on or off.
    pub(crate) fn new(colour: bool) -> Style {
        Style { colour }
    }

    fn paint(self, code: &str, s: &str) -> String {
        if self.colour {
            format!("\x1b[{code}m{s}\x1b[0m")
        } else {
            s.to_owned()
        }
    }

    /// Bold.
    pub(crate) fn bold(self, s: &str) -> String {
        self.paint("1", s)
    }

    /// Dim.
    pub(crate) fn dim(self, s: &str) -> String {
        self.paint("2", s)
    }

    /// Red.
    pub(crate) fn red(self, s: &str) -> String {
        self.paint("31", s)
    }

    /// Green.
    pub(crate) fn green(self, s: &str) -> String {
        self.paint("32", s)
    }

    /// Yellow.
    pub(crate) fn yellow(self, s: &str) -> String {
        self.paint("33", s)
    }

    /// Cyan.
    pub(crate) fn cyan(self, s: &str) -> String {
        self.paint("36", s)
    }

    /// Magenta.
    pub(crate) fn magenta(self, s: &str) -> String {
        self.paint("35", s)
    }
}

/// Buffered standard output with its style and width.
pub(crate) struct Out {
    w: BufWriter<Stdout>,
    /// The style for stdout.
    pub(crate) style: Style,
    /// The text width to wrap at.
    pub(crate) width: usize,
}

impl Out {
    /// Standard output; colour when it is a terminal and colour is not disabled.
    pub(crate) fn stdout(no_color: bool) -> Out {
        let terminal = io::stdout().is_terminal();
        let width = std::env::var("COLUMNS")
            .ok()
            .and_then(|c| c.parse::<usize>().ok())
            .filter(|w| *w >= 40)
            .unwrap_or(100);
        Out {
            w: BufWriter::with_capacity(64 * 1024, io::stdout()),
            style: Style::new(colour_allowed(terminal, no_color)),
            width,
        }
    }

    /// Writes one line.
    pub(crate) fn line(&mut self, s: &str) -> io::Result<()> {
        self.w.write_all(s.as_bytes())?;
        self.w.write_all(b"\n")
    }

    /// Flushes to the terminal or pipe.
    pub(crate) fn flush(&mut self) -> io::Result<()> {
        self.w.flush()
    }

    /// The raw writer, for streamed JSON.
    pub(crate) fn writer(&mut self) -> &mut BufWriter<Stdout> {
        &mut self.w
    }
}

/// Display width of a string (one column per character, escape sequences excluded).
pub(crate) fn width_of(s: &str) -> usize {
    let mut n = 0;
    let mut in_escape = false;
    for c in s.chars() {
        if in_escape {
            if c == 'm' {
                in_escape = false;
            }
        } else if c == '\x1b' {
            in_escape = true;
        } else {
            n += 1;
        }
    }
    n
}

/// Pads `s` to `width` columns.
pub(crate) fn pad(s: &str, width: usize) -> String {
    let w = width_of(s);
    if w >= width {
        s.to_owned()
    } else {
        format!("{s}{}", " ".repeat(width - w))
    }
}

/// Cuts plain text to `max` columns, ending in `…` when cut.
pub(crate) fn truncate(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_owned();
    }
    let mut out: String = s.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// Renders rows as an aligned table (the first row is the heading, shown bold). Columns whose
/// index is in `right` are right-aligned. Every line is `indent` + cells separated by two spaces.
pub(crate) fn table(
    rows: &[Vec<String>],
    right: &[usize],
    style: Style,
    indent: &str,
) -> Vec<String> {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let mut widths = vec![0; cols];
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            widths[i] = widths[i].max(width_of(cell));
        }
    }
    rows.iter()
        .enumerate()
        .map(|(r, row)| {
            let mut line = String::from(indent);
            for (i, cell) in row.iter().enumerate() {
                if i > 0 {
                    line.push_str("  ");
                }
                let last = i + 1 == row.len();
                let w = widths[i];
                let cell_w = width_of(cell);
                if right.contains(&i) {
                    line.push_str(&" ".repeat(w.saturating_sub(cell_w)));
                    line.push_str(cell);
                } else if last {
                    line.push_str(cell);
                } else {
                    line.push_str(&pad(cell, w));
                }
            }
            let line = line.trim_end().to_owned();
            if r == 0 { style.bold(&line) } else { line }
        })
        .collect()
}

/// Wraps text to `width` columns, keeping its own line breaks; long words are split.
pub(crate) fn wrap(text: &str, width: usize) -> Vec<String> {
    let width = width.max(10);
    let mut out = Vec::new();
    for para in text.split('\n') {
        let para = para.trim_end_matches('\r');
        if para.is_empty() {
            out.push(String::new());
            continue;
        }
        let mut line = String::new();
        let mut line_w = 0;
        for word in para.split(' ') {
            let mut word: String = word.replace('\t', "    ");
            loop {
                let ww = word.chars().count();
                let sep = usize::from(line_w > 0);
                if line_w + sep + ww <= width {
                    if sep == 1 {
                        line.push(' ');
                    }
                    line.push_str(&word);
                    line_w += sep + ww;
                    break;
                }
                if line_w > 0 {
                    out.push(std::mem::take(&mut line));
                    line_w = 0;
                    continue;
                }
                // A word longer than the width: split it.
                let head: String = word.chars().take(width).collect();
                word = word.chars().skip(width).collect();
                out.push(head);
            }
        }
        out.push(line);
    }
    while out.last().is_some_and(String::is_empty) {
        out.pop();
    }
    out
}

/// Keeps at most `max` lines, replacing the rest by one `… (N more lines)` line.
pub(crate) fn clip(mut lines: Vec<String>, max: Option<usize>) -> Vec<String> {
    if let Some(max) = max
        && lines.len() > max
    {
        let more = lines.len() - max + 1;
        lines.truncate(max.saturating_sub(1));
        lines.push(format!("… ({more} more lines)"));
    }
    lines
}

/// A byte count for people: `812 B`, `8.5 KiB`, `3.1 MiB`.
pub(crate) fn bytes(n: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut v = n as f64 / 1024.0;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    format!("{v:.1} {}", UNITS[unit])
}

/// An epoch-milliseconds time as `YYYY-MM-DD HH:MM:SS` UTC.
pub(crate) fn utc(ms: u64) -> String {
    let secs = ms / 1000;
    let days = secs / 86_400;
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days as i64);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// An epoch-milliseconds time as RFC 3339 UTC (`2026-01-01T00:00:00.000Z`).
pub(crate) fn rfc3339(ms: u64) -> String {
    let secs = ms / 1000;
    let days = secs / 86_400;
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days as i64);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        ms % 1000
    )
}

/// Howard Hinnant's days-to-civil conversion.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}
