//! The part of XLA's FFI C API (`xla/ffi/api/c_api.h`, API version 0.3,
//! as jaxlib 0.10 ships it under `jax.ffi.include_dir()`; the handlers
//! report 0.1, see [`API_MINOR`]) that the
//! `kernel_ops.jax` targets use: the call frame XLA hands a handler (its
//! stage, argument and result buffers, attributes), the stream of a GPU
//! call, errors made through the API, and the metadata query XLA sends
//! when a handler is registered.
//!
//! Layout rules of the C API that these definitions follow:
//!
//! * every struct starts with `struct_size` (`size_t`) and
//!   `extension_start`; `struct_size` is the offset of the struct's last
//!   field of the API version that made it plus that field's size
//!   (`XLA_FFI_STRUCT_SIZE`), so a caller built against a newer API may
//!   pass a larger struct: each size is checked to be at least ours before
//!   a field is read;
//! * C enums are `int`: they are read as `i32` here, never as Rust enums
//!   (an unknown value from a newer XLA must not be undefined behavior);
//! * `XLA_FFI_Api` only grows at its end (new functions are appended, the
//!   major version stays 0): a function is read only when `struct_size`
//!   covers it.
//!
//! Only what is needed is defined; the pointers of API functions that are
//! not called are kept as opaque `*const c_void` so the offsets stay right.
//! A compile-time block at the end checks every size and offset against
//! the header's.
use std::ffi::{c_char, c_void, CString};
use std::mem::{offset_of, size_of};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// The API version a handler reports to XLA in the metadata query: 0.1,
/// the oldest XLA accepts (jaxlib 0.5 is at 0.1, jaxlib 0.10 at 0.3 and
/// still accepts 0.1). The handlers read only what API 0.1 has (the call
/// frame, buffers, scalar attributes, `XLA_FFI_Error_Create`,
/// `XLA_FFI_Stream_Get`, all at the offsets 0.1 gave them); the one later
/// function they use, `XLA_FFI_DeviceOrdinal_Get`, is read only when XLA's
/// API table says it is 0.3 or later and is large enough to hold it.
/// Reporting 0.3 would make a jaxlib of API 0.1 refuse the registration
/// (and with it JAX's whole CPU backend: checked with jax 0.5.3).
pub const API_MAJOR: i32 = 0;
pub const API_MINOR: i32 = 1;

/// The API version whose `XLA_FFI_Api` layout [`Api`] follows past
/// `XLA_FFI_Stream_Get` (0.3 inserted `XLA_FFI_ThreadPool_NumThreads`
/// before the futures, so later offsets differ between versions).
const LAYOUT_MINOR: i32 = 3;

/// `XLA_FFI_Extension_Base`.
#[repr(C)]
pub struct ExtensionBase {
    pub struct_size: usize,
    /// `XLA_FFI_Extension_Type`: 1 is `XLA_FFI_Extension_Metadata`.
    pub kind: i32,
    pub next: *mut ExtensionBase,
}

/// `XLA_FFI_Extension_Metadata`.
const EXTENSION_METADATA: i32 = 1;

/// `XLA_FFI_Api_Version`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ApiVersion {
    pub struct_size: usize,
    pub extension_start: *mut ExtensionBase,
    pub major_version: i32,
    pub minor_version: i32,
}

/// `XLA_FFI_Error`: opaque, owned by whoever receives it (XLA destroys the
/// one a handler returns).
#[repr(C)]
pub struct FfiError {
    _opaque: [u8; 0],
}

/// `XLA_FFI_Error_Code` values used here (absl status codes).
pub mod code {
    pub const INVALID_ARGUMENT: i32 = 3;
    pub const INTERNAL: i32 = 13;
}

/// `XLA_FFI_Error_Create_Args`.
#[repr(C)]
pub struct ErrorCreateArgs {
    pub struct_size: usize,
    pub extension_start: *mut ExtensionBase,
    /// Copied by XLA (into an `absl::Status`) during the call.
    pub message: *const c_char,
    /// `XLA_FFI_Error_Code`.
    pub errc: i32,
}

