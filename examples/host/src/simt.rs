//! The SIMT examples (`kernels::simt`) on a [`Device`] (a GPU or the CPU
//! emulator), each checked against a CPU reference: bit for bit where the kernel's
//! arithmetic is exact or its order is reproduced (shuffles, reductions and
//! scans in the butterfly / Hillis-Steele order), within the PTX ISA's
//! error bounds for the approximate math (`kernel_device::math`).
use crate::{inputs, ExampleError, Outcome, Result};
use kernel_device::{bf16, f16};
use kernel_host::Device;
use kernels::simt;

fn mismatch(example: &'static str, index: usize, got: f32, want: f32, wrong: usize) -> ExampleError {
    ExampleError::Mismatch { example, index, got, want, wrong }
}

/// Checks `got[i]` against `want[i]` with the tolerance `tol(i)` (`None`:
/// bitwise, NaN matching NaN).
fn check_tol(example: &'static str, got: &[f32], want: &[f32], tol: impl Fn(usize) -> Option<f64>) -> Result<Outcome> {
    assert_eq!(got.len(), want.len(), "{example}: output length");
    let bad = |i: usize| match tol(i) {
        None => !(got[i].to_bits() == want[i].to_bits() || (got[i].is_nan() && want[i].is_nan())),
        Some(t) => !((got[i] as f64 - want[i] as f64).abs() <= t),
    };
    let wrong: Vec<usize> = (0..got.len()).filter(|&i| bad(i)).collect();
    if let Some(&i) = wrong.first() {
        return Err(mismatch(example, i, got[i], want[i], wrong.len()));
    }
    Ok(Outcome { example, checked: got.len(), sample: got.iter().take(4).copied().collect() })
}

fn ints(n: usize, seed: u64) -> Vec<i32> {
    inputs(n, seed).iter().map(|v| (v * 30.0) as i32).collect()
}

/// The 32-lane butterfly `v = op(v, v[l ^ m])`, m = 16..1 (every lane ends
/// with the same value).
fn butterfly(v: &[f32], op: fn(f32, f32) -> f32) -> f32 {
    let mut v = v.to_vec();
    for m in [16, 8, 4, 2, 1] {
        v = (0..32).map(|l| op(v[l], v[l ^ m])).collect();
    }
    v[0]
}

/// Hillis-Steele inclusive scan over 32 lanes: `v[l] = op(v[l - d], v[l])`.
fn hs_scan<T: Copy>(v: &[T], op: fn(T, T) -> T) -> Vec<T> {
    let mut v = v.to_vec();
    let mut d = 1;
    while d < 32 {
        v = (0..32).map(|l| if l >= d { op(v[l - d], v[l]) } else { v[l] }).collect();
        d *= 2;
    }
    v
}

fn add(a: f32, b: f32) -> f32 {
    a + b
}

