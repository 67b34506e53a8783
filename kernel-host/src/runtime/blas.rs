//! [`Blas`]: a cuBLAS f16 (or bf16: [`BlasElem`]) matrix-product baseline
//! on row-major matrices, through cudarc's [`CudaBlas`] and `Gemm<f16>`
//! (`Gemm<bf16>`: `CUDA_R_16BF`) (`cublasGemmEx` with f16
//! inputs and output, f32 compute, `CUBLAS_GEMM_DEFAULT`).
//!
//! cuBLAS is column-major; our matrices are row-major. A row-major `R x C`
//! matrix with leading dimension `C` is, read as column-major, its transpose
//! (`C x R`, leading dimension `C`). So every product is computed as its
//! transpose, `Cᵀ = op(B)ᵀ · op(A)ᵀ`, with the operands swapped and no data
//! moved:
//!
//! | row-major product | cuBLAS call (column-major) |
//! |---|---|
//! | `gemm_nt`: `C(MxN) = A(MxK) · B(NxK)ᵀ` | `Cᵀ(NxM) = Bᵀ · Aᵀ` read as `op(B-view KxN) = T`, `op(A-view KxM) = N`: `transa = T, transb = N, m = N, n = M, k = K, A = b, lda = K, B = a, ldb = K, ldc = N` |
//! | `gemm_nn`: `C(MxN) = A(MxK) · B(KxN)` | `Cᵀ(NxM) = Bᵀ · Aᵀ`, the views of `b` (`NxK`, ld `N`) and `a` (`KxM`, ld `K`) used as they are: `transa = N, transb = N, m = N, n = M, k = K, A = b, lda = N, B = a, ldb = K, ldc = N` |
//!
//! cuBLAS is loaded at first use (cudarc's `dynamic-loading`: `libcublas.so`,
//! then `libcublas.so.13`, `.12`, ... on the library path). [`Blas::new`]
//! returns an [`Error::Cublas`] saying "cuBLAS could not be loaded" when it
//! is not there, instead of cudarc's panic.

use super::error::{Error, Result};
use super::gpu::Gpu;
use cudarc::cublas::result::CublasError;
use cudarc::cublas::sys::cublasOperation_t;
use cudarc::cublas::{CudaBlas, Gemm, GemmConfig};
use cudarc::driver::CudaSlice;
use half::{bf16, f16};
use std::ffi::c_int;
use std::panic::{self, AssertUnwindSafe};
use std::sync::OnceLock;

/// Whether a cuBLAS library can be `dlopen`ed under one of the names cudarc
/// tries. Asked once per process.
fn cublas_present() -> bool {
    static PRESENT: OnceLock<bool> = OnceLock::new();
    *PRESENT.get_or_init(|| {
        // SAFETY: only `dlopen`s and closes libcublas (running its
        // initializers, as cudarc's first cuBLAS call would).
        unsafe { cudarc::cublas::sys::is_culib_present() }
    })
}

/// The message of a panic payload.
fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "(non-string panic payload)".to_string()
    }
}

const NOT_LOADED: &str = "cuBLAS could not be loaded";
const LOAD_FIX: &str = "put the directory holding libcublas.so.13 (CUDA toolkit lib64, or pip's \
    nvidia-cublas nvidia/cu13/lib) on LD_LIBRARY_PATH";

/// Runs `f`, a call into cuBLAS, turning a panic (cudarc panics when the
/// library or one of its symbols is missing) into an [`Error::Cublas`].
fn guarded<T>(
    call: &'static str,
    f: impl FnOnce() -> std::result::Result<T, CublasError>,
) -> Result<T> {
    match panic::catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(Error::Cublas {
            call,
            reason: format!("{:?}", e.0),
        }),
        Err(payload) => Err(Error::Cublas {
            call,
            reason: format!(
                "{NOT_LOADED} (cudarc panicked: {}); {LOAD_FIX}",
                panic_message(&*payload)
            ),
        }),
    }
}

