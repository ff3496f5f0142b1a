//! `view SESSION -o FILE.html`: one self-contained page of a session for sharing
//! (`session_web::export_page`), secrets masked unless `--no-redact`.

use std::path::PathBuf;

use crate::args::Global;
use crate::cmd_read::require_store;
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
    let page = store
        .block_on(session_web::export_page(
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
    std::fs::write(&tmp, page.as_bytes()).map_err(located)?;
    std::fs::rename(&tmp, output).map_err(located)?;
    out.line(&format!(
        "wrote {} ({}){}",
        output.display(),
        bytes(page.len() as u64),
        if args.redact {
            ""
        } else {
            ", secrets NOT masked (--no-redact)"
        }
    ))?;
    store.close()
}
