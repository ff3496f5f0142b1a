//! `view SESSION -o FILE.html`: one self-contained page of a session for sharing
//! (`session_web::export_view`, written by `session_web::render_to`), secrets masked unless `--no-redact`.

use std::path::PathBuf;

use crate::args::Global;
use crate::cmd_read::{close_leaving, require_store};
use crate::error::{Error, Location, Result};
use crate::output::{Out, bytes};
use crate::store::{Store, resolve};

/// `view`'s options.
#[derive(Debug, Clone)]
pub(crate) struct ViewArgs {
    /// The SESSION operand.
    pub(crate) session: String,
    /// `-o FILE.html`.
    pub(crate) output: Option<PathBuf>,
    /// Mask secret-looking strings (no `--no-redact`).
    pub(crate) redact: bool,
}

/// `view`.
pub(crate) fn view(args: &ViewArgs, global: &Global, out: &mut Out) -> Result<()> {
    let Some(output) = &args.output else {
        return Err(Error::usage("view needs -o FILE.html"));
    };
    let target = resolve(&args.session, global, true)?;
    require_store(&target.at)?;
    let store = Store::for_target(&target)?;
    let options = session_web::ExportOptions {
        redact: args.redact.then(session_persist::redact::mask_secrets),
        ..session_web::ExportOptions::default()
    };
    let view = store
        .block_on(session_web::export_view(
            &store.persistence,
            &target.id,
            &options,
        ))
        .map_err(|e| match e.storage_source() {
            Some(source) => store.err(source.clone(), target.file.as_deref()),
            None => Error::failed(e.to_string(), None),
        })?;
    // Written beside the destination, then renamed: a reader never sees half a page.
    let tmp = output.with_extension("html.tmp");
    let located = |e: std::io::Error| {
        Error::failed_at(
            format!("cannot write {}: {e}", output.display()),
            None,
            Location {
                file: Some(output.clone()),
                ..Location::default()
            },
        )
    };
    // The page is written as it is built (`render_to`), never held whole.
    let mut file = Counted {
        inner: std::io::BufWriter::new(std::fs::File::create(&tmp).map_err(located)?),
        written: 0,
    };
    session_web::render_to(&view, &options.limits, &mut file).map_err(located)?;
    file.inner
        .into_inner()
        .map_err(|e| located(e.into_error()))?;
    std::fs::rename(&tmp, output).map_err(located)?;
    out.line(&format!(
        "wrote {} ({}){}",
        output.display(),
        bytes(file.written),
        if args.redact {
            ""
        } else {
            ", secrets NOT masked (--no-redact)"
        }
    ))?;
    close_leaving(store, &target.id, view)
}

/// A writer that counts the bytes written through it.
struct Counted<W> {
    inner: W,
    written: u64,
}

impl<W: std::io::Write> std::io::Write for Counted<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.written += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}