/// Every warp collective on 2 warps (see the kernel's docs).
pub fn warp_collectives(dev: &Device) -> Result<Outcome> {
    let n = 64;
    let (x, xi) = (inputs(n, 11), ints(n, 12));
    let (of, oi) = (vec![f32::NAN; n * simt::WARP_OUTS], vec![i32::MIN; n * simt::WARP_OUTS]);
    let (dx, dxi) = (dev.upload(&x)?, dev.upload(&xi)?);
    let (mut dof, mut doi) = (dev.upload(&of)?, dev.upload(&oi)?);
    dev.load(&kernels::DEVICE_CODE)?.kernel::<simt::warp_collectives>()?.launch_sync(1u32, (&dx, &dxi, &mut dof, &mut doi))?;
    let (of, oi) = (dev.download(&dof)?, dev.download(&doi)?);
    let mut wf = vec![0f32; n * simt::WARP_OUTS];
    let mut wi = vec![0i32; n * simt::WARP_OUTS];
    for w in [0, 32] {
        let xs = &x[w..w + 32];
        let ks = &xi[w..w + 32];
        let scan = hs_scan(xs, add);
        let ballot = (0..32).filter(|&l| ks[l] > 0).fold(0u32, |m, l| m | 1 << l);
        let exc_max = hs_scan(ks, |a: i32, b: i32| a.max(b));
        for l in 0..32 {
            let o = (w + l) * simt::WARP_OUTS;
            wf[o] = xs[3];
            wf[o + 1] = if l >= 1 { xs[l - 1] } else { xs[l] };
            wf[o + 2] = if l + 2 <= 31 { xs[l + 2] } else { xs[l] };
            wf[o + 3] = xs[l ^ 5];
            wf[o + 4] = butterfly(xs, add);
            wf[o + 5] = butterfly(xs, f32::max);
            wf[o + 6] = butterfly(xs, f32::min);
            wf[o + 7] = scan[l];
            wi[o] = ballot as i32;
            let all = ks.iter().all(|&k| k > -100);
            let any = ks.iter().any(|&k| k > 0);
            let uni = ks.iter().all(|&k| k > 0) || !any;
            wi[o + 1] = all as i32 | (any as i32) << 1 | (uni as i32) << 2;
            wi[o + 2] = ks.iter().fold(0i32, |a, &b| a.wrapping_add(b));
            wi[o + 3] = *ks.iter().max().unwrap();
            wi[o + 4] = *ks.iter().min().unwrap();
            wi[o + 5] = (0..32).filter(|&j| ks[j] & 3 == ks[l] & 3).fold(0u32, |m, j| m | 1 << j) as i32;
            wi[o + 6] = if l == 0 { i32::MIN } else { exc_max[l - 1] };
            wi[o + 7] = -1;
        }
    }
    check_ints("warp_collectives (i32)", &oi, &wi)?;
    check_tol("warp_collectives", &of, &wf, |_| None)
}

/// The warpgroup index and its warp-uniform form on 3 warpgroups (see the
/// kernel's docs): both `t / 128` for every thread `t`.
pub fn warpgroup_indices(dev: &Device) -> Result<Outcome> {
    let mut out = dev.upload(&vec![u32::MAX; 768])?;
    dev.load(&kernels::DEVICE_CODE)?.kernel::<simt::warpgroup_indices>()?.launch_sync(1u32, (&mut out,))?;
    let got: Vec<i32> = dev.download(&out)?.iter().map(|&v| v as i32).collect();
    let want: Vec<i32> = (0..768).map(|i| (i / 2 / 128) as i32).collect();
    check_ints("warpgroup_indices", &got, &want)?;
    Ok(Outcome { example: "warpgroup_indices", checked: got.len(), sample: got.iter().step_by(256).map(|&v| v as f32).collect() })
}

fn check_ints(example: &'static str, got: &[i32], want: &[i32]) -> Result<()> {
    let wrong: Vec<usize> = (0..got.len()).filter(|&i| got[i] != want[i]).collect();
    match wrong.first() {
        Some(&i) => Err(mismatch(example, i, got[i] as f32, want[i] as f32, wrong.len())),
        None => Ok(()),
    }
}