/// `XLA_FFI_Stream_Get_Args`.
#[repr(C)]
pub struct StreamGetArgs {
    pub struct_size: usize,
    pub extension_start: *mut ExtensionBase,
    pub ctx: *mut c_void,
    /// Out: the platform's stream (`CUstream` on CUDA).
    pub stream: *mut c_void,
}

/// `XLA_FFI_DeviceOrdinal_Get_Args` (API 0.3).
#[repr(C)]
pub struct DeviceOrdinalGetArgs {
    pub struct_size: usize,
    pub extension_start: *mut ExtensionBase,
    pub ctx: *mut c_void,
    /// Out.
    pub device_ordinal: i32,
}

type ErrorCreateFn = unsafe extern "C" fn(*mut ErrorCreateArgs) -> *mut FfiError;
type StreamGetFn = unsafe extern "C" fn(*mut StreamGetArgs) -> *mut FfiError;
type DeviceOrdinalGetFn = unsafe extern "C" fn(*mut DeviceOrdinalGetArgs) -> *mut FfiError;

/// `XLA_FFI_Api` of API 0.3, up to `XLA_FFI_DeviceOrdinal_Get` (its last
/// function; later versions append more). The first five functions have
/// had these offsets since 0.1; the rest only from 0.3 (see
/// [`LAYOUT_MINOR`]).
#[repr(C)]
pub struct Api {
    pub struct_size: usize,
    pub extension_start: *mut ExtensionBase,
    pub api_version: ApiVersion,
    pub internal_api: *const c_void,
    pub error_create: Option<ErrorCreateFn>,
    pub error_get_message: *const c_void,
    pub error_destroy: *const c_void,
    pub handler_register: *const c_void,
    pub stream_get: Option<StreamGetFn>,
    pub type_register: *const c_void,
    pub execution_context_get: *const c_void,
    pub state_set: *const c_void,
    pub state_get: *const c_void,
    pub device_memory_allocate: *const c_void,
    pub device_memory_free: *const c_void,
    pub thread_pool_schedule: *const c_void,
    pub thread_pool_num_threads: *const c_void,
    pub future_create: *const c_void,
    pub future_set_available: *const c_void,
    pub future_set_error: *const c_void,
    pub run_id_get: *const c_void,
    pub device_ordinal_get: Option<DeviceOrdinalGetFn>,
}

/// `XLA_FFI_Buffer`.
#[repr(C)]
pub struct RawBuffer {
    pub struct_size: usize,
    pub extension_start: *mut ExtensionBase,
    /// `XLA_FFI_DataType` (`xla::PrimitiveType`).
    pub dtype: i32,
    pub data: *mut c_void,
    pub rank: i64,
    /// `rank` entries.
    pub dims: *const i64,
}

/// `XLA_FFI_Args`.
#[repr(C)]
pub struct Args {
    pub struct_size: usize,
    pub extension_start: *mut ExtensionBase,
    pub size: i64,
    /// `XLA_FFI_ArgType` per argument: 1 is a buffer.
    pub types: *const i32,
    /// `XLA_FFI_Buffer*` per argument (for a buffer).
    pub args: *const *mut c_void,
}

/// `XLA_FFI_Rets`.
#[repr(C)]
pub struct Rets {
    pub struct_size: usize,
    pub extension_start: *mut ExtensionBase,
    pub size: i64,
    /// `XLA_FFI_RetType` per result: 1 is a buffer.
    pub types: *const i32,
    pub rets: *const *mut c_void,
}

/// `XLA_FFI_ByteSpan`: a string, not NUL-terminated.
#[repr(C)]
pub struct ByteSpan {
    pub ptr: *const c_char,
    pub len: usize,
}

/// `XLA_FFI_Scalar`.
#[repr(C)]
pub struct Scalar {
    pub dtype: i32,
    pub value: *const c_void,
}

