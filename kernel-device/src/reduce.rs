//! Warp and block reductions and scans (sum, max, min over `f32`, `i32`,
//! `u32`), built on the warp shuffles and `redux.sync` of [`crate::warp`].
//!
//! | function | scope | how |
//! |---|---|---|
//! | [`warp_sum`], [`warp_max`], [`warp_min`] ([`warp_reduce`]) | all 32 lanes of a warp | `f32`: 5 `shfl.sync.bfly` steps (every lane gets the result); `i32`/`u32`: one `redux.sync` |
//! | [`warp_inclusive_scan`], [`warp_exclusive_scan`] | all 32 lanes of a warp | 5 `shfl.sync.up` steps (Hillis-Steele) |
//! | [`block_reduce`] ([`block_sum`], [`block_max`], [`block_min`]) | every thread of the CTA | warp reduce, one value per warp through a 32-slot SMEM scratch, warp reduce again; 2 `bar.sync` |
//! | [`block_inclusive_scan`], [`block_exclusive_scan`] | every thread of the CTA | warp scans plus the scanned warp totals; 2 `bar.sync` |
//!
//! The operation is a type: [`Sum`], [`Max`], [`Min`] (`warp_reduce::<Max, f32>(x)`).
//! `f32` max/min follow PTX `max.f32`/`min.f32`: a NaN operand is ignored
//! (the other is returned); f32 sums are reassociated (a butterfly), so they
//! differ from a sequential sum by rounding.
//!
//! Block-level functions are collective over the whole CTA (every thread
//! calls them, block size a multiple of 32, at most 1024 threads) and use
//! barrier 0 (`sync_threads`) twice; the scratch may be reused right after.
use crate::smem::Smem;
use crate::sync::sync_threads;
use crate::warp::{lane_id, shfl_up, shfl_xor, ReduxInt, Shfl32};

/// A reduction operator over `T`: an identity and an associative combine,
/// with a warp-wide form.
pub trait ReduceOp<T: Shfl32> {
    /// `combine(IDENTITY, x) == x`.
    const IDENTITY: T;
    /// The binary operation.
    fn combine(a: T, b: T) -> T;
    /// The reduction over the 32 lanes of the warp (every lane gets it).
    /// Default: a butterfly of `shfl.sync.bfly`.
    #[inline(always)]
    #[track_caller]
    fn warp(v: T) -> T {
        let mut v = v;
        let mut m = 16;
        while m > 0 {
            v = Self::combine(v, shfl_xor(v, m));
            m /= 2;
        }
        v
    }
}

/// Addition (`add.f32` / wrapping integer add).
pub struct Sum;
/// Maximum (`max.f32`: NaN operands ignored).
pub struct Max;
/// Minimum (`min.f32`: NaN operands ignored).
pub struct Min;

impl ReduceOp<f32> for Sum {
    const IDENTITY: f32 = 0.0;
    #[inline(always)]
    fn combine(a: f32, b: f32) -> f32 {
        a + b
    }
}
impl ReduceOp<f32> for Max {
    const IDENTITY: f32 = f32::NEG_INFINITY;
    #[inline(always)]
    fn combine(a: f32, b: f32) -> f32 {
        crate::math::max(a, b)
    }
}
impl ReduceOp<f32> for Min {
    const IDENTITY: f32 = f32::INFINITY;
    #[inline(always)]
    fn combine(a: f32, b: f32) -> f32 {
        crate::math::min(a, b)
    }
}

macro_rules! int_ops {
    ($t:ty) => {
        impl ReduceOp<$t> for Sum {
            const IDENTITY: $t = 0;
            #[inline(always)]
            fn combine(a: $t, b: $t) -> $t {
                a.wrapping_add(b)
            }
            #[inline(always)]
            #[track_caller]
            fn warp(v: $t) -> $t {
                v.redux_sum()
            }
        }
        impl ReduceOp<$t> for Max {
            const IDENTITY: $t = <$t>::MIN;
            #[inline(always)]
            fn combine(a: $t, b: $t) -> $t {
                if a > b { a } else { b }
            }
            #[inline(always)]
            #[track_caller]
            fn warp(v: $t) -> $t {
                v.redux_max()
            }
        }
        impl ReduceOp<$t> for Min {
            const IDENTITY: $t = <$t>::MAX;
            #[inline(always)]
            fn combine(a: $t, b: $t) -> $t {
                if a < b { a } else { b }
            }
            #[inline(always)]
            #[track_caller]
            fn warp(v: $t) -> $t {
                v.redux_min()
            }
        }
    };
}
int_ops!(i32);
int_ops!(u32);

/// The reduction of `v` over the warp, in every lane. Collective (all 32 lanes).
#[inline(always)]
#[track_caller]
pub fn warp_reduce<Op: ReduceOp<T>, T: Shfl32>(v: T) -> T {
    Op::warp(v)
}
/// Sum over the warp. Collective.
#[inline(always)]
#[track_caller]
pub fn warp_sum<T: Shfl32>(v: T) -> T
where
    Sum: ReduceOp<T>,
{
    Sum::warp(v)
}
/// Maximum over the warp. Collective.
#[inline(always)]
#[track_caller]
pub fn warp_max<T: Shfl32>(v: T) -> T
where
    Max: ReduceOp<T>,
{
    Max::warp(v)
}
/// Minimum over the warp. Collective.
#[inline(always)]
#[track_caller]
pub fn warp_min<T: Shfl32>(v: T) -> T
where
    Min: ReduceOp<T>,
{
    Min::warp(v)
}

