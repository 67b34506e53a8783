//! 16-byte vector memory (`kernel_device::Pack16`) on the CPU emulator
//! (`kernel_fixtures::vecmem`): every operation moves the right bytes for
//! f16, bf16, E4M3 and f32 (global, shared, a swizzled tile, the raw-pointer
//! forms), and a misaligned or out-of-range access is reported with its
//! rule, its values and the kernel's line.
use kernel_device::{bf16, f16, E4M3};
use kernel_fixtures::vecmem::{self as k, PACKS};
use kernel_host::emulate::{EmuError, Emulator, RunReport};

/// The bytes of `v`.
fn bytes<T: Copy>(v: &[T]) -> &[u8] {
    // SAFETY: the element types here are plain data without padding.
    unsafe { std::slice::from_raw_parts(v.as_ptr() as *const u8, std::mem::size_of_val(v)) }
}

/// Runs one `vec_moves_*` kernel (through `run`) on `x` under 3 seeds and
/// checks its outputs byte for byte: `y[p] = x[y_source(p)]`, `z = y`, and
/// every read form agreeing (`ok[p] = 0b111`).
fn check_moves<T: Copy>(name: &str, x: Vec<T>, poison: T, run: impl Fn(&Emulator, &[T], &mut [T], &mut [T], &mut [u32]) -> Result<RunReport, EmuError>) {
    let lanes = 16 / std::mem::size_of::<T>();
    assert_eq!(x.len(), PACKS * lanes);
    for seed in [1, 2, 0xDEAD_BEEF] {
        let (mut y, mut z, mut ok) = (vec![poison; x.len()], vec![poison; x.len()], vec![0u32; PACKS]);
        if let Err(e) = run(&Emulator::new(seed), &x, &mut y, &mut z, &mut ok) {
            panic!("{name}, seed {seed}: {e}");
        }
        for p in 0..PACKS {
            let (got, want) = (&y[p * lanes..][..lanes], &x[k::y_source(p) * lanes..][..lanes]);
            assert_eq!(bytes(got), bytes(want), "{name}, seed {seed}: pack {p} of y (from pack {} of x)", k::y_source(p));
            assert_eq!(ok[p], 0b111, "{name}, seed {seed}: pack {p}: read_v4 / raw::load / raw::load_nc disagree with read_nc_v4 (bits {:03b})", ok[p]);
        }
        assert_eq!(bytes(&z), bytes(&y), "{name}, seed {seed}: z (raw-pointer round trip) differs from y");
    }
}

#[test]
fn every_16_byte_access_moves_the_right_bytes() {
    // Distinct finite values (the poison is NaN), every pack different
    // from every other and from itself in another lane order.
    let f16s = (0..PACKS * 8).map(|i| f16::from_bits((i * 37 % 0x7000) as u16)).collect();
    check_moves("f16", f16s, f16::NAN, |e, x, y, z, ok| e.launch::<k::vec_moves_f16, _>(1u32, (x, y, z, ok)));
    let bf16s = (0..PACKS * 8).map(|i| bf16::from_bits((i * 37 % 0x7f00) as u16)).collect();
    check_moves("bf16", bf16s, bf16::NAN, |e, x, y, z, ok| e.launch::<k::vec_moves_bf16, _>(1u32, (x, y, z, ok)));
    // E4M3 has 126 finite non-negative codes: element `k` of pack `p` is
    // `(p + 5 k) % 126`, so no two of the 64 packs are equal.
    let e4m3s = (0..PACKS * 16).map(|i| E4M3::from_bits(((i / 16 + 5 * (i % 16)) % 126) as u8)).collect();
    check_moves("e4m3", e4m3s, E4M3::from_bits(0x7f), |e, x, y, z, ok| e.launch::<k::vec_moves_e4m3, _>(1u32, (x, y, z, ok)));
    let f32s = (0..PACKS * 4).map(|i| i as f32 * 1.5 + 0.25).collect();
    check_moves("f32", f32s, f32::NAN, |e, x, y, z, ok| e.launch::<k::vec_moves_f32, _>(1u32, (x, y, z, ok)));
}

/// The report of access `which` at `at` in `vec_misuse` (64 bf16 in `x`, `y`).
fn misuse(which: u32, at: u32) -> String {
    let x = vec![bf16::ONE; 64];
    let mut y = vec![bf16::ZERO; 64];
    let e = Emulator::new(1).launch::<k::vec_misuse, _>(1u32, (&x[..], &mut y[..], which, at)).expect_err("the access must be reported");
    assert!(matches!(e, EmuError::Misuse { .. }), "access {which} at {at}: not a misuse report: {e}");
    e.to_string()
}

#[test]
fn misaligned_and_out_of_range_16_byte_accesses_are_reported() {
    // (access, at, what the report must say): the rule, the values, the fix.
    let cases: &[(u32, u32, &[&str])] = &[
        (0, 4, &["misaligned vector global-memory access", "index 4", "bf16", "must be a multiple of 8", "start the pack at 0 or 8"]),
        (1, 12, &["misaligned vector global-memory access", "index 12", "must be a multiple of 8"]),
        (2, 3, &["misaligned vector global-memory access", "index 3", "must be a multiple of 8"]),
        (0, 64, &["out-of-bounds global-memory access", "index 71 of a Gmem of 64 elements"]),
        (1, 60, &["out-of-bounds global-memory access", "index 67 of a Gmem of 64 elements"]),
        (3, 4, &["Smem 16-byte access (read_v4/write_v4) out of bounds or misaligned", "elements 4..12 of 64", "multiple of 8"]),
        (4, 64, &["Smem 16-byte access (read_v4/write_v4) out of bounds or misaligned", "elements 64..72 of 64"]),
        (5, 4, &["tile 16-byte access (get_v4/set_v4) out of bounds or misaligned", "element (0, 4) of a 8 x 64 tile", "multiple of 8"]),
        (6, 8, &["tile 16-byte access (get_v4/set_v4) out of bounds or misaligned", "element (8, 0)", "row below 8"]),
        (7, 4, &["misaligned shared-memory access through a raw pointer", "16 bytes", "not 16-byte aligned"]),
        (7, 1 << 20, &["out-of-bounds shared-memory access through a pointer", "byte offset 1048576 of a 128-byte shared-memory allocation"]),
        (8, 4, &["misaligned global-memory access through a raw pointer", "16 bytes", "not 16-byte aligned"]),
        (8, 128, &["out-of-bounds global-memory access through a pointer", "byte offset 128 of a 128-byte Gmem view"]),
        (9, 4, &["misaligned vector global-memory access", "index 4", "must be a multiple of 8"]),
        (9, 64, &["out-of-bounds global-memory access", "index 71 of a Gmem of 64 elements"]),
        (10, 12, &["misaligned vector global-memory access", "index 12", "must be a multiple of 8"]),
        (10, 60, &["out-of-bounds global-memory access", "index 67 of a Gmem of 64 elements"]),
    ];
    for &(which, at, want) in cases {
        let msg = misuse(which, at);
        for w in want.iter().chain(&["vecmem.rs"]) {
            assert!(msg.contains(w), "access {which} at {at}: the report lacks `{w}`:\n{msg}");
        }
    }
}