/// `XLA_FFI_Attrs` (sorted by name).
#[repr(C)]
pub struct Attrs {
    pub struct_size: usize,
    pub extension_start: *mut ExtensionBase,
    pub size: i64,
    /// `XLA_FFI_AttrType` per attribute: 3 is a scalar.
    pub types: *const i32,
    pub names: *const *const ByteSpan,
    pub attrs: *const *const c_void,
}

/// `XLA_FFI_CallFrame`.
#[repr(C)]
pub struct CallFrame {
    pub struct_size: usize,
    pub extension_start: *mut ExtensionBase,
    pub api: *const Api,
    pub ctx: *mut c_void,
    /// `XLA_FFI_ExecutionStage`.
    pub stage: i32,
    pub args: Args,
    pub rets: Rets,
    pub attrs: Attrs,
    /// Out, for asynchronous handlers (unused: ours finish, or queue their
    /// GPU work, before they return).
    pub future: *mut c_void,
}

/// `XLA_FFI_TypeId`.
#[repr(C)]
pub struct TypeId {
    pub type_id: i64,
}

/// `XLA_FFI_Metadata`.
#[repr(C)]
pub struct Metadata {
    pub struct_size: usize,
    pub api_version: ApiVersion,
    /// `XLA_FFI_Handler_Traits`: 0, not command-buffer compatible (see
    /// [`answer_metadata`]).
    pub traits: u32,
    /// Past the struct's declared size (`XLA_FFI_STRUCT_SIZE(.., traits)`),
    /// written only when the caller's `struct_size` covers it.
    pub state_type_id: TypeId,
}

/// `XLA_FFI_Metadata_Extension`.
#[repr(C)]
pub struct MetadataExtension {
    pub extension_base: ExtensionBase,
    pub metadata: *mut Metadata,
}

/// `XLA_FFI_STRUCT_SIZE(type, field)`.
macro_rules! struct_size {
    ($t:ty, $f:ident, $ft:ty) => {
        offset_of!($t, $f) + size_of::<$ft>()
    };
}

pub const CALL_FRAME_SIZE: usize = struct_size!(CallFrame, attrs, Attrs);
pub const BUFFER_SIZE: usize = struct_size!(RawBuffer, dims, *const i64);
pub const ARGS_SIZE: usize = struct_size!(Args, args, *const *mut c_void);
pub const RETS_SIZE: usize = struct_size!(Rets, rets, *const *mut c_void);
pub const ATTRS_SIZE: usize = struct_size!(Attrs, attrs, *const *const c_void);
pub const METADATA_SIZE: usize = struct_size!(Metadata, traits, u32);
pub const METADATA_EXTENSION_SIZE: usize = struct_size!(MetadataExtension, metadata, *mut Metadata);
pub const ERROR_CREATE_ARGS_SIZE: usize = struct_size!(ErrorCreateArgs, errc, i32);
pub const STREAM_GET_ARGS_SIZE: usize = struct_size!(StreamGetArgs, stream, *mut c_void);
pub const DEVICE_ORDINAL_GET_ARGS_SIZE: usize = struct_size!(DeviceOrdinalGetArgs, device_ordinal, i32);
pub const API_VERSION_SIZE: usize = struct_size!(ApiVersion, minor_version, i32);

/// `XLA_FFI_ExecutionStage_EXECUTE`: the only stage the targets do work in.
pub const STAGE_EXECUTE: i32 = 3;
const ARG_BUFFER: i32 = 1;
const ATTR_SCALAR: i32 = 3;

/// `XLA_FFI_DataType` values the ops take or read attributes as.
pub mod dtype {
    pub const PRED: i32 = 1;
    pub const S8: i32 = 2;
    pub const S32: i32 = 4;
    pub const S64: i32 = 5;
    pub const U8: i32 = 6;
    pub const U32: i32 = 8;
    pub const U64: i32 = 9;
    pub const F16: i32 = 10;
    pub const F32: i32 = 11;
    pub const F64: i32 = 12;
    pub const BF16: i32 = 16;

