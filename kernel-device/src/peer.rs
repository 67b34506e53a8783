//! Peer memory: the buffers of several GPUs of one host, reachable from a
//! kernel on any of them over NVLink (Pallas's `remote_ref` /
//! `semaphore_signal(.., device_id=..)`, ThunderKittens' parallel global
//! layouts).
//!
//! The host (`kernel_host::group`) allocates one buffer per device, enables
//! peer access between every pair and passes each device's kernel a
//! [`PeerGmem`]: every device's address of the buffer, this device's rank
//! and the device count. A kernel reads and writes another device's part
//! through [`PeerGmem::remote`] (a bounds-checked [`Gmem`], so the emulator's
//! race detector sees the access), copies to or from it with the bulk
//! copies of [`crate::tma::bulk`], and tells the other device that data
//! arrived with a [`PeerSemaphores`] signal (or a [`PeerCounters`] add, for
//! counters that grow across launches): a system-scope release there,
//! matched by that device's system-scope acquire. A `.gpu`-scope release
//! does not order another GPU's reader; the emulator reports the race.
//!
//! ```
//! use kernel_device::prelude::*;
//! use kernel_device::peer::{PeerGmem, PeerSemaphores};
//!
//! /// Each device writes its `x` into slot `rank` of every device's `out`,
//! /// then waits until every device wrote its slot here.
//! #[kernel(block = threads(64))]
//! pub fn exchange(x: GmemRef<f32>, out: PeerGmem<f32>, sems: PeerSemaphores) {
//!     let (me, n, t) = (out.rank(), out.count(), thread_idx().x as usize);
//!     for d in 0..n {
//!         out.remote(d).write(me as usize * 64 + t, x.read(t));
//!     }
//!     sync_threads();
//!     if t == 0 {
//!         for d in 0..n {
//!             sems.signal(d, 0, 1);
//!         }
//!         sems.wait(0, n);
//!     }
//!     sync_threads();
//! }
//! ```
use crate::gmem::Gmem;
use crate::launch::DeviceParam;
use crate::semaphore::raw;

pub use kernel_spec::limits::MAX_PEER_DEVICES;

/// One buffer of `len` elements on each of `count` devices, seen from the
/// device of rank `rank`: a kernel parameter (the host passes
/// `kernel_host::group::PeerBuffer::on(rank)`).
#[repr(C)]
pub struct PeerGmem<T> {
    ptrs: [*mut T; MAX_PEER_DEVICES],
    len: usize,
    rank: u32,
    count: u32,
}

impl<T> Clone for PeerGmem<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for PeerGmem<T> {}

impl<T> core::fmt::Debug for PeerGmem<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "PeerGmem<{}>(rank {} of {}, {} elements)", core::any::type_name::<T>(), self.rank, self.count, self.len)
    }
}

// SAFETY: plain data: device addresses and integers, the same bytes on both
// sides (`#[repr(C)]`).
unsafe impl<T> DeviceParam for PeerGmem<T> {
    type Abi = PeerGmem<T>;
    #[inline(always)]
    fn from_abi(abi: PeerGmem<T>, _: u64) -> PeerGmem<T> {
        abi
    }
}

impl<T> PeerGmem<T> {
    /// # Safety
    /// `ptrs[d]` for `d < count` points to `len` elements of `T` in global
    /// memory reachable from the device of rank `rank` (its own memory, or a
    /// peer's with peer access enabled), valid for the kernel's lifetime;
    /// `rank < count <= MAX_PEER_DEVICES`.
    pub const unsafe fn from_raw_parts(ptrs: [*mut T; MAX_PEER_DEVICES], len: usize, rank: u32, count: u32) -> Self {
        PeerGmem { ptrs, len, rank, count }
    }
    /// This device's rank in the group, `0..count()`.
    #[inline(always)]
    pub fn rank(&self) -> u32 {
        self.rank
    }
    /// Devices in the group.
    #[inline(always)]
    pub fn count(&self) -> u32 {
        self.count
    }
    /// Elements of each device's part.
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.len
    }
    /// Whether the parts are empty.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// The next device of the ring, `(rank + 1) % count`.
    #[inline(always)]
    pub fn next(&self) -> u32 {
        if self.rank + 1 == self.count { 0 } else { self.rank + 1 }
    }
    /// The previous device of the ring, `(rank + count - 1) % count`.
    #[inline(always)]
    pub fn prev(&self) -> u32 {
        if self.rank == 0 { self.count - 1 } else { self.rank - 1 }
    }
}

