//! The norm kernels build for sm_90a and sm_100a, assemble with ptxas 13.0
//! with no stack frame and no spills, keep the row in registers (no local
//! memory) and move it with 16-byte vector accesses (one per piece of 8
//! f16 / bf16, two per piece of 8 f32, masked at the row's end), also for
//! widths that are not a multiple of 16 bytes (peeled: the rows' partial
//! chunks by element), or, in the cluster fallback, one element per access.
use kernel_device::launch::DeviceImage;

fn image(arch: &str) -> &'static DeviceImage {
    kernel_ops_kernels::DEVICE_CODE.image(arch).unwrap_or_else(|| panic!("kernel-ops kernels were not built for {arch}"))
}

fn entry<'a>(ptx: &'a str, name: &str) -> &'a str {
    let head = format!(".visible .entry {name}(");
    let start = ptx.find(&head).unwrap_or_else(|| panic!("no entry `{name}` in the PTX"));
    let end = ptx[start..].find("\n}").map(|e| start + e).unwrap_or(ptx.len());
    &ptx[start..end]
}

fn count(body: &str, opcode: &str) -> usize {
    body.lines().filter(|l| l.trim_start().starts_with(opcode)).count()
}

#[test]
fn norm_kernels_assemble_without_spills_for_both_architectures() {
    for arch in ["sm_90a", "sm_100a"] {
        let img = image(arch);
        assert!(!img.cubin.is_empty(), "{arch}: no cubin: ptxas was not found at build time (tools/install-ptxas.sh)");
        let report = img.ptxas_report;
        let mut entries = 0;
        for block in report.split("Compiling entry function '").skip(1) {
            let name = block.split('\'').next().unwrap();
            if !["softmax_", "layer_norm_", "rms_norm_", "add_rms_norm_", "add_layer_norm_", "fp8_tensor_scale", "norm_bwd_reduce"].iter().any(|p| name.starts_with(p)) {
                continue; // the matmul kernels of this crate are checked by their own tests
            }
            let line = block.lines().find(|l| l.contains("bytes stack frame")).unwrap_or_else(|| panic!("{arch} {name}: no stack line"));
            assert!(line.contains("0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads"), "{arch} {name}: {line}");
            entries += 1;
        }
        // softmax, layer norm, RMS norm: 3 types x (8 warp + 15 warpgroup +
        // 5 wide + 5 cluster) instances (16-byte, peeled and, in a warpgroup,
        // 4 warpgroups or a cluster, one-element accesses), less the f32 layer norm's peeled `V` = 4
        // per 512 threads (wide and cluster);
        // the fused norms: 2 types x (4 warp + 8 warpgroup + 2 wide); the
        // backwards (RMS and layer norm): 3 types x (3 warp + 4 warpgroup)
        // + 2 types x 1 wide with 16-byte accesses, 3 types x (3 warp + 2
        // warpgroup) with one element per access, and their reduce kernel.
        assert_eq!(
            entries,
            3 * 3 * (8 + 15 + 5 + 5) - 2 + 2 * 2 * (4 + 8 + 2) + 1 + 2 * (3 * (3 + 4) + 2 + 3 * (3 + 2)) + 1,
            "{arch}: the norm instances, fp8_tensor_scale and the backwards:\n{report}"
        );
    }
}

