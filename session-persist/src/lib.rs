//! session-persist
