//! Running kernels on the CPU emulator (crate `kernel-emu`): the same kernel
//! source, compiled for the host, run with one emulated thread per GPU
//! thread under a seeded, deterministic scheduler that checks the
//! synchronization protocol (deadlocks, mbarrier misuse).
//!
//! ```ignore
//! let x = vec![1.0f32; 256];
//! let mut y = vec![0.0f32; 256];
//! Emulator::new(7).launch::<kernels::first::increment>(2u32, (&x[..], &mut y[..], 256u32))?;
//! ```
//!
//! Arguments are host memory: `&[T]` for a `*const T` parameter, `&mut [T]`
//! for `*mut T`, `&mut [u32]` for a `Semaphore`, scalars as themselves.
//! Not emulated yet: TMA and wgmma (their operations panic on the host,
//! naming the operation).
use kernel_device::launch::{Dim3, HostEntry};
use kernel_device::Semaphore;

pub use kernel_emu::{EmuError, RunReport};

/// A host value passed for a kernel parameter of type `P` on the emulator.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be passed to the emulator for a kernel parameter of type `{P}`",
    note = "pass `&[T]` for `*const T`, `&mut [T]` for `*mut T`, `&mut [u32]` for `Semaphore`, and a value of exactly the parameter's type for a scalar"
)]
pub trait HostArg<P> {
    fn into_param(self) -> P;
}

macro_rules! scalar_host_args {
    ($($t:ty),*) => {$(
        impl HostArg<$t> for $t {
            fn into_param(self) -> $t { self }
        }
    )*};
}
scalar_host_args!(u8, u16, u32, u64, usize, i8, i16, i32, i64, isize, f32, f64, bool);

impl<T> HostArg<*const T> for &[T] {
    fn into_param(self) -> *const T {
        self.as_ptr()
    }
}
impl<T> HostArg<*const T> for &mut [T] {
    fn into_param(self) -> *const T {
        self.as_ptr()
    }
}
impl<T> HostArg<*mut T> for &mut [T] {
    fn into_param(self) -> *mut T {
        self.as_mut_ptr()
    }
}
impl HostArg<Semaphore> for &mut [u32] {
    fn into_param(self) -> Semaphore {
        assert!(!self.is_empty(), "a Semaphore argument needs at least one u32");
        // SAFETY: a live, aligned u32 the caller lends for the launch.
        unsafe { Semaphore::from_ptr(self.as_mut_ptr()) }
    }
}

/// A tuple of host arguments for a kernel whose parameters are `Params`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` does not match the kernel's parameters `{Params}`",
    note = "pass one argument per kernel parameter, as a tuple in order: `(&x[..], &mut y[..], n)`"
)]
pub trait HostArgs<Params> {
    fn pack(self) -> Params;
}

macro_rules! host_tuple {
    ($(($A:ident, $P:ident, $a:ident)),*) => {
        impl<$($A: HostArg<$P>, $P),*> HostArgs<($($P,)*)> for ($($A,)*) {
            #[allow(clippy::unused_unit)]
            fn pack(self) -> ($($P,)*) {
                let ($($a,)*) = self;
                ($($a.into_param(),)*)
            }
        }
    };
}
host_tuple!();
host_tuple!((A0, P0, a0));
host_tuple!((A0, P0, a0), (A1, P1, a1));
host_tuple!((A0, P0, a0), (A1, P1, a1), (A2, P2, a2));
host_tuple!((A0, P0, a0), (A1, P1, a1), (A2, P2, a2), (A3, P3, a3));
host_tuple!((A0, P0, a0), (A1, P1, a1), (A2, P2, a2), (A3, P3, a3), (A4, P4, a4));
host_tuple!((A0, P0, a0), (A1, P1, a1), (A2, P2, a2), (A3, P3, a3), (A4, P4, a4), (A5, P5, a5));
host_tuple!((A0, P0, a0), (A1, P1, a1), (A2, P2, a2), (A3, P3, a3), (A4, P4, a4), (A5, P5, a5), (A6, P6, a6));
host_tuple!((A0, P0, a0), (A1, P1, a1), (A2, P2, a2), (A3, P3, a3), (A4, P4, a4), (A5, P5, a5), (A6, P6, a6), (A7, P7, a7));

/// The parameter values, shared by the emulated threads (which run one at a
/// time; the emulator's baton orders their accesses).
struct Shared<P>(P);
// SAFETY: the values are plain data (raw pointers into memory the caller
// lends for the launch); only one emulated thread runs at a time.
unsafe impl<P> Sync for Shared<P> {}

/// Runs kernels on the CPU, deterministically for a given seed.
#[derive(Clone, Debug)]
pub struct Emulator {
    seed: u64,
    max_steps: u64,
}

impl Emulator {
    /// An emulator whose scheduler is seeded with `seed`: the same seed gives
    /// the same interleaving of threads.
    pub fn new(seed: u64) -> Self {
        // About a minute of emulation (~30 us a step) before a spinning
        // kernel is reported.
        Emulator { seed, max_steps: 2_000_000 }
    }

    /// Scheduling steps after which a run that has not finished is reported
    /// as making no progress (spinning).
    pub fn max_steps(mut self, steps: u64) -> Self {
        self.max_steps = steps;
        self
    }

    /// Runs kernel `K` over `grid` CTAs with `args` (host memory).
    pub fn launch<K, A>(&self, grid: impl Into<Dim3>, args: A) -> Result<RunReport, EmuError>
    where
        K: HostEntry,
        A: HostArgs<K::Params>,
    {
        let grid = grid.into();
        let (block, cluster) = (K::BLOCK, K::CLUSTER);
        for (axis, g, c) in [("x", grid.x, cluster.x), ("y", grid.y, cluster.y), ("z", grid.z, cluster.z)] {
            if g == 0 || g % c != 0 {
                return Err(EmuError::Misuse {
                    kernel: K::NAME.to_string(),
                    rule: "the grid is a non-zero multiple of the cluster shape in every dimension".into(),
                    where_: "launch".into(),
                    detail: format!("grid.{axis} = {g}, cluster.{axis} = {c}"),
                });
            }
        }
        let cfg = kernel_emu::LaunchConfig {
            kernel: K::NAME.to_string(),
            grid: [grid.x, grid.y, grid.z],
            block: [block.x, block.y, block.z],
            cluster: [cluster.x, cluster.y, cluster.z],
            smem_bytes: K::SMEM_BYTES as usize,
            seed: self.seed,
            max_steps: self.max_steps,
        };
        let params = Shared(args.pack());
        // Capture the whole `&Shared` (Sync), not the field (a move closure
        // captures up to the first dereference).
        let shared = &params;
        kernel_emu::run(&cfg, &move || K::run_thread(&shared.0))
    }
}