/// The checks and guard of [`Blas::new`], over their inputs so that the
/// failure paths are testable without cuBLAS.
fn create_handle(
    lib_present: bool,
    create: impl FnOnce() -> std::result::Result<CudaBlas, CublasError>,
) -> Result<CudaBlas> {
    if !lib_present {
        return Err(Error::Cublas {
            call: "CudaBlas::new",
            reason: format!(
                "{NOT_LOADED}: no libcublas.so, libcublas.so.13 (or .12, .11, ...) on the \
                 library path; {LOAD_FIX}"
            ),
        });
    }
    guarded(
        "CudaBlas::new (cublasCreate_v2 + cublasSetStream_v2)",
        create,
    )
}

/// Which row-major product.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Layout {
    /// `C = A · Bᵀ`, `b` is `N x K`.
    Nt,
    /// `C = A · B`, `b` is `K x N`.
    Nn,
}

impl Layout {
    fn function(self) -> &'static str {
        match self {
            Layout::Nt => "Blas::gemm_nt",
            Layout::Nn => "Blas::gemm_nn",
        }
    }
}

/// The element types of [`Blas`]'s products: f16 and bf16 (`A`, `B` and
/// `C` alike; cudarc's `Gemm<T>`: `cublasGemmEx` with `CUDA_R_16F` or
/// `CUDA_R_16BF`, f32 compute).
pub trait BlasElem: Copy + cudarc::driver::DeviceRepr + 'static
where
    CudaBlas: Gemm<Self>,
{
    /// `"f16"` or `"bf16"` (in errors).
    const NAME: &'static str;
    const ONE: Self;
    const ZERO: Self;
}
impl BlasElem for f16 {
    const NAME: &'static str = "f16";
    const ONE: Self = f16::ONE;
    const ZERO: Self = f16::ZERO;
}
impl BlasElem for bf16 {
    const NAME: &'static str = "bf16";
    const ONE: Self = bf16::ONE;
    const ZERO: Self = bf16::ZERO;
}

/// Checks `m, n, k` against the buffer lengths and cuBLAS's `int` range and
/// returns the cuBLAS configuration (column-major, see the module docs).
fn gemm_config<T: BlasElem>(
    layout: Layout,
    (m, n, k): (usize, usize, usize),
    (a_len, b_len, c_len): (usize, usize, usize),
) -> Result<GemmConfig<T>>
where
    CudaBlas: Gemm<T>,
{
    let function = layout.function();
    let bad = |problem: String| Error::InvalidArgument { function, problem };
    if m == 0 || n == 0 || k == 0 {
        return Err(bad(format!(
            "m = {m}, n = {n}, k = {k}: every dimension must be at least 1"
        )));
    }
    let int = |name: &str, v: usize| -> Result<c_int> {
        c_int::try_from(v).map_err(|_| {
            bad(format!(
                "{name} = {v} is over cuBLAS's limit of {} (a 32-bit int)",
                c_int::MAX
            ))
        })
    };
    let (mi, ni, ki) = (int("m", m)?, int("n", n)?, int("k", k)?);
    let (b_rows, b_cols, b_name) = match layout {
        Layout::Nt => (n, k, "N x K"),
        Layout::Nn => (k, n, "K x N"),
    };
    for (name, shape, rows, cols, len) in [
        ("a", "M x K", m, k, a_len),
        ("b", b_name, b_rows, b_cols, b_len),
        ("c", "M x N", m, n, c_len),
    ] {
        let want = rows.checked_mul(cols).ok_or_else(|| {
            bad(format!(
                "{name} would be {rows} x {cols} elements, over usize::MAX"
            ))
        })?;
        if len != want {
            return Err(bad(format!(
                "`{name}` must be {shape} = {rows} x {cols} = {want} {} elements (row-major) \
                 for m = {m}, n = {n}, k = {k}, but it has {len}",
                T::NAME
            )));
        }
    }
    let one = T::ONE;
    let zero = T::ZERO;
    Ok(match layout {
        Layout::Nt => GemmConfig {
            transa: cublasOperation_t::CUBLAS_OP_T,
            transb: cublasOperation_t::CUBLAS_OP_N,
            m: ni,
            n: mi,
            k: ki,
            alpha: one,
            lda: ki,
            ldb: ki,
            beta: zero,
            ldc: ni,
        },
        Layout::Nn => GemmConfig {
            transa: cublasOperation_t::CUBLAS_OP_N,
            transb: cublasOperation_t::CUBLAS_OP_N,
            m: ni,
            n: mi,
            k: ki,
            alpha: one,
            lda: ni,
            ldb: ki,
            beta: zero,
            ldc: ni,
        },
    })
}

