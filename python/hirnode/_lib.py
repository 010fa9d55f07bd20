"""Finds and loads libhirnode.so and declares the C API to ctypes (runtime.h, hirnode.h)."""

import ctypes
import ctypes.util
import os

# Where the library is looked for, in order (README, "Python"):
#  1. $HIRNODE_LIBRARY, the path of a libhirnode.so (an error if it does not load);
#  2. next to this package (what `make python` puts there: an installed copy);
#  3. the build/ folder of the repository this package sits in (python/hirnode/ -> build/);
#  4. the system's (ctypes.util.find_library("hirnode"): ldconfig's cache, LD_LIBRARY_PATH).
_HERE = os.path.dirname(os.path.abspath(__file__))
_CANDIDATES = (
    ("next to the package", os.path.join(_HERE, "libhirnode.so")),
    ("the repository's build/", os.path.join(os.path.dirname(os.path.dirname(_HERE)), "build", "libhirnode.so")),
)


def _find():
    env = os.environ.get("HIRNODE_LIBRARY")
    if env:
        return env, "HIRNODE_LIBRARY"
    for where, path in _CANDIDATES:
        if os.path.isfile(path):
            return path, where
    found = ctypes.util.find_library("hirnode")
    if found:
        return found, "the system's"
    tried = ", ".join(p for _, p in _CANDIDATES)
    raise ImportError("hirnode: libhirnode.so not found: set HIRNODE_LIBRARY to its path, build it (make python), "
                      "or install it where the loader looks (make install; ldconfig); tried " + tried +
                      " and ctypes.util.find_library('hirnode')")


def _load():
    path, where = _find()
    try:
        return ctypes.CDLL(path), path, where
    except OSError as e:
        raise ImportError("hirnode: cannot load %s (found through %s): %s" % (path, where, e)) from None


lib, path, found_through = _load()

MAX_DIMS = 8

# hn_status_t (hirnode.h)
OK = 0
ERR_NOMEM = -1
ERR_INVALID = -2
ERR_PARSE = -3
ERR_VERIFY = -4
ERR_RUNTIME = -5
ERR_TIMEOUT = -6
ERR_MISMATCH = -7
ERR_UNSUPPORTED = -8
ERR_IO = -9
ERR_ABORTED = -10
ERR_DEVICE = -11
ERR_DEVICE_LOST = -12
ERR_BUSY = -13
ERR_PEER_LOST = -14

# hn_device_kind (hirnode.h): what a backend's memory and streams are (DLPack's device types)
DEVICE_KIND_NONE = 0
DEVICE_KIND_HOST = 1
DEVICE_KIND_CUDA = 2

# hn_dtype_code: the IR's names, their element sizes
DTYPES = ("f32", "bf16", "f16", "i32", "i64")
DTYPE_SIZE = {"f32": 4, "bf16": 2, "f16": 2, "i32": 4, "i64": 8}


class RuntimeConfig(ctypes.Structure):
    _fields_ = [
        ("ndev", ctypes.c_int),
        ("backend", ctypes.c_char_p),
        ("nstreams", ctypes.c_int),
        ("timeout_s", ctypes.c_double),
        ("host_delay_us", ctypes.c_double),
        ("seed", ctypes.c_uint64),
        ("graphs", ctypes.c_int),
        ("devices", ctypes.POINTER(ctypes.c_int)),
        ("world", ctypes.c_int),
        ("rank", ctypes.c_int),
        ("rendezvous", ctypes.c_char_p),
    ]


STORE_SET = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p)
STORE_GET = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_char),
                             ctypes.c_size_t, ctypes.c_double)


class WorldStore(ctypes.Structure):
    _fields_ = [
        ("set", STORE_SET),
        ("get", STORE_GET),
        ("ctx", ctypes.c_void_p),
    ]


class Binding(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("data", ctypes.POINTER(ctypes.c_void_p)),
        ("bytes", ctypes.POINTER(ctypes.c_size_t)),
    ]


class RunArgs(ctypes.Structure):
    _fields_ = [
        ("nparams", ctypes.c_int),
        ("param_names", ctypes.POINTER(ctypes.c_char_p)),
        ("param_values", ctypes.POINTER(ctypes.c_int64)),
        ("nbindings", ctypes.c_int),
        ("bindings", ctypes.POINTER(Binding)),
    ]


class IoInfo(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("is_output", ctypes.c_int),
        ("dtype", ctypes.c_int),
        ("ndim", ctypes.c_int),
        ("shape", ctypes.c_int64 * MAX_DIMS),
        ("bytes", ctypes.c_size_t),
        ("shard_axis", ctypes.c_int),
    ]


_vp = ctypes.c_void_p
_st = ctypes.c_int
_PP = ctypes.POINTER(ctypes.c_void_p)  # char **diag, void **ptr, ... (read and freed by hand)


def _decl(name, restype, *argtypes):
    f = getattr(lib, name)
    f.restype = restype
    f.argtypes = argtypes
    return f


