//! `session-store` owns the live sessions of a process: the in-memory [`SessionStore`] that
//! prepares, enters, announces and detaches sessions, publishes their events to scoped
//! listeners, flushes them and forks them.
//!
//! Primary types: [`SessionStore`], [`Scope`] (listener scopes), [`Detach`] (the handle that
//! ends a session's time in the store), [`PrepareOptions`] / [`SeedSource`], [`ForkSource`],
//! [`Dispatch`] (what a pre-commit hook sees), [`SessionPreparation`] and the crate's
//! [`Error`].
//!
//! # Key design decision
//!
//! The store attaches to a [`SharedSession`] as a
//! [`SessionObserver`](session_surface::SessionObserver): the session keeps its own
//! three-phase append (veto, commit, notify) and the store only decides *who* hears it. Its
//! observer runs the dispatch hooks in the veto phase and, after the commit, the
//! `session/event` listeners of the session's scope and the global scope, each failure
//! contained and logged. Listeners are always called without any store lock held, so they
//! may call back into the store; a detach requested while a session is being announced or
//! while one of its appends is being published is deferred until that operation unwinds.
//! The crate needs no async runtime: `flush` joins its listeners' futures by hand, and
//! asynchronous listeners are driven by a replaceable [`Spawner`].
//!
//! # Example
//!
//! ```
//! use std::sync::{Arc, Mutex};
//! use session_core::{FixedClock, json::Value};
//! use session_store::{PrepareOptions, SessionStore, block_on};
//! use session_surface::Draft;
//!
//! let store = SessionStore::new(Arc::new(FixedClock::new(1_000)));
//! let seen = Arc::new(Mutex::new(Vec::new()));
//! let log = seen.clone();
//! store.on_event(move |session, event| {
//!     log.lock().unwrap().push(format!("{}#{}", session.id(), event.seq()));
//!     Ok(())
//! });
//!
//! let (session, detach) = store.create(None, PrepareOptions::default())?;
//! assert_eq!(&*session.id(), "session-1");
//! session.append(Draft::new("turn/start", Value::parse(r#"{"turn":1}"#)?))?;
//! assert_eq!(*seen.lock().unwrap(), ["session-1#0"]);
//!
//! // No flush listener is registered, so nothing participated.
//! assert_eq!(block_on(store.flush(&session))?, false);
//!
//! detach.detach();
//! assert!(store.get("session-1").is_none());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod error;
mod fork;
mod future;
mod listeners;
mod preparation;
mod store;

pub use error::{Error, Result, SharedError};
pub use future::{BoxFuture, Spawner, block_on, default_spawner};
pub use listeners::{Dispatch, Subscription};
pub use preparation::SessionPreparation;
pub use session_surface::{BoxError, Session, SharedSession, WarningSink};
pub use store::{Detach, ForkSource, PrepareOptions, Scope, SeedSource, SessionStore};
