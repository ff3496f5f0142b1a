//! Human output: a buffered stdout, colour only on a terminal, aligned tables, wrapping and
//! truncation.

use std::borrow::Cow;
use std::io::{self, BufWriter, IsTerminal, Write};

/// Whether `c` is a control character a terminal may act on: C0 (U+0000–U+001F) except the
/// layout characters newline and tab, DEL (U+007F) and C1 (U+0080–U+009F, which some terminals
/// read as CSI, OSC, …).
fn is_hostile_control(c: char) -> bool {
    matches!(c, '\0'..='\x1f' | '\x7f'..='\u{9f}') && c != '\n' && c != '\t'
}

/// Appends `c`, escaped as `\xHH` (C0, DEL) or `\u{HH}` (C1) when it is a hostile control.
fn push_escaped(out: &mut String, c: char) {
    use std::fmt::Write as _;
    if !is_hostile_control(c) {
        out.push(c);
    } else if c < '\u{80}' {
        let _ = write!(out, "\\x{:02x}", c as u32);
    } else {
        let _ = write!(out, "\\u{{{:x}}}", c as u32);
    }
}

/// `s` with every control character a terminal could act on (ESC starting a CSI or OSC
/// sequence, BEL, backspace, carriage return, DEL, C1 …) shown as a visible escape (`\x1b`,
/// `\u{9b}`); newlines and tabs stay. The one function human output uses for text that comes
/// from a session (ids, content, paths).
pub(crate) fn escape_controls(s: &str) -> Cow<'_, str> {
    if !s.chars().any(is_hostile_control) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        push_escaped(&mut out, c);
    }
    Cow::Owned(out)
}

/// The length of the colour sequence `ESC [ <digits and ;> m` that [`Style`] writes, when `s`
/// starts with one.
fn sgr_len(s: &str) -> Option<usize> {
    let rest = s.strip_prefix("\x1b[")?;
    let params = rest
        .bytes()
        .take_while(|b| b.is_ascii_digit() || *b == b';')
        .count();
    (rest.as_bytes().get(params) == Some(&b'm')).then_some(2 + params + 1)
}

/// A finished line for a terminal: [`escape_controls`], except that with `colour` the colour
/// sequences [`Style`] writes are kept. Every human line goes through this, so a control
/// character that reached a line unescaped is still shown, never acted on.
pub(crate) fn sanitize_line(s: &str, colour: bool) -> Cow<'_, str> {
    if !s.chars().any(is_hostile_control) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 16);
    let mut rest = s;
    while let Some(c) = rest.chars().next() {
        if colour
            && c == '\x1b'
            && let Some(n) = sgr_len(rest)
        {
            out.push_str(&rest[..n]);
            rest = &rest[n..];
            continue;
        }
        push_escaped(&mut out, c);
        rest = &rest[c.len_utf8()..];
    }
    Cow::Owned(out)
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
    w: BufWriter<Box<dyn Write>>,
    /// The pager the output goes through, if any.
    pager: Option<std::process::Child>,
    /// The style for stdout.
    pub(crate) style: Style,
    /// The text width to wrap and clip at: the terminal's, or unbounded ([`UNBOUNDED`]) when
    /// stdout is not a terminal and `COLUMNS` is not set.
    pub(crate) width: usize,
    /// The width to lay columns out in (always finite): the terminal's, else `COLUMNS`, else
    /// 100.
    pub(crate) layout_width: usize,
}

/// The wrap width of output that is not a terminal: no wrapping, no clipping.
pub(crate) const UNBOUNDED: usize = usize::MAX / 4;

/// `COLUMNS`, when set to a usable width (at least 40).
fn columns_env() -> Option<usize> {
    std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.parse::<usize>().ok())
        .filter(|w| *w >= 40)
}

/// The widths for stdout: `(wrap width, layout width)`. On a terminal both are the
/// terminal's width (asked of the terminal, so shells that do not export `COLUMNS` still
/// get it); elsewhere an explicit `COLUMNS` is honoured, and without it nothing is wrapped.
pub(crate) fn widths(is_terminal: bool) -> (usize, usize) {
    let terminal = if is_terminal {
        terminal_size::terminal_size()
            .map(|(w, _)| usize::from(w.0))
            .filter(|w| *w >= 20)
    } else {
        None
    };
    match terminal.or_else(columns_env) {
        Some(w) => (w, w),
        None if is_terminal => (100, 100),
        None => (UNBOUNDED, 100),
    }
}