/// A cuBLAS handle bound to a [`Gpu`]'s stream: f16 or bf16 ([`BlasElem`])
/// matrix products on row-major matrices, f32 accumulation, output in the
/// inputs' type, `C` overwritten
/// (`alpha = 1, beta = 0`). Calls are asynchronous on the stream, like kernel
/// launches.
///
/// ```no_run
/// # use kernel_host::{Blas, Gpu};
/// # fn main() -> kernel_host::Result<()> {
/// # let (m, n, k) = (64usize, 64usize, 64usize);
/// # let gpu = Gpu::new(0)?;
/// # let (a, b) = (gpu.zeros::<kernel_device::f16>(m * k)?, gpu.zeros::<kernel_device::f16>(n * k)?);
/// # let mut c = gpu.zeros::<kernel_device::f16>(m * n)?;
/// let blas = Blas::new(&gpu)?;
/// blas.gemm_nt(m, n, k, &a, &b, &mut c)?; // c = a · bᵀ
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Blas {
    blas: CudaBlas,
    /// The GPU's context, bound before each call: cuBLAS launches into the
    /// current context, and in a group of GPUs another device's may be
    /// current (a call then fails with CUBLAS_STATUS_EXECUTION_FAILED).
    ctx: std::sync::Arc<cudarc::driver::CudaContext>,
}

impl Blas {
    /// Creates a cuBLAS handle on `gpu`'s stream. Returns [`Error::Cublas`]
    /// (never panics) when cuBLAS cannot be loaded or `cublasCreate` fails.
    pub fn new(gpu: &Gpu) -> Result<Blas> {
        let stream = gpu.stream().clone();
        let blas = create_handle(cublas_present(), || CudaBlas::new(stream))?;
        Ok(Blas { blas, ctx: gpu.context().clone() })
    }

    /// The cudarc handle, for what this wrapper does not cover.
    pub fn cuda_blas(&self) -> &CudaBlas {
        &self.blas
    }

    /// `C = A · Bᵀ` with `a` `M x K`, `b` `N x K` and `c` `M x N`, all
    /// row-major and contiguous (so both operands are K-major, the layout of
    /// a "TN" GEMM in cuBLAS's column-major terms).
    ///
    /// Returns [`Error::InvalidArgument`] when a dimension is 0 or over
    /// `i32::MAX`, or a buffer's length is not exactly its shape's, and
    /// [`Error::Cublas`] when cuBLAS rejects the call.
    pub fn gemm_nt<T: BlasElem>(
        &self,
        m: usize,
        n: usize,
        k: usize,
        a: &CudaSlice<T>,
        b: &CudaSlice<T>,
        c: &mut CudaSlice<T>,
    ) -> Result<()>
    where
        CudaBlas: Gemm<T>,
    {
        self.gemm(Layout::Nt, (m, n, k), a, b, c)
    }

    /// [`Blas::gemm_nt`] on views (`CudaSlice::slice`, `slice_mut`): one
    /// problem of a batch stored back to back, e.g. a group of a grouped
    /// GEMM. Errors as [`Blas::gemm_nt`].
    pub fn gemm_nt_views<T: BlasElem, A, B, C>(&self, m: usize, n: usize, k: usize, a: &A, b: &B, c: &mut C) -> Result<()>
    where
        CudaBlas: Gemm<T>,
        A: cudarc::driver::DevicePtr<T>,
        B: cudarc::driver::DevicePtr<T>,
        C: cudarc::driver::DevicePtrMut<T>,
    {
        self.gemm(Layout::Nt, (m, n, k), a, b, c)
    }