/// Block reductions and scans over 4 warps (see the kernel's docs).
pub fn block_reductions(dev: &Device) -> Result<Outcome> {
    let n = 128;
    let (x, xi) = (inputs(n, 21), ints(n, 22));
    let (of, oi) = (vec![f32::NAN; n * simt::BLOCK_OUTS], vec![i32::MIN; n * simt::BLOCK_OUTS]);
    let (dx, dxi) = (dev.upload(&x)?, dev.upload(&xi)?);
    let (mut dof, mut doi) = (dev.upload(&of)?, dev.upload(&oi)?);
    dev.load(&kernels::DEVICE_CODE)?.kernel::<simt::block_reductions>()?.launch_sync(1u32, (&dx, &dxi, &mut dof, &mut doi))?;
    let (of, oi) = (dev.download(&dof)?, dev.download(&doi)?);
    // f32: the kernel's order: per-warp butterflies, then a butterfly over
    // the 4 warp values and 28 identities.
    let two_level = |op: fn(f32, f32) -> f32, id: f32| {
        let mut lanes = vec![id; 32];
        for w in 0..4 {
            lanes[w] = butterfly(&x[32 * w..32 * w + 32], op);
        }
        butterfly(&lanes, op)
    };
    let (sum, mx, mn) = (two_level(add, 0.0), two_level(f32::max, f32::NEG_INFINITY), two_level(f32::min, f32::INFINITY));
    let incs: Vec<Vec<f32>> = (0..4).map(|w| hs_scan(&x[32 * w..32 * w + 32], add)).collect();
    let mut totals = vec![0f32; 32];
    for w in 0..4 {
        totals[w] = incs[w][31];
    }
    let tscan = hs_scan(&totals, add);
    let prefix = |w: usize| if w == 0 { 0.0 } else { tscan[w - 1] };
    let mut wf = vec![0f32; n * simt::BLOCK_OUTS];
    let mut wi = vec![0i32; n * simt::BLOCK_OUTS];
    for tid in 0..n {
        let (w, l) = (tid / 32, tid % 32);
        let o = tid * simt::BLOCK_OUTS;
        wf[o] = sum;
        wf[o + 1] = mx;
        wf[o + 2] = mn;
        wf[o + 3] = prefix(w) + incs[w][l];
        wf[o + 4] = if l == 0 { prefix(w) } else { prefix(w) + incs[w][l - 1] };
        wi[o] = xi.iter().fold(0i32, |a, &b| a.wrapping_add(b));
        wi[o + 1] = *xi.iter().max().unwrap();
        wi[o + 2] = *xi.iter().min().unwrap();
        wi[o + 3] = *xi[..=tid].iter().max().unwrap();
        wi[o + 4] = if tid == 0 { i32::MAX } else { *xi[..tid].iter().min().unwrap() };
    }
    check_ints("block_reductions (i32)", &oi, &wi)?;
    check_tol("block_reductions", &of, &wf, |_| None)
}

/// Names of [`kernels::simt::math_ops`]'s outputs, in order.
pub const MATH_NAMES: [&str; simt::MATH_OUTS] = [
    "exp", "exp2", "ln", "log2", "rcp", "rcp_approx", "sqrt_rn", "sqrt_approx", "rsqrt", "tanh", "sin", "cos",
    "fma", "max_nan(x, NaN)", "max(x, NaN)", "f16 round trip", "bf16 round trip", "f16 satfinite", "f16x2 fma lo",
    "f16x2 fma hi", "bf16x2 mul+add hi", "brev (user op)", "ex2.ftz(-140)", "max_nan(1, x)",
];

