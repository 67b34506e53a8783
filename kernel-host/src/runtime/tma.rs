//! TMA tensor maps on the host: the 128-byte `CUtensorMap` descriptors that
//! `cp.async.bulk.tensor` copies read, made by `cuTensorMapEncodeTiled`.
//!
//! Two layers:
//!
//! * [`TensorMapSpec`]: every argument of `cuTensorMapEncodeTiled`, checked
//!   against the driver's documented rules *before* the driver is called
//!   ([`TensorMapSpec::problems`] is a pure function), every broken rule
//!   reported at once in [`Error::TensorMap`]; [`TensorMapSpec::encode`] then
//!   calls the driver.
//! * [`TensorMap<'a, Tl>`]: the map a kernel's `Tma<Tl>` parameter takes, for
//!   a row-major matrix in a [`CudaSlice`]. Its box (`Tl::BLOCK_COLS` x
//!   `Tl::ROWS` elements: one column block of the tile) and swizzle mode
//!   (`Tl::SWIZZLE`) come from the SMEM tile type `Tl` itself, the same type
//!   the kernel addresses SMEM and issues `Tma::load` with, so host and
//!   device cannot disagree; passing a map for another tile type does not
//!   compile (its parameter value is a `TensorMapParam<Tl>`).
//!
//! ```no_run
//! # use kernel_device::prelude::*;
//! # use kernel_device::f16;
//! # use kernel_host::TensorMap;
//! # fn main() -> Result<(), kernel_host::Error> {
//! # let (m, k, grid) = (256usize, 128usize, 2u32);
//! # let host_a = vec![f16::ZERO; m * k];
//! # let gpu = kernel_host::Gpu::new(0)?;
//! # static DEVICE_CODE: kernel_host::DeviceCode = kernel_host::DeviceCode { crate_name: "k", images: &[] };
//! # let module = gpu.load(&DEVICE_CODE)?;
//! type A = Tile<f16, 128, 64, Swizzled<128>>;
//! # #[kernel(block = warpgroups(1))]
//! # pub fn uses_a(a: Tma<A>, c: *mut f16, m: u32) {}
//! # let kernel = module.kernel::<uses_a>()?;
//! # let mut c = gpu.zeros::<f16>(m * 128)?;
//! let a = gpu.upload(&host_a)?;                            // m x k, row-major
//! let map = TensorMap::<A>::new_2d(&a, m, k)?;             // box 64 x 128, 128B swizzle
//! kernel.launch(grid, (&map, &mut c, m as u32))?;          // for `a: Tma<A>`
//! # Ok(()) }
//! ```
//!
//! # The rules
//!
//! The rules of `cuTensorMapEncodeTiled` (CUDA Driver API, §6.30 "Tensor
//! Map Object Management") for the tiled, non-interleaved maps made here
//! (`interleave` is always `CU_TENSOR_MAP_INTERLEAVE_NONE`) are checked by
//! [`kernel_spec::tensor_map::check_map`], whose module docs list them with
//! the driver's text: rank 1..=5, array lengths, a non-null 16-byte aligned
//! address, `dims[i]` in 1..=2^32, strides multiples of 16 below 2^40 that
//! cover the dimension below, `box_dims[i]` in 1..=256 with an inner
//! dimension of a multiple of 16 bytes within the swizzle span, element
//! strides in 1..=8. The emulator's maps (`kernel_host::emulate::EmuTensorMap`)
//! are checked by the same function. One rule is this module's, as it
//! depends on the driver's data types:
//!
//! | field | rule | driver text |
//! |---|---|---|
//! | `oob_fill` | NaN fill only for float types | "CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA can only be used when tensorDataType represents a floating-point data type" |
//!
//! The `tensorMap` output must be 64-byte aligned: it is a `sys::CUtensorMap`
//! (`align(128)` in the CUDA 13.0 bindings) owned by [`TensorMapSpec::encode`].
//! The packed `16U4`/`16U6` data types and their extra rules are not offered.
//!
//! # Driver and context
//!
//! The reference lists `CUDA_ERROR_NOT_INITIALIZED` and
//! `CUDA_ERROR_INVALID_CONTEXT` among the results, so [`TensorMapSpec::encode`]
//! calls `cuInit` first, and [`TensorMap::new_2d`] makes the buffer's context
//! current on the calling thread. Without libcuda (or without
//! `cuTensorMapEncodeTiled` in it) encoding returns [`Error::NoGpu`]; it never
//! panics.

use super::error::{CudaError, Error, Result};
use super::gpu::culib_present;
use cudarc::driver::result as cu;
use cudarc::driver::sys::{
    self, CUtensorMapDataType, CUtensorMapFloatOOBfill, CUtensorMapInterleave,
    CUtensorMapL2promotion, CUtensorMapSwizzle,
};
use cudarc::driver::{CudaSlice, DevicePtr};
use kernel_device::layout::{Swizzle, TileLayout};
use kernel_device::tma::{TensorMapParam, TENSOR_MAP_BYTES};
use std::fmt;
use std::marker::PhantomData;

/// The tensor-map limits, defined in [`kernel_spec::tensor_map`] (whose
/// [`check_map`](kernel_spec::tensor_map::check_map) both these GPU maps and
/// the emulator's maps are checked with).
pub use kernel_spec::tensor_map::{
    BOX_INNER_ALIGN, GLOBAL_ALIGN, GLOBAL_STRIDE_LIMIT, MAX_BOX_DIM, MAX_ELEMENT_STRIDE,
    MAX_GLOBAL_DIM, MAX_RANK,
};
use kernel_spec::tensor_map::{check_map, MapDesc, SOURCE};

/// The element type of a tensor map (`CUtensorMapDataType`).
///
/// The CUDA 13.0 driver has no 8-bit float or signed 8/16-bit types: those
/// are encoded as the unsigned integer of their size (a tiled copy moves
/// bytes; the type only matters for the element size and for the NaN
/// out-of-bounds fill, which such maps cannot use).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TmaDtype {
    /// `UINT8`.
    U8,
    /// Encoded as `UINT8`.
    I8,
    /// FP8 E4M3, encoded as `UINT8` (no FP8 type in the 13.0 driver).
    F8E4M3,
    /// FP8 E5M2, encoded as `UINT8` (no FP8 type in the 13.0 driver).
    F8E5M2,
    /// `UINT16`.
    U16,
    /// Encoded as `UINT16`.
    I16,
    /// `FLOAT16`.
    F16,
    /// `BFLOAT16`.
    Bf16,
    /// `UINT32`.
    U32,
    /// `INT32`.
    I32,
    /// `FLOAT32`.
    F32,
    /// `FLOAT32_FTZ` (denormals flushed to zero).
    F32Ftz,
    /// `TFLOAT32`: f32 in memory, rounded to TF32 by the copy.
    Tf32,
    /// `TFLOAT32_FTZ`.
    Tf32Ftz,
    /// `UINT64`.
    U64,
    /// `INT64`.
    I64,
    /// `FLOAT64`.
    F64,
}