    /// The NumPy/JAX name of a data type, for messages.
    pub fn name(d: i32) -> String {
        match d {
            PRED => "bool".into(),
            S8 => "int8".into(),
            S32 => "int32".into(),
            S64 => "int64".into(),
            U8 => "uint8".into(),
            U32 => "uint32".into(),
            U64 => "uint64".into(),
            F16 => "float16".into(),
            F32 => "float32".into(),
            F64 => "float64".into(),
            BF16 => "bfloat16".into(),
            other => format!("XLA data type {other}"),
        }
    }
}

/// Why a handler failed.
pub enum Failure {
    /// Ours: an absl status code and the message XLA raises (as
    /// `JaxRuntimeError` in Python), after the op's name.
    Op { code: i32, message: String },
    /// An error an API function returned (owned here: handed back to XLA
    /// as the call's error, which destroys it).
    Xla(*mut FfiError),
}

impl Failure {
    /// Inputs that do not fit the op (`INVALID_ARGUMENT`).
    pub fn invalid(message: impl Into<String>) -> Failure {
        Failure::Op { code: code::INVALID_ARGUMENT, message: message.into() }
    }
    /// A launch or device error (`INTERNAL`).
    pub fn internal(message: impl Into<String>) -> Failure {
        Failure::Op { code: code::INTERNAL, message: message.into() }
    }
}

/// One array XLA passed (an argument or a result): its element type, its
/// dimensions and its data (host memory on the CPU platform, device
/// memory of the call's GPU on CUDA).
pub struct Array {
    pub dtype: i32,
    pub data: *mut c_void,
    pub dims: Vec<usize>,
}

impl Array {
    /// Elements.
    pub fn len(&self) -> usize {
        self.dims.iter().product()
    }

    /// `float16[2, 64]`, for messages.
    pub fn describe(&self) -> String {
        format!("{}{:?}", dtype::name(self.dtype), self.dims)
    }
}

/// The call frame of one call in the execute stage, checked to be at
/// least the size of the version it is read as.
pub struct Frame<'a> {
    raw: &'a CallFrame,
    /// XLA's API table, non-null; read only through [`api_field`] (its
    /// version may be shorter than [`Api`]).
    api: *const Api,
}

/// The field at byte `offset` of XLA's API table `api`, when the table's
/// `struct_size` covers it (an older XLA's table is shorter: then `None`).
/// Read through the raw pointer: no reference to the whole table is made.
///
/// # Safety
/// `api` is XLA's non-null API table (alive for the process) and `T` the
/// type of the field at `offset` in [`Api`], in the table's version.
unsafe fn api_field<T: Copy>(api: *const Api, offset: usize) -> Option<T> {
    // SAFETY: `struct_size` is the first field of every version.
    let size = unsafe { (*api).struct_size };
    if size < offset + size_of::<T>() {
        return None;
    }
    // SAFETY: the table holds `size` bytes, which cover the field; the
    // caller names its type.
    Some(unsafe { (api as *const u8).add(offset).cast::<T>().read() })
}

