"""Reading a tensor's address, dtype, shape, device and layout without copying it: PyTorch tensors,
NumPy arrays, hirnode Buffers, and anything with __dlpack__, __cuda_array_interface__ or
__array_interface__; each checked against what a program's binding needs on a rank."""

import ctypes
import sys

from . import _lib
from .errors import BindingError, InvalidArgumentError

# One inspector per type, found the first time the type is bound: fn(obj, slot, rank, keep) -> address.
# `keep` collects what must outlive the C call (DLPack capsules); the bytes vouched for are the
# slot's, since dtype and shape were checked equal (a Buffer gives its own).
_inspectors = {}

# DLPack (dlpack.h): device types and data type codes
DL_CPU, DL_CUDA, DL_CUDA_HOST = 1, 2, 3
_DL_DEVICE_NAMES = {1: "cpu", 2: "cuda", 3: "cuda_host", 4: "opencl", 7: "vulkan", 8: "metal", 10: "rocm",
                    11: "rocm_host", 13: "cuda_managed", 14: "oneapi"}
_DL_DTYPES = {(2, 32, 1): "f32", (4, 16, 1): "bf16", (2, 16, 1): "f16", (0, 32, 1): "i32", (0, 64, 1): "i64"}
_DL_READ_ONLY = 1

# __cuda_array_interface__ / __array_interface__ type strings ('<' little-endian, '=' native)
_TYPESTRS = {"f4": "f32", "f2": "f16", "i4": "i32", "i8": "i64"}


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


class _DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p), ("flags", ctypes.c_uint64), ("dl_tensor", _DLTensor)]


_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_capsule_is_valid = ctypes.pythonapi.PyCapsule_IsValid
_capsule_is_valid.restype = ctypes.c_int
_capsule_is_valid.argtypes = [ctypes.py_object, ctypes.c_char_p]


def _prefix(slot, r):
    """r: the index in the per-rank lists; the rank is the runtime's first + r."""
    return "%s: error: binding '%s' on rank %d: " % (slot.filename, slot.name, slot.first + r)


def _shape_text(dtype, shape):
    return "%s[%s]" % (dtype, ", ".join(str(int(d)) for d in shape))


def _is_c_contiguous(shape, strides, itemsize, in_bytes):
    """strides None means row-major; dimensions of one element do not count; in_bytes: strides in bytes."""
    if strides is None:
        return True
    if any(d == 0 for d in shape):
        return True
    want = itemsize if in_bytes else 1
    for d, s in zip(reversed(tuple(shape)), reversed(tuple(strides))):
        if d != 1 and s != want:
            return False
        want *= d
    return True


def refuse(slot, r, kind, dtype, shape, contiguous, device, writable=True):
    """Raises the BindingError naming what differs from what the slot needs on rank r.
    device: ("cpu", -1) / ("cuda", ordinal) / (other name, id), or None when unknown."""
    p = _prefix(slot, r)
    what = "%s of %s" % (kind, _shape_text(dtype, shape) if shape is not None else dtype)
    want = _shape_text(slot.dtype, slot.shapes[r])
    if dtype != slot.dtype or (kind == "a NumPy array" and slot.np_dtype is None):
        extra = ""
        if slot.dtype == "bf16" and kind == "a NumPy array":
            extra = " (NumPy has no bfloat16: bind a torch tensor, a DLPack producer or an ml_dtypes array)"
        raise BindingError(p + "expected %s, got %s: wrong dtype%s" % (want, what, extra), slot.name, slot.first + r)
    if shape is None or tuple(shape) != slot.shapes[r]:
        raise BindingError(p + "expected %s (the rank's %s), got %s: wrong shape" %
                           (want, "shard" if slot.shard_axis >= 0 else "copy", what), slot.name, slot.first + r)
    if not contiguous:
        raise BindingError(p + "%s is not contiguous (row-major, no gaps): make a contiguous copy "
                           "(torch: .contiguous(), NumPy: numpy.ascontiguousarray)" % what, slot.name, slot.first + r)
    if not writable and slot.is_output:
        raise BindingError(p + "%s is read-only, and '%s' is an output" % (what, slot.name), slot.name, slot.first + r)
    if device is None or not slot.device_ok(device, r):
        raise BindingError(p + "%s %s, but %s" % (what, _device_text(device), slot.device_need(r)), slot.name, slot.first + r)
    raise AssertionError("refuse() called on a binding that fits")


