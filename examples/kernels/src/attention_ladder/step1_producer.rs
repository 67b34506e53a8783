//! Attention ladder, step 1: a producer warpgroup and a ring of K/V slots.
use super::{kv_blocks, write_o, Kv, Q64, BN};
use kernel_device::prelude::*;
use kernel_device::tma::{commit_group, wait_group};
use kernel_device::wgmma::{setmaxnreg_dec, wgmma_commit_group, wgmma_wait, Acc, Cols, WgmmaShape};
use kernel_ops_kernels::attention::{online_softmax, p_fragments, Rows, SoftmaxState, KC};

/// Step 0 with the loads moved to a producer warpgroup.
///
/// This kernel works as follows: as [`super::step0_one_warpgroup::attention_step0`]
/// (64 Q rows per CTA), with two warpgroups:
/// 1. the producer (warpgroup 1, registers down to 24): one thread loads
///    the Q tile, then K and V of block `j` into slot `j % STAGES`, each on
///    its own `loaded` barrier, after waiting (from the second round on)
///    for the slot's K (`k_consumed`) or V (`v_consumed`) to be released;
/// 2. the consumer (warpgroup 0, the 256 registers a 256-thread kernel
///    starts with: the most a thread can have, so no `setmaxnreg.inc`,
///    which may not lower a count; step 2's 384 threads start with 168
///    and its consumers raise it to 240): per block, waits for K,
///    `S = Q Kᵀ`, waits for the GEMM and releases K's slot (128
///    arrivals), the softmax, waits for V, `O += P V`, waits and releases
///    V's slot. Loads of the next `STAGES - 1` blocks run under this
///    block's GEMMs and softmax;
/// 3. `O / l` over the Q buffer, one TMA store.
///
/// Launch: as step 0, block 2 warpgroups. Constraints: D 64 or 128;
/// `STAGES >= 2`; SMEM `64 D + 2 STAGES 128 D` f16.
#[kernel(block = warpgroups(2), arch = sm_90a, instances((64, 3), (128, 2)))]
pub fn attention_step1<const D: usize, const STAGES: usize>(
    q: Tma<Q64<D>, 3>,
    k: Tma<Kv<D>, 3>,
    v: Tma<Kv<D>, 3>,
    o: Tma<Q64<D>, 3>,
    seq: u32,
    kv_group: u32,
    scale_log2: f32,
    causal: u32,
    #[scratch] q_buf: Smem<Q64<D>>,
    #[scratch] k_bufs: Smem<[Kv<D>; STAGES]>,
    #[scratch] v_bufs: Smem<[Kv<D>; STAGES]>,
    #[scratch] q_loaded: Barrier,
    #[scratch] k_loaded: Barriers<STAGES>,
    #[scratch] v_loaded: Barriers<STAGES>,
    #[scratch(arrivals = 128)] k_consumed: Barriers<STAGES>,
    #[scratch(arrivals = 128)] v_consumed: Barriers<STAGES>,
) where
    Cols<D>: WgmmaShape,
{
    let (mb, h, b) = (block_idx().x, block_idx().y, block_idx().z);
    let causal = causal != 0;
    let n_blocks = kv_blocks(mb * 64, 64, seq, causal);
    let slot = |j: u32| (j % STAGES as u32) as usize;
    if warpgroup_idx() == 1 {
        setmaxnreg_dec::<24>();
        if thread_in_warpgroup() == 0 {
            let kv_col = (h / kv_group) * D as u32;
            q_loaded.arrive_expect_tx(<Q64<D> as TileLayout>::BYTES as u32);
            q.load_at(q_buf, [h * D as u32, mb * 64, b], q_loaded.as_ref());
            for j in 0..n_blocks {
                let s = slot(j);
                let bytes = <Kv<D> as TileLayout>::BYTES as u32;
                if j >= STAGES as u32 {
                    k_consumed.at(s).wait();
                }
                k_loaded.at(s).arrive_expect_tx(bytes);
                k.load_at(k_bufs.at(s), [kv_col, j * BN as u32, b], k_loaded.at(s));
                if j >= STAGES as u32 {
                    v_consumed.at(s).wait();
                }
                v_loaded.at(s).arrive_expect_tx(bytes);
                v.load_at(v_bufs.at(s), [kv_col, j * BN as u32, b], v_loaded.at(s));
            }
        }
        return;
    }
    let rows = Rows { seq, causal, wg_first_row: mb * 64, scale_log2 };
    let mut st = SoftmaxState { m: [f32::NEG_INFINITY; 2], l: [0.0; 2] };
    let mut acc_o = Acc::<D>::zeros();
    let mut frag = [[0u32; 4]; KC];
    q_loaded.wait();
    for j in 0..n_blocks {
        let s = slot(j);
        k_loaded.at(s).wait();
        let mut acc_s = Acc::<BN>::undefined();
        acc_s.mma(q_buf, 0, k_bufs.at(s), 0, false);
        wgmma_commit_group();
        wgmma_wait::<0>();
        k_consumed.at(s).arrive();
        acc_s.fence_operands();
        let alpha = online_softmax::<BN>(acc_s.regs.as_mut(), j * BN as u32, &rows, &mut st);
        {
            let or = acc_o.regs.as_mut();
            kernel_device::array::regs::unroll(D / 2, |i| or[i] *= alpha[(i / 2) % 2]);
        }
        p_fragments::<kernel_device::f16, KC>(acc_s.regs.as_ref(), &mut frag);
        v_loaded.at(s).wait();
        acc_o.mma_rs_kn_chain(&frag, v_bufs.at(s), 0, true);
        wgmma_commit_group();
        wgmma_wait::<0>();
        v_consumed.at(s).arrive();
    }
    write_o(&mut acc_o, st.l, q_buf, 0);
    commit_smem();
    // The consumer warpgroup alone meets here (named barrier 1, 128 threads).
    NamedBarrier::new(1, 128).sync();
    if thread_in_warpgroup() == 0 {
        o.store_at(q_buf, [h * D as u32, mb * 64, b]);
        commit_group();
        wait_group::<0>();
    }
}
