//! Every example kernel builds for sm_90a and sm_100a and assembles with
//! ptxas 13.0, with no spills and no local-memory stack, and its PTX holds
//! the instructions the kernel is about; so do the test fixtures
//! (`kernel_fixtures`) and the library's matmul kernels that are the Hopper
//! ladder's steps 4 and 5.
//!
//! These tests need ptxas at build time (`tools/install-ptxas.sh`; the
//! README's test command runs it): without it the images have no cubin and
//! the tests fail, saying so.
use kernel_device::launch::{DeviceCode, DeviceImage};

const ARCHS: [&str; 2] = ["sm_90a", "sm_100a"];

/// (entry point, instructions its PTX must contain)
const EXPECTED: &[(&str, &[&str])] = &[
    ("increment", &["ld.b32", "st.b32", "trap"]),
    (
        "producer_consumer",
        &["mbarrier.init.shared::cta.b64", "fence.mbarrier_init.release.cluster", "mbarrier.arrive.shared::cta.b64", "mbarrier.try_wait.parity.shared::cta.b64", "barrier.sync 0"],
    ),
    ("cluster_exchange", &["mapa.u64", "barrier.cluster.arrive.release;", "barrier.cluster.wait.acquire;", "ld.shared"]),
    ("semaphore_signal", &["red.release.gpu.global.add.u32", "ld.acquire.gpu.global.u32", "atom.acquire.gpu.global.cas.b32", "barrier.sync 0"]),
    // Two host-passed parameters (`x`, `out`), then the hidden global scratch address.
    ("grid_sum", &["atom.acq_rel.gpu.global.add.u32", ".param .u64 grid_sum_param_2\n)", "shfl.sync.bfly.b32"]),
    (
        "exchange_shards",
        &[
            "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes",
            "cp.async.bulk.global.shared::cta.bulk_group",
            "cp.async.bulk.wait_group.read 1",
            "cp.async.bulk.wait_group 0",
            "fence.proxy.async.global",
            "red.release.sys.global.add.u32",
            "ld.acquire.sys.global.u32",
            "atom.acquire.sys.global.cas.b32",
        ],
    ),
    ("ring_all_gather", &["cp.async.bulk.global.shared::cta.bulk_group", "red.release.sys.global.add.u32", "ld.acquire.sys.global.u32"]),
    ("exchange_tiles", &["cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group", "fence.proxy.async.global", "red.release.sys.global.add.u32"]),
    (
        "multicast_copy",
        &[
            "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster",
            "cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group",
            "cp.async.bulk.commit_group",
            "cp.async.bulk.wait_group.read 0",
            "mbarrier.arrive.expect_tx",
            "barrier.cluster.arrive",
            ".param .align 64 .b8 multicast_copy_param_0[128]",
            ".param .align 64 .b8 multicast_copy_param_1[128]",
        ],
    ),
    (
        "cluster_allreduce",
        &["mapa.shared::cluster.u32", "mbarrier.arrive.release.cluster.shared::cluster.b64", "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64", "mapa.u64"],
    ),
    (
        "cluster_allreduce16",
        &["barrier.cluster.arrive.release", "barrier.cluster.wait.acquire", "mapa.u64"],
    ),
    (
        "warp_collectives",
        &[
            "shfl.sync.idx.b32", "shfl.sync.up.b32", "shfl.sync.down.b32", "shfl.sync.bfly.b32",
            "vote.sync.ballot.b32", "vote.sync.all.pred", "vote.sync.any.pred", "vote.sync.uni.pred",
            "redux.sync.add.s32", "redux.sync.max.s32", "redux.sync.min.s32", "match.any.sync.b32", "match.all.sync.b32",
        ],
    ),
    ("warpgroup_indices", &["shfl.sync.idx.b32"]),
    ("block_reductions", &["shfl.sync.bfly.b32", "shfl.sync.up.b32", "redux.sync.add.s32", "barrier.sync 0"]),
    (
        "math_ops",
        &[
            "ex2.approx.f32", "ex2.approx.ftz.f32", "lg2.approx.f32", "rcp.rn.f32", "rcp.approx.ftz.f32", "sqrt.rn.f32",
            "sqrt.approx.f32", "rsqrt.approx.f32", "tanh.approx.f32", "sin.approx.f32", "cos.approx.f32", "fma.rn.f32",
            "max.NaN.f32", "max.f32", "cvt.rn.f16.f32", "cvt.f32.f16", "cvt.rn.bf16.f32", "cvt.f32.bf16",
            "cvt.rn.satfinite.f16.f32", "cvt.rn.f16x2.f32", "fma.rn.f16x2", "cvt.rn.bf16x2.f32", "mul.rn.bf16x2",
            "add.rn.bf16x2", "brev.b32",
        ],
    ),
    (
        "gmem_ops",
        &[
            "ld.global.nc.v4.b32", "ld.global.nc.v2.b32", "st.global.v4.b32", "ld.global.v2.b32",
            "atom.relaxed.gpu.global.add.u32", "atom.relaxed.gpu.global.add.f32", "atom.relaxed.gpu.global.add.u64",
            "atom.relaxed.gpu.global.cas.b32", "atom.relaxed.gpu.global.max.s32", "atom.relaxed.cta.global.min.s32",
            "atom.relaxed.gpu.global.exch.b32",
        ],
    ),
    (
        "smem_matrices",
        &[
            "stmatrix.sync.aligned.m8n8.x4.shared.b16", "stmatrix.sync.aligned.m8n8.x2.trans.shared.b16", "stmatrix.sync.aligned.m8n8.x1.shared.b16",
            "ldmatrix.sync.aligned.m8n8.x4.shared.b16", "ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16", "ldmatrix.sync.aligned.m8n8.x1.shared.b16", "bar.warp.sync",
        ],
    ),
    ("warp_mma", &["mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"]),
    ("softmax_rows", &["ld.global.nc.v4.b32", "shfl.sync.bfly.b32", "ex2.approx.f32", "rcp.rn.f32", "st.global.v4.b32"]),
    (
        "bf16_vectors",
        &["ld.global.nc.v4.b32", "ld.global.v4.b32", "st.shared.v4.b32", "ld.shared.v4.b32", "st.global.v4.b32", "cvt.rn.bf16.f32", "barrier.sync 0"],
    ),
    (
        "reduce_adds",
        &[
            "st.shared.v4.b32", "fence.proxy.async.shared::cta", "cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32",
            "cp.async.bulk.commit_group", "cp.async.bulk.wait_group 0", "red.relaxed.gpu.global.add.v2.f32",
        ],
    ),
];