/// The exact value of output `k` for input `v` (f64 math; the exactly
/// specified operations reproduced bit for bit) and its tolerance
/// (`None`: bitwise): the PTX ISA bound plus one f32 ulp.
pub fn math_reference(k: usize, v: f32) -> (f32, Option<f64>) {
    let (x, a) = (v as f64, v.abs() as f64);
    let rel = |want: f64, bound: f64| (want as f32, Some(want.abs() * bound + want.abs() * 2f64.powi(-23)));
    let pf = |lo: f32, hi: f32| (f16::from_f32(lo), f16::from_f32(hi));
    let pb = |lo: f32, hi: f32| (bf16::from_f32(lo), bf16::from_f32(hi));
    match k {
        0 => rel(x.exp(), 2f64.powf(-22.0) + x.abs() * 2f64.powi(-24)),
        1 => rel(x.exp2(), 2f64.powf(-22.0)),
        2 => (a.ln() as f32, Some(2f64.powf(-22.6) * 2f64.ln() + a.ln().abs() * 2f64.powi(-22))),
        3 => (a.log2() as f32, Some(2f64.powf(-22.6) + a.log2().abs() * 2f64.powi(-22))),
        4 => (1.0 / v, None),
        5 => rel(1.0 / x, 2f64.powi(-23)),
        6 => (v.abs().sqrt(), None),
        7 => rel(a.sqrt(), 2f64.powi(-23)),
        8 => rel(1.0 / a.sqrt(), 2f64.powf(-22.9)),
        9 => rel(x.tanh(), 2f64.powf(-10.987)),
        10 => (x.sin() as f32, Some(2f64.powf(-20.5) + 2f64.powi(-24))),
        11 => (x.cos() as f32, Some(2f64.powf(-20.5) + 2f64.powi(-24))),
        12 => (v.mul_add(v, 1.0), None),
        13 => (f32::NAN, None),
        14 => (v, None),
        15 => (f16::from_f32(1000.0 * v).to_f32(), None),
        16 => (bf16::from_f32(1000.0 * v).to_f32(), None),
        17 => {
            let h = f16::from_f32(1e5 * v);
            (if h.is_infinite() { if v > 0.0 { 65504.0 } else { -65504.0 } } else { h.to_f32() }, None)
        }
        18 | 19 => {
            let (p, q) = (pf(v, 2.0 * v), pf(0.5, -v));
            let lane = |a: f16, b: f16| f16::from_f64(a.to_f64() * b.to_f64() + a.to_f64()).to_f32();
            (if k == 18 { lane(p.0, q.0) } else { lane(p.1, q.1) }, None)
        }
        20 => {
            let (p, q) = (pb(v, 2.0 * v), pb(0.5, -v));
            let prod = bf16::from_f64(p.1.to_f64() * q.1.to_f64());
            (bf16::from_f64(prod.to_f64() + p.1.to_f64()).to_f32(), None)
        }
        21 => (f32::from_bits(v.to_bits().reverse_bits()), None),
        22 => (0.0, None),
        _ => (1f32.max(v), None),
    }
}

/// Every math and conversion operation on 64 inputs; returns the outcome
/// and, per operation, the largest |got - exact| / tolerance seen (below 1
/// passes; bitwise-checked operations report 0).
pub fn math_ops_errors(dev: &Device) -> Result<(Outcome, Vec<f64>)> {
    let n = 64;
    let x = inputs(n, 31);
    let dx = dev.upload(&x)?;
    let mut dout = crate::poisoned(dev, n * simt::MATH_OUTS)?;
    dev.load(&kernels::DEVICE_CODE)?.kernel::<simt::math_ops>()?.launch_sync(1u32, (&dx, &mut dout))?;
    let out = dev.download(&dout)?;
    let mut want = vec![0f32; out.len()];
    let mut tols = vec![None; out.len()];
    let mut worst = vec![0f64; simt::MATH_OUTS];
    for i in 0..n {
        for k in 0..simt::MATH_OUTS {
            let (w, tol) = math_reference(k, x[i]);
            let j = i * simt::MATH_OUTS + k;
            want[j] = w;
            tols[j] = tol;
            if let Some(tol) = tol {
                let exact = match k {
                    0 => (x[i] as f64).exp(),
                    1 => (x[i] as f64).exp2(),
                    _ => w as f64,
                };
                worst[k] = worst[k].max((out[j] as f64 - exact).abs() / tol);
            }
        }
    }
    let o = check_tol("math_ops", &out, &want, |j| tols[j])?;
    Ok((o, worst))
}

/// [`math_ops_errors`] without the error table.
pub fn math_ops(dev: &Device) -> Result<Outcome> {
    math_ops_errors(dev).map(|(o, _)| o)
}

