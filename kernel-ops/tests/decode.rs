//! Decode attention (`kernel_ops::attention::decode`,
//! `kernel_ops_kernels::decode`) on the CPU emulator, race checks on,
//! against the f64 reference (`decode::reference`): ragged lengths (empty,
//! one key, not a multiple of the block or the page, the ring wrapping),
//! GQA groups 1, 4, 8 and 16, 1 and 3 query tokens, contiguous and paged
//! caches with a shuffled block table, FP8 with per-tensor and per-head
//! scales, f16 and bf16, NaN in the cache past every length; the bad
//! inputs refused on the host and the bad device values clamped and
//! flagged. `#[ignore]`d GPU tests run the benchmark's shapes (`cargo test
//! -p kernel-ops --test decode -- --ignored` on a GPU).
use kernel_device::{bf16, f16, E4M3};
use kernel_host::emulate::Emulator;
use kernel_host::{Buffer, Device};
use kernel_ops::attention::decode::{reference, reference_row, CacheElem, CacheLayout, Decode, DecodeErrors, DecodeKernel, DecodeOptions, DecodeShape, DecodeType, KvCache};

/// The element types in the tests, from and to f32.
trait Elem: DecodeType + CacheElem<Self> + kernel_host::DeviceRepr + Default {
    fn from(x: f32) -> Self;
    fn to(self) -> f32;
}
impl Elem for f16 {
    fn from(x: f32) -> Self {
        f16::from_f32(x)
    }
    fn to(self) -> f32 {
        self.to_f32()
    }
}
impl Elem for bf16 {
    fn from(x: f32) -> Self {
        bf16::from_f32(x)
    }
    fn to(self) -> f32 {
        self.to_f32()
    }
}

/// How the cache is stored in a test problem.
#[derive(Clone, Copy, Debug)]
enum Store {
    /// The query type.
    Same,
    /// FP8 with one scale per tensor (`false`) or per KV head (`true`).
    Fp8 { per_head: bool },
}

#[derive(Clone, Debug)]
struct Problem {
    shape: DecodeShape,
    layout: CacheLayout,
    lens: Vec<u32>,
    store: Store,
    splits: Option<usize>,
    /// Q's magnitude: N(0, 1) times this.
    q_scale: f32,
}

fn randn(n: usize, seed: u64) -> Vec<f32> {
    kernel_host::randn_f32(n, seed)
}

/// A shuffled block table: each sequence's pages drawn without
/// replacement from `0..num_pages` (deterministic), entries past what a
/// sequence needs set to -1 (never read).
fn block_table(lens: &[u32], num_pages: usize, page_size: usize, max_pages: usize, seed: u64) -> Vec<i32> {
    let mut pages: Vec<i32> = (0..num_pages as i32).collect();
    let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    for i in (1..pages.len()).rev() {
        s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        pages.swap(i, (s >> 33) as usize % (i + 1));
    }
    let mut next = 0;
    let mut table = vec![-1i32; lens.len() * max_pages];
    for (b, &len) in lens.iter().enumerate() {
        for p in 0..(len as usize).div_ceil(page_size).min(max_pages) {
            table[b * max_pages + p] = pages[next % num_pages];
            next += 1;
        }
    }
    table
}

/// The cache's keys that no sequence reads (past every length, and pages
/// no table entry names) set to NaN: the kernel must not let them reach O.
fn poison(cache: &mut [f32], p: &Problem, table: Option<&[i32]>) {
    let row = p.shape.kv_heads * p.shape.head_dim;
    match p.layout {
        CacheLayout::Contiguous { max_len } => {
            for (b, &len) in p.lens.iter().enumerate() {
                for j in (len as usize).min(max_len)..max_len {
                    cache[(b * max_len + j) * row..][..row].fill(f32::NAN);
                }
            }
        }
        CacheLayout::Paged { page_size, max_pages, num_pages } => {
            let table = table.unwrap();
            let mut used = vec![false; num_pages * page_size];
            for (b, &len) in p.lens.iter().enumerate() {
                for j in 0..len as usize {
                    let e = table[b * max_pages + j / page_size];
                    if e >= 0 && (e as usize) < num_pages {
                        used[e as usize * page_size + j % page_size] = true;
                    }
                }
            }
            for (r, u) in used.iter().enumerate() {
                if !*u && r >= page_size {
                    // Page 0 stays finite: the kernel reads it for bad entries.
                    cache[r * row..][..row].fill(f32::NAN);
                }
            }
        }
    }
}