impl<T: Copy> PeerGmem<T> {
    /// This device's part.
    #[inline(always)]
    #[track_caller]
    pub fn local(&self) -> Gmem<T> {
        self.remote(self.rank)
    }
    /// Device `device`'s part (this device's own for `device == rank()`):
    /// loads and stores go over NVLink. A device outside the group is a
    /// trap on the GPU and a reported misuse on the emulator.
    #[inline(always)]
    #[track_caller]
    pub fn remote(&self, device: u32) -> Gmem<T> {
        if device >= self.count {
            no_such_device(device, self.count);
        }
        // A select per slot rather than `ptrs[device]`: a dynamic index
        // into a kernel parameter's array copies the parameter to local
        // memory (an 80-byte stack frame per `PeerGmem`). Each address
        // passes through `opaque_ptr` first: without it the compiler turned
        // the selects back into that indexed load where `remote` ran inside
        // a loop (the reduce-scatter matmul's tile loop).
        let mut ptr = opaque_ptr(self.ptrs[0]);
        let mut i = 1;
        while i < MAX_PEER_DEVICES {
            let candidate = opaque_ptr(self.ptrs[i]);
            if i as u32 == device {
                ptr = candidate;
            }
            i += 1;
        }
        // SAFETY: `from_raw_parts`' contract for `device < count`.
        unsafe { Gmem::from_raw_parts(ptr, self.len) }
    }
}

impl PeerGmem<u32> {
    /// The address of word `slot` of device `device`'s part: a counter of
    /// [`PeerSemaphores`] or [`PeerCounters`], for their atomics. A slot or
    /// device out of range is a trap on the GPU and a reported misuse on
    /// the emulator.
    #[inline(always)]
    #[track_caller]
    fn counter(&self, device: u32, slot: usize) -> *mut u32 {
        let g = self.remote(device);
        crate::gmem::check_range(slot, 1, g.len());
        // SAFETY: in bounds (checked).
        unsafe { g.as_ptr().add(slot) }
    }
}

/// `p`, which the compiler must treat as a value computed here (an empty
/// `asm!` with `p` in and out of one register: no instruction), so that a
/// select among such values stays a select.
#[inline(always)]
fn opaque_ptr<T>(p: *mut T) -> *mut T {
    #[cfg(target_arch = "nvptx64")]
    {
        let mut a = p as u64;
        // SAFETY: no instruction; `a` stays in its register. Not `pure`, so
        // it is neither merged with another nor hoisted.
        unsafe { core::arch::asm!("// opaque {0}", inout(reg64) a, options(nomem, nostack, preserves_flags)) };
        a as *mut T
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        p
    }
}

#[cold]
#[track_caller]
fn no_such_device(device: u32, count: u32) -> ! {
    device!("peer device check", {
        let _ = (device, count);
        // SAFETY: aborts the kernel.
        unsafe { core::arch::asm!("trap;", options(noreturn, nostack)) }
    }, host: {
        kernel_emu::misuse(
            "peer device out of range",
            format_args!("device {device} of a group of {count}: use a rank in 0..{count} (PeerGmem::count)"),
        )
    })
}

/// Cross-device semaphores: `slots` zeroed `u32` counters on each device of
/// a group (a kernel parameter; the host passes
/// `kernel_host::group::PeerBuffer<u32>::semaphores(rank)`). [`signal`]
/// adds to a counter on any device with a system-scope release;
/// [`wait`] spins on this device's counter with a system-scope acquire and
/// consumes what it waited for. Each waiting device must be running while
/// the others signal: launch the group's kernels together (the host's
/// group launch does).
///
/// [`signal`]: PeerSemaphores::signal
/// [`wait`]: PeerSemaphores::wait
#[repr(transparent)]
#[derive(Clone, Copy, Debug)]
pub struct PeerSemaphores {
    words: PeerGmem<u32>,
}

// SAFETY: a `PeerGmem<u32>`, plain data.
unsafe impl DeviceParam for PeerSemaphores {
    type Abi = PeerSemaphores;
    #[inline(always)]
    fn from_abi(abi: PeerSemaphores, _: u64) -> PeerSemaphores {
        abi
    }
}

