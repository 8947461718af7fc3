//! tracer-preload
