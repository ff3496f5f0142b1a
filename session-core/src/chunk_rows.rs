//! The packed chunk-row storage codec.
