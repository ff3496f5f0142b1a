//! session-store