    /// `C = A · B` with `a` `M x K`, `b` `K x N` and `c` `M x N`, all
    /// row-major and contiguous. Errors as [`Blas::gemm_nt`].
    pub fn gemm_nn<T: BlasElem>(
        &self,
        m: usize,
        n: usize,
        k: usize,
        a: &CudaSlice<T>,
        b: &CudaSlice<T>,
        c: &mut CudaSlice<T>,
    ) -> Result<()>
    where
        CudaBlas: Gemm<T>,
    {
        self.gemm(Layout::Nn, (m, n, k), a, b, c)
    }

    fn gemm<T: BlasElem, A, B, C>(&self, layout: Layout, dims: (usize, usize, usize), a: &A, b: &B, c: &mut C) -> Result<()>
    where
        CudaBlas: Gemm<T>,
        A: cudarc::driver::DevicePtr<T>,
        B: cudarc::driver::DevicePtr<T>,
        C: cudarc::driver::DevicePtrMut<T>,
    {
        let cfg = gemm_config::<T>(layout, dims, (a.len(), b.len(), c.len()))?;
        self.ctx.bind_to_thread().map_err(Error::cuda_call("cuCtxSetCurrent (before cuBLAS)"))?;
        // cuBLAS's A is our `b` and its B our `a` (see the module docs).
        // SAFETY: `gemm_config` checked that each buffer holds exactly the
        // elements the configuration reads or writes (`lda`/`ldb`/`ldc` are
        // the row lengths of contiguous row-major matrices), and the sizes
        // fit cuBLAS's `int`.
        let call = if T::NAME == "bf16" { "cublasGemmEx (bf16 in/out, CUBLAS_COMPUTE_32F)" } else { "cublasGemmEx (f16 in/out, CUBLAS_COMPUTE_32F)" };
        guarded(call, || unsafe {
            self.blas.gemm(cfg, b, a, c)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cublas_reason(r: Result<CudaBlas>) -> String {
        match r {
            Err(e @ Error::Cublas { .. }) => e.to_string(),
            other => panic!("expected Error::Cublas, got {other:?}"),
        }
    }

    #[test]
    fn missing_cublas_is_an_error_and_calls_nothing() {
        let msg = cublas_reason(create_handle(false, || {
            panic!("cublasCreate called without cuBLAS")
        }));
        assert!(msg.contains("cuBLAS could not be loaded"), "{msg}");
        assert!(msg.contains("LD_LIBRARY_PATH"), "{msg}");
    }

    #[test]
    fn asking_whether_cublas_is_there_never_panics() {
        // Without cuBLAS this is false; on a GPU machine usually true.
        let present = cublas_present();
        assert_eq!(present, cublas_present());
    }

    #[test]
    fn a_cudarc_panic_becomes_an_error() {
        let msg = cublas_reason(create_handle(true, || {
            panic!("Missing symbol cublasCreate_v2: not found")
        }));
        assert!(msg.contains("cuBLAS could not be loaded"), "{msg}");
        assert!(msg.contains("Missing symbol cublasCreate_v2"), "{msg}");
    }

    #[test]
    fn a_cublas_status_is_named() {
        use cudarc::cublas::sys::cublasStatus_t::CUBLAS_STATUS_NOT_INITIALIZED;
        let msg = cublas_reason(create_handle(true, || {
            Err(CublasError(CUBLAS_STATUS_NOT_INITIALIZED))
        }));
        assert!(
            msg.starts_with("CudaBlas::new (cublasCreate_v2 + cublasSetStream_v2) failed: "),
            "{msg}"
        );
        assert!(msg.ends_with("CUBLAS_STATUS_NOT_INITIALIZED"), "{msg}");
    }

    #[test]
    fn nt_maps_to_transposed_column_major() {
        let c = gemm_config::<f16>(
            Layout::Nt,
            (256, 384, 512),
            (256 * 512, 384 * 512, 256 * 384),
        )
        .unwrap();
        assert_eq!(c.transa, cublasOperation_t::CUBLAS_OP_T);
        assert_eq!(c.transb, cublasOperation_t::CUBLAS_OP_N);
        assert_eq!((c.m, c.n, c.k), (384, 256, 512));
        assert_eq!((c.lda, c.ldb, c.ldc), (512, 512, 384));
        assert_eq!((c.alpha, c.beta), (f16::ONE, f16::ZERO));
    }

    #[test]
    fn nn_maps_to_transposed_column_major() {
        let c = gemm_config::<f16>(
            Layout::Nn,
            (256, 384, 512),
            (256 * 512, 512 * 384, 256 * 384),
        )
        .unwrap();
        assert_eq!(c.transa, cublasOperation_t::CUBLAS_OP_N);
        assert_eq!(c.transb, cublasOperation_t::CUBLAS_OP_N);
        assert_eq!((c.m, c.n, c.k), (384, 256, 512));
        assert_eq!((c.lda, c.ldb, c.ldc), (384, 512, 384));
    }

    fn invalid(r: Result<GemmConfig<f16>>) -> String {
        match r {
            Err(e @ Error::InvalidArgument { .. }) => e.to_string(),
            other => panic!("expected Error::InvalidArgument, got {other:?}"),
        }
    }

    #[test]
    fn wrong_buffer_lengths_are_errors() {
        // b given as K x N to the NT product of a non-square shape: right
        // count (N*K = K*N) passes, so use a wrong count.
        let msg = invalid(gemm_config(Layout::Nt, (4, 6, 8), (32, 47, 24)));
        assert_eq!(
            msg,
            "invalid argument to Blas::gemm_nt: `b` must be N x K = 6 x 8 = 48 f16 elements \
             (row-major) for m = 4, n = 6, k = 8, but it has 47"
        );
        let msg = invalid(gemm_config(Layout::Nn, (4, 6, 8), (33, 48, 24)));
        assert!(msg.contains("`a` must be M x K = 4 x 8 = 32"), "{msg}");
        let msg = invalid(gemm_config(Layout::Nn, (4, 6, 8), (32, 48, 25)));
        assert!(msg.contains("`c` must be M x N = 4 x 6 = 24"), "{msg}");
        assert!(
            msg.starts_with("invalid argument to Blas::gemm_nn"),
            "{msg}"
        );
    }

    #[test]
    fn zero_and_huge_dimensions_are_errors() {
        let msg = invalid(gemm_config(Layout::Nt, (0, 6, 8), (0, 48, 0)));
        assert!(msg.contains("at least 1"), "{msg}");
        let big = 1usize << 31;
        let msg = invalid(gemm_config(Layout::Nt, (1, 1, big), (big, big, 1)));
        assert!(
            msg.contains("k = 2147483648 is over cuBLAS's limit"),
            "{msg}"
        );
    }
}

/// Tests that need a CUDA GPU and cuBLAS; they fail (not skip) without them:
///
/// ```text
/// cargo test -p kernel-host --lib runtime::blas -- --ignored --nocapture
/// ```
#[cfg(test)]
mod gpu_tests {
    use super::super::bench::{
        randn_f16, reference_gemm_nn, reference_gemm_nt, rel_frobenius_error,
    };
    use super::*;

    /// Uploads `c` poisoned with NaN, runs `f`, and returns the result, which
    /// must have every element written.
    fn run_poisoned(
        gpu: &Gpu,
        len: usize,
        f: impl FnOnce(&mut CudaSlice<f16>) -> Result<()>,
    ) -> Vec<f16> {
        let mut c = gpu.upload(&vec![f16::NAN; len]).unwrap();
        f(&mut c).unwrap();
        gpu.download(&c).unwrap()
    }

    fn check(what: &str, got: &[f16], want: &[f32]) {
        assert!(
            got.iter().all(|x| x.is_finite()),
            "{what}: unwritten or non-finite output"
        );
        let err = rel_frobenius_error(got, want);
        println!("{what}: rel Frobenius error {err:.3e}");
        assert!(err < 1e-2, "{what}: rel error {err}");
    }

    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn cublas_gemm_nt_and_nn_match_the_cpu_reference() {
        let gpu = Gpu::new(0).unwrap();
        let blas = Blas::new(&gpu).unwrap();
        for (seed, (m, n, k)) in [(256usize, 384usize, 512usize), (16896, 512, 640)]
            .into_iter()
            .enumerate()
        {
            let seed = 10 * seed as u64;
            let a = randn_f16(m * k, seed + 1);
            let b = randn_f16(n * k, seed + 2);
            let (da, db) = (gpu.upload(&a).unwrap(), gpu.upload(&b).unwrap());

            let got = run_poisoned(&gpu, m * n, |c| blas.gemm_nt(m, n, k, &da, &db, c));
            check(
                &format!("gemm_nt {m}x{n}x{k}"),
                &got,
                &reference_gemm_nt(m, n, k, &a, &b),
            );

            // The same `b` read as K x N.
            let got = run_poisoned(&gpu, m * n, |c| blas.gemm_nn(m, n, k, &da, &db, c));
            check(
                &format!("gemm_nn {m}x{n}x{k}"),
                &got,
                &reference_gemm_nn(m, n, k, &a, &b),
            );
        }

        // Bad lengths are errors, not cuBLAS calls.
        let a = gpu.zeros::<f16>(10).unwrap();
        let mut c = gpu.zeros::<f16>(4).unwrap();
        blas.gemm_nt(2, 2, 5, &a, &a, &mut c).unwrap(); // 2x5 · (2x5)ᵀ fits
        let e = blas.gemm_nt(2, 3, 5, &a, &a, &mut c).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument { .. }), "{e}");
        assert!(
            e.to_string().contains("`b` must be N x K = 3 x 5 = 15"),
            "{e}"
        );
        let e = blas.gemm_nt(2, 2, 4, &a, &a, &mut c).unwrap_err();
        assert!(
            e.to_string().contains("`a` must be M x K = 2 x 4 = 8"),
            "{e}"
        );
    }

    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn cublas_bf16_gemm_nt_matches_the_cpu_reference() {
        let gpu = Gpu::new(0).unwrap();
        let blas = Blas::new(&gpu).unwrap();
        let (m, n, k) = (257usize, 136usize, 520usize);
        let bf = |v: Vec<f16>| v.iter().map(|x| bf16::from_f32(x.to_f32())).collect::<Vec<_>>();
        let (a, b) = (bf(randn_f16(m * k, 31)), bf(randn_f16(n * k, 32)));
        let (da, db) = (gpu.upload(&a).unwrap(), gpu.upload(&b).unwrap());
        let mut c = gpu.upload(&vec![bf16::NAN; m * n]).unwrap();
        blas.gemm_nt(m, n, k, &da, &db, &mut c).unwrap();
        let got: Vec<f32> = gpu.download(&c).unwrap().iter().map(|x| x.to_f32()).collect();
        let err = super::super::bench::rel_frobenius_error_f32(&got, &reference_gemm_nt(m, n, k, &a, &b));
        println!("bf16 gemm_nt {m}x{n}x{k}: rel Frobenius error {err:.3e}");
        assert!(err < 8e-3, "bf16 gemm_nt: rel error {err}");
        // Lengths are checked, naming the type.
        let e = blas.gemm_nt(m, n, k + 8, &da, &db, &mut c).unwrap_err();
        assert!(e.to_string().contains("bf16 elements"), "{e}");
    }
}
