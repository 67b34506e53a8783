"""The XLA FFI handlers of kernel_ops.jax called by hand, through ctypes,
with call frames laid out as xla/ffi/api/c_api.h declares them and a fake
API table whose XLA_FFI_Error_Create records the message: what XLA itself
never sends to an execute-only handler (the stages before execution, a
frame of an older size, a metadata query without an API), and a whole
call (rms_norm on NumPy buffers, on the emulator) with no JAX at all."""
import ctypes as C

import numpy as np
import pytest

from kernel_ops import _native

F32, F16 = 11, 10          # XLA_FFI_DataType
BUFFER, SCALAR = 1, 3      # XLA_FFI_ArgType / RetType, XLA_FFI_AttrType
INSTANTIATE, PREPARE, INITIALIZE, EXECUTE = 0, 1, 2, 3


class ExtBase(C.Structure):
    _fields_ = [("struct_size", C.c_size_t), ("type", C.c_int), ("next", C.c_void_p)]


class ApiVersion(C.Structure):
    _fields_ = [("struct_size", C.c_size_t), ("extension_start", C.c_void_p),
                ("major_version", C.c_int), ("minor_version", C.c_int)]


class ErrorCreateArgs(C.Structure):
    _fields_ = [("struct_size", C.c_size_t), ("extension_start", C.c_void_p),
                ("message", C.c_char_p), ("errc", C.c_int)]


ERROR_CREATE = C.CFUNCTYPE(C.c_void_p, C.POINTER(ErrorCreateArgs))


class Api(C.Structure):
    # Up to XLA_FFI_Stream_Get, as API 0.1 begins (the CPU handlers call
    # Error_Create only).
    _fields_ = [("struct_size", C.c_size_t), ("extension_start", C.c_void_p), ("api_version", ApiVersion),
                ("internal_api", C.c_void_p), ("error_create", ERROR_CREATE), ("error_get_message", C.c_void_p),
                ("error_destroy", C.c_void_p), ("handler_register", C.c_void_p), ("stream_get", C.c_void_p)]


class Buffer(C.Structure):
    _fields_ = [("struct_size", C.c_size_t), ("extension_start", C.c_void_p), ("dtype", C.c_int),
                ("data", C.c_void_p), ("rank", C.c_int64), ("dims", C.POINTER(C.c_int64))]


class Args(C.Structure):
    _fields_ = [("struct_size", C.c_size_t), ("extension_start", C.c_void_p), ("size", C.c_int64),
                ("types", C.POINTER(C.c_int)), ("args", C.POINTER(C.c_void_p))]


class ByteSpan(C.Structure):
    _fields_ = [("ptr", C.c_void_p), ("len", C.c_size_t)]


class Scalar(C.Structure):
    _fields_ = [("dtype", C.c_int), ("value", C.c_void_p)]


class Attrs(C.Structure):
    _fields_ = [("struct_size", C.c_size_t), ("extension_start", C.c_void_p), ("size", C.c_int64),
                ("types", C.POINTER(C.c_int)), ("names", C.POINTER(C.POINTER(ByteSpan))),
                ("attrs", C.POINTER(C.c_void_p))]


class CallFrame(C.Structure):
    _fields_ = [("struct_size", C.c_size_t), ("extension_start", C.c_void_p), ("api", C.POINTER(Api)),
                ("ctx", C.c_void_p), ("stage", C.c_int), ("args", Args), ("rets", Args), ("attrs", Attrs),
                ("future", C.c_void_p)]


class Metadata(C.Structure):
    _fields_ = [("struct_size", C.c_size_t), ("api_version", ApiVersion), ("traits", C.c_uint32),
                ("state_type_id", C.c_int64)]


class MetadataExtension(C.Structure):
    _fields_ = [("extension_base", ExtBase), ("metadata", C.POINTER(Metadata))]


# XLA_FFI_STRUCT_SIZE of each: the offset of the last declared field plus its size.
CALL_FRAME_SIZE = CallFrame.attrs.offset + C.sizeof(Attrs)
assert (CALL_FRAME_SIZE, C.sizeof(Buffer), C.sizeof(Args), C.sizeof(Attrs)) == (168, 48, 40, 48)

HANDLER = C.CFUNCTYPE(C.c_void_p, C.POINTER(CallFrame))
ERROR = 0x5EED0  # what the fake Error_Create returns


def handler(op, platform=0):
    capsule = _native._xla_ffi_targets()[op][platform]
    get = C.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = C.c_void_p, [C.py_object, C.c_char_p]
    return HANDLER(get(capsule, None))