/// Runs `p` on `dev` with `kernel` (a 16-bit cache's) and returns (O's
/// relative Frobenius error, the largest lse error, the plan's flags).
fn run<T: Elem>(dev: &Device, p: &Problem, seed: u64, kernel: DecodeKernel) -> (f64, f64, DecodeErrors) {
    let ops = dev.load(&kernel_ops_kernels::DEVICE_CODE).unwrap();
    let (shape, layout) = (p.shape, p.layout);
    let n = layout.cache_len(&shape);
    let q: Vec<T> = randn(shape.q_len(), seed).into_iter().map(|x| T::from(x * p.q_scale)).collect();
    let qf: Vec<f32> = q.iter().map(|x| x.to()).collect();
    let table = match layout {
        CacheLayout::Paged { num_pages, page_size, max_pages } => Some(block_table(&p.lens, num_pages, page_size, max_pages, seed)),
        _ => None,
    };
    let (mut kf, mut vf) = (randn(n, seed + 1), randn(n, seed + 2));
    let lens = dev.upload(&p.lens).unwrap();
    let table_buf = table.as_ref().map(|t| dev.upload(t).unwrap());
    let mut out = dev.upload(&vec![T::from(f32::NAN); shape.q_len()]).unwrap();
    let mut lse = dev.upload(&vec![f32::NAN; shape.lse_len()]).unwrap();
    let opts = DecodeOptions { scale: None, splits: p.splits, kernel };
    let (mut want, errors) = match p.store {
        Store::Same => {
            let round = |x: &mut Vec<f32>| x.iter_mut().for_each(|v| *v = T::from(*v).to());
            round(&mut kf);
            round(&mut vf);
            poison(&mut kf, p, table.as_deref());
            poison(&mut vf, p, table.as_deref());
            let (k, v): (Vec<T>, Vec<T>) = (kf.iter().map(|&x| T::from(x)).collect(), vf.iter().map(|&x| T::from(x)).collect());
            let (k, v) = (dev.upload(&k).unwrap(), dev.upload(&v).unwrap());
            let cache = cache_of(&k, &v, table_buf.as_ref(), None);
            let errors = go::<T, T>(dev, &ops, p, opts, &q, &cache, &lens, &mut out, &mut lse);
            (reference(&qf, &kf, &vf, &p.lens, table.as_deref(), None, shape, layout, None), errors)
        }
        Store::Fp8 { per_head } => {
            // Scales that put K and V near e4m3's range, per head or not.
            let heads = if per_head { shape.kv_heads } else { 1 };
            let scales: Vec<f32> = (0..2 * heads).map(|i| 0.02 + 0.003 * i as f32).collect();
            let quant = |x: &mut Vec<f32>, first: usize| -> Vec<E4M3> {
                x.iter_mut()
                    .enumerate()
                    .map(|(i, v)| {
                        let kvh = (i / shape.head_dim) % shape.kv_heads;
                        let e = E4M3::from_f32(*v / scales[first + kvh % heads]);
                        *v = e.to_f32();
                        e
                    })
                    .collect()
            };
            let (kq, vq) = (quant(&mut kf, 0), quant(&mut vf, heads));
            poison(&mut kf, p, table.as_deref());
            poison(&mut vf, p, table.as_deref());
            let nan = |x: &mut Vec<E4M3>, f: &[f32]| x.iter_mut().zip(f).for_each(|(e, v)| if v.is_nan() { *e = E4M3::NAN });
            let (mut kq, mut vq) = (kq, vq);
            nan(&mut kq, &kf);
            nan(&mut vq, &vf);
            let (k, v, s) = (dev.upload(&kq).unwrap(), dev.upload(&vq).unwrap(), dev.upload(&scales).unwrap());
            let cache = cache_of(&k, &v, table_buf.as_ref(), Some(&s));
            let errors = go::<T, E4M3>(dev, &ops, p, opts, &q, &cache, &lens, &mut out, &mut lse);
            (reference(&qf, &kf, &vf, &p.lens, table.as_deref(), Some(&scales), shape, layout, None), errors)
        }
    };
    let got: Vec<f32> = dev.download(&out).unwrap().iter().map(|x| x.to()).collect();
    assert!(got.iter().all(|x| x.is_finite()), "{p:?}: an output element is NaN or was not written");
    let got_lse = dev.download(&lse).unwrap();
    let mut lse_err = 0f64;
    for (a, b) in got_lse.iter().zip(&want.1) {
        if b.is_infinite() || a.is_infinite() {
            assert!(a == b, "{p:?}: lse {a} where the reference has {b}");
        } else {
            lse_err = lse_err.max(f64::from((a - b).abs()));
        }
    }
    let num: f64 = got.iter().zip(&want.0).map(|(a, b)| f64::from(a - b).powi(2)).sum();
    let den: f64 = want.0.iter().map(|b| f64::from(*b).powi(2)).sum();
    want.0.clear();
    ((num / den.max(1e-30)).sqrt(), lse_err, errors)
}

fn cache_of<'a, C>(k: &'a Buffer<C>, v: &'a Buffer<C>, table: Option<&'a Buffer<i32>>, scales: Option<&'a Buffer<f32>>) -> KvCache<'a, C> {
    KvCache { k, v, block_table: table, scales }
}

