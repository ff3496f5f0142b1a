//! session-fork