/// Vector, read-only and atomic global accesses over 2 CTAs (see the kernel's docs).
pub fn gmem_ops(dev: &Device) -> Result<Outcome> {
    let threads = 2 * simt::GMEM_BLOCK as usize;
    let x = inputs(4 * threads, 41);
    let dx = dev.upload(&x)?;
    let mut dy = crate::poisoned(dev, 4 * threads)?;
    let (mut dc, mut dfs, mut dw) = (dev.zeros::<u32>(3)?, dev.zeros::<f32>(1)?, dev.zeros::<u64>(1)?);
    let (mut dfe, mut die) = (dev.upload(&[f32::NEG_INFINITY, f32::INFINITY])?, dev.upload(&[i32::MIN, i32::MAX])?);
    dev.load(&kernels::DEVICE_CODE)?
        .kernel::<simt::gmem_ops>()?
        .launch_sync(2u32, (&dx, &mut dy, &mut dc, &mut dfs, &mut dw, &mut dfe, &mut die))?;
    let (y, counts, fsum) = (dev.download(&dy)?, dev.download(&dc)?, dev.download(&dfs)?);
    let (wide, fext, iext) = (dev.download(&dw)?, dev.download(&dfe)?, dev.download(&die)?);
    let mut want = vec![0f32; 4 * threads];
    for g in 0..threads {
        let (a, b) = (x[4 * g] + x[2 * g], x[4 * g + 1] + x[2 * g + 1]);
        want[4 * g] = a;
        want[4 * g + 1] = b;
        want[4 * g + 2] = (a + b) + x[4 * g + 2];
        want[4 * g + 3] = x[4 * g + 3];
    }
    let firsts: Vec<f32> = (0..threads).map(|g| x[4 * g]).collect();
    let sum: f64 = firsts.iter().map(|&v| v as f64).sum();
    let fmax = firsts.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let fmin = firsts.iter().copied().fold(f32::INFINITY, f32::min);
    let in_range = |v: u32| (1..=threads as u32).contains(&v);
    let scalars_ok = counts[0] == threads as u32
        && in_range(counts[1])
        && in_range(counts[2])
        && (fsum[0] as f64 - sum).abs() < 1e-3
        && wide[0] == (threads * (threads - 1) / 2) as u64
        && fext == [fmax, fmin]
        && iext == [threads as i32 - 1 - 50, -50];
    if !scalars_ok {
        return Err(mismatch("gmem_ops (atomics)", 0, counts[0] as f32, threads as f32, 1)).map_err(|e| {
            eprintln!(
                "gmem_ops atomics: counts {counts:?} fsum {fsum:?} (want {sum}) wide {wide:?} fext {fext:?} (want [{fmax}, {fmin}]) iext {iext:?}"
            );
            e
        });
    }
    check_tol("gmem_ops", &y, &want, |_| None)
}

/// Bulk reductions and vector `red` from 6 CTAs into the same elements
/// (see the kernel's docs).
pub fn reduce_adds(dev: &Device) -> Result<Outcome> {
    let (ctas, len) = (6usize, simt::REDUCE_LEN);
    let x = inputs(ctas * len, 47);
    let dx = dev.upload(&x)?;
    let (mut dsums, mut dpairs) = (dev.zeros::<f32>(len)?, dev.zeros::<f32>(len)?);
    dev.load(&kernels::DEVICE_CODE)?.kernel::<simt::reduce_adds>()?.launch_sync(ctas as u32, (&dx, &mut dsums, &mut dpairs))?;
    let (sums, pairs) = (dev.download(&dsums)?, dev.download(&dpairs)?);
    let want: Vec<f32> = (0..len).map(|i| (0..ctas).map(|b| x[b * len + i] as f64).sum::<f64>() as f32).collect();
    // Six f32 adds in any order: a few ulps of the largest partial sum
    // (|x| < 4, so below 24).
    let tol = |_| Some(24.0 * 6.0 * f32::EPSILON as f64);
    check_tol("reduce_adds (bulk reduction)", &sums, &want, tol)?;
    check_tol("reduce_adds (red.global.add.v2)", &pairs, &want, tol)
}