#[allow(clippy::too_many_arguments)]
fn go<T: Elem, C: CacheElem<T>>(dev: &Device, ops: &kernel_host::Program, p: &Problem, opts: DecodeOptions, q: &[T], cache: &KvCache<'_, C>, lens: &Buffer<u32>, out: &mut Buffer<T>, lse: &mut Buffer<f32>) -> DecodeErrors {
    let q = dev.upload(q).unwrap();
    let mut plan = Decode::new::<T, C>(dev, ops, p.shape, p.layout, opts).unwrap_or_else(|e| panic!("{p:?}: {e}"));
    if let Some(s) = p.splits {
        assert_eq!(plan.splits(), s, "{p:?}");
    }
    plan.run(dev, ops, &q, cache, lens, out, lse).unwrap_or_else(|e| panic!("{p:?}: {e}"));
    // Again on poisoned outputs: the plan's arrival counters were left at
    // zero, so the second launch combines too.
    dev.write(out, &vec![T::from(f32::NAN); out.len()]).unwrap();
    dev.write(lse, &vec![f32::NAN; lse.len()]).unwrap();
    plan.run(dev, ops, &q, cache, lens, out, lse).unwrap_or_else(|e| panic!("{p:?}: {e}"));
    plan.errors(dev).unwrap()
}

fn emulator(seed: u64) -> Device {
    Device::emulator_with(Emulator::new(seed))
}

/// P is rounded to the element type before `P V`, O once more at the end.
fn bound<T: Elem>() -> f64 {
    if std::any::type_name::<T>().contains("bf16") {
        1.2e-2
    } else {
        3e-3
    }
}

/// Checks `p` against the reference: a 16-bit cache on every kernel (the
/// wgmma one and the warp-MMA ones, whatever `Auto` would pick; the 8-warp
/// one at head dim 128), an FP8 cache on its own.
fn check<T: Elem>(p: Problem, seed: u64) {
    let kernels: &[DecodeKernel] = match p.store {
        Store::Same if p.shape.head_dim == 128 => &[DecodeKernel::Wgmma, DecodeKernel::WarpMma, DecodeKernel::WarpMma8],
        Store::Same => &[DecodeKernel::Wgmma, DecodeKernel::WarpMma],
        Store::Fp8 { .. } => &[DecodeKernel::Auto],
    };
    for &kernel in kernels {
        let (o, l, errors) = run::<T>(&emulator(seed), &p, seed, kernel);
        assert!(o < bound::<T>() && l < 5e-3, "{p:?}, {kernel:?}: O error {o:.2e}, lse error {l:.2e}");
        assert_eq!(errors, DecodeErrors::default(), "{p:?}, {kernel:?}: flags on good input");
    }
}

fn shape(batch: usize, heads: usize, kv_heads: usize, head_dim: usize, tokens: usize) -> DecodeShape {
    DecodeShape { batch, heads, kv_heads, head_dim, tokens }
}

#[test]
fn contiguous_ragged_lengths_two_splits_bf16() {
    // G = 1: an empty sequence, a one-key one, a full one (200 = 3 blocks
    // + 8), a 77-key one; 2 splits of 128 keys (the second split of the
    // short sequences has no key: lse -inf, weight 0 in the combine).
    let p = Problem { shape: shape(4, 2, 2, 64, 1), layout: CacheLayout::Contiguous { max_len: 200 }, lens: vec![0, 1, 200, 77], store: Store::Same, splits: Some(2), q_scale: 1.0 };
    check::<bf16>(p, 1);
    // 10 splits of one block: the combine takes its splits 8 at a time.
    let p = Problem { shape: shape(1, 2, 1, 64, 1), layout: CacheLayout::Contiguous { max_len: 640 }, lens: vec![601], store: Store::Same, splits: Some(10), q_scale: 1.0 };
    check::<bf16>(p, 11);
}

#[test]
fn the_ring_wraps_with_gqa_4_and_3_tokens_f16() {
    // D 128 has 3 slots: one split of 448 keys is 7 steps (the ring wraps
    // twice); 3 causal tokens x 4 query heads = 12 rows; a 130-key
    // sequence ends 2 keys into its third block; a 2-key one leaves its
    // first token without keys.
    let p = Problem { shape: shape(3, 4, 1, 128, 3), layout: CacheLayout::Contiguous { max_len: 448 }, lens: vec![448, 130, 2], store: Store::Same, splits: Some(1), q_scale: 1.0 };
    check::<f16>(p, 2);
}

#[test]
fn paged_16_shuffled_table_gqa_8_bf16() {
    // Pages of 16 keys (4 boxes per block of 64), shuffled; 2 splits; a
    // 37-key sequence ends inside its third page.
    let p = Problem { shape: shape(2, 8, 1, 64, 1), layout: CacheLayout::Paged { num_pages: 20, page_size: 16, max_pages: 8 }, lens: vec![37, 128], store: Store::Same, splits: Some(2), q_scale: 1.0 };
    check::<bf16>(p, 3);
}