impl<'a> Frame<'a> {
    fn buffers(&self, what: &str, size: i64, types: *const i32, ptrs: *const *mut c_void) -> Result<Vec<Array>, Failure> {
        let n = usize::try_from(size).map_err(|_| Failure::internal(format!("XLA passed {size} {what}s")))?;
        let mut out = Vec::with_capacity(n);
        for i in 0..n {
            // SAFETY: XLA's call frame holds `size` entries in `types` and
            // in the pointer array (c_api.h: "length == size"); `i < size`.
            let (ty, p) = unsafe { (*types.add(i), *ptrs.add(i)) };
            if ty != ARG_BUFFER {
                return Err(Failure::invalid(format!("{what} {i} is not a buffer (XLA type {ty}): the op takes arrays only")));
            }
            let p = p as *const RawBuffer;
            // SAFETY: a buffer entry points to an `XLA_FFI_Buffer` that
            // lives for the call; its first field is `struct_size`.
            let size = unsafe { (*p).struct_size };
            if size < BUFFER_SIZE {
                return Err(Failure::internal(format!("{what} {i}: XLA_FFI_Buffer of {size} bytes, {BUFFER_SIZE} expected (an XLA older than the FFI API 0.1?)")));
            }
            // SAFETY: as above, and it holds all of `RawBuffer` (checked).
            let b = unsafe { &*p };
            let rank = usize::try_from(b.rank).map_err(|_| Failure::internal(format!("{what} {i}: rank {}", b.rank)))?;
            // SAFETY: `dims` holds `rank` entries (c_api.h: "length == rank").
            let dims = (0..rank).map(|d| unsafe { *b.dims.add(d) }.max(0) as usize).collect();
            out.push(Array { dtype: b.dtype, data: b.data, dims });
        }
        Ok(out)
    }

    /// The argument buffers, in order.
    pub fn args(&self) -> Result<Vec<Array>, Failure> {
        self.buffers("argument", self.raw.args.size, self.raw.args.types, self.raw.args.args)
    }

    /// The result buffers, in order.
    pub fn rets(&self) -> Result<Vec<Array>, Failure> {
        self.buffers("result", self.raw.rets.size, self.raw.rets.types, self.raw.rets.rets)
    }

    /// The scalar attribute `name`, or `None` when the call has none.
    fn scalar(&self, name: &str) -> Result<Option<(i32, *const c_void)>, Failure> {
        let a = &self.raw.attrs;
        for i in 0..usize::try_from(a.size).unwrap_or(0) {
            // SAFETY: `names`, `types` and `attrs` hold `size` entries
            // (c_api.h); each name is a live byte span of `len` bytes.
            let (span, ty, p) = unsafe { (&**a.names.add(i), *a.types.add(i), *a.attrs.add(i)) };
            // SAFETY: as above: `ptr` addresses `len` bytes.
            let key = unsafe { std::slice::from_raw_parts(span.ptr as *const u8, span.len) };
            if key != name.as_bytes() {
                continue;
            }
            if ty != ATTR_SCALAR {
                return Err(Failure::invalid(format!("attribute `{name}` is not a scalar (XLA attribute type {ty})")));
            }
            // SAFETY: a scalar attribute points to an `XLA_FFI_Scalar`.
            let s = unsafe { &*(p as *const Scalar) };
            return Ok(Some((s.dtype, s.value)));
        }
        Ok(None)
    }

    /// The float attribute `name` (float32, or float64 narrowed).
    pub fn attr_f32(&self, name: &str) -> Result<f32, Failure> {
        match self.scalar(name)? {
            // SAFETY: the scalar's `value` points to a value of its dtype.
            Some((dtype::F32, v)) => Ok(unsafe { *(v as *const f32) }),
            // SAFETY: as above.
            Some((dtype::F64, v)) => Ok(unsafe { *(v as *const f64) } as f32),
            Some((d, _)) => Err(Failure::invalid(format!("attribute `{name}` is {}, a float32 expected (pass numpy.float32)", dtype::name(d)))),
            None => Err(Failure::invalid(format!("attribute `{name}` is missing: the target takes {name}: float32"))),
        }
    }

    /// The boolean attribute `name` (bool, or an integer: non-zero is true).
    pub fn attr_bool(&self, name: &str) -> Result<bool, Failure> {
        // SAFETY (each arm): the scalar's `value` points to a value of its
        // dtype; PRED is a C++ `bool`, one byte.
        match self.scalar(name)? {
            Some((dtype::PRED | dtype::S8 | dtype::U8, v)) => Ok(unsafe { *(v as *const u8) } != 0),
            Some((dtype::S32 | dtype::U32, v)) => Ok(unsafe { *(v as *const u32) } != 0),
            Some((dtype::S64 | dtype::U64, v)) => Ok(unsafe { *(v as *const u64) } != 0),
            Some((d, _)) => Err(Failure::invalid(format!("attribute `{name}` is {}, a bool expected", dtype::name(d)))),
            None => Err(Failure::invalid(format!("attribute `{name}` is missing: the target takes {name}: bool"))),
        }
    }