/// `stmatrix` / `ldmatrix` on one warp (see the kernel's docs): each
/// area's shared-memory image must hold every matrix row where its lane
/// named it (transposed for the `.trans` area), and the loads must give
/// back the registers stored. Exact.
pub fn smem_matrices(dev: &Device) -> Result<Outcome> {
    let mut dout = dev.zeros::<u32>(simt::MATRIX_OUTS)?;
    dev.load(&kernels::DEVICE_CODE)?.kernel::<simt::smem_matrices>()?.launch_sync(1u32, (&mut dout,))?;
    let got = dev.download(&dout)?;
    let mut want = vec![0u32; simt::MATRIX_OUTS];
    let mut base = 0;
    for (area, (n, trans)) in [(4u32, false), (2, true), (1, false)].into_iter().enumerate() {
        let area = area as u32;
        for i in 0..n {
            for r in 0..8 {
                let slot = simt::matrix_row_slot(i, r) as usize;
                for c in 0..8u32 {
                    let v = if trans { simt::matrix_elem(area, i, c, r) } else { simt::matrix_elem(area, i, r, c) };
                    let (word, half) = (base + 4 * slot + c as usize / 2, 16 * (c % 2));
                    want[word] |= v << half;
                }
            }
            for l in 0..32u32 {
                let (r, c) = (l / 4, 2 * (l % 4));
                want[base + 32 * n as usize + 32 * i as usize + l as usize] = simt::matrix_elem(area, i, r, c) | simt::matrix_elem(area, i, r, c + 1) << 16;
            }
        }
        base += 64 * n as usize;
    }
    // Compared as b16 halves (small integers, exact in f32).
    let halves = |v: &[u32]| -> Vec<f32> { v.iter().flat_map(|&w| [(w & 0xffff) as f32, (w >> 16) as f32]).collect() };
    check_tol("smem_matrices", &halves(&got), &halves(&want), |_| None)
}

/// Row softmax, one warp per row, 8 rows of 128 (see the kernel's docs).
pub fn softmax_rows(dev: &Device) -> Result<Outcome> {
    let rows = 2 * simt::SOFTMAX_ROWS as usize;
    let cols = simt::SOFTMAX_COLS;
    let x = inputs(rows * cols, 51);
    let dx = dev.upload(&x)?;
    let mut dy = crate::poisoned(dev, rows * cols)?;
    dev.load(&kernels::DEVICE_CODE)?.kernel::<simt::softmax_rows>()?.launch_sync(2u32, (&dx, &mut dy))?;
    let y = dev.download(&dy)?;
    let mut want = vec![0f32; rows * cols];
    for r in 0..rows {
        let row = &x[r * cols..(r + 1) * cols];
        let m = row.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
        let s: f64 = row.iter().map(|&v| (v as f64 - m).exp()).sum();
        for c in 0..cols {
            want[r * cols + c] = ((row[c] as f64 - m).exp() / s) as f32;
        }
    }
    // exp: 2^-22 + |x - max| 2^-24 relative (|x - max| < 8); the sum and
    // the products add a few ulps.
    check_tol("softmax_rows", &y, &want, |i| Some(want[i].abs() as f64 * 2f64.powi(-18)))
}

/// 16-byte vector memory on bf16 (see the kernel's docs): exact, since a
/// product of two bf16 is exact in f32 and the sum and the final rounding
/// are the same f32 and round-to-nearest-even operations as here.
pub fn bf16_vectors(dev: &Device) -> Result<Outcome> {
    let (ctas, rows, cols) = (3usize, simt::BF16_ROWS, simt::BF16_COLS);
    let n = ctas * rows * cols;
    let bf = |v: Vec<f32>| -> Vec<bf16> { v.into_iter().map(bf16::from_f32).collect() };
    let (x, scale, y0) = (bf(inputs(n, 61)), bf(inputs(cols, 62)), bf(inputs(n, 63)));
    let (dx, ds) = (dev.upload(&x)?, dev.upload(&scale)?);
    let mut dy = dev.upload(&y0)?;
    dev.load(&kernels::DEVICE_CODE)?.kernel::<simt::bf16_vectors>()?.launch_sync(ctas as u32, (&dx, &ds, &mut dy))?;
    let got: Vec<f32> = dev.download(&dy)?.iter().map(|v| v.to_f32()).collect();
    let mut want = vec![0f32; n];
    for row in 0..ctas * rows {
        // The row of `x` this row reads: mirrored within its CTA's 8 rows.
        let src = row - row % rows + rows - 1 - row % rows;
        for c in 0..cols / 8 {
            let c2 = (c + 3) % 8;
            for k in 0..8 {
                let (i, j, sk) = (row * cols + 8 * c + k, src * cols + 8 * c2 + k, 8 * c2 + k);
                want[i] = bf16::from_f32(x[j].to_f32() * scale[sk].to_f32() + y0[i].to_f32()).to_f32();
            }
        }
    }
    check_tol("bf16_vectors", &got, &want, |_| None)
}