/// Kernels built for sm_90a only (`#[kernel(arch = sm_90a)]`: wgmma).
const SM90A_ONLY: &[(&str, &[&str])] = &[
    // imm-trans-a, imm-trans-b: B transposed, A transposed, both.
    ("wgmma_transposed", &["wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16", "p, 1, 1, 0, 1;", "p, 1, 1, 1, 0;", "p, 1, 1, 1, 1;"]),
    (
        "matmul_pipelined__2",
        &[
            "wgmma.fence.sync.aligned",
            "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16",
            "wgmma.commit_group.sync.aligned",
            "wgmma.wait_group.sync.aligned 1",
            "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes",
            "cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group",
            "fence.proxy.async.shared::cta",
            "cvt.rn.f16x2.f32",
            ".param .align 64 .b8 matmul_pipelined__2_param_0[128]",
        ],
    ),
    ("matmul_pipelined__4", &["wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16", "wgmma.wait_group.sync.aligned 1"]),
    (
        "matmul_warp_specialized__2_0",
        &[
            "setmaxnreg.dec.sync.aligned.u32 40",
            "setmaxnreg.inc.sync.aligned.u32 232",
            "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16",
            "barrier.sync %r",
            ".maxntid 384, 1, 1",
        ],
    ),
    ("matmul_warp_specialized__4_8", &["setmaxnreg.dec.sync.aligned.u32 40", "setmaxnreg.inc.sync.aligned.u32 232"]),
    (
        "wgmma_fp8",
        &[
            "wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3",
            "wgmma.mma_async.sync.aligned.m64n256k32.f32.e5m2.e5m2",
        ],
    ),
    (
        "wgmma_variants",
        &[
            "wgmma.mma_async.sync.aligned.m64n128k16.f16.f16.f16",
            "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16",
            "wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16",
            "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes",
        ],
    ),
];

fn code() -> &'static DeviceCode {
    &kernels::DEVICE_CODE
}

/// The PTX text of one `.entry`, from its name to the closing brace at
/// column 0.
fn entry_body<'a>(ptx: &'a str, name: &str) -> &'a str {
    let head = format!(".visible .entry {name}(");
    let start = ptx.find(&head).unwrap_or_else(|| panic!("no entry `{name}` in the PTX"));
    let end = ptx[start..].find("\n}").map(|e| start + e).unwrap_or(ptx.len());
    &ptx[start..end]
}

/// ptxas's report block for one entry: `(stack bytes, spill stores, spill loads)`.
fn ptxas_numbers(report: &str, name: &str, arch: &str) -> (u32, u32, u32) {
    let head = format!("Compiling entry function '{name}' for '{arch}'");
    let start = report.find(&head).unwrap_or_else(|| panic!("ptxas report has no `{head}`:\n{report}"));
    let line = report[start..]
        .lines()
        .find(|l| l.contains("bytes stack frame"))
        .unwrap_or_else(|| panic!("no stack/spill line for {name}:\n{report}"));
    let nums: Vec<u32> = line.split(|c: char| !c.is_ascii_digit()).filter(|s| !s.is_empty()).map(|s| s.parse().unwrap()).collect();
    assert_eq!(nums.len(), 3, "unexpected ptxas line `{line}`");
    (nums[0], nums[1], nums[2])
}

fn image(arch: &str) -> &'static DeviceImage {
    code().image(arch).unwrap_or_else(|| panic!("kernels were not built for {arch}"))
}

#[test]
fn built_for_both_architectures() {
    let archs: Vec<&str> = code().images.iter().map(|i| i.arch).collect();
    assert_eq!(archs, ARCHS);
    for arch in ARCHS {
        let ptx = image(arch).ptx;
        assert!(ptx.contains(&format!(".target {arch}")), "{arch}: wrong .target");
    }
    assert!(image("sm_100a").ptx.contains(".version 8.7"), "sm_100a needs PTX ISA 8.7");
}

#[test]
fn assembled_by_ptxas_13_with_no_spills() {
    for arch in ARCHS {
        let img = image(arch);
        assert!(
            !img.cubin.is_empty(),
            "{arch}: no cubin: ptxas was not found when the kernels were built. Run tools/install-ptxas.sh \
             (or set KERNEL_PTXAS) and rebuild"
        );
        assert!(img.ptxas_report.contains("release 13.0"), "{arch}: expected ptxas 13.0:\n{}", img.ptxas_report);
        assert!(!img.ptxas_report.contains("serialized"), "{arch}: wgmma serialization warning:\n{}", img.ptxas_report);
        let sm90a = if arch == "sm_90a" { SM90A_ONLY } else { &[] };
        for (name, _) in EXPECTED.iter().chain(sm90a) {
            let (stack, spill_st, spill_ld) = ptxas_numbers(img.ptxas_report, name, arch);
            assert_eq!((stack, spill_st, spill_ld), (0, 0, 0), "{arch} {name}: stack frame / spills");
        }
    }
}

