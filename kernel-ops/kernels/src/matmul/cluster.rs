//! The matmul in clusters of 2 with B multicast:
//! [`matmul_persistent_ws_cluster`] (the Hopper ladder's step 5,
//! `examples/kernels/src/hopper_ladder/step5_cluster_multicast.rs`, which
//! re-exports it as `matmul_cluster_multicast` and tells why its remote
//! arrive is release at CTA scope), generic over the element type (f16
//! and bf16 instances); its body is [`matmul_persistent_ws_cluster_of`].
use crate::gemm::{check_tile, ATile, BTile, EpiTile, GemmElem, WgAcc, COMPUTE_REGS, MEMORY_REGS, TK};
use kernel_device::grid::{nd_loop, planar_snake, Collective};
use kernel_device::prelude::*;
use kernel_device::tma::wait_group;
use kernel_device::pipeline::Ring;
use kernel_device::wgmma::{setmaxnreg_dec, setmaxnreg_inc, Cols, WgmmaShape};
use kernel_device::Barriers;
use kernel_device::{bf16, f16};

/// CTAs per cluster of [`matmul_persistent_ws_cluster`].
pub const CLUSTER_M: u32 = 2;

/// `C = A · Bᵀ` on element type `E` (f16 or bf16), persistent, clusters of 2 along M with B multicast: as
/// [`matmul_persistent_ws`](super::matmul_persistent_ws), with each pair of
/// vertically adjacent tiles sharing its B tile.
///
/// This kernel works as follows:
/// 1. cluster `q` of `Q` (grid `2 Q`, at most one CTA per SM) runs the
///    cluster tiles `q, q + Q, ..` of `ceil(m_tiles / 2) * n_tiles`, in
///    [`planar_snake`] order ([`nd_loop`] over clusters); CTA rank `r`
///    computes output tile `(2 i + r, j)` of cluster tile `(i, j)`;
/// 2. one thread of warpgroup 2 per CTA, for every tile and K step, waits
///    until slot `step % STAGES` is consumed in both CTAs, announces A's and
///    the whole B tile's bytes on its `loaded` barrier, loads its A tile,
///    and multicasts rows `r BH .. (r + 1) BH` of the B tile to both CTAs
///    (mask `0b11`: the same SMEM offset and barrier in each);
/// 3. compute warpgroups as [`matmul_persistent_ws`](super::matmul_persistent_ws),
///    releasing each slot on both CTAs' `consumed` barriers (a local
///    arrive and a remote one through `mapa`: 512 arrivals per phase);
/// 4. epilogue as [`matmul_persistent_ws`](super::matmul_persistent_ws)
///    (each CTA stores its own tile).
///
/// Constraints: as [`matmul_persistent_ws`](super::matmul_persistent_ws),
/// and `BH * 2 == BN`; grid a multiple of 2, at most the SM count; the
/// kernel's end is a cluster barrier (no CTA exits while its peer may
/// still write into its SMEM or barriers).
#[kernel(block = warpgroups(3), cluster = 2, arch = sm_90a, instances(E = [f16, bf16], (128, 256, 128, 4, 8), (256, 128, 64, 3, 8), (128, 256, 128, 4, 16)))]
#[allow(clippy::too_many_arguments)]
pub fn matmul_persistent_ws_cluster<E: GemmElem, const BM: usize, const BN: usize, const BH: usize, const STAGES: usize, const GRID_W: u32>(
    a: Tma<ATile<E, BM>>,
    b: Tma<BTile<E, BH>>,
    c: Tma<EpiTile<E, BM>>,
    m_tiles: u32,
    n_tiles: u32,
    k_steps: u32,
    #[scratch] a_bufs: Smem<[ATile<E, BM>; STAGES]>,
    #[scratch] b_bufs: Smem<[BTile<E, BN>; STAGES]>,
    #[scratch] epi: Smem<[EpiTile<E, BM>; 2]>,
    #[scratch] loaded: Barriers<STAGES>,
    #[scratch(arrivals = 512)] consumed: Barriers<STAGES>,
) where
    Cols<BN>: WgmmaShape,
{
    matmul_persistent_ws_cluster_of::<E, BM, BN, BH, STAGES, GRID_W>(a, b, c, m_tiles, n_tiles, k_steps, a_bufs, b_bufs, epi, loaded, consumed)
}