/// Split-KV flash decoding (`kernels::decode`): one query token per
/// sequence, bf16, 2 query heads per KV head, ragged lengths (37 and 200
/// of 200 cached keys), 2 splits (so one CTA of the short sequence has no
/// keys), checked against an f64 CPU softmax(q kᵀ scale) v per head within
/// bf16 rounding (the kernel's `ex2.approx`, its f32 sums and the bf16
/// output: 1.5e-2 absolute, outputs of magnitude below 1).
pub fn split_kv_decode(dev: &Device) -> Result<Outcome> {
    use kernel_host::{MapArg, TileMap};
    use kernels::decode::{self as kd, KvBlock, DEC_D};
    let (batch, kv_heads, group, max_len, splits) = (2usize, 2usize, 2usize, 200usize, 2usize);
    let heads = kv_heads * group;
    let lens = [37u32, 200];
    let bf = |v: Vec<f32>| -> Vec<bf16> { v.into_iter().map(bf16::from_f32).collect() };
    let q = bf(inputs(batch * heads * DEC_D, 71));
    let k = bf(inputs(batch * max_len * kv_heads * DEC_D, 72));
    let v = bf(inputs(batch * max_len * kv_heads * DEC_D, 73));
    let scale = 1.0 / (DEC_D as f32).sqrt();
    let (dq, dk, dv, dl) = (dev.upload(&q)?, dev.upload(&k)?, dev.upload(&v)?, dev.upload(&lens)?);
    let mut o_part = dev.upload(&vec![0f32; batch * heads * splits * DEC_D])?;
    let mut lse = dev.upload(&vec![0f32; batch * heads * splits])?;
    let mut out = dev.upload(&vec![bf16::from_f32(f32::NAN); batch * heads * DEC_D])?;
    let (rows, cols) = (batch * max_len, kv_heads * DEC_D);
    let km = TileMap::<KvBlock>::new_2d(&dk, rows, cols)?.param();
    let vm = TileMap::<KvBlock>::new_2d(&dv, rows, cols)?.param();
    let prog = dev.load(&kernels::DEVICE_CODE)?;
    prog.kernel::<kd::decode_split>()?.launch_sync(
        (splits as u32, kv_heads as u32, batch as u32),
        (&dq, MapArg::read(km, &dk), MapArg::read(vm, &dv), &dl, &mut o_part, &mut lse, max_len as u32, heads as u32, scale),
    )?;
    prog.kernel::<kd::decode_combine>()?.launch_sync((heads as u32, batch as u32), (&o_part, &lse, &mut out, splits as u32))?;
    let got: Vec<f32> = dev.download(&out)?.iter().map(|x| x.to_f32()).collect();
    let mut want = vec![0f32; got.len()];
    let f = |x: &[bf16], i: usize| x[i].to_f32() as f64;
    for b in 0..batch {
        for h in 0..heads {
            let kvh = h / group;
            let n = lens[b] as usize;
            let at = |t: usize, d: usize| (b * max_len + t) * kv_heads * DEC_D + kvh * DEC_D + d;
            let s: Vec<f64> = (0..n).map(|t| (0..DEC_D).map(|d| f(&q, (b * heads + h) * DEC_D + d) * f(&k, at(t, d))).sum::<f64>() * scale as f64).collect();
            let mx = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let p: Vec<f64> = s.iter().map(|x| (x - mx).exp()).collect();
            let sum: f64 = p.iter().sum();
            for d in 0..DEC_D {
                want[(b * heads + h) * DEC_D + d] = ((0..n).map(|t| p[t] * f(&v, at(t, d))).sum::<f64>() / sum) as f32;
            }
        }
    }
    check_tol("split_kv_decode", &got, &want, |_| Some(1.5e-2))
}

