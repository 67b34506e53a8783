//! The strongest cuBLAS baseline a careful user gets: cuBLASLt's matmul
//! with the fastest of its top heuristic algorithms, timed in place.
//!
//! `cublasLtMatmulAlgoGetHeuristic` returns up to [`HEURISTIC_ALGOS`]
//! algorithms for the problem (f16 in, f32 compute, f16 out, or bf16 in
//! and out with [`BlasLt::new_bf16`]; 32 MiB workspace, the layout asked for); [`BlasLt::tune`] runs each on the real
//! buffers (warm-up, then the median of a few CUDA-event-timed runs) and
//! keeps the fastest; [`BlasLt::matmul`] then launches that one.
//!
//! Row-major `C = A · Bᵀ` (`B` `N x K`) is column-major `Cᵀ = B · Aᵀ`: a
//! "TN" product with `m' = N, n' = M`; with `B` stored `K x N` it is "NN".
use kernel_host::cudarc::cublaslt::{result, sys};
use kernel_host::cudarc::driver::{DevicePtr, DevicePtrMut};
use kernel_host::cudarc::driver::{CudaView, CudaViewMut, DeviceSlice};
use kernel_host::{time_kernel, CudaSlice, Error, Gpu, Result};
use kernel_device::{bf16, f16};
use std::ffi::c_void;

/// Algorithms asked of the heuristic.
pub const HEURISTIC_ALGOS: usize = 8;
/// cuBLASLt's recommended workspace on Hopper.
pub const WORKSPACE_BYTES: usize = 32 << 20;

/// B's layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BLayout {
    /// `B` is `N x K` row-major (K-major, as our kernels read it).
    NxK,
    /// `B` is `K x N` row-major (N-major).
    KxN,
}

fn lt_err(call: &'static str) -> impl Fn(result::CublasError) -> Error {
    move |e| Error::InvalidArgument { function: "cuBLASLt", problem: format!("{call} failed: {e:?}") }
}

/// The 16-bit element types of [`BlasLt::matmul`]'s buffers: f16 and bf16
/// (`A`, `B` and `C` alike), with cuBLASLt's data type for each.
pub trait LtElem: Copy + kernel_host::cudarc::driver::DeviceRepr {
    const DATA_TYPE: sys::cudaDataType;
}
impl LtElem for f16 {
    const DATA_TYPE: sys::cudaDataType = sys::cudaDataType::CUDA_R_16F;
}
impl LtElem for bf16 {
    const DATA_TYPE: sys::cudaDataType = sys::cudaDataType::CUDA_R_16BF;
}

/// One cuBLASLt problem with its descriptors and the chosen algorithm.
pub struct BlasLt {
    handle: sys::cublasLtHandle_t,
    desc: sys::cublasLtMatmulDesc_t,
    layouts: [sys::cublasLtMatrixLayout_t; 3],
    algos: Vec<sys::cublasLtMatmulHeuristicResult_t>,
    best: usize,
    workspace: CudaSlice<u8>,
    gpu_stream: sys::cudaStream_t,
    /// The data type of `C` (f16, or bf16 for [`BlasLt::new_bf16`]).
    out_type: sys::cudaDataType,
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub layout: BLayout,
}

impl BlasLt {
    /// Creates the descriptors for `m x n x k` with B in `layout` and asks
    /// the heuristic for its top algorithms.
    pub fn new(gpu: &Gpu, m: usize, n: usize, k: usize, layout: BLayout) -> Result<BlasLt> {
        BlasLt::with_inputs(gpu, m, n, k, layout, sys::cudaDataType::CUDA_R_16F, sys::cudaDataType::CUDA_R_16F, None)
    }

    /// [`BlasLt::new`] on bf16: `A`, `B` and `C` bf16 (`CUDA_R_16BF`),
    /// f32 compute.
    pub fn new_bf16(gpu: &Gpu, m: usize, n: usize, k: usize, layout: BLayout) -> Result<BlasLt> {
        BlasLt::with_inputs(gpu, m, n, k, layout, bf16::DATA_TYPE, bf16::DATA_TYPE, None)
    }

