//! Ready kernels with host entry points, like Pallas's `ops/gpu` package:
//! each entry point takes [`Buffer`](kernel_host::Buffer)s of a
//! [`Device`](kernel_host::Device) (a GPU or the CPU emulator: the same call
//! runs on both), checks its inputs (an error names the constraint and the
//! values), picks and caches what it needs (kernel instance, tensor maps),
//! and launches. The examples crates stay the teaching ladder; this crate is
//! what an application calls.
//!
//! | module | entry point | kernels |
//! |---|---|---|
//! | [`norms`] | [`norms::softmax`], [`norms::layer_norm`], [`norms::rms_norm`] (f16, bf16, f32; any width up to 65536), [`norms::add_rms_norm`], [`norms::add_layer_norm`] (f16, bf16; multiples of 8 up to 16384) | `kernel_ops_kernels::norms` |
//! | [`matmul`] | [`Matmul::matmul`] (`c = a · bᵀ`, f16 or bf16, autotuned per shape and type) | `kernel_ops_kernels::matmul` |
//! | [`swiglu`] | [`swiglu::swiglu`] (`out = silu(x · w1ᵀ) * (x · w3ᵀ)`, f16, GPU or emulator) and [`swiglu::swiglu_reference`] | `kernel_ops_kernels::swiglu` (on `kernel_ops_kernels::gemm_multi`) |
//! | [`fp8`] | [`fp8::matmul_fp8`] (`c = (scale_a scale_b) a · bᵀ`, e4m3 in or e5m2 with e4m3, f16 out, GPU or emulator), [`fp8::matmul_fp8_blockscaled`] (1 x 128 / 128 x 128 block scales), the quantizers and CPU references | `kernel_ops_kernels::matmul_fp8` (on `kernel_ops_kernels::gemm_multi`) |
//! | [`attention`] | [`attention::attention`] (`o = softmax(scale q kᵀ) v` and the log-sum-exp, f16/bf16, `[batch, seq, heads, head_dim]`, head_dim 64/128/256, causal, GQA; GPU or emulator) and [`attention::reference`] | `kernel_ops_kernels::attention` |
//! | [`blaslt`] | [`blaslt::BlasLt`] (the cuBLASLt baseline of the `bench` binary) | cuBLASLt |

pub mod attention;
pub mod blaslt;
pub mod collective;
pub mod fp8;
pub mod grouped;
pub mod matmul;
pub mod norms;
pub mod reduce_scatter;
pub mod swiglu;

pub use matmul::{check_problem, check_problem_for, Matmul, MatmulElem, MatmulError};

/// How many CTAs a persistent kernel of this crate launches for `tiles`
/// output tiles on `sms` SMs. Its CTAs take tiles `i, i + grid, ..` (the
/// static schedule of `nd_loop`), so the kernel takes `ceil(tiles / grid)`
/// waves of tiles either way; the policies differ in how full the last one is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Ctas {
    /// The fewest CTAs that still finish in `ceil(tiles / sms)` waves:
    /// `ceil(tiles / waves)`, so every CTA runs `waves` tiles or one fewer
    /// (4096 tiles on 132 SMs: 128 CTAs of 32 tiles, not 4 CTAs running a
    /// 32nd wave alone). At the power cap the SMs left idle hand their
    /// power to the busy ones, which is what a nearly empty last wave cannot
    /// use.
    #[default]
    EvenWaves,
    /// `min(sms, tiles)`: a CTA on every SM, and a last wave of `tiles %
    /// sms` tiles.
    EverySm,
}

impl Ctas {
    /// The grid for `tiles` tiles on `sms` SMs (0 for no tiles).
    pub fn grid(self, tiles: u32, sms: u32) -> u32 {
        let sms = sms.max(1);
        match self {
            _ if tiles == 0 => 0,
            Ctas::EverySm => sms.min(tiles),
            Ctas::EvenWaves => tiles.div_ceil(tiles.div_ceil(sms)),
        }
    }
}

/// Errors of the entry points.
#[derive(Debug)]
pub enum Error {
    /// The inputs do not fit the kernel's constraints.
    Shape { op: &'static str, problem: String },
    /// The runtime failed: a CUDA or launch error on a GPU, a race or
    /// protocol report of the CPU emulator (`kernel_host::Error::Emulator`).
    Runtime(kernel_host::Error),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Shape { op, problem } => write!(f, "{op}: {problem}"),
            Error::Runtime(e) => write!(f, "{e}"),
        }
    }
}
impl std::error::Error for Error {}
impl From<kernel_host::Error> for Error {
    fn from(e: kernel_host::Error) -> Self {
        Error::Runtime(e)
    }
}

