//! gcc-hooks