def _device_text(device):
    if device is None:
        return "on an unknown device"
    name, idx = device
    return "on cpu" if name == "cpu" else "on %s:%d" % (name, idx)


# ---- PyTorch: attributes read directly (no capsule) ----

def _torch_dtype_name(torch, dt):
    names = {torch.float32: "f32", torch.bfloat16: "bf16", torch.float16: "f16", torch.int32: "i32",
             torch.int64: "i64"}
    return names.get(dt, str(dt).replace("torch.", ""))


def _torch(t, slot, r, keep):
    if (t.dtype is not slot.torch_dtype or t.shape != slot.shapes[r] or not t.is_contiguous()
            or not (t.is_cuda and t.get_device() == slot.devices[r] if slot.cuda else t.is_cpu)):
        if slot.torch_dtype is None and slot.resolve():  # torch came after the configuration
            return _torch(t, slot, r, keep)
        torch = sys.modules["torch"]
        dev = t.device
        refuse(slot, r, "a torch.Tensor", _torch_dtype_name(torch, t.dtype), tuple(t.shape), t.is_contiguous(),
               (dev.type, -1 if dev.index is None else dev.index))
    return t.data_ptr()


# ---- NumPy: the array's own fields ----

_NP_NAMES = {"float32": "f32", "float16": "f16", "int32": "i32", "int64": "i64", "bfloat16": "bf16"}


def _numpy_dtype_name(dt):
    if dt.byteorder == ">" or (dt.byteorder == "=" and sys.byteorder == "big"):
        return str(dt)
    return _NP_NAMES.get(dt.name, dt.name)


def _numpy(a, slot, r, keep):
    fl = a.flags
    dt = a.dtype
    # `is` first: the dtypes of native arrays are shared objects (np_dtype None: NumPy has none for it;
    # never compared with ==, which would read None as float64)
    if ((dt is not slot.np_dtype and (slot.np_dtype is None or dt != slot.np_dtype)) or a.shape != slot.shapes[r]
            or not fl.c_contiguous or slot.cuda):
        if slot.np_dtype is None and slot.resolve():  # NumPy came after the configuration
            return _numpy(a, slot, r, keep)
        refuse(slot, r, "a NumPy array", _numpy_dtype_name(dt), a.shape, fl.c_contiguous, ("cpu", -1), fl.writeable)
    if fl.writeable and a.size:
        return ctypes.addressof(ctypes.c_char.from_buffer(a))  # a third of __array_interface__'s cost
    if slot.is_output:
        refuse(slot, r, "a NumPy array", _numpy_dtype_name(a.dtype), a.shape, True, ("cpu", -1), False)
    return a.__array_interface__["data"][0]


# ---- hirnode Buffers (Runtime.alloc) ----

def _buffer(b, slot, r, keep):
    if b.ptr is None:
        raise BindingError(_prefix(slot, r) + "the Buffer was freed", slot.name, slot.first + r)
    if b._state is not slot.state:
        raise BindingError(_prefix(slot, r) + "the Buffer belongs to another runtime", slot.name, slot.first + r)
    if b.rank != slot.first + r:
        raise BindingError(_prefix(slot, r) + "a Buffer of rank %d (each rank's binding is memory of that rank)"
                           % b.rank, slot.name, slot.first + r)
    if b.dtype is not None and (b.dtype != slot.dtype or b.shape != slot.shapes[r]):
        refuse(slot, r, "a Buffer", b.dtype, b.shape, True, slot.device_of(r))
    slot.bytes[r] = b.nbytes  # its own size: the library checks it against the tensor's
    slot.sized = True
    return b.ptr


# ---- DLPack ----

def _dlpack(t, slot, r, keep):
    dev = t.__dlpack_device__() if hasattr(t, "__dlpack_device__") else None
    if dev is not None and dev[0] != DL_CPU:
        try:  # -1: no synchronisation (the caller orders its streams with the launch's)
            cap = t.__dlpack__(stream=-1)
        except (TypeError, ValueError, BufferError):
            cap = t.__dlpack__()
    else:
        cap = t.__dlpack__()
    keep.append(cap)
    return read_dlpack(cap, slot, r, type(t).__name__)