impl TmaDtype {
    /// Bytes of one element.
    pub const fn bytes(self) -> u64 {
        use TmaDtype::*;
        match self {
            U8 | I8 | F8E4M3 | F8E5M2 => 1,
            U16 | I16 | F16 | Bf16 => 2,
            U32 | I32 | F32 | F32Ftz | Tf32 | Tf32Ftz => 4,
            U64 | I64 | F64 => 8,
        }
    }

    /// The driver's data type this is encoded as.
    pub const fn to_cu(self) -> CUtensorMapDataType {
        use CUtensorMapDataType::*;
        use TmaDtype::*;
        match self {
            U8 | I8 | F8E4M3 | F8E5M2 => CU_TENSOR_MAP_DATA_TYPE_UINT8,
            U16 | I16 => CU_TENSOR_MAP_DATA_TYPE_UINT16,
            F16 => CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
            Bf16 => CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
            U32 => CU_TENSOR_MAP_DATA_TYPE_UINT32,
            I32 => CU_TENSOR_MAP_DATA_TYPE_INT32,
            F32 => CU_TENSOR_MAP_DATA_TYPE_FLOAT32,
            F32Ftz => CU_TENSOR_MAP_DATA_TYPE_FLOAT32_FTZ,
            Tf32 => CU_TENSOR_MAP_DATA_TYPE_TFLOAT32,
            Tf32Ftz => CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ,
            U64 => CU_TENSOR_MAP_DATA_TYPE_UINT64,
            I64 => CU_TENSOR_MAP_DATA_TYPE_INT64,
            F64 => CU_TENSOR_MAP_DATA_TYPE_FLOAT64,
        }
    }

    /// Whether the driver's data type is a floating-point one (the NaN
    /// out-of-bounds fill needs one).
    pub const fn is_driver_float(self) -> bool {
        use TmaDtype::*;
        matches!(self, F16 | Bf16 | F32 | F32Ftz | Tf32 | Tf32Ftz | F64)
    }
}

/// An element type a [`TensorMap`] can describe: its [`TmaDtype`].
///
/// `DTYPE.bytes()` must be `size_of::<Self>()` ([`TensorMap`] checks it).
/// Implement it for an 8-bit float newtype with [`TmaDtype::F8E4M3`] or
/// [`TmaDtype::F8E5M2`].
pub trait TmaElement: Copy {
    const DTYPE: TmaDtype;
}

macro_rules! tma_elements {
    ($($t:ty => $d:ident),* $(,)?) => {$(
        impl TmaElement for $t {
            const DTYPE: TmaDtype = TmaDtype::$d;
        }
    )*};
}
tma_elements!(
    half::f16 => F16,
    half::bf16 => Bf16,
    f32 => F32,
    f64 => F64,
    u8 => U8,
    i8 => I8,
    u16 => U16,
    i16 => I16,
    u32 => U32,
    i32 => I32,
    u64 => U64,
    i64 => I64,
    kernel_device::E4M3 => F8E4M3,
    kernel_device::E5M2 => F8E5M2,
);

/// L2 promotion: the granularity at which L2 fills the copy's requests from
/// DRAM (`CUtensorMapL2promotion`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum L2Promotion {
    None,
    B64,
    B128,
    B256,
}

impl L2Promotion {
    /// The driver's value.
    pub const fn to_cu(self) -> CUtensorMapL2promotion {
        use CUtensorMapL2promotion::*;
        match self {
            L2Promotion::None => CU_TENSOR_MAP_L2_PROMOTION_NONE,
            L2Promotion::B64 => CU_TENSOR_MAP_L2_PROMOTION_L2_64B,
            L2Promotion::B128 => CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
            L2Promotion::B256 => CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
        }
    }
}

/// What a load writes for elements outside the tensor
/// (`CUtensorMapFloatOOBfill`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OobFill {
    /// Zeros (`CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE`).
    Zero,
    /// A NaN that makes the tensor cores' FMA produce zero
    /// (`CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA`); float types only.
    NanRequestZeroFma,
}

impl OobFill {
    /// The driver's value.
    pub const fn to_cu(self) -> CUtensorMapFloatOOBfill {
        match self {
            OobFill::Zero => CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
            OobFill::NanRequestZeroFma => {
                CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA
            }
        }
    }
}

/// The driver's swizzle mode for `swizzle`.
pub const fn swizzle_to_cu(swizzle: Swizzle) -> CUtensorMapSwizzle {
    use CUtensorMapSwizzle::*;
    match swizzle {
        Swizzle::None => CU_TENSOR_MAP_SWIZZLE_NONE,
        Swizzle::B32 => CU_TENSOR_MAP_SWIZZLE_32B,
        Swizzle::B64 => CU_TENSOR_MAP_SWIZZLE_64B,
        Swizzle::B128 => CU_TENSOR_MAP_SWIZZLE_128B,
    }
}

/// Every argument of `cuTensorMapEncodeTiled` (interleave is always none).
/// Arrays are innermost dimension first: a row-major `rows x cols` matrix
/// has `dims = [cols, rows]`, `strides_bytes = [row stride in bytes]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorMapSpec {
    pub dtype: TmaDtype,
    /// Device address of element `(0, 0, ...)` (`globalAddress`).
    pub global_address: u64,
    /// Extent of each dimension in elements (`globalDim`); its length is
    /// the rank, 1..=5.
    pub dims: Vec<u64>,
    /// Byte stride of dimensions `1..rank` (`globalStrides`, `rank - 1`
    /// entries; dimension 0 is contiguous).
    pub strides_bytes: Vec<u64>,
    /// The box one copy moves, in elements per dimension (`boxDim`).
    pub box_dims: Vec<u32>,
    /// Traversal step per dimension (`elementStrides`), usually all 1.
    pub element_strides: Vec<u32>,
    /// SMEM swizzle mode of the box.
    pub swizzle: Swizzle,
    pub l2_promotion: L2Promotion,
    pub oob_fill: OobFill,
}

impl TensorMapSpec {
    /// The map for copies of SMEM tiles of type `Tl` from/to a row-major
    /// `rows x cols` matrix at `global_address` whose rows are
    /// `row_stride_bytes` apart: box `[Tl::BLOCK_COLS, Tl::ROWS]` (one column
    /// block of the tile; `Tma::load` issues `Tl::BLOCKS` copies),
    /// swizzle `Tl::SWIZZLE`, zero out-of-bounds fill (what `Tma::load`
    /// documents), 128-byte L2 promotion (CUTLASS's default). Not validated.
    pub fn for_tile_2d<Tl: TileLayout>(
        global_address: u64,
        rows: u64,
        cols: u64,
        row_stride_bytes: u64,
    ) -> TensorMapSpec
    where
        Tl::Elem: TmaElement,
    {
        TensorMapSpec {
            dtype: <Tl::Elem as TmaElement>::DTYPE,
            global_address,
            dims: vec![cols, rows],
            strides_bytes: vec![row_stride_bytes],
            box_dims: vec![clamp_u32(Tl::BLOCK_COLS), clamp_u32(Tl::ROWS)],
            element_strides: vec![1, 1],
            swizzle: Tl::SWIZZLE,
            l2_promotion: L2Promotion::B128,
            oob_fill: OobFill::Zero,
        }
    }