#[test]
fn entries_have_their_instructions_and_block_size() {
    for arch in ARCHS {
        let ptx = image(arch).ptx;
        for (name, instrs) in EXPECTED {
            let body = entry_body(ptx, name);
            for i in *instrs {
                assert!(body.contains(i), "{arch} {name}: `{i}` missing from the PTX");
            }
            assert!(body.contains(".maxntid"), "{arch} {name}: no .maxntid");
            assert!(!body.contains(".local"), "{arch} {name}: uses local memory");
        }
        if arch == "sm_90a" {
            for (name, instrs) in SM90A_ONLY {
                let body = entry_body(ptx, name);
                for i in *instrs {
                    assert!(body.contains(i), "{arch} {name}: `{i}` missing from the PTX");
                }
                if name.starts_with("matmul") {
                    // 8 wgmmas per K step: 2 row blocks x 4 k16 steps.
                    assert_eq!(body.matches("wgmma.mma_async").count(), 8, "{name}: wgmma count");
                }
            }
        } else {
            for (name, _) in SM90A_ONLY {
                assert!(!ptx.contains(&format!(".entry {name}(")), "{arch}: `{name}` is sm_90a-only but was built");
            }
        }
        // The block shape given to #[kernel] reaches ptxas.
        assert!(entry_body(ptx, "producer_consumer").contains(".maxntid 256, 1, 1"));
        assert!(entry_body(ptx, "increment").contains(".maxntid 128, 1, 1"));
    }
}

/// A kernel with `#[global_scratch]` has one more PTX parameter than the
/// host passes (the launch's scratch address, last); one without has none.
#[test]
fn global_scratch_is_one_hidden_trailing_parameter() {
    use kernel_device::KernelSpec;
    use kernels::first;
    fn params(ptx: &str, name: &str) -> usize {
        let body = entry_body(ptx, name);
        let head = &body[..body.find(')').expect("a parameter list")];
        head.matches(".param").count()
    }
    assert_eq!(<first::grid_sum as KernelSpec>::GLOBAL_SCRATCH_BYTES, first::GRID_SUM_MAX_BLOCKS * 4 + 4);
    assert_eq!(<first::semaphore_signal as KernelSpec>::GLOBAL_SCRATCH_BYTES, 0);
    for arch in ARCHS {
        let ptx = image(arch).ptx;
        assert_eq!(params(ptx, "grid_sum"), 3, "{arch}: grid_sum: x, out, and the global scratch");
        assert_eq!(params(ptx, "semaphore_signal"), 4, "{arch}: semaphore_signal: its 4 parameters, nothing hidden");
    }
}

/// Every entry ptxas compiled (not only the listed ones) has no stack frame
/// and no spills.
#[test]
fn no_entry_spills() {
    for arch in ARCHS {
        let report = image(arch).ptxas_report;
        let entries: Vec<&str> = report
            .lines()
            .filter_map(|l| l.split("Compiling entry function '").nth(1))
            .filter_map(|r| r.split('\'').next())
            .collect();
        assert!(entries.len() >= EXPECTED.len(), "{arch}: ptxas compiled {} entries:\n{report}", entries.len());
        for name in entries {
            assert_eq!(ptxas_numbers(report, name, arch), (0, 0, 0), "{arch} {name}: stack frame / spills");
        }
    }
}

#[test]
fn cubins_are_elf_for_the_right_arch() {
    for arch in ARCHS {
        let cubin = image(arch).cubin;
        if cubin.is_empty() {
            continue; // reported by assembled_by_ptxas_13_with_no_spills
        }
        assert_eq!(&cubin[..4], b"\x7fELF", "{arch}: not an ELF cubin");
    }
}

/// The kernels of `code` missing from the crate docs' table `docs`.
fn unlisted_kernels(code: &DeviceCode, docs: &str) -> Vec<String> {
    let mut missing = Vec::new();
    // Every image: the sm_100a-only kernels are only in the sm_100a one.
    for line in code.images.iter().flat_map(|i| i.ptx.lines()) {
        let Some(rest) = line.trim_start().strip_prefix(".visible .entry ").or_else(|| line.trim_start().strip_prefix(".entry ")) else {
            continue;
        };
        let name = rest.split(['(', ' ']).next().unwrap_or("");
        // Instances of const-generic kernels are `name__A_B`.
        let base = name.split("__").next().unwrap_or(name);
        if !docs.contains(&format!("`{base}`")) {
            missing.push(base.to_string());
        }
    }
    missing.sort();
    missing.dedup();
    missing
}

/// Every kernel of the examples crate is listed in its crate docs' table.
#[test]
fn every_example_kernel_is_listed_in_the_crate_docs() {
    let missing = unlisted_kernels(code(), include_str!("../../examples/kernels/src/lib.rs"));
    assert!(missing.is_empty(), "kernels missing from the table in examples/kernels/src/lib.rs: {missing:?}");
}

// ----- the test fixtures (deliberately broken kernels) ---------------------------