/// Checks that every buffer of an entry point (`(name, start address,
/// elements)`, [`at`]) that holds elements starts at a multiple of 16
/// bytes ([`kernel_host::GLOBAL_ALIGN`]): TMA's `globalAddress` rule, and
/// the kernels' 16-byte vector loads and stores (`ld/st.global.v4`), which
/// trap on the GPU at a misaligned address. A [`Device`](kernel_host::Device)'s
/// allocations are 256-byte aligned; a view borrowed at an offset
/// ([`kernel_host::Buffer::borrow_gpu`], [`kernel_host::Buffer::borrow_host`])
/// may not be. (The Python package checks the same rule on its arrays.)
pub fn check_aligned(op: &'static str, bufs: &[(&str, u64, usize)]) -> Result<(), Error> {
    match bufs.iter().find(|(_, addr, len)| *len > 0 && addr % kernel_host::GLOBAL_ALIGN != 0) {
        None => Ok(()),
        Some((name, addr, _)) => Err(Error::Shape { op, problem: misaligned(name, *addr) }),
    }
}

/// The problem of a buffer `name` starting at `addr`, not a multiple of 16.
pub(crate) fn misaligned(name: &str, addr: u64) -> String {
    let align = kernel_host::GLOBAL_ALIGN;
    format!(
        "`{name}` starts at {addr:#x}, {} bytes past a multiple of {align}: every buffer must start at a multiple of {align} bytes (TMA and the kernels' 16-byte vector accesses need it); pass a fresh allocation, or a view at an aligned offset",
        addr % align
    )
}

/// A buffer's name, start address and length, for [`check_aligned`].
pub fn at<'a, T>(name: &'a str, buf: &kernel_host::Buffer<T>) -> (&'a str, u64, usize) {
    (name, buf.address(), buf.len())
}

/// The `main` of this crate's benchmark binaries (`swiglu_bench`,
/// `fp8_bench`, ...): takes their parsed arguments (clap has already
/// answered `--help` and exited 2 on a usage error), opens the GPU (or the
/// emulator), runs, and exits 0 only if every output matched its CPU
/// reference; errors are printed, not panicked.
pub fn bench_main<A>(args: A, run: impl FnOnce(&kernel_host::Device, &A) -> Result<bool, Box<dyn std::error::Error>>) -> std::process::ExitCode {
    use std::process::ExitCode;
    let fail = |e: &dyn std::fmt::Display| {
        eprintln!("error: {e}");
        ExitCode::FAILURE
    };
    let dev = match kernel_host::Device::gpu_or_emulator() {
        Ok(d) => d,
        Err(e) => return fail(&e),
    };
    match run(&dev, &args) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => {
            eprintln!("FAIL: an output differs from the CPU reference");
            ExitCode::FAILURE
        }
        Err(e) => fail(&e),
    }
}

/// Parses a GEMM shape `MxNxK` (`4096x8192x4096`), as the benchmark
/// binaries' `--shape` takes it: a clap value parser, so a malformed shape
/// is a usage error naming the flag.
pub fn parse_mnk(s: &str) -> Result<(usize, usize, usize), String> {
    let dims: Vec<usize> = s.split('x').map(|d| d.trim().parse::<usize>().map_err(|e| format!("`{d}` in `{s}`: {e}"))).collect::<Result<_, _>>()?;
    match dims[..] {
        [m, n, k] if m > 0 && n > 0 && k > 0 => Ok((m, n, k)),
        [_, _, _] => Err(format!("`{s}`: M, N and K must be positive")),
        _ => Err(format!("`{s}` is not MxNxK (three sizes joined by `x`, as 4096x8192x4096)")),
    }
}

#[cfg(test)]
mod tests {
    use super::{parse_mnk, Ctas};

    #[test]
    fn shapes_parse_as_m_x_n_x_k() {
        assert_eq!(parse_mnk("4096x8192x1024"), Ok((4096, 8192, 1024)));
        for bad in ["4096x8192", "4096x8192x1024x2", "4096xx1024", "0x8x8", "axbxc", ""] {
            assert!(parse_mnk(bad).is_err(), "{bad:?} parsed");
        }
    }

    #[test]
    fn even_waves_keep_the_wave_count_with_the_fewest_ctas() {
        for sms in [1u32, 2, 7, 114, 132] {
            for tiles in 0..3 * sms + 5 {
                let (even, every) = (Ctas::EvenWaves.grid(tiles, sms), Ctas::EverySm.grid(tiles, sms));
                assert_eq!(every, sms.min(tiles));
                if tiles == 0 {
                    assert_eq!(even, 0);
                    continue;
                }
                let waves = tiles.div_ceil(sms);
                assert!(even <= every && tiles.div_ceil(even) == waves, "{tiles} tiles on {sms} SMs: grid {even}");
                // Fewest: one CTA less would need another wave.
                assert!(even == 1 || tiles.div_ceil(even - 1) > waves, "{tiles} tiles on {sms} SMs: grid {even} is not the fewest");
            }
        }
        // The shapes of the benchmarks: 8192 x 8192 in 128 x 128 tiles
        // (SwiGLU) and 128 x 256 tiles on an H100's 132 SMs.
        assert_eq!(Ctas::EvenWaves.grid(4096, 132), 128);
        assert_eq!(Ctas::EvenWaves.grid(2048, 132), 128);
        assert_eq!(Ctas::EvenWaves.grid(133, 132), 67);
    }
}