def read_dlpack(cap, slot, r, kind):
    """The address of a DLPack capsule's tensor, checked against slot on rank r. The capsule stays
    unconsumed: its destructor gives the tensor back when it goes."""
    if _capsule_is_valid(cap, b"dltensor"):
        dl = _DLManagedTensor.from_address(_capsule_pointer(cap, b"dltensor")).dl_tensor
        flags = 0
    elif _capsule_is_valid(cap, b"dltensor_versioned"):
        m = _DLManagedTensorVersioned.from_address(_capsule_pointer(cap, b"dltensor_versioned"))
        if m.major != 1:
            raise BindingError(_prefix(slot, r) + "a DLPack %d.%d tensor (this reader knows 1.x)" % (m.major, m.minor),
                               slot.name, r)
        dl, flags = m.dl_tensor, m.flags
    else:
        raise BindingError(_prefix(slot, r) + "__dlpack__ gave no unconsumed DLPack capsule", slot.name, slot.first + r)
    code = (dl.dtype.code, dl.dtype.bits, dl.dtype.lanes)
    dtype = _DL_DTYPES.get(code, "dlpack(code %d, bits %d, lanes %d)" % code)
    ndim = dl.ndim
    shape = tuple(dl.shape[i] for i in range(ndim))
    strides = tuple(dl.strides[i] for i in range(ndim)) if dl.strides else None
    contiguous = _is_c_contiguous(shape, strides, 1, False)
    dtype_dev = dl.device.device_type
    device = ("cpu", -1) if dtype_dev in (DL_CPU, DL_CUDA_HOST) else (
        _DL_DEVICE_NAMES.get(dtype_dev, "dlpack device %d" % dtype_dev), dl.device.device_id)
    if (dtype != slot.dtype or shape != slot.shapes[r] or not contiguous or not slot.device_ok(device, r)
            or (flags & _DL_READ_ONLY and slot.is_output)):
        refuse(slot, r, "a DLPack tensor (%s)" % kind, dtype, shape, contiguous, device, not flags & _DL_READ_ONLY)
    return (dl.data or 0) + dl.byte_offset


# ---- __cuda_array_interface__ (v2, v3) and __array_interface__ ----

def _interface_dtype(typestr):
    if typestr[:1] in "<=|" and typestr[1:] in _TYPESTRS:
        return _TYPESTRS[typestr[1:]]
    return typestr


def _cuda_array_interface(t, slot, r, keep):
    cai = t.__cuda_array_interface__
    ptr, readonly = cai["data"]
    shape = tuple(cai["shape"])
    dtype = _interface_dtype(cai["typestr"])
    if slot.dtype == "bf16" and dtype != "bf16":
        raise BindingError(_prefix(slot, r) + "'%s' is bf16, which __cuda_array_interface__ cannot say (typestr "
                           "%r): bind the tensor through DLPack (__dlpack__)" % (slot.name, cai["typestr"]),
                           slot.name, r)
    if cai.get("mask") is not None:
        raise BindingError(_prefix(slot, r) + "a masked array (__cuda_array_interface__ mask)", slot.name, slot.first + r)
    itemsize = _lib.DTYPE_SIZE.get(dtype, 1)
    contiguous = _is_c_contiguous(shape, cai.get("strides"), itemsize, True)
    device = cuda_device_of(t, ptr)
    if dtype != slot.dtype or shape != slot.shapes[r] or not contiguous or not slot.device_ok(device, r) \
            or (readonly and slot.is_output):
        refuse(slot, r, "a %s (__cuda_array_interface__)" % type(t).__name__, dtype, shape, contiguous, device,
               not readonly)
    return ptr or 0


def _array_interface(t, slot, r, keep):
    ai = t.__array_interface__
    data = ai.get("data")
    if not isinstance(data, tuple):
        raise BindingError(_prefix(slot, r) + "a %s whose __array_interface__ has no address (a buffer object): "
                           "pass a NumPy array" % type(t).__name__, slot.name, slot.first + r)
    ptr, readonly = data
    shape = tuple(ai["shape"])
    dtype = _interface_dtype(ai["typestr"])
    contiguous = _is_c_contiguous(shape, ai.get("strides"), _lib.DTYPE_SIZE.get(dtype, 1), True)
    if dtype != slot.dtype or shape != slot.shapes[r] or not contiguous or not slot.device_ok(("cpu", -1), r) \
            or (readonly and slot.is_output):
        refuse(slot, r, "a %s (__array_interface__)" % type(t).__name__, dtype, shape, contiguous, ("cpu", -1),
               not readonly)
    return (ptr or 0) + ai.get("offset", 0)