    /// The FP8 problem cuBLASLt runs (`torch._scaled_mm`'s): A and B e4m3,
    /// B `N x K` (the "TN" layout FP8 requires), f32 compute, f16 out, with
    /// per-tensor scales `scale_a`, `scale_b` (one f32 each on the device,
    /// in allocations of their own: cuBLASLt refuses a scale pointer that
    /// is not 16-byte aligned with `CUBLAS_STATUS_NOT_SUPPORTED`) as the
    /// scale pointers, set before the heuristic is asked (as torch does);
    /// [`BlasLt::matmul_fp8_with`] runs it. `fast_accum`:
    /// `CUBLASLT_MATMUL_DESC_FAST_ACCUM` (torch's `use_fast_accum`): the
    /// MMAs accumulate in the tensor core's narrower FP8 accumulator for
    /// the whole K, as `kernel_ops::fp8` does; without it cuBLASLt
    /// promotes partial sums to f32 (slower, more accurate).
    pub fn new_fp8(gpu: &Gpu, m: usize, n: usize, k: usize, scale_a: &CudaSlice<f32>, scale_b: &CudaSlice<f32>, fast_accum: bool) -> Result<BlasLt> {
        let stream = scale_a.stream().clone();
        let (pa, _ra) = scale_a.device_ptr(&stream);
        let (pb, _rb) = scale_b.device_ptr(&stream);
        BlasLt::with_inputs(gpu, m, n, k, BLayout::NxK, sys::cudaDataType::CUDA_R_8F_E4M3, sys::cudaDataType::CUDA_R_16F, Some((pa, pb, fast_accum)))
    }

    #[allow(clippy::too_many_arguments)]
    fn with_inputs(gpu: &Gpu, m: usize, n: usize, k: usize, layout: BLayout, in_type: sys::cudaDataType, out_type: sys::cudaDataType, fp8: Option<(u64, u64, bool)>) -> Result<BlasLt> {
        gpu.context().bind_to_thread().map_err(|e| Error::InvalidArgument { function: "cuBLASLt", problem: format!("cuCtxSetCurrent failed: {e:?}") })?;
        let handle = result::create_handle().map_err(lt_err("cublasLtCreate"))?;
        let desc = result::create_matmul_desc(sys::cublasComputeType_t::CUBLAS_COMPUTE_32F, sys::cudaDataType::CUDA_R_32F)
            .map_err(lt_err("cublasLtMatmulDescCreate"))?;
        let (ta, x_rows, x_cols, ldx) = match layout {
            BLayout::NxK => (kernel_host::cudarc::cublas::sys::cublasOperation_t::CUBLAS_OP_T, k, n, k),
            BLayout::KxN => (kernel_host::cudarc::cublas::sys::cublasOperation_t::CUBLAS_OP_N, n, k, n),
        };
        let tb = kernel_host::cudarc::cublas::sys::cublasOperation_t::CUBLAS_OP_N;
        // SAFETY: a live descriptor; the attribute values are 4-byte enums.
        unsafe {
            result::set_matmul_desc_attribute(desc, sys::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_TRANSA, &ta as *const _ as *const c_void, 4)
                .map_err(lt_err("cublasLtMatmulDescSetAttribute(TRANSA)"))?;
            result::set_matmul_desc_attribute(desc, sys::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_TRANSB, &tb as *const _ as *const c_void, 4)
                .map_err(lt_err("cublasLtMatmulDescSetAttribute(TRANSB)"))?;
        }
        // Column-major: X = B (x_rows x x_cols), Y = Aᵀ (K x M), D = Cᵀ (N x M).
        if let Some((our_a, our_b, fast_accum)) = fp8 {
            // Column-major: cuBLASLt's A is our B, its B our A.
            let (sa, sb) = (our_b, our_a);
            let fast = fast_accum as i8;
            // SAFETY: the descriptor is ours; the attribute is an int8_t.
            unsafe {
                result::set_matmul_desc_attribute(desc, sys::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast as *const _ as *const c_void, 1)
                    .map_err(lt_err("cublasLtMatmulDescSetAttribute(FAST_ACCUM)"))?;
            }
            // SAFETY: the descriptor is ours; the values are device pointers
            // to f32 that the caller keeps alive while it uses this problem.
            unsafe {
                result::set_matmul_desc_attribute(desc, sys::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sa as *const _ as *const c_void, 8)
                    .map_err(lt_err("cublasLtMatmulDescSetAttribute(A_SCALE_POINTER)"))?;
                result::set_matmul_desc_attribute(desc, sys::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sb as *const _ as *const c_void, 8)
                    .map_err(lt_err("cublasLtMatmulDescSetAttribute(B_SCALE_POINTER)"))?;
            }
        }
        let lx = result::create_matrix_layout(in_type, x_rows as u64, x_cols as u64, ldx as i64).map_err(lt_err("cublasLtMatrixLayoutCreate(B)"))?;
        let ly = result::create_matrix_layout(in_type, k as u64, m as u64, k as i64).map_err(lt_err("cublasLtMatrixLayoutCreate(A)"))?;
        let ld = result::create_matrix_layout(out_type, n as u64, m as u64, n as i64).map_err(lt_err("cublasLtMatrixLayoutCreate(C)"))?;
        let pref = result::create_matmul_pref().map_err(lt_err("cublasLtMatmulPreferenceCreate"))?;
        let ws = WORKSPACE_BYTES as u64;
        let mut results = vec![std::mem::MaybeUninit::<sys::cublasLtMatmulHeuristicResult_t>::zeroed(); HEURISTIC_ALGOS];
        let mut count = 0i32;
        // SAFETY: live descriptors; `results` holds HEURISTIC_ALGOS entries.
        unsafe {
            result::set_matmul_pref_attribute(pref, sys::cublasLtMatmulPreferenceAttributes_t::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws as *const _ as *const c_void, 8)
                .map_err(lt_err("cublasLtMatmulPreferenceSetAttribute"))?;
            sys::cublasLtMatmulAlgoGetHeuristic(handle, desc, lx, ly, ld, ld, pref, HEURISTIC_ALGOS as i32, results.as_mut_ptr() as *mut _, &mut count)
                .result()
                .map_err(lt_err("cublasLtMatmulAlgoGetHeuristic"))?;
            let _ = result::destroy_matmul_pref(pref);
        }
        // SAFETY: the first `count` entries were written.
        let algos: Vec<_> = results[..count.max(0) as usize]
            .iter()
            .map(|r| unsafe { r.assume_init() })
            .filter(|r| r.state == sys::cublasStatus_t::CUBLAS_STATUS_SUCCESS)
            .collect();
        if algos.is_empty() {
            return Err(Error::InvalidArgument { function: "cuBLASLt", problem: format!("no heuristic algorithm for {m} x {n} x {k} ({layout:?})") });
        }
        let workspace = gpu.zeros::<u8>(WORKSPACE_BYTES)?;
        Ok(BlasLt {
            handle,
            desc,
            layouts: [lx, ly, ld],
            algos,
            best: 0,
            workspace,
            gpu_stream: gpu.stream().cu_stream() as sys::cudaStream_t,
            out_type,
            m,
            n,
            k,
            layout,
        })
    }