impl PeerSemaphores {
    /// # Safety
    /// As [`PeerGmem::from_raw_parts`], the words zero at the launch and used
    /// only as semaphores during the kernel.
    pub const unsafe fn from_words(words: PeerGmem<u32>) -> Self {
        PeerSemaphores { words }
    }
    /// This device's rank.
    #[inline(always)]
    pub fn rank(&self) -> u32 {
        self.words.rank()
    }
    /// Devices in the group.
    #[inline(always)]
    pub fn count(&self) -> u32 {
        self.words.count()
    }
    /// Counters per device.
    #[inline(always)]
    pub fn slots(&self) -> usize {
        self.words.len()
    }
    /// Adds `n` to counter `slot` of device `device` (this one or a peer):
    /// `red.release.sys.global.add.u32`. What this thread wrote before, and
    /// what it saw through barriers (a `sync_threads` after the CTA's
    /// stores), is visible to the thread whose [`wait`](Self::wait) consumes
    /// the signal.
    #[inline(always)]
    #[track_caller]
    pub fn signal(&self, device: u32, slot: usize, n: u32) {
        let w = self.words.counter(device, slot);
        // SAFETY: an aligned u32 of the group's semaphore words.
        unsafe { raw::red_release_sys_add(w, n) }
    }
    /// Spins until this device's counter `slot` is at least `n`, then
    /// subtracts `n` (`ld.acquire.sys` and `atom.acquire.sys.cas`).
    #[inline(always)]
    #[track_caller]
    pub fn wait(&self, slot: usize, n: u32) {
        let w = self.words.counter(self.rank(), slot);
        loop {
            // SAFETY: as in `signal`.
            let v = unsafe { raw::ld_acquire_sys(w) };
            // SAFETY: as above.
            if v >= n && unsafe { raw::atom_cas_acquire_sys(w, v, v - n) } == v {
                return;
            }
            raw::nanosleep(64);
        }
    }
}

/// Cross-device counters that only grow: `slots` `u32` words on each device
/// of a group (a kernel parameter; the host passes
/// `kernel_host::group::PeerBuffer<u32>::on(rank)`), for hand-overs that
/// repeat across launches without a reset. Each launch is one *epoch*
/// (`1, 2, ..`, wrapping): a counter that `senders` signals of `n` each
/// reach per launch holds `epoch x senders x n` once epoch `epoch`'s
/// signals are in, so a waiter compares against that target instead of
/// consuming ([`PeerSemaphores`] consume, and need zeros at the launch).
///
/// - [`add`](Self::add): `red.release.sys.global.add.u32` on any device's
///   counter: what this thread wrote before, and saw through a barrier, is
///   visible to whoever acquires the count;
/// - [`wait_for`](Self::wait_for): spins (`ld.acquire.sys`) until this
///   device's counter has reached `target`, compared in wrapping
///   arithmetic (`counter - target` read as `i32` is `>= 0`), so epochs
///   may wrap past `u32::MAX` as long as no counter runs `2^31` ahead of a
///   waiter's target.
///
/// The same residency rule as [`PeerSemaphores`]: every waiting kernel of
/// the group must be running while the others add (the host's group
/// launch).
#[repr(transparent)]
#[derive(Clone, Copy, Debug)]
pub struct PeerCounters {
    words: PeerGmem<u32>,
}

// SAFETY: a `PeerGmem<u32>`, plain data.
unsafe impl DeviceParam for PeerCounters {
    type Abi = PeerCounters;
    #[inline(always)]
    fn from_abi(abi: PeerCounters, _: u64) -> PeerCounters {
        abi
    }
}

impl PeerCounters {
    /// # Safety
    /// As [`PeerGmem::from_raw_parts`], the words used only as counters (by
    /// these methods) while any kernel of the group runs.
    pub const unsafe fn from_words(words: PeerGmem<u32>) -> Self {
        PeerCounters { words }
    }
    /// This device's rank.
    #[inline(always)]
    pub fn rank(&self) -> u32 {
        self.words.rank()
    }
    /// Devices in the group.
    #[inline(always)]
    pub fn count(&self) -> u32 {
        self.words.count()
    }
    /// The next device of the ring, `(rank + 1) % count`.
    #[inline(always)]
    pub fn next(&self) -> u32 {
        self.words.next()
    }
    /// Counters per device.
    #[inline(always)]
    pub fn slots(&self) -> usize {
        self.words.len()
    }
    /// Adds `n` to counter `slot` of device `device` (this one or a peer)
    /// with a system-scope release.
    #[inline(always)]
    #[track_caller]
    pub fn add(&self, device: u32, slot: usize, n: u32) {
        let w = self.words.counter(device, slot);
        // SAFETY: an aligned u32 of the group's counter words.
        unsafe { raw::red_release_sys_add(w, n) }
    }
    /// Spins until this device's counter `slot` has reached `target`
    /// (wrapping comparison; type docs), with a system-scope acquire.
    #[inline(always)]
    #[track_caller]
    pub fn wait_for(&self, slot: usize, target: u32) {
        let w = self.words.counter(self.rank(), slot);
        // SAFETY: as in `add`.
        while (unsafe { raw::ld_acquire_sys(w) }.wrapping_sub(target) as i32) < 0 {
            raw::nanosleep(64);
        }
    }
}