# The device of CUDA memory that says nothing of it (__cuda_array_interface__ has no device field):
# its __dlpack_device__ when it has one, else cudaPointerGetAttributes of the CUDA runtime that
# libhirnode loaded; None when neither answers.
class _PointerAttributes(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("device", ctypes.c_int), ("device_pointer", ctypes.c_void_p),
                ("host_pointer", ctypes.c_void_p)]


_cudart = []


def _cudart_lib():
    if not _cudart:
        found = None
        try:
            with open("/proc/self/maps") as f:
                for line in f:
                    path = line.split()[-1]
                    if "/libcudart.so" in path:
                        found = ctypes.CDLL(path)
                        found.cudaPointerGetAttributes.restype = ctypes.c_int
                        found.cudaPointerGetAttributes.argtypes = [ctypes.POINTER(_PointerAttributes), ctypes.c_void_p]
                        break
        except OSError:
            found = None
        _cudart.append(found)
    return _cudart[0]


def cuda_device_of(t, ptr):
    if hasattr(t, "__dlpack_device__"):
        kind, idx = t.__dlpack_device__()
        if kind in (DL_CPU, DL_CUDA_HOST):
            return ("cpu", -1)
        return (_DL_DEVICE_NAMES.get(kind, "dlpack device %d" % kind), idx)
    rt = _cudart_lib()
    if rt is None or not ptr:
        return None
    attr = _PointerAttributes()
    if rt.cudaPointerGetAttributes(ctypes.byref(attr), ctypes.c_void_p(ptr)) != 0:
        return None
    # 0 unregistered host memory, 1 pinned host memory, 2 device, 3 managed
    return ("cpu", -1) if attr.type in (0, 1) else ("cuda", attr.device) if attr.type == 2 else \
        ("cuda_managed", attr.device) if attr.type == 3 else None


def _not_a_tensor(t, slot, r, keep):
    raise BindingError(_prefix(slot, r) + "a %s.%s is no tensor hirnode can bind (it takes torch tensors, NumPy "
                       "arrays, hirnode Buffers, and objects with __dlpack__, __cuda_array_interface__ or "
                       "__array_interface__)" % (type(t).__module__, type(t).__qualname__), slot.name, slot.first + r)


def inspector(tp, buffer_type):
    """The function that reads objects of type tp (cached per type)."""
    f = _inspectors.get(tp)
    if f is not None:
        return f
    torch = sys.modules.get("torch")
    np = sys.modules.get("numpy")
    if issubclass(tp, buffer_type):
        f = _buffer
    elif torch is not None and issubclass(tp, torch.Tensor):
        f = _torch
    elif np is not None and issubclass(tp, np.ndarray):
        f = _numpy
    elif hasattr(tp, "__dlpack__"):
        f = _dlpack
    elif hasattr(tp, "__cuda_array_interface__"):
        f = _cuda_array_interface
    elif hasattr(tp, "__array_interface__"):
        f = _array_interface
    else:
        return _not_a_tensor  # not cached: the type may be a list or tuple mistaken for a tensor
    _inspectors[tp] = f
    return f


def address_of(t, buffer_type):
    """(address, bytes) of the memory a tensor views, for Runtime.register: torch tensors, hirnode
    Buffers, NumPy arrays, objects with __cuda_array_interface__ or __array_interface__, or an
    (address, bytes) pair."""
    torch = sys.modules.get("torch")
    if isinstance(t, tuple) and len(t) == 2 and all(isinstance(v, int) for v in t):
        return t
    if isinstance(t, buffer_type):
        return t.ptr, t.nbytes
    if torch is not None and isinstance(t, torch.Tensor):
        return t.data_ptr(), t.numel() * t.element_size()
    for name in ("__cuda_array_interface__", "__array_interface__"):
        d = getattr(t, name, None)
        if d is not None:
            n = 1
            for s in d["shape"]:
                n *= s
            return d["data"][0], n * int(d["typestr"][2:])
    raise InvalidArgumentError("hirnode: error: register: a torch tensor, a Buffer, an array or an (address, bytes) "
                               "pair, got a %s" % type(t).__name__)