    /// The rank (`dims.len()`).
    pub fn rank(&self) -> usize {
        self.dims.len()
    }

    /// Every rule of `cuTensorMapEncodeTiled` this spec breaks, one message
    /// per violated field (named, with its value and the rule). Empty when
    /// the spec is valid. Pure: calls no CUDA.
    pub fn problems(&self) -> Vec<String> {
        let mut p = Vec::new();
        // Every rule but the NaN fill's: `kernel_spec::tensor_map`, the
        // validator the emulator's maps use too.
        let desc = MapDesc {
            elem_bytes: self.dtype.bytes(),
            global_address: self.global_address,
            dims: &self.dims,
            strides_bytes: &self.strides_bytes,
            box_dims: &self.box_dims,
            element_strides: &self.element_strides,
            swizzle: self.swizzle,
        };
        check_map(&desc, |problem| p.push(problem.to_string()));

        // oobFill: NaN "can only be used when tensorDataType represents a
        // floating-point data type".
        if self.oob_fill == OobFill::NanRequestZeroFma && !self.dtype.is_driver_float() {
            p.push(format!(
                "`oob_fill` = NanRequestZeroFma with `dtype` = {:?} (encoded as {:?}): the NaN \
                 fill needs a floating-point data type (oobFill: \"can only be used when \
                 tensorDataType represents a floating-point data type\"; {SOURCE}); use \
                 OobFill::Zero",
                self.dtype,
                self.dtype.to_cu()
            ));
        }
        p
    }

    /// `Ok` when [`TensorMapSpec::problems`] finds none, else
    /// [`Error::TensorMap`] listing them all. Pure: calls no CUDA.
    pub fn validate(&self) -> Result<()> {
        let problems = self.problems();
        if problems.is_empty() {
            Ok(())
        } else {
            Err(Error::TensorMap {
                context: format!("TensorMapSpec {self}"),
                problems,
            })
        }
    }

    /// Validates the spec ([`TensorMapSpec::validate`]; nothing reaches the
    /// driver when a rule is broken), then encodes it with
    /// `cuTensorMapEncodeTiled`: the 128 bytes of the `CUtensorMap`.
    ///
    /// Errors: [`Error::TensorMap`] for broken rules, [`Error::NoGpu`] without
    /// a usable driver, [`Error::TensorMapEncode`] (the CUDA error and every
    /// argument) when the driver rejects the spec.
    pub fn encode(&self) -> Result<[u64; TENSOR_MAP_BYTES / 8]> {
        self.validate()?;
        driver_ready()?;
        self.encode_unchecked()
    }

    /// Calls the driver with this spec as it is (array lengths must match the
    /// rank: the driver reads `rank` entries).
    fn encode_unchecked(&self) -> Result<[u64; TENSOR_MAP_BYTES / 8]> {
        let rank = self.rank();
        assert!(
            self.box_dims.len() == rank
                && self.element_strides.len() == rank
                && self.strides_bytes.len() + 1 == rank,
            "encode_unchecked: array lengths do not match the rank"
        );
        let mut map = sys::CUtensorMap {
            opaque: [0; TENSOR_MAP_BYTES / 8],
        };
        // SAFETY: `map` is a 128-byte, 128-aligned CUtensorMap (the driver
        // needs 64); the arrays hold `rank` (strides: `rank - 1`) entries, as
        // asserted above, and live for the call; the address is only stored
        // in the descriptor, not accessed.
        let result = unsafe {
            sys::cuTensorMapEncodeTiled(
                &mut map,
                self.dtype.to_cu(),
                rank as u32,
                self.global_address as *mut std::ffi::c_void,
                self.dims.as_ptr(),
                self.strides_bytes.as_ptr(),
                self.box_dims.as_ptr(),
                self.element_strides.as_ptr(),
                CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE,
                swizzle_to_cu(self.swizzle),
                self.l2_promotion.to_cu(),
                self.oob_fill.to_cu(),
            )
        };
        match result.result() {
            Ok(()) => Ok(map.opaque),
            Err(e) => Err(Error::TensorMapEncode {
                cuda: CudaError::from_driver(e),
                args: self.to_string(),
            }),
        }
    }
}

/// `v` as a `u32`, saturated (a box extent over `u32::MAX` is then reported
/// as over 256).
fn clamp_u32(v: usize) -> u32 {
    u32::try_from(v).unwrap_or(u32::MAX)
}

/// The arguments as `cuTensorMapEncodeTiled` receives them.
impl fmt::Display for TensorMapSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "(tensorDataType = {:?} for {:?} ({} bytes), tensorRank = {}, globalAddress = {:#x}, \
             globalDim = {:?}, globalStrides = {:?}, boxDim = {:?}, elementStrides = {:?}, \
             interleave = CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle = {:?}, l2Promotion = {:?}, \
             oobFill = {:?})",
            self.dtype.to_cu(),
            self.dtype,
            self.dtype.bytes(),
            self.rank(),
            self.global_address,
            self.dims,
            self.strides_bytes,
            self.box_dims,
            self.element_strides,
            swizzle_to_cu(self.swizzle),
            self.l2_promotion.to_cu(),
            self.oob_fill.to_cu(),
        )
    }
}

/// libcuda is loaded, has `cuTensorMapEncodeTiled` (CUDA 12.0+ drivers) and
/// `cuInit` succeeds; else [`Error::NoGpu`] (cudarc would panic).
fn driver_ready() -> Result<()> {
    if !culib_present() {
        return Err(Error::NoGpu {
            reason: "libcuda.so could not be loaded (no NVIDIA driver on this machine, or \
                     libcuda.so.1 is not on the library path), so no tensor map can be encoded"
                .into(),
        });
    }
    // SAFETY: libcuda is present (checked above); looking a symbol up runs
    // no code of it.
    let has_encode = unsafe {
        sys::culib()
            .get::<unsafe extern "C" fn()>(b"cuTensorMapEncodeTiled")
            .is_ok()
    };
    if !has_encode {
        return Err(Error::NoGpu {
            reason: "this libcuda has no cuTensorMapEncodeTiled (a driver older than CUDA 12.0); \
                     install driver 580 or newer"
                .into(),
        });
    }
    cu::init().map_err(|e| Error::NoGpu {
        reason: format!(
            "cuInit failed with {} before encoding a tensor map",
            CudaError::from_driver(e)
        ),
    })
}