/// Lane `l` gets `v[0] op ... op v[l]`. Collective (all 32 lanes).
#[inline(always)]
#[track_caller]
pub fn warp_inclusive_scan<Op: ReduceOp<T>, T: Shfl32>(v: T) -> T {
    let lane = lane_id();
    let mut v = v;
    let mut d = 1;
    while d < 32 {
        let up = shfl_up(v, d);
        if lane >= d {
            v = Op::combine(up, v);
        }
        d *= 2;
    }
    v
}
/// Lane `l` gets `v[0] op ... op v[l - 1]` (lane 0: the identity). Collective.
#[inline(always)]
#[track_caller]
pub fn warp_exclusive_scan<Op: ReduceOp<T>, T: Shfl32>(v: T) -> T {
    let inc = warp_inclusive_scan::<Op, T>(v);
    let prev = shfl_up(inc, 1);
    if lane_id() == 0 {
        Op::IDENTITY
    } else {
        prev
    }
}

#[inline(always)]
fn block_threads() -> u32 {
    let n = crate::index::block_dim();
    n.x * n.y * n.z
}

/// The reduction of `v` over the CTA, in every thread. Collective over the
/// whole CTA (block size a multiple of 32); `scratch` holds one value per
/// warp and is free again when this returns.
#[inline(always)]
#[track_caller]
pub fn block_reduce<Op: ReduceOp<T>, T: Shfl32>(v: T, scratch: Smem<[T; 32]>) -> T {
    let warps = block_threads().div_ceil(32);
    let (warp, lane) = (crate::index::warp_idx(), lane_id());
    let w = Op::warp(v);
    if lane == 0 {
        scratch.at(warp as usize).store(w);
    }
    sync_threads();
    let x = if lane < warps { scratch.at(lane as usize).load() } else { Op::IDENTITY };
    let r = Op::warp(x);
    sync_threads();
    r
}
/// Sum over the CTA (see [`block_reduce`]).
#[inline(always)]
#[track_caller]
pub fn block_sum<T: Shfl32>(v: T, scratch: Smem<[T; 32]>) -> T
where
    Sum: ReduceOp<T>,
{
    block_reduce::<Sum, T>(v, scratch)
}
/// Maximum over the CTA (see [`block_reduce`]).
#[inline(always)]
#[track_caller]
pub fn block_max<T: Shfl32>(v: T, scratch: Smem<[T; 32]>) -> T
where
    Max: ReduceOp<T>,
{
    block_reduce::<Max, T>(v, scratch)
}
/// Minimum over the CTA (see [`block_reduce`]).
#[inline(always)]
#[track_caller]
pub fn block_min<T: Shfl32>(v: T, scratch: Smem<[T; 32]>) -> T
where
    Min: ReduceOp<T>,
{
    block_reduce::<Min, T>(v, scratch)
}

/// Thread `t` (linear index) gets `v[0] op ... op v[t]` over the CTA.
/// Collective over the whole CTA, as [`block_reduce`].
#[inline(always)]
#[track_caller]
pub fn block_inclusive_scan<Op: ReduceOp<T>, T: Shfl32>(v: T, scratch: Smem<[T; 32]>) -> T {
    let warps = block_threads().div_ceil(32);
    let (warp, lane) = (crate::index::warp_idx(), lane_id());
    let inc = warp_inclusive_scan::<Op, T>(v);
    if lane == 31 {
        scratch.at(warp as usize).store(inc);
    }
    sync_threads();
    let total = if lane < warps { scratch.at(lane as usize).load() } else { Op::IDENTITY };
    // Exclusive scan of the warp totals; lane `warp` holds this warp's prefix.
    let prefix = shfl_idx_t(warp_exclusive_scan::<Op, T>(total), warp);
    sync_threads();
    Op::combine(prefix, inc)
}
/// Thread `t` gets `v[0] op ... op v[t - 1]` (thread 0: the identity).
/// Collective over the whole CTA, as [`block_reduce`].
#[inline(always)]
#[track_caller]
pub fn block_exclusive_scan<Op: ReduceOp<T>, T: Shfl32>(v: T, scratch: Smem<[T; 32]>) -> T {
    let warps = block_threads().div_ceil(32);
    let (warp, lane) = (crate::index::warp_idx(), lane_id());
    let inc = warp_inclusive_scan::<Op, T>(v);
    let exc = shfl_up(inc, 1);
    if lane == 31 {
        scratch.at(warp as usize).store(inc);
    }
    sync_threads();
    let total = if lane < warps { scratch.at(lane as usize).load() } else { Op::IDENTITY };
    let prefix = shfl_idx_t(warp_exclusive_scan::<Op, T>(total), warp);
    sync_threads();
    if lane == 0 {
        prefix
    } else {
        Op::combine(prefix, exc)
    }
}

#[inline(always)]
#[track_caller]
fn shfl_idx_t<T: Shfl32>(v: T, src: u32) -> T {
    crate::warp::shfl_idx(v, src)
}