#[test]
fn paged_64_and_32_tokens_3_f16() {
    let p = Problem { shape: shape(2, 4, 2, 64, 3), layout: CacheLayout::Paged { num_pages: 6, page_size: 64, max_pages: 3 }, lens: vec![150, 65], store: Store::Same, splits: Some(1), q_scale: 1.0 };
    check::<f16>(p, 4);
    let p = Problem { shape: shape(1, 2, 2, 128, 1), layout: CacheLayout::Paged { num_pages: 9, page_size: 32, max_pages: 6 }, lens: vec![161], store: Store::Same, splits: Some(2), q_scale: 1.0 };
    check::<f16>(p, 5);
}

#[test]
fn fp8_cache_with_scales() {
    // Per-KV-head scales, pages of 32, bf16 out; then one scale per tensor,
    // contiguous, D 128, f16 out, splits picked by the plan.
    let p = Problem { shape: shape(2, 8, 2, 64, 1), layout: CacheLayout::Paged { num_pages: 8, page_size: 32, max_pages: 4 }, lens: vec![100, 33], store: Store::Fp8 { per_head: true }, splits: Some(2), q_scale: 1.0 };
    check::<bf16>(p, 6);
    let p = Problem { shape: shape(1, 4, 1, 128, 1), layout: CacheLayout::Contiguous { max_len: 150 }, lens: vec![150], store: Store::Fp8 { per_head: false }, splits: None, q_scale: 1.0 };
    check::<f16>(p, 7);
}

#[test]
fn more_rows_than_one_wgmma_take_two_row_groups() {
    // G 16 x T 5 = 80 rows: two CTAs per KV head, rows 64.. in the
    // second; 2 splits, so each row group's last CTA combines its rows.
    let p = Problem { shape: shape(1, 16, 1, 64, 5), layout: CacheLayout::Contiguous { max_len: 70 }, lens: vec![70], store: Store::Same, splits: Some(2), q_scale: 1.0 };
    check::<bf16>(p, 8);
}

#[test]
fn fp8_rows_in_groups_of_16() {
    // The FP8 kernel takes 16 query rows per CTA: G 8 x T 3 = 24 rows,
    // two row groups (the second half padding), D 128, 2 splits, a length
    // that ends inside a warp's 16 keys.
    let p = Problem { shape: shape(1, 8, 1, 128, 3), layout: CacheLayout::Contiguous { max_len: 140 }, lens: vec![133], store: Store::Fp8 { per_head: false }, splits: Some(2), q_scale: 1.0 };
    check::<bf16>(p, 12);
}

#[test]
fn fp8_bf16_queries_beyond_f16_range() {
    // The FP8 kernel's MMAs are f16: each Q row is scaled by a power of
    // two into f16's range first. |q| up to ~1e6 (f16's largest is 65504).
    // The log-sum-exp is near the largest score (~1e6 here): its bound is
    // relative, a few f32 ulps of it.
    let p = Problem { shape: shape(1, 4, 1, 128, 1), layout: CacheLayout::Contiguous { max_len: 100 }, lens: vec![100], store: Store::Fp8 { per_head: false }, splits: Some(1), q_scale: 3e5 };
    let (o, l, errors) = run::<bf16>(&emulator(13), &p, 13, DecodeKernel::Auto);
    assert!(o < bound::<bf16>() && l < 1.0, "{p:?}: O error {o:.2e}, lse error {l:.2e}");
    assert_eq!(errors, DecodeErrors::default());
    let p = Problem { shape: shape(1, 4, 1, 64, 1), layout: CacheLayout::Contiguous { max_len: 100 }, lens: vec![77], store: Store::Fp8 { per_head: false }, splits: Some(2), q_scale: 1e-4 };
    check::<bf16>(p, 14);
}

