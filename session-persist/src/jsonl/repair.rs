//! Crash repair (`commitRepair`): cut the torn tail, then append recovered events and closers.
//!
//! The two steps are each durable but not atomic together: a crash between them leaves a
//! shorter, valid log, and the next load recomputes the closers.

use session_core::{Event, SessionHeader};

use super::Inner;
use super::lock::lock_writer;
use super::write::append_bytes;
use crate::backend::TornMarker;
use crate::error::{Error, Result};

impl Inner {
    pub(crate) fn commit_repair(
        &self,
        meta: &SessionHeader,
        torn: Option<TornMarker>,
        closers: &[Event],
    ) -> Result<()> {
        let (truncate_to, mut batch) = match torn {
            None => (None, Vec::new()),
            Some(TornMarker::Truncate {
                truncate_to,
                recovered,
            }) => (Some(truncate_to), recovered),
            Some(_) => {
                return Err(Error::ForeignMarker {
                    backend: self.name.clone(),
                });
            }
        };
        batch.extend_from_slice(closers);
        if truncate_to.is_none() && batch.is_empty() {
            return Ok(());
        }
        let path = self.path_for(meta)?;
        self.check_session_dir(&path)?;
        // Encode before touching the file.
        let bytes = if batch.is_empty() {
            None
        } else {
            Some(self.encode_batch(&batch)?)
        };
        let shared = self.writers.acquire(self.fs.as_ref(), &meta.id, &path)?;
        let mut writer = lock_writer(&shared);
        writer.verify(self.fs.as_ref(), truncate_to.is_none())?;
        self.ensure_durable_entry(&meta.id, &path)?;
        if let Some(cut) = truncate_to {
            let len = writer
                .file
                .stat()
                .map_err(|e| Error::io("fstat", &path, e))?
                .size;
            if cut > len {
                return Err(Error::StaleRepair {
                    path,
                    truncate_to: cut,
                    len,
                });
            }
            writer.truncate(cut)?;
        }
        match bytes {
            Some(bytes) => append_bytes(&mut writer, &bytes),
            None => Ok(()),
        }
    }
}