    /// The number of heuristic algorithms returned.
    pub fn algo_count(&self) -> usize {
        self.algos.len()
    }

    /// Index (in heuristic order) of the algorithm [`BlasLt::matmul`] runs.
    pub fn best(&self) -> usize {
        self.best
    }

    /// Launches algorithm `i` (asynchronous). `c = a · bᵀ` (or `a · b`),
    /// all of the problem's type (f16, or bf16 for [`BlasLt::new_bf16`]:
    /// another type is an error).
    pub fn matmul_with<T: LtElem>(&mut self, i: usize, a: &CudaSlice<T>, b: &CudaSlice<T>, c: &mut CudaSlice<T>) -> Result<()> {
        if T::DATA_TYPE != self.out_type {
            return Err(Error::InvalidArgument {
                function: "BlasLt::matmul",
                problem: format!("the buffers are {:?} but the problem was made for {:?} (BlasLt::new for f16, BlasLt::new_bf16 for bf16)", T::DATA_TYPE, self.out_type),
            });
        }
        let stream = c.stream().clone();
        let (pa, _ra) = a.device_ptr(&stream);
        let (pb, _rb) = b.device_ptr(&stream);
        self.launch(i, pa, pb, c)
    }

    /// FP8 `c = (scale_a scale_b) a · bᵀ` with algorithm `i` of a
    /// [`BlasLt::new_fp8`] problem (the scales it was made with).
    pub fn matmul_fp8_with(&mut self, i: usize, a: &CudaSlice<kernel_device::E4M3>, b: &CudaSlice<kernel_device::E4M3>, c: &mut CudaSlice<f16>) -> Result<()> {
        let stream = c.stream().clone();
        let (pa, _ra) = a.device_ptr(&stream);
        let (pb, _rb) = b.device_ptr(&stream);
        self.launch(i, pa, pb, c)
    }

