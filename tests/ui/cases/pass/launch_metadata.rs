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
    assert_eq!(spec::<tuned>(), ("tuned", Dim3::new(384, 1, 1), Dim3::new(1, 1, 1), 32768));
    // The parameter tuple the host must match.
    let _: <plain as KernelSpec>::Params = (core::ptr::null::<f32>(), core::ptr::null_mut::<f32>(), 3u32);
    let _: <with_scratch as KernelSpec>::Params = (core::ptr::null_mut::<f32>(),);
}