/// A TMA tensor map over a row-major matrix in `buf`, for a kernel parameter
/// `Tma<Tl>`: its copies fill SMEM tiles of type `Tl` (box
/// `[Tl::BLOCK_COLS, Tl::ROWS]`, swizzle `Tl::SWIZZLE`).
///
/// The map holds `buf`'s device address, so it borrows `buf` (`'a`): the
/// buffer cannot be freed (or mutably borrowed) while the map exists.
/// Passing `&map` to a launch orders the launch after earlier writes to
/// `buf` on other streams (as `&CudaSlice` does); the kernel's TMA *stores*
/// through the map are not recorded as writes for cudarc's cross-stream
/// tracking, which matters only when other streams use `buf` (this runtime
/// launches and copies on one stream).
pub struct TensorMap<'a, Tl: TileLayout, const RANK: usize = 2> {
    bytes: [u64; TENSOR_MAP_BYTES / 8],
    spec: TensorMapSpec,
    buf: &'a CudaSlice<Tl::Elem>,
    _tile: PhantomData<fn() -> Tl>,
}

impl<'a, Tl: TileLayout> TensorMap<'a, Tl, 3>
where
    Tl::Elem: TmaElement,
{
    /// The map of `batch` row-major `rows x cols` matrices stored one after
    /// the other in `buf`, for a kernel parameter `Tma<Tl, 3>`: dims
    /// `[cols, rows, batch]`, box `[Tl::BLOCK_COLS, Tl::ROWS, 1]`; a device
    /// `load_at(dst, [col, row, b], bar)` copies one tile of matrix `b`.
    pub fn new_batched(buf: &'a CudaSlice<Tl::Elem>, batch: usize, rows: usize, cols: usize) -> Result<Self> {
        let one = TensorMap::<'a, Tl, 2>::spec_2d(0x100, rows * cols, rows, cols, cols)?;
        if buf.len() < batch * rows * cols || batch == 0 || batch > i32::MAX as usize {
            return Err(Error::TensorMap {
                context: format!("TensorMap::<{}, 3>::new_batched(batch = {batch}, rows = {rows}, cols = {cols})", std::any::type_name::<Tl>()),
                problems: vec![format!(
                    "the buffer has {} elements; {batch} matrices of {rows} x {cols} need {} (and 1 <= batch <= i32::MAX)",
                    buf.len(),
                    batch * rows * cols
                )],
            });
        }
        let address = {
            let (ptr, _record) = buf.device_ptr(buf.stream());
            ptr
        };
        let elem = std::mem::size_of::<Tl::Elem>() as u64;
        let mut spec = one;
        spec.global_address = address;
        spec.dims.push(batch as u64);
        spec.strides_bytes.push(rows as u64 * cols as u64 * elem);
        spec.box_dims.push(1);
        spec.element_strides.push(1);
        spec.validate()?;
        driver_ready()?;
        buf.context().bind_to_thread().map_err(Error::cuda_call("cuCtxSetCurrent (before cuTensorMapEncodeTiled)"))?;
        let bytes = spec.encode_unchecked()?;
        Ok(TensorMap { bytes, spec, buf, _tile: PhantomData })
    }
}

impl<'a, Tl: TileLayout> TensorMap<'a, Tl, 2>
where
    Tl::Elem: TmaElement,
{
    /// The map of the row-major `rows x cols` matrix in `buf` (rows
    /// `cols` elements apart).
    ///
    /// Checks, all reported at once in [`Error::TensorMap`]: `buf` holds
    /// `rows * cols` elements, `rows` and `cols` fit the device's `i32`
    /// coordinates, and every `cuTensorMapEncodeTiled` rule (e.g. a row of
    /// `cols` elements must be a multiple of 16 bytes; the tile's box at most
    /// 256 x 256). Then makes `buf`'s context current and encodes.
    pub fn new_2d(buf: &'a CudaSlice<Tl::Elem>, rows: usize, cols: usize) -> Result<Self> {
        Self::new_2d_strided(buf, rows, cols, cols)
    }

    /// As [`TensorMap::new_2d`] with rows `row_stride_elems` elements apart
    /// (a sub-matrix, or rows padded to 16 bytes). `buf` must hold
    /// `(rows - 1) * row_stride_elems + cols` elements.
    pub fn new_2d_strided(
        buf: &'a CudaSlice<Tl::Elem>,
        rows: usize,
        cols: usize,
        row_stride_elems: usize,
    ) -> Result<Self> {
        let address = {
            let (ptr, _record) = buf.device_ptr(buf.stream());
            ptr
        };
        let spec = Self::spec_2d(address, buf.len(), rows, cols, row_stride_elems)?;
        driver_ready()?;
        buf.context().bind_to_thread().map_err(Error::cuda_call(
            "cuCtxSetCurrent (before cuTensorMapEncodeTiled)",
        ))?;
        let bytes = spec.encode_unchecked()?;
        Ok(TensorMap {
            bytes,
            spec,
            buf,
            _tile: PhantomData,
        })
    }

    /// The validated spec [`TensorMap::new_2d_strided`] encodes for a buffer
    /// of `buf_len` elements at `global_address`, without encoding it: pure,
    /// so it can be checked without a GPU. Errors list every problem.
    pub fn spec_2d(
        global_address: u64,
        buf_len: usize,
        rows: usize,
        cols: usize,
        row_stride_elems: usize,
    ) -> Result<TensorMapSpec> {
        let elem_bytes = std::mem::size_of::<Tl::Elem>() as u64;
        let row_stride_bytes =
            u64::try_from(row_stride_elems as u128 * u128::from(elem_bytes)).unwrap_or(u64::MAX);
        let spec = TensorMapSpec::for_tile_2d::<Tl>(
            global_address,
            rows as u64,
            cols as u64,
            row_stride_bytes,
        );
        let mut problems = Vec::new();
        let dtype = <Tl::Elem as TmaElement>::DTYPE;
        if dtype.bytes() != elem_bytes {
            problems.push(format!(
                "the element type {} is {elem_bytes} bytes but its TmaElement::DTYPE = {dtype:?} \
                 is {} bytes: fix its TmaElement impl",
                std::any::type_name::<Tl::Elem>(),
                dtype.bytes()
            ));
        }
        for (name, v) in [("rows", rows), ("cols", cols)] {
            if v > i32::MAX as usize {
                problems.push(format!(
                    "`{name}` = {v}: must be at most {} (`Tma::load`/`store` coordinates are \
                     i32)",
                    i32::MAX
                ));
            }
        }
        if rows > 0 && cols > 0 {
            let needed = (rows as u128 - 1) * row_stride_elems as u128 + cols as u128;
            if (buf_len as u128) < needed {
                problems.push(format!(
                    "the buffer has {buf_len} elements but a {rows} x {cols} matrix with rows \
                     {row_stride_elems} elements apart needs (rows - 1) * row_stride + cols = \
                     {needed}"
                ));
            }
        }
        problems.extend(spec.problems());
        if problems.is_empty() {
            Ok(spec)
        } else {
            Err(Error::TensorMap {
                context: format!(
                    "TensorMap::<{}>::new_2d_strided(rows = {rows}, cols = {cols}, \
                     row_stride_elems = {row_stride_elems}) over a buffer of {buf_len} \
                     elements; {spec}",
                    std::any::type_name::<Tl>()
                ),
                problems,
            })
        }
    }
}