#[test]
fn device_values_out_of_range_are_clamped_and_flagged() {
    // A length above max_len: clamped (the reference clamps too), flagged.
    let p = Problem { shape: shape(2, 2, 1, 64, 1), layout: CacheLayout::Contiguous { max_len: 70 }, lens: vec![1000, 5], store: Store::Same, splits: Some(2), q_scale: 1.0 };
    let dev = emulator(9);
    let (o, _, errors) = run::<bf16>(&dev, &p, 9, DecodeKernel::Auto);
    assert!(o < bound::<bf16>(), "O error {o:.2e}");
    assert_eq!(errors, DecodeErrors { length_over_max: Some(1000), bad_page: None });
    // A block-table entry out of range for a key below the length: page 0
    // is read instead (the reference does the same), flagged, and the
    // check names it.
    let dev = emulator(10);
    let ops = dev.load(&kernel_ops_kernels::DEVICE_CODE).unwrap();
    let shape = shape(1, 2, 1, 64, 1);
    let layout = CacheLayout::Paged { num_pages: 4, page_size: 16, max_pages: 4 };
    let n = layout.cache_len(&shape);
    let kf: Vec<f32> = randn(n, 1).iter().map(|&x| bf16::from_f32(x).to_f32()).collect();
    let vf: Vec<f32> = randn(n, 2).iter().map(|&x| bf16::from_f32(x).to_f32()).collect();
    let qf: Vec<f32> = randn(shape.q_len(), 3).iter().map(|&x| bf16::from_f32(x).to_f32()).collect();
    let up = |x: &[f32]| dev.upload(&x.iter().map(|&v| bf16::from_f32(v)).collect::<Vec<_>>()).unwrap();
    let (q, k, v) = (up(&qf), up(&kf), up(&vf));
    let table = [2, 77, 1, -5];
    let (t, lens) = (dev.upload(&table).unwrap(), dev.upload(&[50u32]).unwrap());
    let mut out = dev.zeros::<bf16>(shape.q_len()).unwrap();
    let mut lse = dev.zeros::<f32>(shape.lse_len()).unwrap();
    let mut plan = Decode::new::<bf16, bf16>(&dev, &ops, shape, layout, DecodeOptions::default()).unwrap();
    plan.run(&dev, &ops, &q, &KvCache::paged(&k, &v, &t), &lens, &mut out, &mut lse).unwrap();
    let e = plan.errors(&dev).unwrap();
    assert!(e.bad_page == Some(77) || e.bad_page == Some(-5), "{e:?}");
    let msg = plan.check(&dev).unwrap_err().to_string();
    assert!(msg.contains("block_table") && msg.contains("outside 0..4"), "{msg}");
    let (want, _) = reference(&qf, &kf, &vf, &[50], Some(&table), None, shape, layout, None);
    let got: Vec<f32> = dev.download(&out).unwrap().iter().map(|x| x.to_f32()).collect();
    let err = got.iter().zip(&want).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
    assert!(err < 3e-2, "clamped pages: largest error {err}");
    plan.clear_errors(&dev).unwrap();
    assert!(plan.check(&dev).is_ok());
}

#[test]
fn bad_host_inputs_are_refused_with_their_rule() {
    let dev = Device::emulator();
    let ops = dev.load(&kernel_ops_kernels::DEVICE_CODE).unwrap();
    let good = shape(2, 8, 2, 64, 1);
    let contiguous = CacheLayout::Contiguous { max_len: 100 };
    let new = |s: DecodeShape, l: CacheLayout, o: DecodeOptions| Decode::new::<bf16, bf16>(&dev, &ops, s, l, o).map(|_| ()).unwrap_err().to_string();
    let cases = [
        (new(shape(2, 8, 2, 96, 1), contiguous, DecodeOptions::default()), "head_dim = 96"),
        (new(shape(2, 8, 3, 64, 1), contiguous, DecodeOptions::default()), "kv_heads must divide heads"),
        (new(shape(2, 32, 1, 64, 1), contiguous, DecodeOptions::default()), "at most 16 query heads per KV head"),
        (new(shape(2, 8, 2, 64, 9), contiguous, DecodeOptions::default()), "at most 8 query tokens"),
        (new(shape(0, 8, 2, 64, 1), contiguous, DecodeOptions::default()), "batch = 0"),
        (new(good, CacheLayout::Paged { num_pages: 4, page_size: 48, max_pages: 2 }, DecodeOptions::default()), "page_size = 48"),
        (new(good, contiguous, DecodeOptions { splits: Some(3), ..DecodeOptions::default() }), "splits = 3"),
        (new(good, contiguous, DecodeOptions { scale: Some(f32::NAN), ..DecodeOptions::default() }), "finite and positive"),
    ];
    for (msg, want) in cases {
        assert!(msg.contains(want), "{msg:?} does not say {want:?}");
    }
    // Buffers that do not match the plan.
    let mut plan = Decode::new::<bf16, bf16>(&dev, &ops, good, contiguous, DecodeOptions::default()).unwrap();
    let q = dev.zeros::<bf16>(good.q_len()).unwrap();
    let kv = dev.zeros::<bf16>(contiguous.cache_len(&good)).unwrap();
    let short = dev.zeros::<bf16>(10).unwrap();
    let lens = dev.zeros::<u32>(2).unwrap();
    let table = dev.zeros::<i32>(2).unwrap();
    let scales = dev.zeros::<f32>(2).unwrap();
    let mut out = dev.zeros::<bf16>(good.q_len()).unwrap();
    let mut lse = dev.zeros::<f32>(good.lse_len()).unwrap();
    let mut msg = |cache: KvCache<'_, bf16>, lens: &Buffer<u32>| plan.run(&dev, &ops, &q, &cache, lens, &mut out, &mut lse).unwrap_err().to_string();
    let m = msg(KvCache::contiguous(&short, &kv), &lens);
    assert!(m.contains("`k` holds 10 elements"), "{m}");
    let m = msg(KvCache::contiguous(&kv, &kv), &dev.zeros::<u32>(3).unwrap());
    assert!(m.contains("`lens` holds 3"), "{m}");
    let m = msg(KvCache::paged(&kv, &kv, &table), &lens);
    assert!(m.contains("block table was passed for a contiguous cache"), "{m}");
    let m = msg(KvCache::contiguous(&kv, &kv).with_scales(&scales), &lens);
    assert!(m.contains("only an FP8"), "{m}");
    // An FP8 plan needs the scales.
    let mut plan8 = Decode::new::<bf16, E4M3>(&dev, &ops, good, contiguous, DecodeOptions::default()).unwrap();
    let k8 = dev.upload(&vec![E4M3::from_f32(0.0); contiguous.cache_len(&good)]).unwrap();
    let m = plan8.run(&dev, &ops, &q, &KvCache::contiguous(&k8, &k8), &lens, &mut out, &mut lse).unwrap_err().to_string();
    assert!(m.contains("needs its scales"), "{m}");
}

