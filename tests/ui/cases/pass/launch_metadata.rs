//! Kernels that must compile, and the launch metadata `#[kernel]` derives.
use kernel_device::launch::{Dim3, KernelSpec};
use kernel_device::prelude::*;

/// Default block: one warpgroup; no scratch.
#[kernel]
pub fn plain(x: *const f32, y: *mut f32, n: u32) {
    let i = thread_idx().x;
    if i < n {
        unsafe { *y.add(i as usize) = *x.add(i as usize) };
    }
}

/// Scratch placed in order with alignment: 512 B of f32 at 0, two barriers
/// at 512, one barrier at 528, 6 bytes at 544 (16-aligned) => 550 bytes.
#[kernel(block = warpgroups(2), cluster = (2, 1, 1))]
pub fn with_scratch(
    mut a: *mut f32,
    #[scratch] buf: Smem<[f32; 128]>,
    #[scratch(arrivals = 128)] full: Barriers<2>,
    #[scratch] done: Barrier,
    #[scratch] tail: Smem<[u8; 6]>,
) {
    a = a.wrapping_add(0);
    let _ = (a, buf, full.len(), done.parity(), tail);
}

#[kernel(block = (32, 4, 2), instances((1), (4)))]
pub fn staged<const STAGES: usize>(x: *mut f32, #[scratch] bufs: Smem<[[f32; 256]; STAGES]>, #[scratch] ready: Barriers<STAGES>) {
    let _ = (x, bufs, ready.len());
}

/// An element type the generic kernels below accept.
pub trait Elem: Copy {}
impl Elem for f32 {}
impl Elem for u16 {}

/// Type parameters: one instance per listed combination, the type part of
/// the entry name. A plain list mixes types and literals in declaration order.
#[kernel(instances((f32, 2), (u16, 4)))]
pub fn typed<E: Elem, const S: usize>(x: Gmem<E>, #[scratch] bufs: Smem<[[E; 32]; S]>) {
    let _ = (x, bufs);
}

/// The cross product: `E = [..]` by name, the tuples give the rest (`S`,
/// `W`) in declaration order: 2 x 2 instances.
#[kernel(instances(E = [f32, u16], (1, 8), (2, 16)))]
pub fn crossed<E, const S: usize, const W: u32>(x: GmemRef<E>, #[scratch] bufs: Smem<[[E; 64]; S]>)
where
    E: Elem,
{
    let _ = (x, bufs);
}

/// The occupancy options and the local-memory opt-out: launch metadata
/// unchanged (they reach ptxas through the PTX).
#[kernel(block = warpgroups(3), min_blocks_per_sm = 2, max_registers = 80, allow_spills = "a planted stack frame")]
pub fn tuned(x: Gmem<f32>, #[scratch] stage: Smem<[[f32; 128]; 64]>) {
    let _ = (x, stage);
}

fn spec<K: KernelSpec>() -> (&'static str, Dim3, Dim3, u32) {
    (K::NAME, K::BLOCK, K::CLUSTER, K::SMEM_BYTES)
}

fn main() {
    assert_eq!(spec::<plain>(), ("plain", Dim3::new(128, 1, 1), Dim3::new(1, 1, 1), 0));
    assert_eq!(spec::<with_scratch>(), ("with_scratch", Dim3::new(256, 1, 1), Dim3::new(2, 1, 1), 550));
    assert_eq!(spec::<staged<1>>(), ("staged__1", Dim3::new(32, 4, 2), Dim3::new(1, 1, 1), 1024 + 8));
    assert_eq!(spec::<staged<4>>(), ("staged__4", Dim3::new(32, 4, 2), Dim3::new(1, 1, 1), 4096 + 32));
    assert_eq!(spec::<typed<f32, 2>>(), ("typed__f32_2", Dim3::new(128, 1, 1), Dim3::new(1, 1, 1), 2 * 128));
    assert_eq!(spec::<typed<u16, 4>>(), ("typed__u16_4", Dim3::new(128, 1, 1), Dim3::new(1, 1, 1), 4 * 64));
    assert_eq!(spec::<crossed<f32, 1, 8>>().0, "crossed__f32_1_8");
    assert_eq!(spec::<crossed<f32, 2, 16>>().0, "crossed__f32_2_16");
    assert_eq!(spec::<crossed<u16, 1, 8>>().0, "crossed__u16_1_8");
    assert_eq!(spec::<crossed<u16, 2, 16>>(), ("crossed__u16_2_16", Dim3::new(128, 1, 1), Dim3::new(1, 1, 1), 2 * 128));
    assert_eq!(spec::<tuned>(), ("tuned", Dim3::new(384, 1, 1), Dim3::new(1, 1, 1), 32768));
    // The parameter tuple the host must match.
    let _: <plain as KernelSpec>::Params = (core::ptr::null::<f32>(), core::ptr::null_mut::<f32>(), 3u32);
    let _: <with_scratch as KernelSpec>::Params = (core::ptr::null_mut::<f32>(),);
}