    /// The call's CUDA stream (`XLA_FFI_Stream_Get`), as a raw `CUstream`.
    pub fn stream(&self) -> Result<u64, Failure> {
        // SAFETY: `api` is XLA's table; Stream_Get has had this offset and
        // type since API 0.1.
        let Some(Some(get)) = (unsafe { api_field::<Option<StreamGetFn>>(self.api, offset_of!(Api, stream_get)) }) else {
            return Err(Failure::internal("XLA's FFI API has no XLA_FFI_Stream_Get"));
        };
        let mut args = StreamGetArgs { struct_size: STREAM_GET_ARGS_SIZE, extension_start: std::ptr::null_mut(), ctx: self.raw.ctx, stream: std::ptr::null_mut() };
        // SAFETY: an API function called with its argument struct, sized
        // and filled as c_api.h declares, and the call's own context.
        let err = unsafe { get(&mut args) };
        if !err.is_null() {
            return Err(Failure::Xla(err));
        }
        Ok(args.stream as u64)
    }

    /// The device ordinal of the call (`XLA_FFI_DeviceOrdinal_Get`, API
    /// 0.3), or `None` with an older XLA.
    pub fn device_ordinal(&self) -> Option<i32> {
        // SAFETY: `api` is XLA's table; its version struct has had this
        // offset since API 0.1.
        let v = unsafe { api_field::<ApiVersion>(self.api, offset_of!(Api, api_version)) }?;
        if !(v.struct_size >= API_VERSION_SIZE && v.major_version == 0 && v.minor_version >= LAYOUT_MINOR) {
            return None;
        }
        // SAFETY: a table of version 0.3 or later has [`Api`]'s layout up
        // to DeviceOrdinal_Get (`api_field` checks that it reaches it).
        let get = unsafe { api_field::<Option<DeviceOrdinalGetFn>>(self.api, offset_of!(Api, device_ordinal_get)) }??;
        let mut args = DeviceOrdinalGetArgs { struct_size: DEVICE_ORDINAL_GET_ARGS_SIZE, extension_start: std::ptr::null_mut(), ctx: self.raw.ctx, device_ordinal: -1 };
        // SAFETY: as in `stream`.
        let err = unsafe { get(&mut args) };
        // A failure here (which XLA 0.10 cannot produce) would leak its
        // error object: the ordinal is only a check, so `None` follows.
        (err.is_null() && args.device_ordinal >= 0).then_some(args.device_ordinal)
    }
}

/// Answers XLA's metadata query (a call frame whose extension is
/// `XLA_FFI_Metadata_Extension`, sent when the handler is registered; its
/// `api` may be null): the API version these definitions follow, and no
/// traits. In particular not `COMMAND_BUFFER_COMPATIBLE`: the GPU path
/// orders its launches with XLA's stream through events and the backward
/// pass allocates scratch, neither of which may be captured into a CUDA
/// graph, so XLA must not trace these calls into command buffers.
///
/// # Safety
/// `ext` is the call frame's non-null `extension_start`, of type metadata.
unsafe fn answer_metadata(ext: *mut ExtensionBase) -> Result<(), String> {
    // SAFETY: the caller's contract: an extension starts with its base.
    let size = unsafe { (*ext).struct_size };
    if size < METADATA_EXTENSION_SIZE {
        return Err(format!("XLA_FFI_Metadata_Extension of {size} bytes, {METADATA_EXTENSION_SIZE} expected"));
    }
    // SAFETY: a metadata extension (the caller's contract) of at least
    // our size (checked): its `metadata` field can be read.
    let md = unsafe { (*(ext as *const MetadataExtension)).metadata };
    if md.is_null() {
        return Err("XLA_FFI_Metadata_Extension without its metadata".into());
    }
    // SAFETY: non-null, XLA's metadata struct, alive for the query;
    // `struct_size` is its first field.
    let md_size = unsafe { (*md).struct_size };
    if md_size < METADATA_SIZE {
        return Err(format!("XLA_FFI_Metadata of {md_size} bytes, {METADATA_SIZE} expected"));
    }
    // SAFETY (the three writes): the fields lie within the `md_size`
    // bytes of XLA's struct (checked against their ends), written as raw
    // places (no reference to the whole struct).
    unsafe {
        (*md).api_version = ApiVersion { struct_size: API_VERSION_SIZE, extension_start: std::ptr::null_mut(), major_version: API_MAJOR, minor_version: API_MINOR };
        (*md).traits = 0;
        if md_size >= offset_of!(Metadata, state_type_id) + size_of::<TypeId>() {
            // No state: XLA_FFI_UNKNOWN_TYPE_ID.
            (*md).state_type_id = TypeId { type_id: 0 };
        }
    }
    Ok(())
}

