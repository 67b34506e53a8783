//! Attention ladder, step 2: two consumer warpgroups share each K/V block.
use super::{kv_blocks, write_o, Kv, Q128, BN};
use kernel_device::prelude::*;
use kernel_device::tma::{commit_group, wait_group};
use kernel_device::wgmma::{setmaxnreg_dec, setmaxnreg_inc, wgmma_commit_group, wgmma_wait, Acc, Cols, WgmmaShape};
use kernel_ops_kernels::attention::{online_softmax, p_fragments, Rows, SoftmaxState, KC};

/// Step 1 with 128 Q rows per CTA: two consumer warpgroups of 64 rows.
///
/// This kernel works as follows: as [`super::step1_producer::attention_step1`],
/// with three warpgroups: the producer (number 2) loads the `128 x D` Q
/// tile and streams K and V as before; consumers 0 and 1 each run step 1's
/// consumer loop over their 64 rows of the Q tile, on the same K and V
/// slots, which are released when both have arrived (256 arrivals). Each
/// K/V block is loaded once for 128 rows instead of 64 (half the loads and
/// L2 traffic per row), and while one consumer does its softmax the other's
/// GEMMs can run — but nothing orders them: both tend to reach the tensor
/// pipe, and their softmaxes, at the same time. At the end the two meet
/// (named barrier 1, 256 threads) and thread 0 stores the tile.
///
/// Launch: grid `(ceil(seq / 128), heads, batch)`, 3 warpgroups.
/// Constraints: D 64 or 128; `STAGES >= 2`; SMEM `128 D + 2 STAGES 128 D`
/// f16.
#[kernel(block = warpgroups(3), arch = sm_90a, instances((64, 3), (128, 2)))]
pub fn attention_step2<const D: usize, const STAGES: usize>(
    q: Tma<Q128<D>, 3>,
    k: Tma<Kv<D>, 3>,
    v: Tma<Kv<D>, 3>,
    o: Tma<Q128<D>, 3>,
    seq: u32,
    kv_group: u32,
    scale_log2: f32,
    causal: u32,
    #[scratch] q_buf: Smem<Q128<D>>,
    #[scratch] k_bufs: Smem<[Kv<D>; STAGES]>,
    #[scratch] v_bufs: Smem<[Kv<D>; STAGES]>,
    #[scratch] q_loaded: Barrier,
    #[scratch] k_loaded: Barriers<STAGES>,
    #[scratch] v_loaded: Barriers<STAGES>,
    #[scratch(arrivals = 256)] k_consumed: Barriers<STAGES>,
    #[scratch(arrivals = 256)] v_consumed: Barriers<STAGES>,
) where
    Cols<D>: WgmmaShape,
{
    let (mb, h, b) = (block_idx().x, block_idx().y, block_idx().z);
    let causal = causal != 0;
    let n_blocks = kv_blocks(mb * 128, 128, seq, causal);
    let slot = |j: u32| (j % STAGES as u32) as usize;
    if warpgroup_idx() == 2 {
        setmaxnreg_dec::<24>();
        if thread_in_warpgroup() == 0 {
            let kv_col = (h / kv_group) * D as u32;
            q_loaded.arrive_expect_tx(<Q128<D> as TileLayout>::BYTES as u32);
            q.load_at(q_buf, [h * D as u32, mb * 128, b], q_loaded.as_ref());
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
    setmaxnreg_inc::<240>();
    let row0 = 64 * warpgroup_idx() as usize;
    let wg_first = mb * 128 + row0 as u32;
    let rows = Rows { seq, causal, wg_first_row: wg_first, scale_log2 };
    let mut st = SoftmaxState { m: [f32::NEG_INFINITY; 2], l: [0.0; 2] };
    let mut acc_o = Acc::<D>::zeros();
    let mut frag = [[0u32; 4]; KC];
    q_loaded.wait();
    for j in 0..n_blocks {
        let s = slot(j);
        k_loaded.at(s).wait();
        let mut acc_s = Acc::<BN>::undefined();
        acc_s.mma(q_buf, row0, k_bufs.at(s), 0, false);
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
    write_o(&mut acc_o, st.l, q_buf, row0);
    commit_smem();
    NamedBarrier::new(1, 256).sync();
    if thread_linear() == 0 {
        o.store_at(q_buf, [h * D as u32, mb * 128, b]);
        commit_group();
        wait_group::<0>();
    }
}