/// The fixtures crate (`tests/fixtures`): its racy kernels are never
/// launched on a GPU, but they are built for both architectures and
/// assembled by ptxas 13.0 like every other kernel, with no stack frame and
/// no spills, and each is listed in the crate docs' table.
#[test]
fn fixtures_are_assembled_for_both_architectures_with_no_spills() {
    let code = &kernel_fixtures::DEVICE_CODE;
    let archs: Vec<&str> = code.images.iter().map(|i| i.arch).collect();
    assert_eq!(archs, ARCHS);
    for arch in ARCHS {
        let img = code.image(arch).expect("listed above");
        assert!(img.ptx.contains(&format!(".target {arch}")), "fixtures {arch}: wrong .target");
        assert!(!img.cubin.is_empty(), "fixtures {arch}: no cubin: ptxas was not found when the fixtures were built (tools/install-ptxas.sh)");
        assert_eq!(&img.cubin[..4], b"\x7fELF", "fixtures {arch}: not an ELF cubin");
        assert!(img.ptxas_report.contains("release 13.0"), "fixtures {arch}: expected ptxas 13.0:\n{}", img.ptxas_report);
        let entries: Vec<&str> = img
            .ptxas_report
            .lines()
            .filter_map(|l| l.split("Compiling entry function '").nth(1))
            .filter_map(|r| r.split('\'').next())
            .collect();
        assert!(entries.len() >= 60, "fixtures {arch}: ptxas compiled {} entries:\n{}", entries.len(), img.ptxas_report);
        for name in entries {
            assert_eq!(ptxas_numbers(img.ptxas_report, name, arch), (0, 0, 0), "fixtures {arch} {name}: stack frame / spills");
        }
        // No example kernel is compiled into the fixtures (they only use
        // the examples' tile types and helpers).
        assert!(!img.ptx.contains(".entry increment("), "fixtures {arch}: holds the examples' kernels");
    }
    let missing = unlisted_kernels(code, include_str!("../fixtures/src/lib.rs"));
    assert!(missing.is_empty(), "kernels missing from the table in tests/fixtures/src/lib.rs: {missing:?}");
}

/// The 16-byte accesses of every element type (`kernel_fixtures::vecmem`,
/// the raw-pointer forms included) assemble to the `.v4.b32` loads and
/// stores, with no local memory (the packs stay in registers), on both
/// architectures.
#[test]
fn sixteen_byte_accesses_assemble_to_v4_instructions() {
    let code = &kernel_fixtures::DEVICE_CODE;
    for arch in ARCHS {
        let ptx = code.image(arch).expect("built for both").ptx;
        for name in ["vec_moves_f16", "vec_moves_bf16", "vec_moves_e4m3", "vec_moves_f32"] {
            let body = entry_body(ptx, name);
            for instr in ["ld.global.nc.v4.b32", "ld.global.v4.b32", "st.global.v4.b32", "st.shared.v4.b32", "ld.shared.v4.b32"] {
                assert!(body.contains(instr), "fixtures {arch} {name}: `{instr}` missing from the PTX");
            }
            assert!(!body.contains(".local"), "fixtures {arch} {name}: uses local memory");
        }
    }
}

/// The Hopper ladder (steps 2 to 7): `(entry, wgmma form, wgmmas in the
/// PTX, instructions the step is about)`. Each entry is assembled for
/// sm_90a only, with no stack frame, no spills and no wgmma serialization
/// (the last checked for every entry by `assembled_by_ptxas_13_with_no_spills`).
const LADDER: &[(&str, &str, usize, &[&str])] = &[
    ("matmul_big_tiles__128_256_4_8", "m64n256k16", 4, &["setmaxnreg.dec.sync.aligned.u32 40", "setmaxnreg.inc.sync.aligned.u32 232", ".maxntid 384, 1, 1"]),
    ("matmul_big_tiles__256_128_4_8", "m64n128k16", 8, &["setmaxnreg.inc.sync.aligned.u32 232"]),
    ("matmul_persistent__128_256_3_8", "m64n256k16", 4, &["cp.async.bulk.wait_group.read 0", "%nctaid.x"]),
    ("matmul_fewer_arrivals__128_256_128_4_8", "m64n256k16", 4, &[".multicast::cluster", "elect.sync", "mbarrier.arrive.shared::cluster.b64"]),
    ("matmul_pingpong__128_128_6_8", "m64n128k16", 8, &["barrier.arrive", "barrier.sync", "cp.async.bulk.wait_group.read 0"]),
    ("matmul_pingpong__64_256_5_8", "m64n256k16", 4, &["barrier.arrive", "barrier.sync", "cp.async.bulk.wait_group.read 0"]),
];

/// The ladder's steps 4 and 5 are `kernel-ops`' matmul kernels
/// (`matmul_epilogue_overlap` = `matmul_persistent_ws`,
/// `matmul_cluster_multicast` = `matmul_persistent_ws_cluster`), built into
/// `kernel_ops_kernels::DEVICE_CODE` under the library's names (the f16
/// instances of the generic kernels): the same
/// facts as [`LADDER`], checked in that image.
const LADDER_LIBRARY: &[(&str, &str, usize, &[&str])] = &[
    ("matmul_persistent_ws__f16_128_256_4_8", "m64n256k16", 4, &["cp.async.bulk.wait_group.read 1", "cp.async.bulk.commit_group"]),
    ("matmul_persistent_ws__f16_256_128_3_8", "m64n128k16", 8, &["cp.async.bulk.wait_group.read 1"]),
    (
        "matmul_persistent_ws_cluster__f16_128_256_128_4_8",
        "m64n256k16",
        4,
        &[".multicast::cluster", "mapa.shared::cluster", "mbarrier.arrive.shared::cluster.b64", "%clusterid.x", "%cluster_ctarank"],
    ),
    ("matmul_persistent_ws_cluster__f16_256_128_64_3_8", "m64n128k16", 8, &[".multicast::cluster"]),
];