/// An `XLA_FFI_Error` with `code` and `message`, made by XLA's API (the
/// only way: XLA destroys it). Null when the API cannot make one, which a
/// conforming XLA never gives (`XLA_FFI_Error_Create` is the first API
/// function); then the failure is written to stderr and XLA sees success.
fn make_error(api: *const Api, code: i32, message: &str) -> *mut FfiError {
    // An interior NUL would cut the message short, not fail.
    let text = CString::new(message.replace('\0', " ")).expect("NULs replaced");
    // SAFETY: `api` is the call frame's API pointer: null, or XLA's API
    // table for the life of the process; Error_Create has had this offset
    // and type since API 0.1.
    let create = if api.is_null() { None } else { unsafe { api_field::<Option<ErrorCreateFn>>(api, offset_of!(Api, error_create)) }.flatten() };
    let Some(create) = create else {
        eprintln!("kernel_ops.jax: {message} (XLA's FFI API could not take this error)");
        return std::ptr::null_mut();
    };
    let mut args = ErrorCreateArgs { struct_size: ERROR_CREATE_ARGS_SIZE, extension_start: std::ptr::null_mut(), message: text.as_ptr(), errc: code };
    // SAFETY: the API function with its argument struct; XLA copies the
    // message during the call (into an absl::Status), and `text` outlives it.
    unsafe { create(&mut args) }
}