#[test]
fn rows_stay_in_registers_and_move_in_16_byte_accesses() {
    for arch in ["sm_90a", "sm_100a"] {
        let ptx = image(arch).ptx;
        for (op, extra_loads) in [("softmax", 0), ("layer_norm", 2), ("rms_norm", 1)] {
            // (type, 16-byte accesses per 8-element piece)
            for (t, per_piece) in [("f16", 1), ("bf16", 1), ("f32", 2)] {
                for (family, vecs) in [("", 1), ("", 2), ("", 3), ("", 4), ("", 8), ("_warp", 3), ("_warp", 4), ("_wide", 3), ("_wide", 4), ("_cluster", 2), ("_cluster", 4)] {
                    let name = format!("{op}{family}__{t}_Vec16_{vecs}");
                    let body = entry(ptx, &name);
                    assert!(!body.contains(".local"), "{arch} {name}: local memory");
                    // x, plus gamma (and beta): `vecs` pieces each; `vecs` pieces of y.
                    let pieces = per_piece * vecs;
                    assert_eq!(count(body, "ld.v4.b32") + count(body, "ld.global.v4"), pieces * (1 + extra_loads), "{arch} {name}: vector loads");
                    assert_eq!(count(body, "st.v4.b32") + count(body, "st.global.v4"), pieces, "{arch} {name}: vector stores");
                    assert!(body.contains("shfl.sync.bfly.b32"), "{arch} {name}: warp butterfly");
                    if family == "_cluster" {
                        // The partials through distributed shared memory.
                        assert!(body.contains("mapa.u64") && body.contains("barrier.cluster.wait.acquire"), "{arch} {name}: cluster reduction");
                    }
                }
            }
            // Peeled 16-byte accesses (widths not a multiple of 16 bytes): x
            // and y as above, each gamma (and beta) piece two 16-byte
            // chunks (shifted to the row's alignment); the element
            // accesses of the rows' partial chunks beside them.
            for (t, per_piece) in [("f16", 1), ("bf16", 1), ("f32", 2)] {
                for (family, vecs) in [("_warp", 1), ("", 3), ("", 6), ("_wide", 3), ("_cluster", 2)] {
                    let name = format!("{op}{family}__{t}_Peel_{vecs}");
                    let body = entry(ptx, &name);
                    assert!(!body.contains(".local"), "{arch} {name}: local memory");
                    let pieces = per_piece * vecs;
                    assert_eq!(count(body, "ld.v4.b32") + count(body, "ld.global.v4"), pieces * (1 + 2 * extra_loads), "{arch} {name}: vector loads");
                    assert_eq!(count(body, "st.v4.b32") + count(body, "st.global.v4"), pieces, "{arch} {name}: vector stores");
                }
            }
            // One element per access: 8 per piece, each one load (x, gamma, beta) or store (y).
            for (t, bits) in [("f16", 16), ("bf16", 16), ("f32", 32)] {
                for (family, vecs) in [("_cluster", 4)] {
                    let name = format!("{op}{family}__{t}_Single_{vecs}");
                    let body = entry(ptx, &name);
                    assert!(!body.contains(".local"), "{arch} {name}: local memory");
                    assert_eq!(count(body, &format!("ld.b{bits}")), 8 * vecs * (1 + extra_loads), "{arch} {name}: element loads");
                    // (A cluster's partials are one `st.b32` per `mapa`.)
                    let partials = if bits == 32 { count(body, "mapa.u64") } else { 0 };
                    assert_eq!(count(body, &format!("st.b{bits}")), 8 * vecs + partials, "{arch} {name}: element stores");
                    assert_eq!(count(body, "ld.v4.b32") + count(body, "st.v4.b32"), 0, "{arch} {name}: no vector access");
                }
            }
        }
    }
}