impl Out {
    /// Standard output; colour when it is a terminal and colour is not disabled.
    pub(crate) fn stdout(color: crate::args::ColorWhen) -> Out {
        let terminal = io::stdout().is_terminal();
        let (width, layout_width) = widths(terminal);
        Out {
            w: BufWriter::with_capacity(64 * 1024, Box::new(io::stdout())),
            pager: None,
            style: Style::new(color.allows(terminal)),
            width,
            layout_width,
        }
    }

    /// Standard output through the pager ([`crate::pager`]) when stdout is a terminal and a
    /// pager starts; plain standard output otherwise.
    pub(crate) fn paged(color: crate::args::ColorWhen) -> Out {
        let mut out = Out::stdout(color);
        if io::stdout().is_terminal()
            && let Some((child, stdin)) = crate::pager::spawn()
        {
            out.w = BufWriter::with_capacity(64 * 1024, Box::new(stdin));
            out.pager = Some(child);
        }
        out
    }

    /// Flushes, closes the pager's input and waits for the person to quit it.
    pub(crate) fn finish(&mut self) -> io::Result<()> {
        let flushed = self.w.flush();
        if let Some(mut child) = self.pager.take() {
            // Dropping the old writer closes the pipe: the pager sees the end of its input.
            self.w = BufWriter::new(Box::new(io::sink()));
            let _ = child.wait();
        }
        flushed
    }

    /// Writes one line (control characters escaped, see [`sanitize_line`]).
    pub(crate) fn line(&mut self, s: &str) -> io::Result<()> {
        self.w
            .write_all(sanitize_line(s, self.style.colour).as_bytes())?;
        self.w.write_all(b"\n")
    }

    /// Flushes to the terminal or pipe.
    pub(crate) fn flush(&mut self) -> io::Result<()> {
        self.w.flush()
    }