class Harness:
    """A fake API table, and call frames over NumPy arrays and scalars."""

    def __init__(self):
        self.errors = []

        def create(args):
            self.errors.append((args.contents.errc, args.contents.message.decode()))
            return ERROR

        self._create = ERROR_CREATE(create)
        self.api = Api(struct_size=C.sizeof(Api), error_create=self._create)
        self.api.api_version = ApiVersion(C.sizeof(ApiVersion), None, 0, 1)
        self.keep = []

    def _list(self, arrays):
        bufs = []
        for a in arrays:
            dims = (C.c_int64 * max(a.ndim, 1))(*a.shape)
            dt = {np.dtype(np.float32): F32, np.dtype(np.float16): F16}[a.dtype]
            b = Buffer(C.sizeof(Buffer), None, dt, a.ctypes.data, a.ndim, C.cast(dims, C.POINTER(C.c_int64)))
            self.keep += [dims, b, a]
            bufs.append(b)
        types = (C.c_int * max(len(bufs), 1))(*[BUFFER] * len(bufs))
        ptrs = (C.c_void_p * max(len(bufs), 1))(*[C.addressof(b) for b in bufs])
        self.keep += [types, ptrs]
        return Args(C.sizeof(Args), None, len(bufs), C.cast(types, C.POINTER(C.c_int)), C.cast(ptrs, C.POINTER(C.c_void_p)))

    def frame(self, stage, args, rets, **scalars):
        names, types, values = [], [], []
        for name in sorted(scalars):
            raw = name.encode()
            span = ByteSpan(C.cast(C.c_char_p(raw), C.c_void_p), len(raw))
            v = C.c_float(scalars[name])
            s = Scalar(F32, C.cast(C.pointer(v), C.c_void_p))
            self.keep += [raw, span, v, s]
            names.append(C.pointer(span))
            types.append(SCALAR)
            values.append(C.addressof(s))
        n = len(names)
        attrs = Attrs(C.sizeof(Attrs), None, n, (C.c_int * max(n, 1))(*types),
                      (C.POINTER(ByteSpan) * max(n, 1))(*names), (C.c_void_p * max(n, 1))(*values))
        return CallFrame(CALL_FRAME_SIZE, None, C.pointer(self.api), None, stage, self._list(args), self._list(rets), attrs, None)


def test_the_metadata_query_gets_api_0_1_and_no_traits_without_an_api():
    md = Metadata(struct_size=Metadata.traits.offset + 4, traits=77, state_type_id=0)
    ext = MetadataExtension(ExtBase(C.sizeof(MetadataExtension), 1, None), C.pointer(md))
    frame = CallFrame(CALL_FRAME_SIZE, C.addressof(ext), None, None, EXECUTE)
    for op in _native._xla_ffi_targets():
        for platform in (0, 1):
            md.api_version = ApiVersion()
            assert handler(op, platform)(C.pointer(frame)) is None, op
            v = md.api_version
            assert (v.struct_size, v.major_version, v.minor_version, md.traits) == (C.sizeof(ApiVersion), 0, 1, 0)


@pytest.mark.parametrize("stage", [INSTANTIATE, PREPARE, INITIALIZE])
def test_the_stages_before_execution_do_nothing(stage):
    # Arguments that would fail every check, and an output that would be
    # written: a stage before execution returns success and touches none.
    h = Harness()
    y = np.full((2, 16), 7.0, np.float32)
    frame = h.frame(stage, [np.zeros(3, np.float16)], [y])
    assert handler("rms_norm")(C.pointer(frame)) is None
    assert h.errors == [] and (y == 7.0).all()


def test_a_whole_call_without_jax():
    h = Harness()
    x = np.arange(32, dtype=np.float32).reshape(2, 16)
    g = np.linspace(0.5, 2, 16, dtype=np.float32)
    y = np.zeros_like(x)
    assert handler("rms_norm")(C.pointer(h.frame(EXECUTE, [x, g], [y], eps=1e-6))) is None, h.errors
    want = x / np.sqrt((x.astype(np.float64) ** 2).mean(-1, keepdims=True) + 1e-6) * g
    np.testing.assert_allclose(y, want, rtol=1e-5)


@pytest.mark.parametrize("make, code, text", [
    # A frame of an older, smaller layout.
    (lambda h: h.frame(EXECUTE, [], []), 13, "kernel_ops.jax.rms_norm: XLA_FFI_CallFrame of 160 bytes, 168 expected"),
    (lambda h: h.frame(EXECUTE, [np.zeros((2, 16), np.float32)], [np.zeros((2, 16), np.float32)], eps=1e-6), 3,
     "kernel_ops.jax.rms_norm: 1 arguments and 1 results passed; the target takes (x, gamma) -> (y)"),
    (lambda h: h.frame(EXECUTE, [np.zeros((2, 16), np.float32), np.zeros(16, np.float16)], [np.zeros((2, 16), np.float32)], eps=1e-6), 3,
     "kernel_ops.jax.rms_norm: `x` is float32[2, 16] and `gamma` is float16[16]: they must have the same dtype"),
    (lambda h: h.frame(EXECUTE, [np.zeros((2, 16), np.float32), np.zeros(16, np.float32)], [np.zeros((2, 16), np.float32)]), 3,
     "kernel_ops.jax.rms_norm: attribute `eps` is missing"),
])
def test_failures_are_errors_made_by_the_api(make, code, text):
    h = Harness()
    frame = make(h)
    if "160 bytes" in text:
        frame.struct_size = 160
    assert handler("rms_norm")(C.pointer(frame)) == ERROR
    assert len(h.errors) == 1 and h.errors[0][0] == code and h.errors[0][1].startswith(text), h.errors
