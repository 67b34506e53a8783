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
    // The cases are built, not only checked: some rules are `const`
    // assertions that only an instantiated kernel evaluates, which `cargo
    // check` never does. Without debug info: each case is its own binary,
    // linked against the host crates, and nobody debugs them.
    std::env::set_var("CARGO_PROFILE_DEV_DEBUG", "0");
    let t = trybuild::TestCases::new();
    t.compile_fail("cases/fail/*.rs");
    t.pass("cases/pass/*.rs");
}