#[test]
fn hopper_ladder_is_assembled_without_spills_and_has_its_instructions() {
    let library = |arch: &str| kernel_ops_kernels::DEVICE_CODE.image(arch).unwrap_or_else(|| panic!("kernel-ops kernels were not built for {arch}"));
    for (sm90, sm100, table) in [(image("sm_90a"), image("sm_100a"), LADDER), (library("sm_90a"), library("sm_100a"), LADDER_LIBRARY)] {
        for (name, form, wgmmas, instrs) in table {
            let body = entry_body(sm90.ptx, name);
            let mma = format!("wgmma.mma_async.sync.aligned.{form}.f32.f16.f16");
            assert_eq!(body.matches("wgmma.mma_async").count(), *wgmmas, "{name}: wgmma count (one K step of 64)");
            assert_eq!(body.matches(mma.as_str()).count(), *wgmmas, "{name}: every wgmma is {mma}");
            for i in *instrs {
                assert!(body.contains(i), "{name}: `{i}` missing from the PTX");
            }
            assert!(!body.contains(".local"), "{name}: uses local memory");
            assert_eq!(ptxas_numbers(sm90.ptxas_report, name, "sm_90a"), (0, 0, 0), "{name}: stack frame / spills");
            assert!(!sm100.ptx.contains(&format!(".entry {name}(")), "{name} is sm_90a-only");
        }
    }
    // Every instance of the ladder is in its image: steps 2, 3, 6 and 7
    // (3 + 3 + 3 + 2) and steps 0 and 1 (9) here, steps 4 and 5 (5 + 3) in
    // the library's.
    let entries = image("sm_90a").ptx.matches(".entry matmul_").count();
    assert!(entries >= 11 + 9, "ladder and step 0/1 entries: {entries}");
    // (kernel-ops also holds their bf16 instances, `matmul_persistent_ws__bf16_*`
    // and `matmul_persistent_ws_cluster__bf16_*`: kernel-ops/tests/ptx.rs.)
    let lib = library("sm_90a").ptx;
    let entries = lib.matches(".entry matmul_persistent_ws__f16_").count() + lib.matches(".entry matmul_persistent_ws_cluster__f16_").count();
    assert_eq!(entries, 5 + 3, "kernel-ops f16 matmul entries");
    // The examples crate depends on kernel-ops-kernels, but a dependency's
    // kernels are not compiled into the dependent's device code.
    for arch in ARCHS {
        for other in [".entry matmul_persistent_ws", ".entry rms_norm__"] {
            assert!(!image(arch).ptx.contains(other), "examples {arch}: holds kernel-ops' `{other}`");
        }
    }
}

/// Kernels built for sm_100a only (`#[kernel(arch = sm_100a)]`: tcgen05 and
/// TMEM), with the instructions their PTX must hold (besides the common
/// tcgen05 facts checked below).
const SM100A_ONLY: &[(&str, &[&str])] = &[
    ("matmul0__128_4", &["cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group", "barrier.sync 0"]),
    ("matmul0__256_2", &[]),
    ("matmul1__128_4", &["elect.sync"]),
    ("matmul1__256_3", &["elect.sync"]),
    ("matmul2__128_4", &["elect.sync", "cp.async.bulk.wait_group.read 1"]),
    ("matmul2__256_4", &["elect.sync", "cp.async.bulk.wait_group.read 1"]),
    ("tcgen05_transposed", &["cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"]),
];

/// Transposed SMEM views as tcgen05 operands (`tcgen05_mma_view`):
/// `tcgen05_transposed` issues 3 products of 4 MMAs, and its instruction
/// descriptors are the three with the transpose bits set as the views
/// say (B MN-major; A MN-major; both), as `instr_descriptor` encodes
/// them (PTX ISA Table 42, bits 15 and 16), and no K-major-only one.
#[test]
fn tcgen05_transposed_views_set_the_descriptor_transpose_bits() {
    use kernel_device::f16;
    use kernel_device::tcgen05::{instr_descriptor, Major};
    let body = entry_body(image("sm_100a").ptx, "tcgen05_transposed");
    assert_eq!(body.matches("tcgen05.mma.cta_group::1.kind::f16").count(), 12, "3 products x 4 MMAs of K = 16");
    let word = |a, b| instr_descriptor::<f16, f32>(a, b, 128, 128).0;
    for (what, a, b) in [("B transposed", Major::K, Major::MN), ("A transposed", Major::MN, Major::K), ("both transposed", Major::MN, Major::MN)] {
        let w = word(a, b);
        assert!(body.contains(&format!(", {w};")), "tcgen05_transposed: no instruction descriptor {w:#x} ({what}) in the PTX");
    }
    let plain = word(Major::K, Major::K);
    assert!(!body.contains(&format!(", {plain};")), "tcgen05_transposed: a K-major-only descriptor {plain:#x} in the PTX");
}

/// Per-kernel tcgen05 facts: TMEM allocated and freed (paired, one each),
/// the permit relinquished, `tcgen05.mma` of `kind::f16`, commits to an
/// mbarrier, TMEM loads with their wait, the tcgen05 fences, `.maxntid`,
/// no local memory; ptxas assembled it with no stack and no spills. And no
/// tcgen05 anywhere in the sm_90a image.
#[test]
fn blackwell_kernels_have_their_tcgen05_facts() {
    let ptx = image("sm_100a").ptx;
    let report = image("sm_100a").ptxas_report;
    for (name, extra) in SM100A_ONLY {
        let body = entry_body(ptx, name);
        let count = |s: &str| body.matches(s).count();
        assert_eq!(count("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32"), 1, "{name}: one tcgen05.alloc");
        assert_eq!(count("tcgen05.dealloc.cta_group::1.sync.aligned.b32"), 1, "{name}: one tcgen05.dealloc (paired with the alloc)");
        assert_eq!(count("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned"), 1, "{name}: relinquish");
        assert!(count("tcgen05.mma.cta_group::1.kind::f16") >= 1, "{name}: tcgen05.mma kind::f16");
        assert!(!body.contains("kind::f8f6f4") && !body.contains("kind::i8"), "{name}: unexpected MMA kind");
        assert!(count("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64") >= 1, "{name}: commit to an mbarrier");
        assert!(count("tcgen05.ld.sync.aligned.32x32b.x32.b32") >= 1, "{name}: TMEM load 32x32b.x32");
        assert!(count("tcgen05.wait::ld.sync.aligned") >= 1, "{name}: wait::ld");
        assert!(count("tcgen05.fence::before_thread_sync") >= 1 && count("tcgen05.fence::after_thread_sync") >= 1, "{name}: fences");
        assert!(body.contains(".maxntid 128, 1, 1"), "{name}: .maxntid 128");
        assert!(!body.contains(".local"), "{name}: uses local memory");
        for i in *extra {
            assert!(body.contains(i), "{name}: `{i}` missing from the PTX");
        }
        assert_eq!(ptxas_numbers(report, name, "sm_100a"), (0, 0, 0), "sm_100a {name}: stack frame / spills");
    }
    let sm90 = image("sm_90a").ptx;
    assert!(!sm90.contains("tcgen05"), "sm_90a image holds tcgen05 instructions");
    for (name, _) in SM100A_ONLY {
        assert!(!sm90.contains(&format!(".entry {name}(")), "sm_90a: `{name}` is sm_100a-only but was built");
    }
}

