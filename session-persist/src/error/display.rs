//! The reference's exact text of every [`Error`].

use std::fmt;
use std::path::Path;

use session_core::json;

use super::{Error, errno};

/// `JSON.stringify` of a path (used by the layout and encoding messages).
fn json_path(path: &Path) -> String {
    let mut out = String::new();
    json::write_str(&path.to_string_lossy(), &mut out);
    out
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const ZSTD: &str = "corrupt Zstandard session log";
        match self {
            Error::Io { op, path, source } => {
                if let Some(code) = errno::io_code(source) {
                    write!(f, "{code}: ")?;
                }
                write!(f, "{source}, {op} '{}'", path.display())
            }
            Error::EmptyLog { zstd: false } => f.write_str("empty or header-less session log"),
            Error::EmptyLog { zstd: true } => {
                f.write_str("empty or header-less Zstandard session log")
            }
            Error::HeaderNotJson { .. } => {
                f.write_str("corrupt session log: header line is not valid JSON")
            }
            Error::NotSessionHeader { .. } => {
                f.write_str("corrupt session log: first line is not a session header")
            }
            Error::RetiredHeaderFields => {
                f.write_str("session header uses retired policy baseline fields")
            }
            Error::LoneSurrogate { line, offset } => {
                f.write_str("session log ")?;
                match line {
                    None => f.write_str("header line")?,
                    Some(n) => write!(f, "line {n}")?,
                }
                write!(
                    f,
                    " holds a lone UTF-16 surrogate escape at byte {offset}, which this build \
                     cannot represent; refusing to read it"
                )
            }
            Error::UnparsableCommitted { line, .. } => {
                write!(
                    f,
                    "corrupt session log: unparsable committed event at line {line}"
                )
            }
            Error::RecordTooLong { offset, limit } => write!(
                f,
                "corrupt session log: record at byte {offset} is longer than {limit} bytes \
                 without a newline (MAX_RECORD_BYTES)"
            ),
            Error::SeqGap {
                line,
                expected,
                got,
            } => write!(
                f,
                "corrupt session log: seq gap in committed region at line {line} (expected \
                 {expected}, got {got})"
            ),
            Error::ZstdStructure { kind, offset } => {
                write!(f, "{ZSTD}: {} at byte {offset}", kind.text())
            }
            Error::ZstdFrame { offset, .. } => {
                write!(f, "{ZSTD}: frame at byte {offset} failed validation")
            }
            Error::ZstdTornRecord => {
                write!(f, "{ZSTD}: complete frame contains a torn JSONL record")
            }
            Error::ZstdHeaderFrameLines => {
                write!(f, "{ZSTD}: first frame is not exactly one header line")
            }
            Error::ZstdHeaderFrame { .. } => write!(f, "{ZSTD}: header frame failed validation"),
            Error::FormatUnsupported { refusal, location } => {
                write!(f, "{refusal}")?;
                if let Some(at) = location {
                    write!(f, " (raw log: {})", at.path.display())?;
                }
                Ok(())
            }
            Error::IdentityMismatch {
                path,
                requested,
                header_id,
            } => write!(
                f,
                "corrupt session log \"{}\": requested id \"{requested}\" does not match header \
                 id \"{header_id}\"",
                path.display()
            ),
            Error::UnnameableHeader { path } => write!(
                f,
                "corrupt session log \"{}\": header id cannot name a storage path",
                path.display()
            ),
            Error::IdentityPath {
                path,
                header_id,
                expected,
            } => write!(
                f,
                "corrupt session log \"{}\": header id \"{header_id}\" and cwd identify \"{}\"",
                path.display(),
                expected.display()
            ),
            Error::InvalidRawHeader { path } => write!(
                f,
                "corrupt session log: invalid header line in \"{}\"",
                path.display()
            ),
            Error::PermissiveDirectory { path, mode } => write!(
                f,
                "session directory \"{}\" must not be group/world-writable (mode {mode:04o}); \
                 another user could plant a link in it (chmod go-w it, or allow permissive \
                 directories explicitly)",
                path.display()
            ),
            Error::ReadOnlyFile { path } => write!(
                f,
                "session log \"{}\" is read in place outside a store layout; it cannot be written",
                path.display()
            ),
            Error::FlatLayout { path } => write!(
                f,
                "session artifact {} uses the unsupported flat-file layout; use a separate root \
                 or move it into a project/session directory before loading",
                json_path(path)
            ),
            Error::EncodingMismatch {
                path,
                configured_zstd,
            } => {
                let (suffix, mode) = if *configured_zstd {
                    (".jsonl", "\"zstd\"")
                } else {
                    (".jsonl.zstd", "\"none\"")
                };
                write!(
                    f,
                    "session artifact {} uses {suffix}, but this backend is configured for \
                     compression {mode}; use a separate root or select the matching compression \
                     mode",
                    json_path(path)
                )
            }
            Error::DuplicateId { id } => write!(
                f,
                "duplicate JSONL session id \"{id}\" appears in multiple project directories"
            ),
            Error::EmptySegment => f.write_str("cannot encode an empty path segment"),
            Error::EmptyProjectPath => f.write_str("cannot encode an empty project path"),
            Error::AlreadyMaterialized { id } => write!(
                f,
                "refusing to materialize \"{id}\": a log already exists on disk (load/resume it \
                 instead)"
            ),
            Error::RollbackFailed {
                path,
                error,
                rollback,
            } => write!(
                f,
                "failed to roll back append to \"{}\": {error}; the rollback also failed: \
                 {rollback}",
                path.display()
            ),
            Error::PublicationNotDurable {
                id,
                path,
                bytes,
                seqs: (first, last),
                source,
            } => write!(
                f,
                "session \"{id}\": the log \"{}\" is on disk ({bytes} bytes: the header and \
                 events {first}..={last}, written and fsynced), but its directory entry is not \
                 durable: {source}; the batch is not acknowledged, and a retry re-syncs the \
                 directories and writes only the events after seq {last}",
                path.display()
            ),
            Error::Locked { id, .. } => write!(f, "session \"{id}\" is locked by another writer"),
            Error::SealRefused { id, reason } => {
                write!(f, "cannot seal session \"{id}\": {reason}")
            }
            Error::Vanished { id, path } => write!(
                f,
                "session \"{id}\" log \"{}\" disappeared under its writer; refusing to re-create \
                 it",
                path.display()
            ),
            Error::Replaced { id, path } => write!(
                f,
                "session \"{id}\" log \"{}\" was replaced or changed outside its writer; refusing \
                 to append",
                path.display()
            ),
            Error::StaleWriter {
                id,
                path,
                loaded_len,
                loaded,
                stored_len,
                stored,
            } => {
                write!(
                    f,
                    "session \"{id}\" log \"{}\" changed since this writer loaded it: the writer's \
                     session ends at ",
                    path.display()
                )?;
                match loaded_len {
                    Some(len) => write!(f, "byte {len}")?,
                    None => f.write_str("an unknown byte")?,
                }
                write!(
                    f,
                    " (revision {loaded}), the stored log ends at byte {stored_len} (revision \
                     {stored}); refusing to write"
                )
            }
            Error::StaleRepair {
                path,
                truncate_to,
                len,
            } => write!(
                f,
                "refusing to repair \"{}\": the torn marker truncates to byte {truncate_to} but \
                 the log holds {len} bytes",
                path.display()
            ),
            Error::ForeignMarker { backend } => write!(
                f,
                "{backend} cannot apply a torn marker produced by another backend"
            ),
            Error::Unsupported { backend, operation } => {
                write!(f, "{backend} does not support {operation}")
            }
            Error::NoRawArtifacts => {
                f.write_str("this session persistence backend does not expose raw artifacts")
            }
            Error::Closed { backend } => write!(f, "{backend} is closed"),
            Error::Encode { source } => write!(f, "Zstandard compression failed: {source}"),
            Error::Task { message } => write!(f, "background persistence task failed: {message}"),
            // ---- Coordinator errors ----
            Error::MetadataNotLossless => {
                f.write_str("session metadata must be losslessly JSON-serializable")
            }
            Error::MetadataCreatedAt => {
                f.write_str("session metadata createdAt must be a non-negative safe integer")
            }
            Error::InvalidMetadata(message) | Error::Backend(message) => f.write_str(message),
            Error::AlreadyTracked { id } => {
                write!(f, "session \"{id}\" already exists in this backend")
            }
            Error::AlreadyPersisted { id } => write!(
                f,
                "session \"{id}\" already has a persisted log on disk; load/resume it instead \
                 of creating"
            ),
            Error::VerbatimAppend { seq } => write!(
                f,
                "event at seq {seq} is a stored record with an invalid event envelope and cannot \
                 be appended"
            ),
            Error::BatchNotLossless => f.write_str(
                "session event batch is not losslessly JSON-serializable because it contains \
                 non-JSON-serializable data",
            ),
            Error::AppendSeqMismatch {
                id,
                expected,
                index,
                got,
            } => write!(
                f,
                "append seq mismatch for \"{id}\": expected {expected} at index {index}, got {got}"
            ),
            Error::PreparationReserved { id } => write!(
                f,
                "cannot append session \"{id}\" while its persisted preparation is reserved"
            ),
            Error::NotFound { id } => write!(f, "session \"{id}\" not found"),
            Error::PrepareWhileLive { id } => {
                write!(f, "cannot prepare session \"{id}\" while it is live")
            }
            Error::LiveOwner { id } => {
                write!(f, "session \"{id}\" already has a live persistence owner")
            }
            Error::LiveTurnOpen { id } => write!(
                f,
                "cannot load session \"{id}\" while its live turn is open; use the live Session \
                 or wait for the turn to close"
            ),
            Error::InvalidFromSeq { got } => {
                write!(
                    f,
                    "readFrom fromSeq must be a non-negative safe integer, got {got}"
                )
            }
            Error::StoredIdentityMismatch {
                requested,
                header_id,
            } => write!(
                f,
                "stored session identity mismatch: requested \"{requested}\", header contains \
                 \"{header_id}\""
            ),
            Error::CwdCollision {
                id,
                persisted,
                live,
            } => write!(
                f,
                "session \"{id}\" is already persisted at a different cwd (persisted: {}, live: \
                 {}) (id collision)",
                persisted.as_deref().unwrap_or("undefined"),
                live.as_deref().unwrap_or("undefined")
            ),
            Error::SeedCollision { id, count } => write!(
                f,
                "session \"{id}\" is already persisted with {count} event(s) that do not match \
                 this live session (id collision)"
            ),
            Error::OwnerCollision { id } => write!(
                f,
                "session \"{id}\" is already bound to a different live session in this backend \
                 (id collision)"
            ),
            Error::PrefixCollision { id } => write!(
                f,
                "session \"{id}\" already has a persisted log on disk that does not match this \
                 live session (id collision)"
            ),
            Error::PreparationMismatch { id } => write!(
                f,
                "session \"{id}\" preparation no longer matches its persistence state"
            ),
            Error::CannotPublish { id } => write!(
                f,
                "cannot publish session \"{id}\": persisted state already owns this identity"
            ),
            Error::NotReserved { id } => {
                write!(f, "session \"{id}\" preparation is no longer reserved")
            }
            Error::LegacyEvent { id, kind, seq } => write!(
                f,
                "session \"{id}\" contains unsupported legacy {} at seq {seq}",
                kind.text()
            ),
            Error::MalformedLegacy {
                id,
                event_type,
                seq,
            } => session_core::rules::Violation::MalformedLegacy {
                id: id.clone(),
                event_type,
                seq: *seq,
            }
            .fmt(f),
            Error::UpgradeWithoutData {
                id,
                event_type,
                seq,
            } => write!(
                f,
                "session \"{id}\" stores {event_type} at seq {seq} without a data object, which \
                 the read-time upgrade must read"
            ),
            Error::InvalidStoredEnvelope { index, .. } => {
                write!(
                    f,
                    "seed event at index {index} has an invalid event envelope"
                )
            }
            Error::InvalidCacheSize => {
                f.write_str("preparedSessionCacheSize must be a positive safe integer")
            }
            Error::InvalidBatchDelay => {
                f.write_str("writeBatchMaxDelayMs must be an integer between 1 and 2147483647")
            }
            Error::InvalidBatches { events, detail } => write!(
                f,
                "batches of a publication must be non-empty consecutive ranges covering its {events} events ({detail})"
            ),
            Error::Corruption { id, cause } => write!(
                f,
                "stored session \"{id}\" failed validation: {}: {cause}",
                cause.name()
            ),
            Error::RedactionChangedEnvelope { id, seq, field } => write!(
                f,
                "redaction of event {seq} of session \"{id}\" changed its {field}"
            ),
            Error::LostState { id } => {
                write!(f, "session \"{id}\" lost persistence state during load")
            }
            Error::Aborted(reason) => write!(f, "{reason}"),
            Error::Session(e) => write!(f, "{e}"),
            Error::Store(e) => write!(f, "{e}"),
            Error::DisposeFailed { backend, .. } => write!(f, "{backend} dispose failed"),
            Error::StoreNotConfigured => {
                f.write_str("cannot prepare a session: SessionStore is not configured")
            }
            Error::WriteInterrupted { id } => {
                write!(f, "background write for session \"{id}\" was interrupted")
            }
            Error::Foreign { error, .. } => write!(f, "{error}"),
        }
    }
}