    /// The raw writer, for streamed JSON.
    pub(crate) fn writer(&mut self) -> &mut BufWriter<Box<dyn Write>> {
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

/// `n` and the noun, plural unless `n` is 1: `1 event`, `2 events`, `0 logs`.
pub(crate) fn plural(n: u64, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else if noun.ends_with("ch") || noun.ends_with('s') {
        format!("{n} {noun}es")
    } else if let Some(stem) = noun.strip_suffix('y') {
        format!("{n} {stem}ies")
    } else {
        format!("{n} {noun}s")
    }
}

/// Wraps text to `width` columns (at least 10), keeping its own line breaks; words are split
/// at spaces, and a word longer than the width is cut. Widths are display columns (a CJK
/// character takes two); tabs count as four spaces. `textwrap` does the wrapping: first fit
/// (each line filled greedily, in one pass), no hyphenation.
pub(crate) fn wrap(text: &str, width: usize) -> Vec<String> {
    let width = width.max(10);
    let options = textwrap::Options::new(width)
        .word_separator(textwrap::WordSeparator::AsciiSpace)
        .word_splitter(textwrap::WordSplitter::NoHyphenation)
        .wrap_algorithm(textwrap::WrapAlgorithm::FirstFit)
        .break_words(true);
    let mut out = Vec::new();
    for para in text.split('\n') {
        let para = para.trim_end_matches('\r');
        let para: Cow<'_, str> = if para.contains('\t') {
            Cow::Owned(para.replace('\t', "    "))
        } else {
            Cow::Borrowed(para)
        };
        if width == UNBOUNDED {
            out.push(para.into_owned());
            continue;
        }
        out.extend(
            textwrap::wrap(&para, &options)
                .into_iter()
                .map(Cow::into_owned),
        );
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
    let (y, m, d) = session_core::clock::civil_from_days(days as i64);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped_and_layout_kept() {
        assert_eq!(escape_controls("plain text"), Cow::Borrowed("plain text"));
        assert_eq!(
            escape_controls("a\x1b]0;pwned\x07b\x1b[2Jc"),
            "a\\x1b]0;pwned\\x07b\\x1b[2Jc"
        );
        assert_eq!(escape_controls("tab\tnew\nline"), "tab\tnew\nline");
        assert_eq!(
            escape_controls("cr\r del\x7f nul\0"),
            "cr\\x0d del\\x7f nul\\x00"
        );
        // C1 controls (8-bit CSI and OSC).
        assert_eq!(escape_controls("\u{9b}31m\u{9d}x"), "\\u{9b}31m\\u{9d}x");
        // Not controls: U+00A0 and beyond, including U+2028.
        assert_eq!(escape_controls("\u{a0}é\u{2028}"), "\u{a0}é\u{2028}");
    }

    #[test]
    fn lines_keep_only_the_colour_sequences_of_the_style() {
        let s = Style::new(true);
        let line = format!("{} \x1b]8;;http://x\x07link\x1b]8;;\x07", s.red("error:"));
        assert_eq!(
            sanitize_line(&line, true),
            "\x1b[31merror:\x1b[0m \\x1b]8;;http://x\\x07link\\x1b]8;;\\x07"
        );
        // Without colour nothing is kept.
        assert_eq!(sanitize_line("\x1b[31mred", false), "\\x1b[31mred");
        // A lone ESC at the end, or an unfinished sequence.
        assert_eq!(sanitize_line("x\x1b", true), "x\\x1b");
        assert_eq!(sanitize_line("\x1b[31", true), "\\x1b[31");
    }

    #[test]
    fn a_very_long_unbroken_word_is_cut_at_the_width() {
        let word = "w".repeat(800_000);
        let lines = wrap(&word, 96);
        assert_eq!(lines.len(), 800_000usize.div_ceil(96));
        assert!(lines[..lines.len() - 1].iter().all(|l| l.len() == 96));
        assert_eq!(lines.concat(), word);
        // After other words, the long word starts a line of its own.
        assert_eq!(
            wrap(&format!("ab {}", "x".repeat(25)), 10),
            vec!["ab", "xxxxxxxxxx", "xxxxxxxxxx", "xxxxx"]
        );
    }

    #[test]
    fn wide_characters_take_two_columns() {
        // 15 CJK characters are 30 columns: three lines of five at width 10.
        let cjk = "漢字漢字漢字漢字漢字漢字漢字漢";
        assert_eq!(
            wrap(cjk, 10),
            vec!["漢字漢字漢", "字漢字漢字", "漢字漢字漢"]
        );
        assert_eq!(
            wrap("中文 文本 很长的句子", 10),
            vec!["中文 文本", "很长的句子"]
        );
        for line in wrap(&"漢字 ".repeat(40), 21) {
            assert!(textwrap::core::display_width(&line) <= 21, "{line}");
        }
    }

    #[test]
    fn plurals_follow_the_count() {
        assert_eq!(plural(1, "event"), "1 event");
        assert_eq!(plural(0, "event"), "0 events");
        assert_eq!(plural(2, "batch"), "2 batches");
        assert_eq!(plural(1, "batch"), "1 batch");
        assert_eq!(plural(3, "entry"), "3 entries");
    }

    #[test]
    fn output_that_is_not_a_terminal_is_not_wrapped() {
        // (COLUMNS unset in the test environment is not guaranteed: only the terminal case
        // with no size and the pipe case without COLUMNS are pure.)
        if std::env::var_os("COLUMNS").is_none() {
            assert_eq!(widths(false), (UNBOUNDED, 100));
            assert_eq!(wrap(&"word ".repeat(100), widths(false).0).len(), 1);
        }
    }

    #[test]
    fn wrapping_keeps_its_layout() {
        assert_eq!(wrap("aa bb cc", 10), vec!["aa bb cc"]);
        assert_eq!(
            wrap("aaaa bbbb cccc dddd", 10),
            vec!["aaaa bbbb", "cccc dddd"]
        );
        assert_eq!(
            wrap("x abcdefghijklmnopqrstuvwxy z", 10),
            vec!["x", "abcdefghij", "klmnopqrst", "uvwxy z"]
        );
        assert_eq!(wrap("a\tb\n\nc\r\n", 10), vec!["a    b", "", "c"]);
        assert_eq!(wrap("ééééééééééééé", 10), vec!["éééééééééé", "ééé"]);
    }
}