impl<'a, Tl: TileLayout, const RANK: usize> TensorMap<'a, Tl, RANK> {
    /// The kernel parameter value (what a launch passes for `Tma<Tl, RANK>`).
    pub fn param(&self) -> TensorMapParam<Tl, RANK> {
        TensorMapParam::from_bytes(self.bytes)
    }

    /// The encoded `CUtensorMap`.
    pub fn bytes(&self) -> &[u64; TENSOR_MAP_BYTES / 8] {
        &self.bytes
    }

    /// What was encoded.
    pub fn spec(&self) -> &TensorMapSpec {
        &self.spec
    }

    /// The buffer the map points into.
    pub fn buffer(&self) -> &'a CudaSlice<Tl::Elem> {
        self.buf
    }
}

impl<Tl: TileLayout, const RANK: usize> Clone for TensorMap<'_, Tl, RANK> {
    fn clone(&self) -> Self {
        TensorMap {
            bytes: self.bytes,
            spec: self.spec.clone(),
            buf: self.buf,
            _tile: PhantomData,
        }
    }
}

impl<Tl: TileLayout, const RANK: usize> fmt::Debug for TensorMap<'_, Tl, RANK> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TensorMap")
            .field("tile", &std::any::type_name::<Tl>())
            .field("spec", &self.spec)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::args::{ArgSink, KernelArg};
    use half::f16;
    use kernel_device::layout::{Swizzled, Tile, Unswizzled};

    /// A valid rank-2 f16 spec: a 256 x 192 row-major matrix, 64 x 128 box,
    /// 128B swizzle.
    fn valid() -> TensorMapSpec {
        TensorMapSpec {
            dtype: TmaDtype::F16,
            global_address: 0x7f00_0000_0000,
            dims: vec![192, 256],
            strides_bytes: vec![192 * 2],
            box_dims: vec![64, 128],
            element_strides: vec![1, 1],
            swizzle: Swizzle::B128,
            l2_promotion: L2Promotion::B128,
            oob_fill: OobFill::Zero,
        }
    }

    /// The problems of `spec`, asserting there is exactly one and that it
    /// contains every one of `needles`.
    #[track_caller]
    fn one_problem(spec: &TensorMapSpec, needles: &[&str]) -> String {
        let p = spec.problems();
        assert_eq!(p.len(), 1, "{p:#?}");
        for n in needles {
            assert!(p[0].contains(n), "{n:?} not in {:?}", p[0]);
        }
        p.into_iter().next().unwrap()
    }

    #[test]
    fn a_valid_spec_has_no_problems() {
        assert_eq!(valid().problems(), Vec::<String>::new());
        assert!(valid().validate().is_ok());
        // Rank 1 and rank 5 are valid too.
        let r1 = TensorMapSpec {
            dims: vec![1024],
            strides_bytes: vec![],
            box_dims: vec![256],
            element_strides: vec![1],
            swizzle: Swizzle::None,
            dtype: TmaDtype::F32,
            ..valid()
        };
        assert_eq!(r1.problems(), Vec::<String>::new());
        let r5 = TensorMapSpec {
            dims: vec![64, 2, 3, 4, 5],
            strides_bytes: vec![128, 256, 768, 3072],
            box_dims: vec![64, 1, 1, 1, 1],
            element_strides: vec![1, 1, 1, 1, 2],
            ..valid()
        };
        assert_eq!(r5.problems(), Vec::<String>::new());
    }

    #[test]
    fn misaligned_and_null_addresses() {
        let s = TensorMapSpec {
            global_address: 0x7f00_0000_0008,
            ..valid()
        };
        one_problem(
            &s,
            &[
                "`global_address` = 0x7f0000000008",
                "multiple of 16",
                "8 bytes past",
                "16 byte aligned",
            ],
        );
        let s = TensorMapSpec {
            global_address: 0,
            ..valid()
        };
        one_problem(&s, &["`global_address` = 0x0", "null"]);
    }

    #[test]
    fn stride_not_a_multiple_of_16() {
        // 100 f16 per row = 200 bytes.
        let s = TensorMapSpec {
            dims: vec![100, 256],
            strides_bytes: vec![200],
            box_dims: vec![64, 128],
            ..valid()
        };
        one_problem(
            &s,
            &[
                "`strides_bytes[0]` = 200",
                "multiple of 16",
                "8 elements of 2 bytes",
            ],
        );
    }

    #[test]
    fn stride_too_large_and_too_small() {
        let s = TensorMapSpec {
            strides_bytes: vec![1 << 40],
            ..valid()
        };
        one_problem(
            &s,
            &["`strides_bytes[0]` = 1099511627776", "less than 2^40"],
        );
        // A row stride shorter than a row (192 f16 = 384 bytes).
        let s = TensorMapSpec {
            strides_bytes: vec![256],
            ..valid()
        };
        one_problem(
            &s,
            &[
                "`strides_bytes[0]` = 256",
                "`dims[0]` x 2 bytes = 384",
                "cover",
            ],
        );
        // Rank 3: dimension 2's stride must cover dimension 1's span.
        let s = TensorMapSpec {
            dims: vec![64, 4, 2],
            strides_bytes: vec![128, 256],
            box_dims: vec![64, 4, 2],
            element_strides: vec![1, 1, 1],
            ..valid()
        };
        one_problem(
            &s,
            &[
                "`strides_bytes[1]` = 256",
                "`strides_bytes[0]` x `dims[1]` = 512",
            ],
        );
    }

    #[test]
    fn global_dims_out_of_range() {
        let s = TensorMapSpec {
            dims: vec![192, 0],
            ..valid()
        };
        one_problem(&s, &["`dims[1]` = 0", "1..=2^32"]);
        let s = TensorMapSpec {
            dims: vec![192, (1 << 32) + 1],
            ..valid()
        };
        one_problem(&s, &["`dims[1]` = 4294967297"]);
        let s = TensorMapSpec {
            dims: vec![192, 1 << 32],
            strides_bytes: vec![384],
            ..valid()
        };
        assert_eq!(s.problems(), Vec::<String>::new());
    }

    #[test]
    fn box_dim_zero_and_over_256() {
        let s = TensorMapSpec {
            box_dims: vec![64, 0],
            ..valid()
        };
        one_problem(&s, &["`box_dims[1]` = 0", "1..=256"]);
        let s = TensorMapSpec {
            box_dims: vec![64, 257],
            ..valid()
        };
        one_problem(&s, &["`box_dims[1]` = 257", "1..=256"]);
        // box_dims[0] = 0: only the range rule (no bytes rule for a zero box).
        let s = TensorMapSpec {
            box_dims: vec![0, 128],
            ..valid()
        };
        one_problem(&s, &["`box_dims[0]` = 0", "1..=256"]);
    }

    #[test]
    fn box_inner_bytes_not_a_multiple_of_16() {
        // 12 f16 = 24 bytes.
        let s = TensorMapSpec {
            box_dims: vec![12, 128],
            ..valid()
        };
        one_problem(
            &s,
            &[
                "`box_dims[0]` = 12",
                "12 x 2 bytes = 24 bytes",
                "multiple of 16",
            ],
        );
    }

    #[test]
    fn box_inner_bytes_over_the_swizzle_span() {
        // 128 f16 = 256 bytes > 128.
        let s = TensorMapSpec {
            box_dims: vec![128, 128],
            ..valid()
        };
        one_problem(
            &s,
            &[
                "`box_dims[0]` = 128",
                "256 bytes",
                "128-byte span of `swizzle` = B128",
                "at most 64 elements",
            ],
        );
        // 64B swizzle: 64 f16 = 128 bytes > 64; 32 f16 fit.
        let s = TensorMapSpec {
            swizzle: Swizzle::B64,
            ..valid()
        };
        one_problem(&s, &["64-byte span", "at most 32 elements"]);
        let s = TensorMapSpec {
            swizzle: Swizzle::B32,
            box_dims: vec![16, 128],
            ..valid()
        };
        assert_eq!(s.problems(), Vec::<String>::new());
        // No swizzle: any multiple of 16 bytes up to 256 elements.
        let s = TensorMapSpec {
            swizzle: Swizzle::None,
            box_dims: vec![192, 128],
            ..valid()
        };
        assert_eq!(s.problems(), Vec::<String>::new());
    }

    #[test]
    fn rank_0_and_6() {
        let s = TensorMapSpec {
            dims: vec![],
            strides_bytes: vec![],
            box_dims: vec![],
            element_strides: vec![],
            ..valid()
        };
        one_problem(&s, &["`dims` has 0 entries", "1..=5", "tensorRank"]);
        let s = TensorMapSpec {
            dims: vec![16, 2, 2, 2, 2, 2],
            strides_bytes: vec![32, 64, 128, 256, 512],
            box_dims: vec![16, 1, 1, 1, 1, 1],
            element_strides: vec![1; 6],
            ..valid()
        };
        one_problem(&s, &["`dims` has 6 entries", "1..=5"]);
    }

    #[test]
    fn array_lengths_must_match_the_rank() {
        let s = TensorMapSpec {
            strides_bytes: vec![384, 384],
            box_dims: vec![64],
            element_strides: vec![1, 1, 1],
            ..valid()
        };
        let p = s.problems();
        assert_eq!(p.len(), 3, "{p:#?}");
        assert!(p[0].contains("`strides_bytes` has 2 entries") && p[0].contains("rank - 1 = 1"));
        assert!(p[1].contains("`box_dims` has 1 entries"));
        assert!(p[2].contains("`element_strides` has 3 entries"));
    }

    #[test]
    fn element_stride_0_and_9() {
        let s = TensorMapSpec {
            element_strides: vec![1, 9],
            ..valid()
        };
        one_problem(&s, &["`element_strides[1]` = 9", "1..=8"]);
        let s = TensorMapSpec {
            element_strides: vec![0, 1],
            ..valid()
        };
        one_problem(&s, &["`element_strides[0]` = 0"]);
    }

    #[test]
    fn nan_fill_needs_a_float_type() {
        let s = TensorMapSpec {
            dtype: TmaDtype::F8E4M3,
            dims: vec![192, 256],
            strides_bytes: vec![192],
            box_dims: vec![128, 128],
            oob_fill: OobFill::NanRequestZeroFma,
            ..valid()
        };
        one_problem(
            &s,
            &[
                "`oob_fill` = NanRequestZeroFma",
                "F8E4M3",
                "CU_TENSOR_MAP_DATA_TYPE_UINT8",
            ],
        );
        let s = TensorMapSpec {
            oob_fill: OobFill::NanRequestZeroFma,
            ..valid()
        };
        assert_eq!(s.problems(), Vec::<String>::new());
    }

    #[test]
    fn every_problem_is_reported_at_once() {
        let s = TensorMapSpec {
            global_address: 0x1004,
            dims: vec![100, 0],
            strides_bytes: vec![200],
            box_dims: vec![12, 300],
            element_strides: vec![1, 9],
            ..valid()
        };
        let p = s.problems();
        let fields = [
            "`global_address` = 0x1004",
            "`dims[1]` = 0",
            "`strides_bytes[0]` = 200",
            "`box_dims[1]` = 300",
            "`box_dims[0]` = 12",
            "`element_strides[1]` = 9",
        ];
        assert_eq!(p.len(), fields.len(), "{p:#?}");
        for f in fields {
            assert!(p.iter().any(|m| m.contains(f)), "{f} missing from {p:#?}");
        }
        // Every message cites the driver reference.
        assert!(
            p.iter().all(|m| m.contains("cuTensorMapEncodeTiled")),
            "{p:#?}"
        );

        // The error lists them all, one per line, with the arguments.
        let e = s.validate().unwrap_err();
        let msg = e.to_string();
        assert!(msg.starts_with("invalid TMA tensor map"), "{msg}");
        assert!(msg.contains("6 problems"), "{msg}");
        assert!(msg.contains("boxDim = [12, 300]"), "{msg}");
        assert_eq!(
            msg.lines().filter(|l| l.starts_with("  - ")).count(),
            6,
            "{msg}"
        );
        assert!(!e.is_no_gpu());
    }

    #[test]
    fn encode_validates_before_calling_the_driver() {
        // Runs on a machine without a GPU: a broken spec never reaches cudarc
        // (which would panic without libcuda) and gives TensorMap, not NoGpu.
        let s = TensorMapSpec {
            box_dims: vec![64, 0],
            ..valid()
        };
        match s.encode() {
            Err(Error::TensorMap { problems, .. }) => assert_eq!(problems.len(), 1),
            other => panic!("{other:?}"),
        }
        // A valid spec reaches the driver check: without libcuda it is NoGpu.
        if !culib_present() {
            let e = valid().encode().unwrap_err();
            assert!(e.is_no_gpu(), "{e}");
        }
    }

    #[test]
    fn driver_failures_print_the_error_and_every_argument() {
        let e = Error::TensorMapEncode {
            cuda: CudaError {
                result: sys::CUresult::CUDA_ERROR_INVALID_VALUE,
                description: String::new(),
            },
            args: valid().to_string(),
        };
        let msg = e.to_string();
        assert!(msg.starts_with("cuTensorMapEncodeTiled"), "{msg}");
        assert!(msg.contains("CUDA_ERROR_INVALID_VALUE (1)"), "{msg}");
        for a in [
            "tensorDataType = CU_TENSOR_MAP_DATA_TYPE_FLOAT16",
            "tensorRank = 2",
            "globalAddress = 0x7f0000000000",
            "globalDim = [192, 256]",
            "globalStrides = [384]",
            "boxDim = [64, 128]",
            "elementStrides = [1, 1]",
            "interleave = CU_TENSOR_MAP_INTERLEAVE_NONE",
            "swizzle = CU_TENSOR_MAP_SWIZZLE_128B",
            "l2Promotion = CU_TENSOR_MAP_L2_PROMOTION_L2_128B",
            "oobFill = CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE",
        ] {
            assert!(msg.contains(a), "{a} missing from {msg}");
        }
        assert_eq!(
            e.cuda().map(|c| c.result),
            Some(sys::CUresult::CUDA_ERROR_INVALID_VALUE)
        );
    }

    #[test]
    fn dtypes_map_to_the_driver_types() {
        use CUtensorMapDataType::*;
        assert_eq!(TmaDtype::F16.to_cu(), CU_TENSOR_MAP_DATA_TYPE_FLOAT16);
        assert_eq!(TmaDtype::Bf16.to_cu(), CU_TENSOR_MAP_DATA_TYPE_BFLOAT16);
        assert_eq!(TmaDtype::F32.to_cu(), CU_TENSOR_MAP_DATA_TYPE_FLOAT32);
        assert_eq!(TmaDtype::I8.to_cu(), CU_TENSOR_MAP_DATA_TYPE_UINT8);
        assert_eq!(TmaDtype::F8E5M2.to_cu(), CU_TENSOR_MAP_DATA_TYPE_UINT8);
        assert_eq!(TmaDtype::I32.to_cu(), CU_TENSOR_MAP_DATA_TYPE_INT32);
        assert_eq!(<f16 as TmaElement>::DTYPE, TmaDtype::F16);
        assert_eq!(<half::bf16 as TmaElement>::DTYPE, TmaDtype::Bf16);
        assert_eq!(<i8 as TmaElement>::DTYPE, TmaDtype::I8);
        // Every element type's size matches its dtype.
        fn same<T: TmaElement>() {
            assert_eq!(
                T::DTYPE.bytes(),
                std::mem::size_of::<T>() as u64,
                "{}",
                std::any::type_name::<T>()
            );
        }
        same::<f16>();
        same::<half::bf16>();
        same::<f32>();
        same::<f64>();
        same::<u8>();
        same::<i8>();
        same::<u16>();
        same::<i16>();
        same::<u32>();
        same::<i32>();
        same::<u64>();
        same::<i64>();
        assert_eq!(
            swizzle_to_cu(Swizzle::B64),
            CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_64B
        );
        assert_eq!(
            swizzle_to_cu(Swizzle::None),
            CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_NONE
        );
    }

    const ADDR: u64 = 0x7f00_0000_0000;

    #[test]
    fn tile_128x64_f16_swizzle_128() {
        type T = Tile<f16, 128, 64, Swizzled<128>>;
        let s = TensorMap::<T>::spec_2d(ADDR, 512 * 256, 512, 256, 256).unwrap();
        assert_eq!(s.box_dims, vec![64, 128]);
        assert_eq!(s.swizzle, Swizzle::B128);
        assert_eq!(
            swizzle_to_cu(s.swizzle),
            CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_128B
        );
        assert_eq!(s.dtype, TmaDtype::F16);
        assert_eq!(s.dims, vec![256, 512]);
        assert_eq!(s.strides_bytes, vec![512]);
        assert_eq!(s.element_strides, vec![1, 1]);
        assert_eq!(s.oob_fill, OobFill::Zero);
        assert_eq!(s.global_address, ADDR);
    }

    #[test]
    fn tile_128x128_f16_is_two_column_blocks_of_64() {
        type T = Tile<f16, 128, 128, Swizzled<128>>;
        assert_eq!(<T as TileLayout>::BLOCKS, 2);
        let s = TensorMap::<T>::spec_2d(ADDR, 256 * 256, 256, 256, 256).unwrap();
        assert_eq!(s.box_dims, vec![64, 128]);
        assert_eq!(s.swizzle, Swizzle::B128);
    }

    #[test]
    fn tile_64x32_f32_swizzle_128() {
        type T = Tile<f32, 64, 32, Swizzled<128>>;
        let s = TensorMap::<T>::spec_2d(ADDR, 64 * 32, 64, 32, 32).unwrap();
        assert_eq!(s.box_dims, vec![32, 64]);
        assert_eq!(s.swizzle, Swizzle::B128);
        assert_eq!(s.dtype, TmaDtype::F32);
        assert_eq!(s.strides_bytes, vec![128]);
    }

    #[test]
    fn other_tiles() {
        // 64B swizzle, bf16: blocks of 32 elements.
        type B = Tile<half::bf16, 64, 64, Swizzled<64>>;
        let s = TensorMap::<B>::spec_2d(ADDR, 4096, 64, 64, 64).unwrap();
        assert_eq!(
            (s.box_dims, s.swizzle, s.dtype),
            (vec![32, 64], Swizzle::B64, TmaDtype::Bf16)
        );
        // Unswizzled: the whole row is the box.
        type U = Tile<f32, 8, 40, Unswizzled>;
        let s = TensorMap::<U>::spec_2d(ADDR, 8 * 40, 8, 40, 40).unwrap();
        assert_eq!((s.box_dims, s.swizzle), (vec![40, 8], Swizzle::None));
        // i8 with 128B swizzle: 128 elements per block.
        type I = Tile<i8, 64, 256, Swizzled<128>>;
        let s = TensorMap::<I>::spec_2d(ADDR, 64 * 256, 64, 256, 256).unwrap();
        assert_eq!(
            (s.box_dims, s.dtype.to_cu()),
            (
                vec![128, 64],
                CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_UINT8
            )
        );
    }

    #[test]
    fn typed_maps_check_the_buffer_and_the_matrix() {
        type T = Tile<f16, 128, 64, Swizzled<128>>;
        // Buffer one element short.
        let e = TensorMap::<T>::spec_2d(ADDR, 256 * 192 - 1, 256, 192, 192).unwrap_err();
        let Error::TensorMap { context, problems } = &e else {
            panic!("{e:?}")
        };
        assert_eq!(problems.len(), 1, "{problems:#?}");
        assert!(
            problems[0].contains("the buffer has 49151 elements"),
            "{problems:#?}"
        );
        assert!(
            problems[0].contains("needs (rows - 1) * row_stride + cols = 49152"),
            "{problems:#?}"
        );
        assert!(context.contains("Tile<"), "{context}");
        assert!(context.contains("rows = 256, cols = 192"), "{context}");

        // Strided: a 100-column sub-matrix of 256-column rows fits in
        // 255 * 256 + 100 elements; 100 f16 columns are not 16-byte rows, but
        // the stride (512 bytes) is what must be, so this is valid.
        TensorMap::<T>::spec_2d(ADDR, 255 * 256 + 100, 256, 100, 256).unwrap();
        // Rows of 100 f16 = 200 bytes, dense: the stride rule fires.
        let e = TensorMap::<T>::spec_2d(ADDR, 256 * 100, 256, 100, 100).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("`strides_bytes[0]` = 200"), "{msg}");
        assert!(msg.contains("multiple of 16"), "{msg}");
        // Stride shorter than a row, and zero rows.
        let e = TensorMap::<T>::spec_2d(ADDR, 1 << 20, 256, 192, 64).unwrap_err();
        assert!(e.to_string().contains("cover a whole span"), "{e}");
        let e = TensorMap::<T>::spec_2d(ADDR, 1 << 20, 0, 192, 192).unwrap_err();
        assert!(e.to_string().contains("`dims[1]` = 0"), "{e}");
        // Coordinates are i32.
        let e = TensorMap::<T>::spec_2d(ADDR, usize::MAX, 1 << 31, 64, 64).unwrap_err();
        assert!(e.to_string().contains("`rows` = 2147483648"), "{e}");
    }

    #[test]
    fn a_tile_too_tall_for_one_box_is_rejected() {
        // 512 rows: box_dims[1] = 512 > 256.
        type T = Tile<f16, 512, 64, Swizzled<128>>;
        let e = TensorMap::<T>::spec_2d(ADDR, 1024 * 64, 1024, 64, 64).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("`box_dims[1]` = 512"), "{msg}");
    }

    /// `Probe::<A, P>::IS` is true when `A: KernelArg<P>` (an inherent
    /// constant, found only when the bound holds) and false otherwise (the
    /// trait's default).
    struct Probe<A, P>(PhantomData<(A, P)>);
    trait NotAnArg {
        const IS: bool = false;
    }
    impl<A, P> NotAnArg for Probe<A, P> {}
    impl<A: KernelArg<P>, P: Copy> Probe<A, P> {
        const IS: bool = true;
    }

    #[test]
    fn a_map_fits_only_its_own_tile_type() {
        type A = Tile<f16, 128, 64, Swizzled<128>>;
        type B = Tile<f16, 64, 64, Swizzled<128>>;
        type C = Tile<f32, 64, 32, Swizzled<128>>;
        const { assert!(Probe::<&TensorMap<'static, A>, TensorMapParam<A>>::IS) };
        const { assert!(Probe::<&TensorMap<'static, C>, TensorMapParam<C>>::IS) };
        const { assert!(!Probe::<&TensorMap<'static, A>, TensorMapParam<B>>::IS) };
        const { assert!(!Probe::<&TensorMap<'static, A>, TensorMapParam<C>>::IS) };
        // Nor is a map a pointer or a scalar, nor a buffer a map.
        const { assert!(!Probe::<&TensorMap<'static, A>, *const f16>::IS) };
        const { assert!(!Probe::<&TensorMap<'static, A>, u64>::IS) };
        const { assert!(!Probe::<&CudaSlice<f16>, TensorMapParam<A>>::IS) };
        // The probe itself works.
        const { assert!(Probe::<u32, u32>::IS) };
    }

    /// A kernel taking a tensor map: `launch` type-checks with the map of
    /// its tile type (this function is compiled, not run).
    #[kernel_device::kernel]
    pub fn tma_probe(a: kernel_device::Tma<Tile<f16, 128, 64, Swizzled<128>>>, #[unchecked] out: *mut f32) {
        let _ = (a, out);
    }

    #[allow(dead_code)]
    fn launching_with_a_map_type_checks(
        k: &crate::runtime::Kernel<tma_probe>,
        map: &TensorMap<'_, Tile<f16, 128, 64, Swizzled<128>>>,
        out: &mut CudaSlice<f32>,
    ) -> Result<()> {
        k.launch(1u32, (map, out))
    }

    #[test]
    fn the_kernels_parameter_is_the_maps_param() {
        use kernel_device::KernelSpec;
        type P = <tma_probe as KernelSpec>::Params;
        type T = Tile<f16, 128, 64, Swizzled<128>>;
        let _: fn(TensorMapParam<T>, *mut f32) -> P = |a, b| (a, b);
        // A map of another tile type does not fit the kernel's parameters.
        const {
            assert!(!Probe::<&TensorMap<'static, Tile<f16, 64, 64, Swizzled<128>>>, TensorMapParam<T>>::IS)
        };
    }

    #[test]
    fn the_param_is_the_128_encoded_bytes() {
        assert_eq!(
            std::mem::size_of::<TensorMapParam<Tile<f16, 128, 64, Swizzled<128>>>>(),
            128
        );
        assert_eq!(std::mem::size_of::<sys::CUtensorMap>(), 128);
        assert_eq!(std::mem::align_of::<sys::CUtensorMap>(), 128);
        let bytes: [u64; 16] = std::array::from_fn(|i| i as u64 * 0x0101_0101);
        let p = TensorMapParam::<Tile<f16, 128, 64, Swizzled<128>>>::from_bytes(bytes);
        assert_eq!(p.bytes, bytes);
    }

    /// Needs a GPU (sm_90+): encodes a real map, and passes it through the
    /// argument packing.
    ///
    /// ```text
    /// cargo test -p kernel-host --lib runtime::tma -- --ignored --nocapture
    /// ```
    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn gpu_encodes_tile_maps() {
        let gpu = crate::runtime::Gpu::new(0).expect("a CUDA GPU");
        type T = Tile<f16, 128, 64, Swizzled<128>>;
        let buf = gpu.zeros::<f16>(256 * 192).expect("alloc");
        let map = TensorMap::<T>::new_2d(&buf, 256, 192).expect("encode");
        assert!(map.bytes().iter().any(|&w| w != 0), "{map:?}");
        assert_eq!(map.spec().box_dims, vec![64, 128]);
        assert_eq!(map.param().bytes, *map.bytes());
        // The address is in the spec.
        let (ptr, _g) = buf.device_ptr(buf.stream());
        assert_eq!(map.spec().global_address, ptr);

        // Packing the argument gives the same bytes.
        let mut sink = ArgSink::detached();
        let p: TensorMapParam<T> = (&map).into_param(&mut sink);
        assert_eq!(p.bytes, *map.bytes());

        // f32 and a strided bf16 map.
        let b32 = gpu.zeros::<f32>(64 * 32).expect("alloc");
        TensorMap::<Tile<f32, 64, 32, Swizzled<128>>>::new_2d(&b32, 64, 32).expect("f32");
        let b16 = gpu.zeros::<half::bf16>(128 * 256).expect("alloc");
        TensorMap::<Tile<half::bf16, 64, 64, Swizzled<64>>>::new_2d_strided(&b16, 128, 100, 256)
            .expect("strided bf16");

        // Checked errors never reach the driver.
        let e = TensorMap::<T>::new_2d(&buf, 512, 192).unwrap_err();
        assert!(matches!(e, Error::TensorMap { .. }), "{e}");

        // Informational: does encoding need a current context? Try from a
        // thread on which no context is current.
        let spec = map.spec().clone();
        let r = std::thread::spawn(move || spec.encode().map(|_| ()))
            .join()
            .unwrap();
        eprintln!("encode with no current context: {r:?}");

        // Informational: does the driver enforce the documented "stride covers
        // the dimension below" rule? (Validation rejects this spec; the
        // driver is asked directly.)
        let overlapping = TensorMapSpec {
            strides_bytes: vec![128],
            ..map.spec().clone()
        };
        assert!(!overlapping.problems().is_empty());
        eprintln!(
            "driver on a row stride shorter than a row: {:?}",
            overlapping.encode_unchecked().map(|_| ())
        );
    }
}