/// TMA gather4 (`Tma::gather4`, sm_100a only): `embedding_gather`'s PTX
/// holds one `tile::gather4` per 64-column block per gather (2 x 2), with
/// the 5-coordinate operand `{col, r0, r1, r2, r3}`; ptxas 13.0 assembled
/// it for sm_100a with no stack or spills; the sm_90a image has no gather4
/// and no `embedding_gather` entry (`#[kernel]` refuses gather4 outside
/// `arch = sm_100a`).
#[test]
fn tma_gather4_is_in_the_sm100a_ptx_only() {
    const GATHER4: &str = "cp.async.bulk.tensor.2d.shared::cluster.global.tile::gather4.mbarrier::complete_tx::bytes";
    let img = image("sm_100a");
    let body = entry_body(img.ptx, "embedding_gather");
    assert_eq!(body.matches(GATHER4).count(), 4, "embedding_gather: 2 gathers x 2 column blocks:\n{body}");
    for line in body.lines().filter(|l| l.contains(GATHER4)) {
        let coords = line.split('{').nth(1).and_then(|r| r.split('}').next()).unwrap_or_else(|| panic!("no coordinate vector in `{line}`"));
        assert_eq!(coords.split(',').count(), 5, "gather4 takes {{col, r0, r1, r2, r3}}: `{line}`");
    }
    assert!(!img.cubin.is_empty(), "sm_100a: no cubin (ptxas missing at build time)");
    assert_eq!(ptxas_numbers(img.ptxas_report, "embedding_gather", "sm_100a"), (0, 0, 0), "embedding_gather: stack frame / spills");
    let sm90 = image("sm_90a").ptx;
    assert!(!sm90.contains("tile::gather4"), "the sm_90a image holds a gather4");
    assert!(!sm90.contains(".entry embedding_gather("), "embedding_gather is sm_100a-only but was built for sm_90a");
}

/// The lines of `body` that read a destination register of a `tcgen05.ld`
/// before the next `tcgen05.wait::ld` (straight-line order of the PTX
/// text): the ISA makes the registers valid only after that wait.
fn tmem_registers_read_before_wait(body: &str) -> Vec<String> {
    let lines: Vec<&str> = body.lines().collect();
    let mut bad = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        let Some(pos) = l.find("tcgen05.ld.sync.aligned") else { continue };
        let (Some(open), Some(close)) = (l[pos..].find('{'), l[pos..].find('}')) else { continue };
        let regs: Vec<&str> = l[pos + open + 1..pos + close].split(',').map(str::trim).collect();
        for later in &lines[i + 1..] {
            if later.contains("tcgen05.wait::ld") {
                break;
            }
            let t = later.trim();
            if t.starts_with("//") {
                continue;
            }
            let reads = t.split(|c: char| !(c.is_ascii_alphanumeric() || c == '%' || c == '_')).any(|tok| regs.contains(&tok));
            if reads && !later.contains("tcgen05.ld.sync.aligned") {
                bad.push(format!("`{}` reads a register of `{}`", t, l.trim()));
            }
        }
    }
    bad
}

/// Every sm_100a kernel reads its `tcgen05.ld` registers only after a
/// `tcgen05.wait::ld` (the `TmemLoad` API's guarantee, checked on the
/// compiled PTX); and the check itself catches an early read.
#[test]
fn tmem_load_registers_are_read_after_their_wait() {
    let ptx = image("sm_100a").ptx;
    let mut checked = 0;
    for entry in ptx.split(".visible .entry ").skip(1) {
        let name = &entry[..entry.find('(').unwrap_or(0)];
        let body = entry_body(ptx, name);
        if !body.contains("tcgen05.ld.sync.aligned") {
            continue;
        }
        checked += 1;
        let bad = tmem_registers_read_before_wait(body);
        assert!(bad.is_empty(), "{name}: TMEM load registers read before tcgen05.wait::ld:\n{}", bad.join("\n"));
    }
    assert!(checked >= 8, "only {checked} sm_100a kernels with TMEM loads found");
    let early = "\ttcgen05.ld.sync.aligned.32x32b.x2.b32 {%r1, %r2}, [%r9];\n\tcvt.rn.f16.f32 %rs1, %r2;\n\ttcgen05.wait::ld.sync.aligned;\n";
    assert_eq!(tmem_registers_read_before_wait(early).len(), 1, "the check misses an early read");
    let late = "\ttcgen05.ld.sync.aligned.32x32b.x2.b32 {%r1, %r2}, [%r9];\n\tadd.s32 %r12, %r9, 4;\n\ttcgen05.wait::ld.sync.aligned;\n\tmov.b32 %f1, %r2;\n";
    assert!(tmem_registers_read_before_wait(late).is_empty(), "the check flags a read after the wait");
}