/// The attention kernels: no spills for sm_90a; P fed to `P V` from
/// registers (the RS form of wgmma, with V MN-major: imm-trans-b 1), the
/// softmax's `ex2.approx`, the role register budgets (`setmaxnreg`), the
/// quad shuffles of the row maxima and sums.
#[test]
fn attention_kernels_use_rs_wgmma_ex2_and_setmaxnreg_without_spills() {
    let img = image("sm_90a");
    let report = img.ptxas_report;
    let mut entries = 0;
    for block in report.split("Compiling entry function '").skip(1) {
        let name = block.split('\'').next().unwrap();
        if !name.starts_with("attention_fwd") {
            continue;
        }
        let line = block.lines().find(|l| l.contains("bytes stack frame")).unwrap_or_else(|| panic!("{name}: no stack line"));
        assert!(line.contains("0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads"), "{name}: {line}");
        entries += 1;
    }
    assert_eq!(entries, 24, "2 types x 6 instances, 2 three-consumer ones, 2 types x 3 varlen ones and 2 types x 2 variant ones:\n{report}");
    for name in ["attention_fwd__f16_128_128_8_2", "attention_fwd__bf16_64_128_8_3", "attention_fwd__f16_256_64_4_2", "attention_fwd__f16_256_80_5_2", "attention_fwd_wg3__64_128_8_3", "attention_fwd_ext__f16_64_128_8_3", "attention_fwd_ext__bf16_128_64_4_2"] {
        let body = entry(img.ptx, name);
        let rs = body.lines().filter(|l| l.contains("wgmma.mma_async") && l.contains("}, {%r")).count();
        assert!(rs >= 4, "{name}: {rs} RS wgmmas (P from registers) found");
        assert!(body.contains("wgmma.mma_async.sync.aligned.m64n128k16.f32") || body.contains("wgmma.mma_async.sync.aligned.m64n64k16.f32") || body.contains("wgmma.mma_async.sync.aligned.m64n80k16.f32"), "{name}: S = Q Kᵀ (m64nBNk16)");
        assert!(body.contains("ex2.approx"), "{name}: ex2.approx");
        let wg3 = name.contains("wg3");
        let (inc, dec) = if wg3 { ("setmaxnreg.inc.sync.aligned.u32 160", "setmaxnreg.dec.sync.aligned.u32 32") } else { ("setmaxnreg.inc.sync.aligned.u32 240", "setmaxnreg.dec.sync.aligned.u32 24") };
        assert!(body.contains(inc) && body.contains(dec), "{name}: setmaxnreg");
        assert!(body.contains("shfl.sync.bfly.b32"), "{name}: quad shuffles");
        assert!(!body.contains(".local"), "{name}: local memory");
    }
}

/// The grouped GEMM: both instances without spills (the partial-tile path
/// goes through the epilogue's SMEM sub-tile, not the registers: from the
/// registers, the 128 x 256 instance spilled), the rank-3 TMA load of B,
/// the TMA stores of full tiles and the m64nBNk16 wgmmas.
#[test]
fn grouped_kernels_have_their_instructions_and_no_spills() {
    let img = image("sm_90a");
    for (name, n) in [("grouped_matmul__f16_128_256_4", 256), ("grouped_matmul__f16_128_128_4", 128), ("grouped_matmul__bf16_128_256_4", 256), ("grouped_matmul__bf16_128_128_4", 128)] {
        let ty = if name.contains("bf16") { "bf16" } else { "f16" };
        let block = img.ptxas_report.split("Compiling entry function '").find(|b| b.starts_with(name)).unwrap_or_else(|| panic!("{name} not assembled"));
        let line = block.lines().find(|l| l.contains("bytes stack frame")).unwrap();
        assert!(line.contains("0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads"), "{name}: {line}");
        let body = entry(img.ptx, name);
        assert!(body.contains("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"), "{name}: B's rank-3 load");
        assert!(body.contains("cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group"), "{name}: the TMA store of full tiles");
        assert!(body.contains(&format!("wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{ty}.{ty}")), "{name}: m64n{n}k16 on {ty}");
        assert!(!body.contains(".local"), "{name}: local memory");
    }
}