/// The warp-level MMA on one warp (see the kernel's docs): bf16 and f16
/// `a · b + c` against an f64 reference of the rounded inputs. Products of
/// 16-bit values are exact in f32; the tensor core's f32 sums differ from
/// exact in the low bits, so the bound is 2^-20 of `|c| + Σ |a b|` (about
/// 16 ulps of it).
pub fn warp_mma(dev: &Device) -> Result<Outcome> {
    let (a, b, c) = (inputs(256, 81), inputs(128, 82), inputs(128, 83));
    let (a_bf, b_bf): (Vec<bf16>, Vec<bf16>) = (a.iter().map(|&x| bf16::from_f32(x)).collect(), b.iter().map(|&x| bf16::from_f32(x)).collect());
    let (a_h, b_h): (Vec<f16>, Vec<f16>) = (a.iter().map(|&x| f16::from_f32(x)).collect(), b.iter().map(|&x| f16::from_f32(x)).collect());
    let mut dout = crate::poisoned(dev, simt::MMA_OUTS)?;
    let (da, db, dah, dbh, dc) = (dev.upload(&a_bf)?, dev.upload(&b_bf)?, dev.upload(&a_h)?, dev.upload(&b_h)?, dev.upload(&c)?);
    dev.load(&kernels::DEVICE_CODE)?.kernel::<simt::warp_mma>()?.launch_sync(1u32, (&da, &db, &dah, &dbh, &dc, &mut dout))?;
    let got = dev.download(&dout)?;
    let mut want = vec![0f32; simt::MMA_OUTS];
    let mut bound = vec![0f64; simt::MMA_OUTS];
    let (ab, bb): (Vec<f64>, Vec<f64>) = (a_bf.iter().map(|x| x.to_f32() as f64).collect(), b_bf.iter().map(|x| x.to_f32() as f64).collect());
    let (ah, bh): (Vec<f64>, Vec<f64>) = (a_h.iter().map(|x| x.to_f32() as f64).collect(), b_h.iter().map(|x| x.to_f32() as f64).collect());
    for (base, (a, b)) in [(0usize, (&ab, &bb)), (128, (&ah, &bh))] {
        for r in 0..16 {
            for n in 0..8 {
                let (mut s, mut m) = (c[8 * r + n] as f64, (c[8 * r + n] as f64).abs());
                for k in 0..16 {
                    s += a[16 * r + k] * b[8 * k + n];
                    m += (a[16 * r + k] * b[8 * k + n]).abs();
                }
                want[base + 8 * r + n] = s as f32;
                bound[base + 8 * r + n] = m * 2f64.powi(-20);
            }
        }
    }
    check_tol("warp_mma", &got, &want, |i| Some(bound[i]))
}

/// Every SIMT example, by name.
pub type SimtExample = (&'static str, fn(&Device) -> Result<Outcome>);

/// The SIMT examples.
pub const SIMT_EXAMPLES: [SimtExample; 11] = [
    ("warp_collectives", warp_collectives),
    ("warpgroup_indices", warpgroup_indices),
    ("block_reductions", block_reductions),
    ("math_ops", math_ops),
    ("gmem_ops", gmem_ops),
    ("reduce_adds", reduce_adds),
    ("softmax_rows", softmax_rows),
    ("smem_matrices", smem_matrices),
    ("bf16_vectors", bf16_vectors),
    ("split_kv_decode", split_kv_decode),
    ("warp_mma", warp_mma),
];