hn_status_string = _decl("hn_status_string", ctypes.c_char_p, _st)
hn_version = _decl("hn_version", ctypes.c_char_p)
hn_string_free = _decl("hn_string_free", None, _vp)
hn_program_parse = _decl("hn_program_parse", _st, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p, _PP, _PP)
hn_program_load = _decl("hn_program_load", _st, ctypes.c_char_p, _PP, _PP)
hn_program_destroy = _decl("hn_program_destroy", None, _vp)
hn_program_print = _decl("hn_program_print", _vp, _vp)
hn_program_io = _decl("hn_program_io", _st, _vp, ctypes.c_int, ctypes.c_int, ctypes.POINTER(RunArgs), ctypes.c_int,
                      ctypes.POINTER(IoInfo), ctypes.c_int, ctypes.POINTER(ctypes.c_int), _PP)
hn_runtime_config_default = _decl("hn_runtime_config_default", None, ctypes.POINTER(RuntimeConfig))
hn_runtime_create_ex = _decl("hn_runtime_create_ex", _st, ctypes.POINTER(RuntimeConfig), _PP, _PP)
hn_runtime_create_store = _decl("hn_runtime_create_store", _st, ctypes.POINTER(RuntimeConfig),
                                ctypes.POINTER(WorldStore), _PP, _PP)
hn_runtime_destroy = _decl("hn_runtime_destroy", None, _vp)
hn_runtime_size = _decl("hn_runtime_size", ctypes.c_int, _vp)
hn_runtime_world = _decl("hn_runtime_world", ctypes.c_int, _vp)
hn_runtime_first_rank = _decl("hn_runtime_first_rank", ctypes.c_int, _vp)
hn_runtime_backend = _decl("hn_runtime_backend", ctypes.c_char_p, _vp)
hn_runtime_device_kind = _decl("hn_runtime_device_kind", ctypes.c_int, _vp)
hn_runtime_device = _decl("hn_runtime_device", ctypes.c_int, _vp, ctypes.c_int)
hn_runtime_alloc = _decl("hn_runtime_alloc", _st, _vp, ctypes.c_int, ctypes.c_size_t, _PP)
hn_runtime_free = _decl("hn_runtime_free", None, _vp, ctypes.c_int, _vp)
hn_runtime_register = _decl("hn_runtime_register", _st, _vp, ctypes.c_int, _vp, ctypes.c_size_t)
hn_runtime_upload = _decl("hn_runtime_upload", _st, _vp, ctypes.c_int, _vp, _vp, ctypes.c_size_t)
hn_runtime_download = _decl("hn_runtime_download", _st, _vp, ctypes.c_int, _vp, _vp, ctypes.c_size_t)
hn_runtime_mem_info = _decl("hn_runtime_mem_info", _st, _vp, ctypes.c_int, ctypes.POINTER(ctypes.c_size_t),
                            ctypes.POINTER(ctypes.c_size_t))
hn_runtime_run = _decl("hn_runtime_run", _st, _vp, _vp, ctypes.POINTER(RunArgs))
hn_runtime_error = _decl("hn_runtime_error", ctypes.c_char_p, _vp)
hn_runtime_launch = _decl("hn_runtime_launch", _st, _vp, _vp, ctypes.POINTER(RunArgs), _PP)
hn_runtime_sync = _decl("hn_runtime_sync", _st, _vp)
hn_runtime_query = _decl("hn_runtime_query", _st, _vp)
hn_runtime_stream_create = _decl("hn_runtime_stream_create", _st, _vp, ctypes.c_int, _PP)
hn_runtime_stream_destroy = _decl("hn_runtime_stream_destroy", None, _vp, ctypes.c_int, _vp)
hn_runtime_forget = _decl("hn_runtime_forget", None, _vp, _vp)
hn_runtime_capture = _decl("hn_runtime_capture", _st, _vp, _vp, ctypes.POINTER(RunArgs), _PP, _PP)
hn_runtime_replay = _decl("hn_runtime_replay", _st, _vp, _vp, _PP)
hn_runtime_graph_destroy = _decl("hn_runtime_graph_destroy", None, _vp, _vp)
hn_runtime_graph_rebind = _decl("hn_runtime_graph_rebind", _st, _vp, _vp, ctypes.POINTER(RunArgs))
hn_runtime_graph_in_place = _decl("hn_runtime_graph_in_place", ctypes.c_int, _vp)
hn_runtime_trace_start = _decl("hn_runtime_trace_start", _st, _vp, ctypes.c_char_p)
hn_runtime_trace_stop = _decl("hn_runtime_trace_stop", _st, _vp)


def take_string(p):
    """The text of a char * the library allocated (None for NULL), freed with hn_string_free."""
    if not p:
        return None
    try:
        return ctypes.string_at(p).decode("utf-8", "replace")
    finally:
        hn_string_free(p)


def status_string(st):
    return hn_status_string(st).decode()
