"""What the Python suites share: the package on the path, programs, random data, and tensor
producers that speak DLPack, __cuda_array_interface__ and __array_interface__ without torch."""

import ctypes
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "python"))

import numpy as np  # noqa: E402

import hirnode  # noqa: E402

# allgather + linear + reduce_scatter: the shapes depend on world and parameters
MLP = """# a tensor-parallel MLP step
param M = 16, D = 8, F = 16
input  X  : f32[M / world, D]  shard(axis 0)
input  W1 : f32[F / world, D]  shard(axis 0)
input  W2 : f32[D, F / world]  shard(axis 1)
output Y  : f32[M / world, D]  shard(axis 0)
Xg = alloc f32[M, D]
H = alloc f32[M, F / world]
P = alloc f32[M, D]
allgather Xg <- X
linear H <- Xg, W1
linear P <- H, W2
reduce_scatter Y <- P
"""

COPY = """param N = 64
input  X : f32[N] replicated
output Y : f32[N] replicated
copy Y <- X
"""

# every dtype in and out: Y = X + X, C = A (bf16) cast to f32
DTYPES = """param N = 6
input  A  : bf16[N] replicated
output C  : f32[N]  replicated
input  H  : f16[N]  replicated
output H2 : f16[N]  replicated
input  I  : i32[N]  replicated
output I2 : i32[N]  replicated
input  L  : i64[N]  replicated
output L2 : i64[N]  replicated
cast C <- A
add H2 <- H, H
add I2 <- I, I
add L2 <- L, L
"""


def rng(seed=0):
    return np.random.default_rng(seed)


def mlp_inputs(world, seed=0, M=16, D=8, F=16):
    """Global X, W1, W2 and their shards per rank; Y poisoned."""
    g = rng(seed)
    X = g.standard_normal((M, D)).astype(np.float32)
    W1 = g.standard_normal((F, D)).astype(np.float32)
    W2 = g.standard_normal((D, F)).astype(np.float32)
    m, f = M // world, F // world
    b = {"X": [X[r * m:(r + 1) * m].copy() for r in range(world)],
         "W1": [W1[r * f:(r + 1) * f].copy() for r in range(world)],
         "W2": [np.ascontiguousarray(W2[:, r * f:(r + 1) * f]) for r in range(world)],
         "Y": [np.full((m, D), np.nan, np.float32) for _ in range(world)]}
    ref = (X.astype(np.float64) @ W1.T.astype(np.float64)) @ W2.T.astype(np.float64)
    return b, ref


def gathered(parts):
    return np.concatenate(parts, axis=0)


def backend_runtime(ranks=2, **kw):
    return hirnode.Runtime(ranks=ranks, backend="host", **kw)


# ---- producers ----

# the structs of dlpack.h as the package declares them (real producers, NumPy's and torch's,
# check the layout in the suites)
from hirnode._tensors import (_DLDataType as DLDataType, _DLDevice as DLDevice,  # noqa: E402
                              _DLManagedTensor as DLManagedTensor,
                              _DLManagedTensorVersioned as DLManagedTensorVersioned, _DLTensor as DLTensor)

_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
_NAMES = {False: ctypes.create_string_buffer(b"dltensor"), True: ctypes.create_string_buffer(b"dltensor_versioned")}

DL_CODES = {"f32": (2, 32), "bf16": (4, 16), "f16": (2, 16), "i32": (0, 32), "i64": (0, 64), "f64": (2, 64)}


class FakeDLPack:
    """A DLPack producer over a NumPy array's memory that says what the test wants: any dtype
    (bf16 from uint16 bits), device, strides (in elements), byte offset, version, read-only flag.
    Its capsules have no destructor: the memory and the structs are this object's."""

    def __init__(self, array, dtype="f32", device=(1, 0), shape=None, strides=None, byte_offset=0,
                 versioned=False, read_only=False):
        self.array = array
        self.dtype = dtype
        self.device = device
        self.shape = tuple(array.shape if shape is None else shape)
        self.strides = strides
        self.byte_offset = byte_offset
        self.versioned = versioned
        self.read_only = read_only
        self.calls = []
        self._keep = None

    def __dlpack_device__(self):
        return self.device

    def __dlpack__(self, stream=None):
        self.calls = self.calls[-3:] + [stream]
        n = len(self.shape)
        shape = (ctypes.c_int64 * max(n, 1))(*self.shape)
        strides = (ctypes.c_int64 * max(n, 1))(*self.strides) if self.strides is not None else None
        code, bits = DL_CODES[self.dtype]
        t = DLTensor(self.array.__array_interface__["data"][0] - self.byte_offset, DLDevice(*self.device), n,
                     DLDataType(code, bits, 1), shape, strides, self.byte_offset)
        if self.versioned:
            m = DLManagedTensorVersioned(1, 0, None, None, 1 if self.read_only else 0, t)
        else:
            m = DLManagedTensor(t, None, None)
        self._keep = (shape, strides, m)  # read while the capsule is: until the next call
        return _capsule_new(ctypes.addressof(m), ctypes.addressof(_NAMES[self.versioned]), None)


class OnlyDLPack:
    """Another producer's tensor seen only through __dlpack__ and __dlpack_device__ (its own
    capsule read by the DLPack reader, not by the fast path of its type)."""

    def __init__(self, t):
        self.t = t

    def __dlpack__(self, stream=None):
        return self.t.__dlpack__()

    def __dlpack_device__(self):
        return self.t.__dlpack_device__()


class FakeCAI:
    """An object with only __cuda_array_interface__ (v3), over host memory: what a CUDA array
    looks like to the reader; `device` adds a __dlpack_device__ that says where it is."""

    def __init__(self, array, typestr=None, strides=None, readonly=False):
        self.array = array
        self.typestr = typestr or array.dtype.str
        self.strides = strides
        self.readonly = readonly

    @property
    def __cuda_array_interface__(self):
        return {"shape": self.array.shape, "typestr": self.typestr,
                "data": (self.array.__array_interface__["data"][0], self.readonly), "version": 3,
                "strides": self.strides, "stream": None}


class FakeCAIWithDevice(FakeCAI):
    def __init__(self, array, device, **kw):
        super().__init__(array, **kw)
        self._device = device

    def __dlpack_device__(self):
        return self._device


class ArrayInterface:
    """A host array known only by __array_interface__."""

    def __init__(self, array, readonly=False):
        self.array = array
        self.readonly = readonly

    @property
    def __array_interface__(self):
        ai = dict(self.array.__array_interface__)
        ai["data"] = (ai["data"][0], self.readonly)
        return ai


def bf16_bits(x):
    """float32 -> bfloat16 bits (round to nearest even), as uint16."""
    u = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_value(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
