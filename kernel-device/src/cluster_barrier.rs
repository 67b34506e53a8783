//! `ClusterBarrier`: an mbarrier that every CTA along chosen cluster axes
//! arrives on (Pallas's `plgpu.ClusterBarrier`), built from
//! `mapa.shared::cluster` (PTX ISA §9.7.9.20) and
//! `mbarrier.arrive.release.cluster.shared::cluster` (§9.7.13.15.13).
//!
//! Each CTA holds its own copy of the barrier (same SMEM offset in every CTA
//! of the cluster). One *arrival* by a CTA is one remote arrive on the copy in
//! every CTA along the barrier's axes (its own included), so a phase of the
//! copy in CTA `r` completes once every CTA along the axes arrived; the
//! arrival count (the number of those CTAs) is derived by `#[kernel]` from
//! its `cluster = ..` shape. Waits are local: a thread waits on its own CTA's
//! copy, and after the wait it sees everything every peer CTA wrote before
//! its arrive (release at cluster scope on the arrive, acquire at cluster
//! scope on the wait).
//!
//! ```no_run
//! use kernel_device::prelude::*;
//!
//! #[kernel(block = threads(128), cluster = (2, 2))]
//! pub fn k(y: Gmem<f32>, #[scratch] row_done: ClusterBarrier<X>) {
//!     // ... write into the SMEM of the CTAs along x (distributed shared memory) ...
//!     sync_threads();                        // the CTA's writes before one arrival
//!     if thread_linear() == 0 {
//!         row_done.arrive();
//!     }
//!     row_done.wait();                       // every CTA along x arrived
//!     y.write(thread_linear() as usize, 1.0);
//! }
//! # fn main() {}
//! ```
//!
//! Who issues what:
//!
//! | op | issued by |
//! |---|---|
//! | init | `#[kernel]`'s prologue (one thread per CTA, count derived), ordered by its cluster barrier |
//! | [`ClusterBarrier::arrive`] | one thread per CTA per phase, after a barrier that orders the CTA's writes before it |
//! | [`ClusterBarrier::wait`] | any thread of a CTA that consumes the phase |
//!
//! Rules `#[kernel]` checks at compile time (one trybuild case each): a
//! `ClusterBarrier` needs a kernel with a cluster of more than one CTA; its
//! axes must be axes along which the cluster has more than one CTA
//! ([`WholeCluster`] is always allowed); `#[scratch(arrivals = N)]` is
//! refused on it (the count is derived).
use crate::mbarrier::{raw, MBARRIER_BYTES};
use core::cell::Cell;
use core::marker::PhantomData;

/// The cluster axes a [`ClusterBarrier`] spans, as a type: [`X`], [`Y`],
/// [`Z`], [`XY`], [`XZ`], [`YZ`], or [`WholeCluster`].
pub trait ClusterAxes {
    /// Bit 0: x, bit 1: y, bit 2: z; [`WHOLE_CLUSTER`] for every axis of the
    /// cluster, whatever its shape.
    const MASK: u8;
    /// The axes as written in the type (for messages).
    const NAME: &'static str;
}

/// [`ClusterAxes::MASK`] of [`WholeCluster`]: every axis of the cluster.
pub const WHOLE_CLUSTER: u8 = 0b1000;