#[test]
fn the_split_count_keeps_one_round_and_never_exceeds_the_blocks() {
    use kernel_ops::attention::decode::splits_for;
    // The benchmark's shapes on 132 SMs (groups = batch x kv_heads), one
    // CTA per SM (a 16-bit cache).
    assert_eq!(splits_for(8, 32768, 132, 1), 16);
    assert_eq!(splits_for(64, 8192, 132, 1), 2);
    assert_eq!(splits_for(32, 8192, 132, 1), 4);
    assert_eq!(splits_for(512, 2048, 132, 1), 1);
    assert_eq!(splits_for(1024, 1024, 132, 1), 1);
    // Two CTAs per SM (FP8).
    assert_eq!(splits_for(64, 8192, 132, 2), 4);
    // Never more splits than blocks of 64 keys; equal blocks per split.
    assert_eq!(splits_for(1, 100, 132, 1), 2);
    assert_eq!(splits_for(1, 1, 132, 2), 1);
    assert_eq!(splits_for(1, 64 * 40, 132, 1), 40);
    assert_eq!(splits_for(2, 64 * 100, 132, 1), 50);
}

#[test]
fn auto_takes_warp_mmas_where_they_measured_faster() {
    // `DecodeKernel::Auto` on a 16-bit cache: warp MMAs when a KV head's
    // rows fit 16 and the head dimension is 128, on 4 warps when the
    // cache is paged in pages of 16 or 32 keys or the plan has one split,
    // else on 8 (the emulated
    // device has 8 SMs: 8 groups of 256 keys make one split, one group of
    // 1024 keys 8). An FP8 cache always runs on warp MMAs.
    let dev = Device::emulator();
    let ops = dev.load(&kernel_ops_kernels::DEVICE_CODE).unwrap();
    use DecodeKernel::{WarpMma, WarpMma8, Wgmma};
    let plan = |s: DecodeShape, layout: CacheLayout, fp8: bool| {
        let opts = DecodeOptions::default();
        let p = if fp8 { Decode::new::<bf16, E4M3>(&dev, &ops, s, layout, opts) } else { Decode::new::<bf16, bf16>(&dev, &ops, s, layout, opts) };
        let p = p.unwrap();
        assert_eq!(p.warp_mma(), p.kernel() != Wgmma);
        (p.kernel(), p.splits())
    };
    let contiguous = |max_len| CacheLayout::Contiguous { max_len };
    let paged16 = CacheLayout::Paged { num_pages: 64, page_size: 16, max_pages: 64 };
    assert_eq!(plan(shape(8, 4, 1, 128, 1), contiguous(256), false), (WarpMma, 1));
    assert_eq!(plan(shape(8, 4, 1, 64, 1), contiguous(256), false), (Wgmma, 1));
    assert_eq!(plan(shape(1, 4, 1, 128, 1), contiguous(1024), false), (WarpMma8, 8));
    assert_eq!(plan(shape(1, 4, 1, 64, 1), contiguous(1024), false), (Wgmma, 8));
    assert_eq!(plan(shape(1, 4, 1, 128, 1), paged16, false).0, WarpMma);
    assert_eq!(plan(shape(1, 8, 1, 128, 3), paged16, false).0, Wgmma, "24 rows per KV head");
    assert_eq!(plan(shape(1, 4, 1, 128, 1), contiguous(1024), true).0, WarpMma, "FP8");
}