/// Runs handler `body` for call frame `frame` of op `op`: answers the
/// metadata query, does nothing in the stages before execution
/// (instantiate, prepare, initialize: the targets keep no state and
/// request no resources), checks the frame's size, and in the execute
/// stage runs `body`, catching a panic (it must not cross the C boundary)
/// and turning a [`Failure`] or a panic into an `XLA_FFI_Error` whose
/// message starts with the op's name.
///
/// # Safety
/// `frame` is what XLA passed to the handler: a call frame valid for the
/// call.
pub unsafe fn handle(frame: *mut CallFrame, op: &str, body: impl FnOnce(&Frame) -> Result<(), Failure>) -> *mut FfiError {
    let run = || -> Result<(), (*const Api, Failure)> {
        if frame.is_null() {
            return Err((std::ptr::null(), Failure::internal("a null call frame")));
        }
        // SAFETY: the caller's contract: a live call frame; `struct_size`,
        // `extension_start` and `api` are at these offsets in every version
        // (read as places through the raw pointer: no reference yet).
        let (size, ext, api) = unsafe { ((*frame).struct_size, (*frame).extension_start, (*frame).api) };
        // SAFETY: a non-null extension pointer addresses an extension,
        // which starts with its base (c_api.h).
        if !ext.is_null() && unsafe { (*ext).kind } == EXTENSION_METADATA {
            // SAFETY: checked: a metadata extension.
            return unsafe { answer_metadata(ext) }.map_err(|m| (api, Failure::internal(m)));
        }
        if size < CALL_FRAME_SIZE {
            return Err((api, Failure::internal(format!("XLA_FFI_CallFrame of {size} bytes, {CALL_FRAME_SIZE} expected: an XLA older than the FFI API 0.1"))));
        }
        // SAFETY: the frame holds every field up to `attrs` (checked), and
        // `future` after them, which every version since 0.1 declares
        // (and which is never read here).
        let raw = unsafe { &*frame };
        if raw.stage != STAGE_EXECUTE {
            return Ok(());
        }
        if api.is_null() {
            return Err((api, Failure::internal("a call frame without its API")));
        }
        for (what, size, want) in [("XLA_FFI_Args", raw.args.struct_size, ARGS_SIZE), ("XLA_FFI_Rets", raw.rets.struct_size, RETS_SIZE), ("XLA_FFI_Attrs", raw.attrs.struct_size, ATTRS_SIZE)] {
            if size < want {
                return Err((api, Failure::internal(format!("{what} of {size} bytes, {want} expected"))));
            }
        }
        body(&Frame { raw, api }).map_err(|f| (api, f))
    };
    let outcome = catch_unwind(AssertUnwindSafe(run)).unwrap_or_else(|panic| {
        let what = panic.downcast_ref::<String>().cloned().or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_else(|| "a panic".into());
        // SAFETY: the caller's contract (read again: the closure that had
        // it unwound); `api` is at this offset in every version.
        let api = if frame.is_null() { std::ptr::null() } else { unsafe { (*frame).api } };
        Err((api, Failure::internal(format!("panicked: {what} (a bug of kernel_ops: please report it)"))))
    });
    match outcome {
        Ok(()) => std::ptr::null_mut(),
        // An error XLA made (the stream query's) goes back as it is.
        Err((_, Failure::Xla(err))) => err,
        Err((api, Failure::Op { code, message })) => make_error(api, code, &format!("kernel_ops.jax.{op}: {message}")),
    }
}

// Sizes and offsets of `xla/ffi/api/c_api.h` on a 64-bit target, as the
// header's `XLA_FFI_STRUCT_SIZE` gives them: checked at compile time, so a
// wrong definition does not build.
const _: () = {
    assert!(size_of::<usize>() == 8, "the layouts below are those of a 64-bit target");
    assert!(size_of::<ExtensionBase>() == 24);
    assert!(API_VERSION_SIZE == 24);
    assert!(ERROR_CREATE_ARGS_SIZE == 28);
    assert!(BUFFER_SIZE == 48 && offset_of!(RawBuffer, data) == 24);
    assert!(ARGS_SIZE == 40 && RETS_SIZE == 40 && ATTRS_SIZE == 48);
    assert!(offset_of!(CallFrame, stage) == 32 && offset_of!(CallFrame, args) == 40);
    assert!(offset_of!(CallFrame, rets) == 80 && offset_of!(CallFrame, attrs) == 120);
    assert!(CALL_FRAME_SIZE == 168 && offset_of!(CallFrame, future) == 168);
    assert!(size_of::<Scalar>() == 16 && size_of::<ByteSpan>() == 16);
    // XLA_FFI_Api: two words, the version (24 bytes), the internal API,
    // then the functions in order: Error_Create at 48, Stream_Get (the
    // 5th) at 80, DeviceOrdinal_Get (the 18th) at 48 + 17 * 8.
    assert!(offset_of!(Api, error_create) == 48);
    assert!(offset_of!(Api, stream_get) == 80);
    assert!(offset_of!(Api, device_ordinal_get) == 48 + 17 * 8);
    assert!(STREAM_GET_ARGS_SIZE == 32 && DEVICE_ORDINAL_GET_ARGS_SIZE == 28);
    assert!(METADATA_SIZE == 36 && offset_of!(Metadata, state_type_id) == 40);
    assert!(METADATA_EXTENSION_SIZE == 32);
};