/// The matmul's kernels, f16 and bf16 (one generic kernel each, the same
/// instances): every instance assembled with no stack frame, no spills and
/// no wgmma serialization, one K step of 64 as `BM / 64` wgmmas of
/// `m64n{BN}k16` on its element type (and none on the other), the
/// epilogue's conversion to that type, and the overlapped TMA stores.
#[test]
fn matmul_kernels_f16_and_bf16_have_their_wgmmas_and_no_spills() {
    let img = image("sm_90a");
    assert!(!img.ptxas_report.contains("serialized"), "wgmma serialization warning:\n{}", img.ptxas_report);
    // (kernel, instance suffix, BM, BN): the `#[kernel(instances(..))]` lists.
    let persistent = [("128_256_4_8", 128, 256), ("256_128_3_8", 256, 128), ("128_256_4_16", 128, 256), ("128_128_4_8", 128, 128), ("128_128_4_16", 128, 128)];
    let cluster = [("128_256_128_4_8", 128, 256), ("256_128_64_3_8", 256, 128), ("128_256_128_4_16", 128, 256)];
    let mut entries = 0;
    for (ty, other, cvt) in [("f16", "bf16", "cvt.rn.f16x2.f32"), ("bf16", "f16", "cvt.rn.bf16x2.f32")] {
        let names = persistent.iter().map(|(i, bm, bn)| (format!("matmul_persistent_ws__{ty}_{i}"), bm, bn));
        let names = names.chain(cluster.iter().map(|(i, bm, bn)| (format!("matmul_persistent_ws_cluster__{ty}_{i}"), bm, bn)));
        for (name, bm, bn) in names {
            let block = img.ptxas_report.split("Compiling entry function '").find(|b| b.starts_with(&format!("{name}'"))).unwrap_or_else(|| panic!("{name} not assembled"));
            let line = block.lines().find(|l| l.contains("bytes stack frame")).unwrap();
            assert!(line.contains("0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads"), "{name}: {line}");
            let body = entry(img.ptx, &name);
            let mma = format!("wgmma.mma_async.sync.aligned.m64n{bn}k16.f32.{ty}.{ty}");
            // A compute warpgroup's BM / 2 rows are BM / 128 blocks of 64,
            // each 4 wgmmas of K 16 per K step of 64.
            let wgmmas = bm / 128 * 4;
            assert_eq!(body.matches("wgmma.mma_async").count(), wgmmas, "{name}: wgmma count");
            assert_eq!(body.matches(mma.as_str()).count(), wgmmas, "{name}: every wgmma is {mma}");
            assert!(!body.contains(&format!(".f32.{other}.{other}")), "{name}: a wgmma on {other}");
            assert!(body.contains(cvt), "{name}: the epilogue's `{cvt}`");
            assert!(body.contains("cp.async.bulk.wait_group.read 1"), "{name}: the overlapped epilogue stores");
            assert!(!body.contains(".local"), "{name}: local memory");
            entries += 1;
        }
    }
    assert_eq!(img.ptx.matches(".entry matmul_persistent_ws").count(), entries, "an unlisted matmul instance");
    // The split-K kernels: the same mainloop (a compute warpgroup per 64
    // rows, or per 64 or 32 columns of a 64-row tile) and epilogue, plus the
    // partials' 16-byte stores and loads and the last CTA's count.
    for (ty, cvt) in [("f16", "cvt.rn.f16x2.f32"), ("bf16", "cvt.rn.bf16x2.f32")] {
        for (inst, wn) in [("128_128_128_6", 128), ("128_64_64_8", 64), ("64_128_64_8", 64), ("64_64_32_13", 32)] {
            let name = format!("matmul_splitk__{ty}_{inst}");
            let block = img.ptxas_report.split("Compiling entry function '").find(|b| b.starts_with(&format!("{name}'"))).unwrap_or_else(|| panic!("{name} not assembled"));
            let line = block.lines().find(|l| l.contains("bytes stack frame")).unwrap();
            assert!(line.contains("0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads"), "{name}: {line}");
            let body = entry(img.ptx, &name);
            assert_eq!(body.matches("wgmma.mma_async").count(), 4, "{name}: wgmmas");
            assert_eq!(body.matches(format!("wgmma.mma_async.sync.aligned.m64n{wn}k16.f32.{ty}.{ty}").as_str()).count(), 4, "{name}: wgmmas");
            assert!(body.contains(cvt) && body.contains("cp.async.bulk.tensor"), "{name}: the epilogue's conversion and TMA store");
            assert!(body.contains("st.global.v4") && body.contains("ld.global.v4"), "{name}: the partials in 16-byte accesses");
            assert!(body.contains("atom.acq_rel.gpu") && body.contains("fence.acq_rel.gpu"), "{name}: the last CTA's count and fences");
            assert!(!body.contains(".local"), "{name}: local memory");
        }
    }
    assert_eq!(img.ptx.matches(".entry matmul_splitk").count(), 8, "an unlisted split-K instance");
}