macro_rules! axes {
    ($($(#[$m:meta])* $name:ident = $mask:expr;)*) => {$(
        $(#[$m])*
        #[derive(Clone, Copy, Debug)]
        pub struct $name;
        impl ClusterAxes for $name {
            const MASK: u8 = $mask;
            const NAME: &'static str = stringify!($name);
        }
    )*};
}
axes! {
    /// The cluster's x axis: the CTAs that share this CTA's y and z.
    X = 0b001;
    /// The cluster's y axis.
    Y = 0b010;
    /// The cluster's z axis.
    Z = 0b100;
    /// The x and y axes.
    XY = 0b011;
    /// The x and z axes.
    XZ = 0b101;
    /// The y and z axes.
    YZ = 0b110;
    /// Every CTA of the cluster.
    WholeCluster = WHOLE_CLUSTER;
}

/// Whether axis `d` (0: x, 1: y, 2: z) is one of `mask`'s axes.
#[inline(always)]
pub const fn spans_axis(mask: u8, d: usize) -> bool {
    mask & WHOLE_CLUSTER != 0 || mask & (1 << d) != 0
}

/// The CTAs along `mask`'s axes of a cluster of shape `cluster`: the arrival
/// count of a `ClusterBarrier` with those axes (one arrival per CTA).
pub const fn cluster_barrier_arrivals(mask: u8, cluster: [u32; 3]) -> u32 {
    let mut n = 1;
    let mut d = 0;
    while d < 3 {
        if spans_axis(mask, d) {
            n *= cluster[d];
        }
        d += 1;
    }
    n
}

/// Whether every axis `mask` names explicitly has more than one CTA in a
/// cluster of shape `cluster` (always true for [`WholeCluster`]).
pub const fn cluster_axes_in_cluster(mask: u8, cluster: [u32; 3]) -> bool {
    if mask & WHOLE_CLUSTER != 0 {
        return true;
    }
    let mut d = 0;
    while d < 3 {
        if mask & (1 << d) != 0 && cluster[d] <= 1 {
            return false;
        }
        d += 1;
    }
    true
}

/// An mbarrier that every CTA along the cluster axes `A` arrives on (one
/// arrival per CTA per phase), with the parity this thread waits for next.
///
/// Declared as kernel scratch: `#[scratch] done: ClusterBarrier<X>`, in a
/// kernel with a cluster (`#[kernel(cluster = ..)]`); the arrival count is
/// derived from the cluster shape.
pub struct ClusterBarrier<A: ClusterAxes = WholeCluster> {
    addr: u32,
    phase: Cell<u32>,
    _axes: PhantomData<A>,
}

impl<A: ClusterAxes> core::fmt::Debug for ClusterBarrier<A> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ClusterBarrier")
            .field("axes", &A::NAME)
            .field("smem_addr", &self.addr)
            .field("parity", &self.parity())
            .finish()
    }
}