/// The Blackwell ladder's steps 3-6 and matmul_dynamic (sm_100a only):
/// `(entry, accumulator TMEM columns allocated, block threads, extra
/// instructions)`.
const BLACKWELL_II: &[(&str, u32, u32, &[&str])] = &[
    ("matmul3__128_256_4", 256, 128, &[]),
    ("matmul4__128_256_4", 256, 128, &["%nclusterid.x"]),
    ("matmul5__128_256_512_4", 512, 256, &["%nclusterid.x", "barrier.sync %r", "mbarrier.arrive.release.cluster.shared::cluster.b64", "mbarrier.try_wait.parity.acquire.cluster"]),
    ("matmul6__128_256_512_4", 512, 256, &["%nclusterid.x", "barrier.sync %r", "mbarrier.arrive.release.cluster.shared::cluster.b64", "mbarrier.try_wait.parity.acquire.cluster"]),
    (
        "matmul_dynamic__128_256_4",
        256,
        128,
        &[
            "clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes.multicast::cluster::all.b128",
            "clusterlaunchcontrol.query_cancel.is_canceled.pred.b128",
            "clusterlaunchcontrol.query_cancel.get_first_ctaid::x.b32.b128",
        ],
    ),
];

/// The column count a `tcgen05.alloc` line allocates: its second operand,
/// an immediate or a register set by a `mov` in the body.
fn alloc_cols(body: &str, alloc: &str) -> u32 {
    let line = body.lines().find(|l| l.contains(alloc)).unwrap_or_else(|| panic!("no `{alloc}`"));
    let op = line.rsplit(',').next().unwrap().trim().trim_end_matches(';').trim();
    if let Ok(v) = op.parse() {
        return v;
    }
    body.lines()
        .filter_map(|l| {
            let t = l.trim();
            let rest = t.strip_prefix("mov.b32 ").or_else(|| t.strip_prefix("mov.u32 "))?;
            let (dst, val) = rest.split_once(',')?;
            (dst.trim() == op).then(|| val.trim().trim_end_matches(';').parse().ok()).flatten()
        })
        .next()
        .unwrap_or_else(|| panic!("no value for `{op}` of `{line}`"))
}

/// Per-kernel facts of the collective (2-CTA) kernels: collective MMA
/// (`cta_group::2`, kind::f16) and no `cta_group::1` tcgen05 form (a kernel
/// uses one CTA group), commits multicast to both CTAs of the pair,
/// partitioned collective TMA loads (`.cta_group::2`, completing on the
/// leader's barrier through `mapa`), one collective alloc/dealloc pair of
/// the accumulator's columns (step 5 and 6: twice step 3/4's), the cluster
/// shape in the PTX (`.reqnctapercluster 2, 1, 1`), `.maxntid`, no local
/// memory; ptxas assembled it with no stack and no spills; none in the
/// sm_90a image.
#[test]
fn blackwell_collective_kernels_have_their_facts() {
    let img = image("sm_100a");
    for (name, cols, threads, extra) in BLACKWELL_II {
        let body = entry_body(img.ptx, name);
        let count = |s: &str| body.matches(s).count();
        assert!(count("tcgen05.mma.cta_group::2.kind::f16") >= 1, "{name}: tcgen05.mma.cta_group::2");
        assert_eq!(count("cta_group::1"), 0, "{name}: a cta_group::1 tcgen05 form in a collective kernel");
        assert!(count("tcgen05.commit.cta_group::2.mbarrier::arrive::one.shared::cluster.multicast::cluster.b64") >= 2, "{name}: multicast commits (consumed + mma_done)");
        assert!(count("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.cta_group::2") >= 2, "{name}: partitioned loads of A and B");
        assert!(count("mapa.shared::cluster") >= 1, "{name}: the leader's barrier mapped");
        assert_eq!(count("tcgen05.alloc.cta_group::2.sync.aligned.shared::cta.b32"), 1, "{name}: one collective alloc");
        assert_eq!(count("tcgen05.dealloc.cta_group::2.sync.aligned.b32"), 1, "{name}: one collective dealloc");
        assert_eq!(count("tcgen05.relinquish_alloc_permit.cta_group::2.sync.aligned"), 1, "{name}: relinquish");
        assert_eq!(alloc_cols(body, "tcgen05.alloc.cta_group::2"), *cols, "{name}: accumulator columns allocated");
        assert!(body.contains(".reqnctapercluster 2, 1, 1"), "{name}: .reqnctapercluster 2, 1, 1");
        assert!(body.contains(&format!(".maxntid {threads}, 1, 1")), "{name}: .maxntid {threads}");
        assert!(count("tcgen05.ld.sync.aligned.32x32b.x32.b32") >= 1 && count("tcgen05.wait::ld.sync.aligned") >= 1, "{name}: TMEM loads");
        assert!(!body.contains(".local"), "{name}: uses local memory");
        for i in *extra {
            assert!(body.contains(i), "{name}: `{i}` missing from the PTX");
        }
        assert_eq!(ptxas_numbers(img.ptxas_report, name, "sm_100a"), (0, 0, 0), "sm_100a {name}: stack frame / spills");
        assert!(!image("sm_90a").ptx.contains(&format!(".entry {name}(")), "{name} is sm_100a-only");
    }
    assert!(!image("sm_100a").ptx.contains(".reqnctapercluster 1, 1, 1"));
}