    /// [`BlasLt::matmul_fp8_with`] on views: `a` (`m x k`), `b` (`n x k`)
    /// and `c` (`m x n`) parts of larger buffers, e.g. one group of a
    /// grouped problem (a loop of these is the grouped GEMM's baseline).
    pub fn matmul_fp8_views(&mut self, i: usize, a: &CudaView<'_, kernel_device::E4M3>, b: &CudaView<'_, kernel_device::E4M3>, c: &mut CudaViewMut<'_, f16>) -> Result<()> {
        let stream = c.stream().clone();
        let (pa, _ra) = a.device_ptr(&stream);
        let (pb, _rb) = b.device_ptr(&stream);
        let (pc, _rc) = c.device_ptr_mut(&stream);
        self.launch_at(i, pa, pb, pc, &stream)
    }

    /// Runs algorithm `i` on the device pointers `pa`, `pb` and `c`.
    fn launch<T: LtElem>(&mut self, i: usize, pa: u64, pb: u64, c: &mut CudaSlice<T>) -> Result<()> {
        let stream = c.stream().clone();
        let (pc, _rc) = c.device_ptr_mut(&stream);
        self.launch_at(i, pa, pb, pc, &stream)
    }

    /// Runs algorithm `i` on the device pointers `pa`, `pb` and `pc`
    /// (buffers of the problem's shapes, on `stream`'s device).
    fn launch_at(&mut self, i: usize, pa: u64, pb: u64, pc: u64, stream: &std::sync::Arc<kernel_host::cudarc::driver::CudaStream>) -> Result<()> {
        let (one, zero) = (1f32, 0f32);
        let (pw, _rw) = self.workspace.device_ptr_mut(stream);
        // SAFETY: live descriptors matching the buffers' shapes (the caller's
        // buffers are m x k, the B layout, m x n); the workspace is ours.
        unsafe {
            result::matmul(
                self.handle,
                self.desc,
                &one as *const f32 as *const c_void,
                &zero as *const f32 as *const c_void,
                pb as *const c_void,
                self.layouts[0],
                pa as *const c_void,
                self.layouts[1],
                pc as *const c_void,
                self.layouts[2],
                pc as *mut c_void,
                self.layouts[2],
                &self.algos[i].algo,
                pw as *mut c_void,
                WORKSPACE_BYTES,
                self.gpu_stream,
            )
            .map_err(lt_err("cublasLtMatmul"))
        }
    }

    /// Launches the chosen algorithm.
    pub fn matmul<T: LtElem>(&mut self, a: &CudaSlice<T>, b: &CudaSlice<T>, c: &mut CudaSlice<T>) -> Result<()> {
        self.matmul_with(self.best, a, b, c)
    }

    /// Times every heuristic algorithm (`warmup` runs, then the median of
    /// `iters`) and keeps the fastest; returns `(algorithm, median ms)` for each.
    pub fn tune<T: LtElem>(&mut self, gpu: &Gpu, a: &CudaSlice<T>, b: &CudaSlice<T>, c: &mut CudaSlice<T>, warmup: usize, iters: usize) -> Result<Vec<(usize, f64)>> {
        let mut times = Vec::new();
        for i in 0..self.algos.len() {
            let t = time_kernel(gpu, warmup, iters, || self.matmul_with(i, a, b, c))?;
            times.push((i, t.median_ms));
        }
        self.best = times.iter().min_by(|x, y| x.1.total_cmp(&y.1)).map(|t| t.0).unwrap_or(0);
        Ok(times)
    }
}

impl Drop for BlasLt {
    fn drop(&mut self) {
        // SAFETY: created in `new`, destroyed once.
        unsafe {
            for l in self.layouts {
                let _ = result::destroy_matrix_layout(l);
            }
            let _ = result::destroy_matmul_desc(self.desc);
            let _ = result::destroy_handle(self.handle);
        }
    }
}