/// The body of [`matmul_persistent_ws_cluster`] (elements `E`: f16 or bf16).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub fn matmul_persistent_ws_cluster_of<E: GemmElem, const BM: usize, const BN: usize, const BH: usize, const STAGES: usize, const GRID_W: u32>(
    a: Tma<ATile<E, BM>>,
    b: Tma<BTile<E, BH>>,
    c: Tma<EpiTile<E, BM>>,
    m_tiles: u32,
    n_tiles: u32,
    k_steps: u32,
    a_bufs: Smem<[ATile<E, BM>; STAGES]>,
    b_bufs: Smem<[BTile<E, BN>; STAGES]>,
    epi: Smem<[EpiTile<E, BM>; 2]>,
    loaded: Barriers<STAGES>,
    consumed: Barriers<STAGES>,
) where
    Cols<BN>: WgmmaShape,
{
    const {
        check_tile(BM, BN);
        assert!(BH * 2 == BN, "matmul_persistent_ws_cluster: BH (the B rows each CTA multicasts) must be BN / 2");
    };
    let rank = cluster_ctarank();
    let m_pairs = m_tiles.div_ceil(CLUSTER_M);
    let tiles = [m_pairs * n_tiles];
    let tile = |i: u32| {
        let (pi, pn) = planar_snake(i, (m_pairs, n_tiles), 0, GRID_W);
        (CLUSTER_M * pi + rank, pn)
    };
    // `consumed` takes both CTAs' releases: 256 local, 256 from the peer.
    let ring = Ring::new(&loaded, &consumed, 512);
    if warpgroup_idx() == 2 {
        setmaxnreg_dec::<MEMORY_REGS>();
        if thread_in_warpgroup() == 0 {
            let mut producer = ring.producer();
            nd_loop(tiles, Collective::Clusters, |info| {
                let (pm, pn) = tile(info.index[0]);
                for k in 0..k_steps {
                    let slot = producer.acquire_tx(Tma::<ATile<E, BM>>::BYTES + Tma::<BTile<E, BN>>::BYTES);
                    a.load(a_bufs.at(slot.index()), pm * BM as u32, k * TK as u32, slot.barrier());
                    // SAFETY: rows r BH .. (r + 1) BH of a BN-row, one-column-block
                    // tile start r BH x 128 bytes in (1024-byte aligned: BH % 8 == 0).
                    let half: Smem<BTile<E, BH>> = unsafe { b_bufs.at(slot.index()).cast_at(rank as usize * <BTile<E, BH> as TileLayout>::BYTES) };
                    b.load_multicast(half, pn * BN as u32 + rank * BH as u32, k * TK as u32, slot.barrier(), 0b11);
                }
            });
        }
    } else {
        setmaxnreg_inc::<COMPUTE_REGS>();
        let row0 = warpgroup_idx_sync() as usize * BM / 2;
        let leader = thread_linear() == 0;
        let peer = rank ^ 1;
        let mut consumer = ring.consumer();
        let mut sub_tiles = 0u32;
        nd_loop(tiles, Collective::Clusters, |info| {
            let (pm, pn) = tile(info.index[0]);
            let mut acc = WgAcc::<BM, BN>::undefined();
            // The slots are refilled by both CTAs' multicasts: release
            // them in both.
            consumer.mma_steps_to_peer::<1>(k_steps, peer, |k, slot| {
                acc.mma(a_bufs.at(slot.index()), row0, b_bufs.at(slot.index()), k > 0);
            });
            consumer.release_to_peer_after_wgmma::<0>(peer);
            sub_tiles = acc.store_tile(&c, epi, (pm, pn), row0, sub_tiles);
        });
        if leader {
            wait_group::<0>();
        }
    }
}