#[test]
fn the_split_kernels_fit_two_ctas_per_sm() {
    // The split count and the ring depth assume 2 CTAs per SM (ptxas's
    // registers and the shared memory, by CUDA's occupancy rules).
    use kernel_ops_kernels::decode::{decode_split, decode_split_fp8, decode_split_warp};
    let dev = Device::emulator();
    let ops = dev.load(&kernel_ops_kernels::DEVICE_CODE).unwrap();
    let occ = [
        ops.kernel::<decode_split<bf16, 128, 64, 3>>().unwrap().occupancy().unwrap(),
        ops.kernel::<decode_split<f16, 64, 16, 6>>().unwrap().occupancy().unwrap(),
        ops.kernel::<decode_split_fp8<bf16, 128, 64, 4>>().unwrap().occupancy().unwrap(),
        ops.kernel::<decode_split_warp<bf16, 128, 64, 2>>().unwrap().occupancy().unwrap(),
        ops.kernel::<decode_split_warp<f16, 64, 16, 4>>().unwrap().occupancy().unwrap(),
    ];
    for o in occ {
        assert_eq!(o.blocks_per_sm, 2, "{o}");
    }
    // The 8-warp kernel: one CTA of 288 threads per SM (two slots of 128
    // keys and its merge in shared memory).
    use kernel_ops_kernels::decode::decode_split_warp8;
    for o in [ops.kernel::<decode_split_warp8<bf16, 128, 64, 2>>().unwrap().occupancy().unwrap(), ops.kernel::<decode_split_warp8<f16, 128, 16, 2>>().unwrap().occupancy().unwrap()] {
        assert_eq!(o.blocks_per_sm, 1, "{o}");
    }
}

#[test]
fn the_8_warp_kernel_is_refused_where_it_is_not_built() {
    let dev = Device::emulator();
    let ops = dev.load(&kernel_ops_kernels::DEVICE_CODE).unwrap();
    let opts = DecodeOptions { kernel: DecodeKernel::WarpMma8, ..DecodeOptions::default() };
    let layout = CacheLayout::Contiguous { max_len: 256 };
    let e = Decode::new::<bf16, bf16>(&dev, &ops, shape(2, 4, 1, 64, 1), layout, opts).unwrap_err().to_string();
    assert!(e.contains("head_dim 128") && e.contains("head_dim 64"), "{e}");
    let e = Decode::new::<bf16, E4M3>(&dev, &ops, shape(2, 4, 1, 128, 1), layout, opts).unwrap_err().to_string();
    assert!(e.contains("FP8"), "{e}");
    // Its splits are whole 128-key steps.
    let plan = Decode::new::<bf16, bf16>(&dev, &ops, shape(1, 4, 1, 128, 1), CacheLayout::Contiguous { max_len: 1000 }, opts).unwrap();
    assert_eq!(plan.chunk() % 128, 0, "{plan:?}");
}

