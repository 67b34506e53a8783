//! Ready kernels with host entry points, like Pallas's `ops/gpu` package:
//! each entry point takes device buffers, checks its inputs (an error names
//! the constraint and the values), picks and caches what it needs (kernel
//! instance, tensor maps), and launches. The examples crates stay the
//! teaching ladder; this crate is what an application calls.
//!
//! | module | entry point | kernels |
//! |---|---|---|
