//! The attention ladder: `O = softmax(scale Q Kᵀ [+ causal mask]) V` on
//! Hopper, one technique per step, each a separate kernel whose header says
//! "This kernel works as follows" and its constraints. q, k, v, o are
//! `[batch, seq, heads, head_dim]` f16 (k, v with `heads / kv_group`
//! heads), seen through rank-3 tensor maps as in `kernel_ops::attention`;
//! the steps write O only (the library kernel also writes the log-sum-exp).
//! They share the library's softmax and fragment helpers
//! (`kernel_ops_kernels::attention`): the ladder points at the library.
//!
//! | step | kernel | what it adds |
//! |---|---|---|
//! | 0 | [`step0_one_warpgroup::attention_step0`] | one warpgroup owns 64 Q rows: load K and V, `S = Q Kᵀ`, online softmax in registers, `O += P V` with P from registers, wait, repeat: nothing overlaps |
//! | 1 | [`step1_producer::attention_step1`] | a producer warpgroup streams K and V through a ring of slots, so loads overlap the GEMMs and the softmax |
//! | 2 | [`step2_two_consumers::attention_step2`] | two consumer warpgroups (128 Q rows) share each K/V block: half the loads per row, two warpgroups' work to overlap |
//! | 3 | `kernel_ops_kernels::attention::attention_fwd` (re-exported as [`attention_step3`]) | ping-pong of the consumers on the tensor pipe (`TurnOrder`), the next `S` issued with `P V` before the softmax, K released before V |
pub mod step0_one_warpgroup;
pub mod step1_producer;
pub mod step2_two_consumers;

/// Step 3: the library kernel.
pub use kernel_ops_kernels::attention::attention_fwd as attention_step3;

use kernel_device::f16;
use kernel_device::layout::{Swizzled, Tile};
pub use kernel_ops_kernels::attention::{KvTile, BN};

/// 64 rows of Q (one warpgroup's) by `D`.
pub type Q64<const D: usize> = Tile<f16, 64, D, Swizzled<128>>;
/// 128 rows of Q (two warpgroups') by `D`.
pub type Q128<const D: usize> = Tile<f16, 128, D, Swizzled<128>>;
/// A K or V tile of the ladder: 128 keys by `D`, f16.
pub type Kv<const D: usize> = KvTile<f16, BN, D>;

/// The K/V blocks a Q block of `bm` rows starting at `row0` reads: all
/// `ceil(seq / BN)`, or with the causal mask those up to its last row.
#[inline(always)]
pub fn kv_blocks(row0: u32, bm: u32, seq: u32, causal: bool) -> u32 {
    let last = if causal { seq.min(row0 + bm) } else { seq };
    last.div_ceil(BN as u32)
}

/// `O / l` (the quad's partial row sums added first) as f16 into rows
/// `row0 ..` of `dst` (its own Q rows), by the 128 threads of a warpgroup.
#[inline(always)]
pub fn write_o<const N: usize, const R: usize>(acc_o: &mut kernel_device::wgmma::Acc<N>, row_l: [f32; 2], dst: kernel_device::smem::Smem<Tile<f16, R, N, Swizzled<128>>>, row0: usize)
where
    kernel_device::wgmma::Cols<N>: kernel_device::wgmma::WgmmaShape,
{
    use kernel_device::warp::shfl_xor;
    let mut inv = [0f32; 2];
    kernel_device::array::regs::unroll(2, |hh| {
        let v1 = row_l[hh] + shfl_xor(row_l[hh], 1);
        let total = v1 + shfl_xor(v1, 2);
        inv[hh] = if total > 0.0 { 1.0 / total } else { 0.0 };
    });
    acc_o.fence_operands();
    let (w, l) = (kernel_device::thread_in_warpgroup() as usize / 32, kernel_device::thread_in_warpgroup() as usize % 32);
    let base = dst.ptr().cast::<u8>();
    let regs = acc_o.regs.as_ref();
    kernel_device::array::regs::unroll(N / 4, |p| {
        let (r, c) = (row0 + 16 * w + l / 4 + 8 * (p % 2), 8 * (p / 2) + 2 * (l % 4));
        let off = Tile::<f16, R, N, Swizzled<128>>::offset_of(r, c);
        let hh = p % 2;
        // SAFETY: inside the tile (r < R, c < N); 4-byte aligned (even column).
        unsafe { kernel_device::smem::write_word(base.add(off), kernel_device::cvt::pack_f16x2(regs[2 * p] * inv[hh], regs[2 * p + 1] * inv[hh])) };
    });
}