/// The attention backward kernel: its register budgets honoured (at D 64
/// the pin marker became `.minnctapersm 1`, without which ptxas dropped the
/// `setmaxnreg`), no spills at D 64 and at D 128 exactly the known spill
/// ([`KNOWN_SPILLS`]); Pᵀ and dSᵀ fed to dV and dK from
/// registers (RS wgmma with B MN-major), dQ by an SS wgmma with both
/// operands transposed (imm-trans-a 1, imm-trans-b 1), its partial sums by
/// one bulk reduction from SMEM per step (`cp.reduce.async.bulk .add.f32`,
/// no per-thread `red`), the statistics by one bulk copy per step.
#[test]
fn attention_backward_kernel_has_its_instructions_and_register_budgets() {
    let img = image("sm_90a");
    let report = img.ptxas_report;
    let mut entries = 0;
    for block in report.split("Compiling entry function '").skip(1) {
        let name = block.split('\'').next().unwrap();
        if !name.starts_with("attention_bwd__") {
            continue;
        }
        let line = block.lines().find(|l| l.contains("bytes stack frame")).unwrap_or_else(|| panic!("{name}: no stack line"));
        if name.contains("16_64_") {
            assert!(line.contains("0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads"), "{name}: {line}");
        }
        entries += 1;
    }
    assert_eq!(entries, 4, "2 types x 2 instances:\n{report}");
    assert!(!report.contains("C7508"), "a kernel's setmaxnreg was dropped:\n{report}");
    for name in ["attention_bwd__f16_64_2", "attention_bwd__bf16_64_2", "attention_bwd__f16_128_2", "attention_bwd__bf16_128_2"] {
        let body = entry(img.ptx, name);
        // Pinned at D 64 only (unpinned, D 128 keeps its budgets and runs faster).
        assert_eq!(body.contains(".minnctapersm 1"), name.contains("_64_"), "{name}: .minnctapersm");
        assert!(body.contains("setmaxnreg.inc.sync.aligned.u32 240") && body.contains("setmaxnreg.dec.sync.aligned.u32 24"), "{name}: setmaxnreg");
        let rs = body.lines().filter(|l| l.contains("wgmma.mma_async") && l.contains("}, {%r")).count();
        assert!(rs >= 8, "{name}: {rs} RS wgmmas (Pᵀ and dSᵀ from registers)");
        assert!(body.lines().any(|l| l.contains("wgmma.mma_async") && l.contains(", 1, 1, 1, 1;")), "{name}: dQ's wgmma with both operands transposed");
        assert!(body.contains("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32"), "{name}: dQ's bulk reduction");
        assert!(!body.contains("red.relaxed.gpu.global"), "{name}: no per-thread reductions left");
        assert!(body.contains("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"), "{name}: the statistics' bulk copy");
        assert!(body.contains("ex2.approx"), "{name}: ex2.approx");
    }
}

/// The block-scaled FP8 GEMM: its register budgets honoured
/// (`BS_COMPUTE_REGS` for the compute warpgroups, `BS_MEMORY_REGS` for the
/// memory one; no `setmaxnreg` dropped), exactly the known spill
/// ([`KNOWN_SPILLS`]), no serialized wgmma,
/// its MMAs as `m64n128k32` e4m3 half groups, and the scales read through
/// the read-only path; the same for the grouped block-scaled kernel, which
/// shares its K loop.
#[test]
fn blockscaled_fp8_kernel_has_its_instructions_and_register_budgets() {
    let img = image("sm_90a");
    let report = img.ptxas_report;
    let mut entries = 0;
    for block in report.split("Compiling entry function '").skip(1) {
        let name = block.split('\'').next().unwrap();
        if !(name.starts_with("matmul_fp8_blockscaled__") || name.starts_with("grouped_matmul_fp8_blockscaled__")) {
            continue;
        }
        assert!(!block.contains("serialized"), "{name}: serialized wgmma:\n{block}");
        let body = entry(img.ptx, name);
        let (inc, dec) = if name.starts_with("grouped") {
            (kernel_ops_kernels::grouped::GBS_COMPUTE_REGS, kernel_ops_kernels::grouped::GBS_MEMORY_REGS)
        } else {
            (kernel_ops_kernels::matmul_fp8::BS_COMPUTE_REGS, kernel_ops_kernels::matmul_fp8::BS_MEMORY_REGS)
        };
        assert!(body.contains(&format!("setmaxnreg.inc.sync.aligned.u32 {inc};")) && body.contains(&format!("setmaxnreg.dec.sync.aligned.u32 {dec};")), "{name}: setmaxnreg");
        let mmas = body.lines().filter(|l| l.contains("wgmma.mma_async") && l.contains("m64n128k32") && l.contains("e4m3.e4m3")).count();
        assert!(mmas >= 8, "{name}: {mmas} m64n128k32 e4m3 wgmmas (2 halves x 4)");
        assert!(count(body, "ld.global.nc.b32") >= 4, "{name}: the scales' loads");
        entries += 1;
    }
    assert_eq!(entries, 3, "2 instances and the grouped kernel's:\n{report}");
    assert!(!report.contains("C7508"), "a kernel's setmaxnreg was dropped:\n{report}");
}