/// The GPU tests: the benchmark's shapes (bf16, D 128, 32 query heads),
/// rows spread over the problem checked against the reference.
fn gpu_case(batch: usize, kv_heads: usize, len: usize, tokens: usize, page: Option<usize>, fp8: bool) {
    let Ok(dev) = Device::gpu_or_emulator() else { return };
    if !dev.is_gpu() {
        eprintln!("no GPU: skipped");
        return;
    }
    let ops = dev.load(&kernel_ops_kernels::DEVICE_CODE).unwrap();
    let shape = shape(batch, 32, kv_heads, 128, tokens);
    let layout = match page {
        None => CacheLayout::Contiguous { max_len: len },
        Some(ps) => CacheLayout::Paged { num_pages: batch * len / ps, page_size: ps, max_pages: len / ps },
    };
    // Ragged lengths: from len / 2 to len.
    let lens: Vec<u32> = (0..batch).map(|b| (len - (b * 7919) % (len / 2)) as u32).collect();
    let table = page.map(|ps| block_table(&vec![len as u32; batch], batch * len / ps, ps, len / ps, 5));
    let n = layout.cache_len(&shape);
    let qf: Vec<f32> = randn(shape.q_len(), 1).iter().map(|&x| bf16::from_f32(x).to_f32()).collect();
    let q = dev.upload(&qf.iter().map(|&x| bf16::from_f32(x)).collect::<Vec<_>>()).unwrap();
    let (mut kf, mut vf) = (randn(n, 2), randn(n, 3));
    let lens_buf = dev.upload(&lens).unwrap();
    let table_buf = table.as_ref().map(|t| dev.upload(t).unwrap());
    let mut out = dev.zeros::<bf16>(shape.q_len()).unwrap();
    let mut lse = dev.zeros::<f32>(shape.lse_len()).unwrap();
    let scales = [0.02f32, 0.025];
    let sc = fp8.then_some(&scales[..]);
    // The cache as stored (FP8 with its scales, or bf16), and kf, vf its
    // values for the reference.
    let (k8, v8): (Vec<E4M3>, Vec<E4M3>) = if fp8 {
        let k8 = kf.iter_mut().map(|x| { let e = E4M3::from_f32(*x / scales[0]); *x = e.to_f32(); e }).collect();
        let v8 = vf.iter_mut().map(|x| { let e = E4M3::from_f32(*x / scales[1]); *x = e.to_f32(); e }).collect();
        (k8, v8)
    } else {
        kf.iter_mut().chain(vf.iter_mut()).for_each(|x| *x = bf16::from_f32(*x).to_f32());
        (Vec::new(), Vec::new())
    };
    // The plan's flags and rows spread over the problem, against the
    // reference.
    let verify = |out: &Buffer<bf16>, lse: &Buffer<f32>, plan_errors: DecodeErrors, kernel: DecodeKernel| {
        assert_eq!(plan_errors, DecodeErrors::default(), "{kernel:?}");
        let got = dev.download(out).unwrap();
        let got_lse = dev.download(lse).unwrap();
        for i in 0..16 {
            let (b, h, t) = ((i * 37) % batch, (i * 11) % 32, i % tokens);
            let (want, want_lse) = reference_row(&qf, &kf, &vf, &lens, table.as_deref(), sc, shape, layout, None, (b, h, t));
            let at = ((b * tokens + t) * 32 + h) * 128;
            let err = want.iter().zip(&got[at..at + 128]).map(|(a, b)| (a - b.to_f32()).abs()).fold(0f32, f32::max);
            let lerr = (want_lse - got_lse[(b * 32 + h) * tokens + t]).abs();
            assert!(err < 2e-2 && lerr < 1e-2, "{kernel:?}, row ({b}, {h}, {t}): O error {err}, lse error {lerr}");
        }
    };
    if fp8 {
        let (k, v, s) = (dev.upload(&k8).unwrap(), dev.upload(&v8).unwrap(), dev.upload(&scales).unwrap());
        let cache = cache_of(&k, &v, table_buf.as_ref(), Some(&s));
        let mut plan = Decode::new::<bf16, E4M3>(&dev, &ops, shape, layout, DecodeOptions::default()).unwrap();
        plan.run(&dev, &ops, &q, &cache, &lens_buf, &mut out, &mut lse).unwrap();
        verify(&out, &lse, plan.errors(&dev).unwrap(), DecodeKernel::Auto);
    } else {
        let up = |x: &[f32]| dev.upload(&x.iter().map(|&v| bf16::from_f32(v)).collect::<Vec<_>>()).unwrap();
        let (k, v) = (up(&kf), up(&vf));
        let cache = cache_of(&k, &v, table_buf.as_ref(), None);
        // Every kernel of a 16-bit cache.
        let kernels: &[DecodeKernel] = if shape.head_dim == 128 { &[DecodeKernel::Wgmma, DecodeKernel::WarpMma, DecodeKernel::WarpMma8] } else { &[DecodeKernel::Wgmma, DecodeKernel::WarpMma] };
        for &kernel in kernels {
            let opts = DecodeOptions { kernel, ..DecodeOptions::default() };
            let mut plan = Decode::new::<bf16, bf16>(&dev, &ops, shape, layout, opts).unwrap();
            let poisoned = vec![bf16::from_f32(f32::NAN); out.len()];
            dev.write(&mut out, &poisoned).unwrap();
            plan.run(&dev, &ops, &q, &cache, &lens_buf, &mut out, &mut lse).unwrap();
            verify(&out, &lse, plan.errors(&dev).unwrap(), kernel);
        }
    }
}

#[test]
#[ignore = "needs a GPU"]
fn gpu_decode_8x8x8192() {
    gpu_case(8, 8, 8192, 1, None, false);
}
#[test]
#[ignore = "needs a GPU"]
fn gpu_decode_64x8x2048() {
    gpu_case(64, 8, 2048, 1, None, false);
}
#[test]
#[ignore = "needs a GPU"]
fn gpu_decode_8x4x8192_gqa8() {
    gpu_case(8, 4, 8192, 1, None, false);
}
#[test]
#[ignore = "needs a GPU"]
fn gpu_decode_1x8x32768() {
    gpu_case(1, 8, 32768, 1, None, false);
}
#[test]
#[ignore = "needs a GPU"]
fn gpu_decode_128x8x1024() {
    gpu_case(128, 8, 1024, 1, None, false);
}
#[test]
#[ignore = "needs a GPU"]
fn gpu_decode_paged_16_64_256() {
    for ps in [16, 64, 256] {
        gpu_case(8, 8, 8192, 1, Some(ps), false);
    }
}
#[test]
#[ignore = "needs a GPU"]
fn gpu_decode_fp8_and_4_tokens() {
    gpu_case(8, 8, 8192, 1, None, true);
    gpu_case(8, 8, 8192, 4, None, false);
    gpu_case(8, 8, 8192, 1, Some(64), true);
}