impl<A: ClusterAxes> ClusterBarrier<A> {
    /// # Safety
    /// `smem_addr` is an 8-byte-aligned `.shared::cta` address holding an
    /// mbarrier at the same offset in every CTA of the cluster, initialized
    /// (before any arrival) with [`ClusterBarrier::arrivals`] arrivals.
    #[inline(always)]
    pub unsafe fn from_smem_addr(smem_addr: u32) -> Self {
        ClusterBarrier { addr: smem_addr, phase: Cell::new(0), _axes: PhantomData }
    }
    /// The barrier's 32-bit shared-memory address in this CTA.
    #[inline(always)]
    pub fn smem_addr(&self) -> u32 {
        self.addr
    }
    /// The parity of the phase this thread waits for next.
    #[inline(always)]
    pub fn parity(&self) -> u32 {
        self.phase.get()
    }
    /// The arrival count for this cluster shape: the CTAs along the axes.
    #[inline(always)]
    pub fn arrivals() -> u32 {
        let c = crate::index::cluster_dim();
        cluster_barrier_arrivals(A::MASK, [c.x, c.y, c.z])
    }
    /// One arrival of this CTA: `mbarrier.arrive.release.cluster` on the
    /// copy of the barrier in every CTA along the axes (this one included).
    /// Everything this thread wrote before (and, through a prior CTA barrier,
    /// every thread of the CTA) is visible to the threads that complete a
    /// wait on that phase in those CTAs.
    ///
    /// Issued by one thread per CTA per phase.
    #[inline(always)]
    #[track_caller]
    pub fn arrive(&self) {
        let (me, dim) = (crate::index::cluster_cta_idx(), crate::index::cluster_dim());
        let (me, dim) = ([me.x, me.y, me.z], [dim.x, dim.y, dim.z]);
        // The peers: this CTA's coordinates off the axes, every coordinate
        // along them. `%cluster_ctarank` is x-fastest.
        let ext = [0, 1, 2].map(|d| if spans_axis(A::MASK, d) { dim[d] } else { 1 });
        for k in 0..ext[0] * ext[1] * ext[2] {
            let mut c = me;
            let mut rest = k;
            for d in 0..3 {
                if spans_axis(A::MASK, d) {
                    c[d] = rest % ext[d];
                    rest /= ext[d];
                }
            }
            let rank = c[0] + dim[0] * (c[1] + dim[1] * c[2]);
            // SAFETY: the barrier is at the same offset in every CTA of the
            // cluster (same kernel, same scratch layout), initialized by the
            // prologue before its cluster barrier; `rank` is in the cluster;
            // the peer runs until the epilogue's cluster barrier.
            unsafe { raw::arrive_cluster(crate::cluster::raw::mapa_shared(self.addr, rank)) };
        }
    }
    /// Block until the phase this thread waits for completes in this CTA's
    /// copy (every CTA along the axes arrived), then flip the parity this
    /// thread waits for. The wait acquires at cluster scope
    /// (`mbarrier.try_wait.parity.acquire.cluster`), pairing with the
    /// arrivals' cluster-scope release: a CTA-scope acquire would not
    /// synchronize with another CTA's release.
    ///
    /// Any thread of the CTA; each waiting thread waits for every phase.
    #[inline(always)]
    #[track_caller]
    pub fn wait(&self) {
        let parity = self.parity();
        // SAFETY: an initialized scratch barrier.
        while !unsafe { raw::try_wait_parity_cluster(self.addr, parity) } {}
        self.phase.set(parity ^ 1);
    }
}

// SAFETY: one 8-byte mbarrier, 8-byte aligned, at the same offset in every
// CTA of the cluster (the layout is the kernel's).
unsafe impl<A: ClusterAxes> crate::smem::Scratch for ClusterBarrier<A> {
    const BYTES: usize = MBARRIER_BYTES;
    const ALIGN: usize = 8;
    const TAKES_ARRIVALS: bool = true;
    const CLUSTER_AXES: u8 = A::MASK;
    unsafe fn from_smem(ptr: *mut u8) -> Self {
        // SAFETY: `ptr` is an 8-byte-aligned scratch allocation.
        unsafe { ClusterBarrier::from_smem_addr(crate::smem::shared_addr(ptr)) }
    }
    unsafe fn init(&self, arrivals: u32) {
        // SAFETY: one thread, before use (trait contract); `#[kernel]` passes
        // the derived count.
        unsafe { raw::init(self.addr, arrivals) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrivals_are_the_ctas_along_the_axes() {
        assert_eq!(cluster_barrier_arrivals(X::MASK, [2, 2, 1]), 2);
        assert_eq!(cluster_barrier_arrivals(XY::MASK, [2, 2, 1]), 4);
        assert_eq!(cluster_barrier_arrivals(Y::MASK, [4, 2, 1]), 2);
        assert_eq!(cluster_barrier_arrivals(WholeCluster::MASK, [2, 2, 2]), 8);
        assert_eq!(cluster_barrier_arrivals(YZ::MASK, [1, 2, 4]), 8);
    }

    #[test]
    fn named_axes_must_have_more_than_one_cta() {
        assert!(cluster_axes_in_cluster(X::MASK, [2, 1, 1]));
        assert!(!cluster_axes_in_cluster(Y::MASK, [2, 1, 1]));
        assert!(!cluster_axes_in_cluster(XY::MASK, [2, 1, 1]));
        assert!(cluster_axes_in_cluster(WholeCluster::MASK, [1, 1, 1]));
    }
}