/// The kernels ptxas spills for, each with its exact `(stack frame, spill
/// stores, spill loads)` in bytes on sm_90a and why it is kept. Every other
/// entry of this crate, on both architectures, has none
/// ([`no_kernel_spills_but_the_known_ones`]); a known one that spills more,
/// or less (then shrink this table), fails too. Each of these kernels says
/// why on its `#[kernel(allow_spills = "..")]`, which keeps the device
/// build from warning about it
/// ([`the_known_spills_opt_out_of_the_build_warning_and_nothing_warns`]).
///
/// - `attention_bwd__{f16,bf16}_128_2` (4 bytes): the step's dQ-reduction
///   address base (`b x heads` plus the K/V head's first Q head), stored
///   once before the loop and reloaded once per step by the one thread that
///   issues the bulk reduction (one `LDL` per step, an L1 hit). LLVM
///   hoists that base out of the step loop as loop-invariant, and the loop
///   holds the rest of its 240 registers; not removed yet.
/// - `attention_bwd_varlen__{f16,bf16}_128_2` (60 bytes): the packed
///   backward at head dim 128, on the dense one's edge (above): its
///   sequence's span comes from `cu_seqlens` loads, not from parameters
///   ptxas can reload for free. Reading the span again at each use
///   (instead of once), exiting past the sequence after `setmaxnreg` (an
///   exit before it cost 1188 bytes and serialized the wgmmas), and
///   trivializing any one of the stores, the mask or the reduction address
///   each took off only a few bytes. No serialized wgmma. Not removed yet:
///   to measure on a GPU (`attention_bench --varlen`).
/// - `grouped_matmul_fp8_blockscaled__4` (24 bytes, the same K loop, on
///   240/240/24 registers): the memory warpgroup's cursor and step counters
///   on its 24 registers (one reload per K step by its issuing thread),
///   and in the compute warpgroups tile coordinates stored before a tile's
///   K loop and reloaded after it (per tile); none in the compute
///   warpgroups' K loop.
const KNOWN_SPILLS: [(&str, (u32, u32, u32)); 5] = [
    ("attention_bwd__f16_128_2", (8, 4, 4)),
    ("attention_bwd__bf16_128_2", (8, 4, 4)),
    ("attention_bwd_varlen__f16_128_2", (32, 60, 84)),
    ("attention_bwd_varlen__bf16_128_2", (32, 60, 84)),
    ("grouped_matmul_fp8_blockscaled__4", (24, 20, 44)),
];

/// `(stack frame, spill stores, spill loads)` of each entry of a ptxas
/// report, in the report's order.
fn spills_of(report: &str) -> Vec<(&str, (u32, u32, u32))> {
    report
        .split("Compiling entry function '")
        .skip(1)
        .map(|block| {
            let name = block.split('\'').next().unwrap();
            let line = block.lines().find(|l| l.contains("bytes stack frame")).unwrap_or_else(|| panic!("{name}: no stack line"));
            let n: Vec<u32> = line.split(|c: char| !c.is_ascii_digit()).filter(|w| !w.is_empty()).map(|w| w.parse().unwrap()).collect();
            assert_eq!(n.len(), 3, "{name}: unexpected ptxas line `{line}`");
            (name, (n[0], n[1], n[2]))
        })
        .collect()
}

