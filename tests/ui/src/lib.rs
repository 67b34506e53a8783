//! See `tests/ui.rs` and `cases/`.
