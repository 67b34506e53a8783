//! Each misuse rule of `#[kernel]` and of the typed launch API has one
//! compile-fail case in `cases/fail/`, named after the rule, with the
//! expected compiler output beside it (`.stderr`). `cases/pass/` holds
//! kernels that must compile, and whose launch metadata is checked at run
//! time.
//!
//! Regenerate the `.stderr` files after an intended message change with
//! `TRYBUILD=overwrite cargo test -p kernel-ui-tests`, and review the diff.
#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("cases/fail/*.rs");
    t.pass("cases/pass/*.rs");
}
