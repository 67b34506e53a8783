//! Several devices of one host ([`DeviceGroup`]: GPUs with peer access, or
//! emulated devices in one run): the seed's shard exchange and a ring
//! all-gather, checked element by element against the inputs.
use crate::{check, inputs, Outcome, Result};
use kernel_host::group::DeviceGroup;
use kernels::peer;

/// Semaphore slots per device: one per CTA of the launches below.
fn semaphores(group: &DeviceGroup, grid: u32) -> Result<kernel_host::group::PeerBuffer<u32>> {
    Ok(group.zeros::<u32>(grid as usize)?)
}

/// A grid for moving `chunks` chunks: 4 CTAs per SM on a GPU (at most one
/// per chunk), 2 per device on the emulator.
fn grid_for(group: &DeviceGroup, chunks: usize) -> u32 {
    let want = if group.is_gpu() { 4 * group.device(0).sm_count() as usize } else { 2 };
    want.min(chunks).max(1) as u32
}

/// The seed's `exchange_shards`: device `r`'s shard of `chunks` x
/// [`peer::CHUNK`] floats lands in device `r + 1`'s `y` (mod the count),
/// with bulk copies and a system-scope semaphore per CTA.
pub fn exchange_shards(group: &DeviceGroup, chunks: usize) -> Result<Outcome> {
    let n = group.len();
    let len = chunks * peer::CHUNK;
    let xs: Vec<Vec<f32>> = (0..n).map(|d| inputs(len, 40 + d as u64)).collect();
    let x = group.upload(&xs)?;
    let y = group.upload(&vec![vec![f32::NAN; len]; n])?;
    let grid = grid_for(group, chunks);
    let sems = semaphores(group, grid)?;
    group
        .load(&kernels::DEVICE_CODE)?
        .kernel::<peer::exchange_shards>()?
        .launch(grid, |r| (x.on(r), y.on(r), sems.on(r)))?;
    let got: Vec<f32> = group.download(&y)?.concat();
    let want: Vec<f32> = (0..n).flat_map(|d| xs[(d + n - 1) % n].iter().copied()).collect();
    check("exchange_shards", &got, &want)
}

/// A ring all-gather of one shard of `chunks` x [`peer::CHUNK`] floats per
/// device: afterwards every device holds every shard, in rank order.
pub fn ring_all_gather(group: &DeviceGroup, chunks: usize) -> Result<Outcome> {
    let n = group.len();
    let len = chunks * peer::CHUNK;
    let xs: Vec<Vec<f32>> = (0..n).map(|d| inputs(len, 50 + d as u64)).collect();
    let x = group.upload(&xs)?;
    let out = group.upload(&vec![vec![f32::NAN; n * len]; n])?;
    let grid = grid_for(group, chunks);
    let sems = semaphores(group, grid)?;
    group
        .load(&kernels::DEVICE_CODE)?
        .kernel::<peer::ring_all_gather>()?
        .launch(grid, |r| (x.on(r), out.on(r), sems.on(r)))?;
    let got: Vec<f32> = group.download(&out)?.concat();
    let gathered = xs.concat();
    let want: Vec<f32> = (0..n).flat_map(|_| gathered.iter().copied()).collect();
    check("ring_all_gather", &got, &want)
}

/// The exchange with TMA tensor copies ([`peer::exchange_tiles`]): device
/// `r` stores its `rows x 64` f16 shard into device `r + 1`'s `y` through a
/// tensor map over that device's buffer.
pub fn exchange_tiles(group: &DeviceGroup, rows: usize) -> Result<Outcome> {
    use kernel_device::f16;
    use kernel_host::TileMap;
    let n = group.len();
    let len = rows * 64;
    let xs: Vec<Vec<f16>> = (0..n).map(|d| inputs(len, 60 + d as u64).iter().map(|&v| f16::from_f32(v)).collect()).collect();
    let x = group.upload(&xs)?;
    let mut y = group.upload(&vec![vec![f16::NAN; len]; n])?;
    let sems = group.zeros::<u32>(rows / 64)?;
    let xmaps = (0..n).map(|d| TileMap::<peer::ShardTile>::new_2d(x.part(d), rows, 64)).collect::<kernel_host::Result<Vec<_>>>()?;
    let ymaps = y.parts_mut().map(|p| TileMap::<peer::ShardTile>::new_2d_mut(p, rows, 64)).collect::<kernel_host::Result<Vec<_>>>()?;
    group
        .load(&kernels::DEVICE_CODE)?
        .kernel::<peer::exchange_tiles>()?
        .launch((rows / 64) as u32, |r| (&xmaps[r.index()], &ymaps[(r.index() + 1) % n], sems.on(r)))?;
    drop(ymaps);
    let got: Vec<f32> = group.download(&y)?.concat().iter().map(|v| v.to_f32()).collect();
    let want: Vec<f32> = (0..n).flat_map(|d| xs[(d + n - 1) % n].iter().map(|v| v.to_f32())).collect();
    check("exchange_tiles", &got, &want)
}