/// A 16-CTA (non-portable) cluster shape carried in the PTX: the build's
/// `.reqnctapercluster` (what `#[kernel]` asks for `arch = sm_100a` cluster
/// kernels) with 16 CTAs, as (16, 1, 1) and (4, 4, 1), assembles with
/// ptxas 13.0 for sm_90a and sm_100a. (ptxas does not check the portable
/// limit: the non-portable permission is the function attribute the host
/// sets at load time, and the 16-CTA example kernel carries none of it.)
#[test]
fn sixteen_cta_reqnctapercluster_assembles_for_both_architectures() {
    let ptxas = kernel_host::build::find_ptxas(std::path::Path::new(env!("CARGO_MANIFEST_DIR")))
        .expect("ptxas not found: run tools/install-ptxas.sh (or set KERNEL_PTXAS)");
    let dir = std::env::temp_dir().join(format!("npc-reqncta-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (arch, version) in [("sm_90a", "8.0"), ("sm_100a", "8.7")] {
        for shape in ["16,1,1", "4,4,1"] {
            // A cluster kernel: DSMEM address of the peer, cluster barrier.
            let src = format!(
                "// kernel-meta entry=k16 maxntid=32,1,1 cluster={shape} reqnctapercluster={shape} byaddr=0\n\
                 .version {version}\n.target {arch}\n.address_size 64\n\
                 .shared .align 8 .b8 buf[8];\n\
                 .visible .entry k16(\n\t.param .u32 k16_param_0\n)\n{{\n\
                 \t.reg .b32 %r<4>;\n\
                 \tld.param.u32 %r1, [k16_param_0];\n\
                 \tmov.u32 %r2, buf;\n\
                 \tmapa.shared::cluster.u32 %r3, %r2, %r1;\n\
                 \tst.shared::cluster.u32 [%r3], %r1;\n\
                 \tbarrier.cluster.arrive.release;\n\
                 \tbarrier.cluster.wait.acquire;\n\
                 \tret;\n}}\n"
            );
            let ptx = kernel_host::build::apply_kernel_meta(&src);
            let want = format!(".reqnctapercluster {}", shape.replace(',', ", "));
            assert!(ptx.contains(&want), "{arch} {shape}: the build did not add `{want}`:\n{ptx}");
            let file = dir.join(format!("k16_{arch}_{}.ptx", shape.replace(',', "x")));
            std::fs::write(&file, &ptx).unwrap();
            let out = std::process::Command::new(&ptxas)
                .arg(format!("-arch={arch}"))
                .arg(&file)
                .arg("-o")
                .arg(file.with_extension("cubin"))
                .output()
                .expect("run ptxas");
            assert!(
                out.status.success(),
                "{arch} {shape}: ptxas rejected a 16-CTA .reqnctapercluster:\n{}\n{ptx}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The fixture `m64_readback` (`tests/fixtures/src/blackwell/shapes.rs`):
/// an M = 64 `tcgen05.mma` (its instruction descriptor's M field, bits
/// 24..29, is 64 >> 4 = 4: the immediate 0x04100010 for f16 x f16 -> f32,
/// N = 64) and every 16-lane `tcgen05.ld`/`tcgen05.st` form the device API
/// emits, in the sm_100a PTX, which ptxas 13.0 assembled with no stack and
/// no spills; the 16-lane loads' registers read only after their wait; none
/// of it in the sm_90a image.
#[test]
fn sixteen_lane_tmem_shapes_and_the_m64_mma_assemble_for_sm_100a() {
    let code = &kernel_fixtures::DEVICE_CODE;
    let img = code.image("sm_100a").expect("sm_100a image");
    let body = entry_body(img.ptx, "m64_readback");
    for form in [
        "tcgen05.mma.cta_group::1.kind::f16",
        "tcgen05.ld.sync.aligned.16x64b.x8.b32",
        "tcgen05.ld.sync.aligned.16x128b.x4.b32",
        "tcgen05.ld.sync.aligned.16x256b.x2.b32",
        "tcgen05.ld.sync.aligned.16x256b.x1.b32",
        "tcgen05.st.sync.aligned.16x256b.x1.b32",
        "tcgen05.st.sync.aligned.16x64b.x2.b32",
        "tcgen05.st.sync.aligned.16x128b.x1.b32",
    ] {
        assert!(body.contains(form), "m64_readback: `{form}` missing from the PTX");
    }
    // .16x32bx2: the split offset is the immediate after the address
    // (load: `{regs}, [taddr], 8;`, store: `[taddr], 1, {regs};`).
    let ld = body.lines().find(|l| l.contains("tcgen05.ld.sync.aligned.16x32bx2.x8.b32")).expect("16x32bx2 load");
    assert!(ld.trim_end().ends_with("], 8;"), "16x32bx2 load without its split offset 8: {ld}");
    let st = body.lines().find(|l| l.contains("tcgen05.st.sync.aligned.16x32bx2.x1.b32")).expect("16x32bx2 store");
    assert!(st.contains("], 1, {"), "16x32bx2 store without its split offset 1: {st}");
    let m64_idesc = 0x0410_0010u32;
    assert!(
        body.contains(&m64_idesc.to_string()) || body.contains(&format!("{m64_idesc:#x}")),
        "m64_readback: the M = 64 instruction descriptor {m64_idesc:#010x} is not in the PTX"
    );
    assert!(!body.contains(".local"), "m64_readback: uses local memory");
    let bad = tmem_registers_read_before_wait(body);
    assert!(bad.is_empty(), "m64_readback: TMEM load registers read before tcgen05.wait::ld:\n{}", bad.join("\n"));
    assert_eq!(ptxas_numbers(img.ptxas_report, "m64_readback", "sm_100a"), (0, 0, 0), "m64_readback: stack frame / spills");
    let sm90 = code.image("sm_90a").expect("sm_90a image");
    assert!(!sm90.ptx.contains(".entry m64_readback("), "m64_readback is sm_100a-only");
}
