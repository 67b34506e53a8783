#![allow(unused)]
use kernel_device::collective::{pair_role, PairTma, PairRole, PartitionedTma, TmemPair};
use kernel_device::prelude::*;
use kernel_device::tcgen05::{tcgen05_commit_arrive, TensorCore};
use kernel_device::f16;

type A = Tile<f16, 128, 64, Swizzled<128>>;

// The barrier a pair's partitioned copies complete on is the leader's
// (cluster scope): the peer CTA may load its half, but waiting on the
// barrier, expecting its bytes or committing the pair's MMAs there is the
// leader's work. With the `PairPeer` token none of it compiles.
#[kernel(block = warpgroups(1), cluster = (2, 1, 1), arch = sm_100a)]
pub fn k(a: Tma<A>, #[scratch] s: Smem<A>, #[scratch] acc: TmemPair<f32, 128, 128>, #[scratch] loaded: Barriers<1, PairTma>, #[scratch] done: Barrier<TensorCore>) {
    a.load_partitioned::<0>(s, 0, 0, loaded.at(0));
    match pair_role() {
        PairRole::Leader(leader) => {
            loaded.at(0).arrive_expect_tx(&leader, 2 * 128 * 64 * 2);
            loaded.at(0).wait(&leader);
        }
        PairRole::Peer(peer) => {
            loaded.at(0).wait(&peer);
            tcgen05_commit_arrive(&peer, done.as_ref());
        }
    }
}

fn main() {}