/// Every entry of this crate, on both architectures: no stack frame, no
/// spills and no serialized wgmma, except the [`KNOWN_SPILLS`], which spill
/// exactly what the table says (sm_90a; they are Hopper-only).
#[test]
fn no_kernel_spills_but_the_known_ones() {
    for arch in ["sm_90a", "sm_100a"] {
        let report = image(arch).ptxas_report;
        assert!(!report.contains("serialized"), "{arch}: wgmma serialization warning:\n{report}");
        let entries = spills_of(report);
        assert!(entries.len() >= if arch == "sm_90a" { 79 } else { 32 }, "{arch}: ptxas compiled only {} entries", entries.len());
        for (name, got) in entries {
            let want = KNOWN_SPILLS.iter().find(|(k, _)| *k == name).map_or((0, 0, 0), |(_, w)| *w);
            assert_eq!(got, want, "{arch} {name}: (stack frame, spill stores, spill loads) in bytes; a new spill is a bug to fix, a known one that changed belongs in KNOWN_SPILLS with its reason");
        }
    }
    let sm90 = spills_of(image("sm_90a").ptxas_report);
    for (name, _) in KNOWN_SPILLS {
        assert!(sm90.iter().any(|(n, _)| *n == name), "{name}: in KNOWN_SPILLS but not assembled");
    }
}

/// The known spills are exactly the kernels that opt out of the build's
/// local-memory warning (`#[kernel(allow_spills = "..")]`, per kernel, so
/// for all its instances), and building this crate warns about none.
#[test]
fn the_known_spills_opt_out_of_the_build_warning_and_nothing_warns() {
    use kernel_host::build::{kernel_meta, local_memory_uses, local_memory_warnings};
    for arch in ["sm_90a", "sm_100a"] {
        let img = image(arch);
        let uses = local_memory_uses(img.ptx, img.ptxas_report);
        assert_eq!(local_memory_warnings(&uses), Vec::<String>::new(), "{arch}: building kernel-ops warns");
    }
    let meta = kernel_meta(image("sm_90a").ptx);
    for (name, _) in KNOWN_SPILLS {
        assert!(meta.get(name).is_some_and(|m| m.allow_spills), "{name}: in KNOWN_SPILLS, so it needs `allow_spills = \"reason\"` on its #[kernel]");
    }
    for (entry, m) in meta.iter().filter(|(_, m)| m.allow_spills) {
        let kernel = m.kernel.as_deref().unwrap_or(entry);
        assert!(
            KNOWN_SPILLS.iter().any(|(k, _)| meta.get(*k).and_then(|km| km.kernel.as_deref()) == Some(kernel)),
            "{entry}: `allow_spills` on kernel `{kernel}`, none of whose instances is in KNOWN_SPILLS"
        );
    }
}

/// The row-wise FP8 GEMM: both instances with the per-tensor kernel's
/// mainloop (`m64n256k32` e4m3 wgmmas, no spill: [`no_kernel_spills_but_the_known_ones`]),
/// its scales read once per thread through the read-only path before the
/// mainloop and from SMEM as each sub-tile is stored.
#[test]
fn rowwise_fp8_kernel_has_its_instructions() {
    let img = image("sm_90a");
    for name in ["matmul_fp8_rowwise__4_8", "matmul_fp8_rowwise__4_16"] {
        let body = entry(img.ptx, name);
        let mmas = body.lines().filter(|l| l.contains("wgmma.mma_async") && l.contains("m64n256k32") && l.contains("e4m3.e4m3")).count();
        assert!(mmas >= 4, "{name}: {mmas} m64n256k32 e4m3 wgmmas (4 per K step)");
        assert_eq!(count(body, "ld.global.nc.b32"), 2, "{name}: one row and one column scale per thread and tile");
        assert!(body.contains("ld.shared"), "{name}: the scales read back from SMEM");
        assert!(!body.contains(".local"), "{name}: local memory");
    }
}
