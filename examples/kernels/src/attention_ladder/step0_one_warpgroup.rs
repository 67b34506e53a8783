//! Attention ladder, step 0: one warpgroup, nothing overlapped.
use super::{kv_blocks, write_o, Kv, Q64, BN};
use kernel_device::prelude::*;
use kernel_device::tma::{commit_group, wait_group};
use kernel_device::wgmma::{wgmma_commit_group, wgmma_wait, Acc, Cols, WgmmaShape};
use kernel_ops_kernels::attention::{online_softmax, p_fragments, Rows, SoftmaxState, KC};

/// `O = softmax(scale Q Kᵀ) V` for 64 rows of Q per CTA.
///
/// This kernel works as follows. CTA `(mb, h, b)` owns Q rows `64 mb ..
/// 64 mb + 64` of head `h` of batch `b`; its one warpgroup:
/// 1. thread 0 loads the Q tile (TMA) and all 128 threads wait for it;
/// 2. for each block of 128 keys: thread 0 loads K's and V's tiles into
///    the one K and one V buffer, everyone waits; `S = Q Kᵀ` (`D / 16`
///    wgmmas `m64n128k16`), wait; the online softmax on S's registers
///    (masks, running maximum and sums, `P = 2^(S scale log2 e - m)`, O
///    rescaled: `kernel_ops_kernels::attention::online_softmax`); P
///    rounded to f16 as the A fragments of `O += P V` (8 RS wgmmas, V
///    MN-major as stored), wait. Each block starts with a CTA barrier, so
///    that no thread's GEMM still reads K or V when thread 0 overwrites
///    them, and no thread is still to wait for the barrier's previous phase
///    when thread 0 starts the next (a waiter two phases behind would wait
///    on the wrong parity forever: the emulator reports that deadlock);
/// 3. `O / l` over the Q buffer, one TMA store.
///
/// Every load waits for the GEMMs before it and every GEMM for the load
/// before it: the tensor cores idle during loads and softmax.
///
/// Launch: grid `(ceil(seq / 64), heads, batch)`, 1 warpgroup;
/// `kv_group = heads / kv_heads`, `scale_log2 = scale x log2 e`, `causal`
/// 0 or 1. Constraints: D 64 or 128.
#[kernel(block = warpgroups(1), arch = sm_90a, instances((64), (128)))]
pub fn attention_step0<const D: usize>(
    q: Tma<Q64<D>, 3>,
    k: Tma<Kv<D>, 3>,
    v: Tma<Kv<D>, 3>,
    o: Tma<Q64<D>, 3>,
    seq: u32,
    kv_group: u32,
    scale_log2: f32,
    causal: u32,
    #[scratch] q_buf: Smem<Q64<D>>,
    #[scratch] k_buf: Smem<Kv<D>>,
    #[scratch] v_buf: Smem<Kv<D>>,
    #[scratch] loaded: Barrier,
) where
    Cols<D>: WgmmaShape,
{
    let (mb, h, b) = (block_idx().x, block_idx().y, block_idx().z);
    let causal = causal != 0;
    let leader = thread_in_warpgroup() == 0;
    let kv_col = (h / kv_group) * D as u32;
    if leader {
        loaded.arrive_expect_tx(<Q64<D> as TileLayout>::BYTES as u32);
        q.load_at(q_buf, [h * D as u32, mb * 64, b], loaded.as_ref());
    }
    loaded.wait();
    let rows = Rows { seq, causal, wg_first_row: mb * 64, scale_log2 };
    let mut st = SoftmaxState { m: [f32::NEG_INFINITY; 2], l: [0.0; 2] };
    let mut acc_o = Acc::<D>::zeros();
    let mut frag = [[0u32; 4]; KC];
    for j in 0..kv_blocks(mb * 64, 64, seq, causal) {
        // Every thread has waited for the barrier's last phase (the Q tile,
        // or the previous K and V: a thread two phases behind would wait on
        // the wrong parity) and finished the GEMMs that read K and V: the
        // next load may go.
        sync_threads();
        if leader {
            loaded.arrive_expect_tx(2 * <Kv<D> as TileLayout>::BYTES as u32);
            k.load_at(k_buf, [kv_col, j * BN as u32, b], loaded.as_ref());
            v.load_at(v_buf, [kv_col, j * BN as u32, b], loaded.as_ref());
        }
        loaded.wait();
        let mut acc_s = Acc::<BN>::undefined();
        acc_s.mma(q_buf, 0, k_buf, 0, false);
        wgmma_commit_group();
        wgmma_wait::<0>();
        acc_s.fence_operands();
        let alpha = online_softmax::<BN>(acc_s.regs.as_mut(), j * BN as u32, &rows, &mut st);
        {
            let or = acc_o.regs.as_mut();
            kernel_device::array::regs::unroll(D / 2, |i| or[i] *= alpha[(i / 2) % 2]);
        }
        p_fragments::<kernel_device::f16, KC>(acc_s.regs.as_ref(), &mut frag);
        acc_o.mma_rs_kn_chain(&frag, v_buf, 0, true);
        wgmma_commit_group();
        wgmma_wait::<0>();
    }
    write_o(&mut acc_o, st.l, q_buf, 0);
    commit_smem();
    sync_threads();
    if leader {
        o.store_at(q_buf, [h * D as u32, mb * 64, b]);
        commit_group();
        wait_group::<0>();
    }
}
