"""Programs, runtimes, graphs, streams and buffers over the C API (include/hirnode/runtime.h).

Each Python object owns one C handle and gives it back when closed, destroyed or collected. What
needs the runtime's caller thread (freeing a graph, a buffer or a stream that the garbage
collector found) is queued and done by the runtime's next call that waits for its devices anyway
(run, sync, alloc, free, capture, rebind, close, ...), never by a launch or a replay. A runtime
serves one thread at a time, as in C.
"""

import collections
import ctypes
import operator
import os
import sys
import weakref

from . import _lib
from . import _tensors
from .errors import BindingError, ClosedError, InvalidArgumentError, UnsupportedError, error

_CONFIGS_KEPT = 64  # configurations (program, parameters) whose argument arrays a runtime keeps

IO = collections.namedtuple("IO", "name is_output dtype shape nbytes shard_axis")
IO.__doc__ = """One input or output of a program at a configuration, as one rank holds it: its name,
whether it is an output, dtype ('f32', 'bf16', 'f16', 'i32', 'i64'), shape (the rank's shard),
nbytes (what a binding needs) and shard_axis (-1: every rank holds all of it)."""


def _default_config():
    cfg = _lib.RuntimeConfig()
    _lib.hn_runtime_config_default(ctypes.byref(cfg))
    return cfg


class _Params:
    """Parameter overrides as the C arrays of hn_run_args."""

    def __init__(self, params):
        if params and not hasattr(params, "items"):
            raise InvalidArgumentError("hirnode: error: parameters are a dict of name -> int, got a %s" %
                                       type(params).__name__)
        items = list(params.items()) if params else []
        self.n = len(items)
        self.names = (ctypes.c_char_p * (self.n + 1))()
        self.values = (ctypes.c_int64 * (self.n + 1))()
        for i, (k, v) in enumerate(items):
            if not isinstance(k, str):
                raise InvalidArgumentError("hirnode: error: parameter names are strings, got %r" % (k,))
            if isinstance(v, bool):
                raise InvalidArgumentError("hirnode: error: parameter %s: an integer, not %r" % (k, v))
            try:
                v = operator.index(v)
                self.values[i] = v
                if self.values[i] != v:
                    raise OverflowError
            except (TypeError, OverflowError):
                raise InvalidArgumentError("hirnode: error: parameter %s: a 64-bit integer, not %r" % (k, v)) from None
            self.names[i] = k.encode()
        self.args = _lib.RunArgs(self.n, self.names, self.values, 0, None)


def _params_key(params):
    return None if not params else tuple(params.items())


class _Closing:
    """`with` closes it."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# ---- programs ----

class Program(_Closing):
    """A parsed and statically verified program (hn_program): immutable, shareable by runtimes
    and threads. Program.parse(text, filename) or Program.load(path); close() or collection
    destroys it (after the runtimes that ran it forgot it)."""

    def __init__(self, handle, filename):
        self._h = handle
        self.filename = filename
        self._runtimes = set()  # states of the runtimes that hold configurations of it
        self._fin = weakref.finalize(self, _program_finalize, handle, self._runtimes)

    @classmethod
    def parse(cls, text, filename="<string>"):
        """Parses program text; errors (ParseError, VerifyError) carry `file:line:col: error: ...`."""
        data = text.encode() if isinstance(text, str) else bytes(text)
        out, diag = ctypes.c_void_p(), ctypes.c_void_p()
        st = _lib.hn_program_parse(data, len(data), os.fsencode(filename), ctypes.byref(out), ctypes.byref(diag))
        msg = _lib.take_string(diag.value)
        if st != _lib.OK:
            raise error(st, msg)
        return cls(out.value, filename)

    @classmethod
    def load(cls, path):
        """Reads and parses a program file (FileError when it cannot be read)."""
        out, diag = ctypes.c_void_p(), ctypes.c_void_p()
        st = _lib.hn_program_load(os.fsencode(path), ctypes.byref(out), ctypes.byref(diag))
        msg = _lib.take_string(diag.value)
        if st != _lib.OK:
            raise error(st, msg)
        return cls(out.value, os.fspath(path))

    def _handle(self):
        if self._h is None:
            raise ClosedError("hirnode: error: the program %s was closed" % self.filename)
        return self._h

    @property
    def closed(self):
        return self._h is None

    @property
    def text(self):
        """The canonical text: what the parser reads back."""
        return _lib.take_string(_lib.hn_program_print(self._handle())) or ""

    def __str__(self):
        return self.text

    def __repr__(self):
        return "<hirnode.Program %s%s>" % (self.filename, " closed" if self._h is None else "")

    def io(self, world=1, nstreams=None, params=None, rank=0):
        """The inputs, then the outputs, at a configuration (world ranks, nstreams, parameter
        overrides) as `rank` holds them: a list of IO. No runtime needed. nstreams: default the
        runtime's default ($HIRNODE_STREAMS or 3)."""
        if nstreams is None:
            nstreams = _default_config().nstreams
        return self._io(int(world), int(nstreams), _Params(params), int(rank))

    def _io(self, world, nstreams, pa, rank):
        h = self._handle()
        n, diag = ctypes.c_int(), ctypes.c_void_p()
        args = ctypes.byref(pa.args)
        st = _lib.hn_program_io(h, world, nstreams, args, rank, None, 0, ctypes.byref(n), ctypes.byref(diag))
        if st == _lib.OK:
            infos = (_lib.IoInfo * max(n.value, 1))()
            st = _lib.hn_program_io(h, world, nstreams, args, rank, infos, n.value, ctypes.byref(n),
                                    ctypes.byref(diag))
        msg = _lib.take_string(diag.value)
        if st != _lib.OK:
            raise error(st, msg)
        return [IO(i.name.decode(), bool(i.is_output), _lib.DTYPES[i.dtype], tuple(i.shape[:i.ndim]), i.bytes,
                   i.shard_axis) for i in infos[:n.value]]

    def close(self):
        """Forgets the program in every open runtime that ran it, then destroys it. Graphs captured
        from it become unusable. Idempotent."""
        if self._h is not None:
            for state in list(self._runtimes):
                if state.handle is not None:
                    state.forget(self)
            self._fin()
            self._h = None

    destroy = close


def _program_finalize(handle, runtimes):
    for state in runtimes:
        if state.handle is not None:
            _lib.hn_runtime_forget(state.handle, handle)
    _lib.hn_program_destroy(handle)


# ---- the configuration of a program on a runtime: its io list and argument arrays ----

class _Slot:
    """One input or output at a configuration: what each rank's binding must be, and the
    ctypes arrays (one pointer and one size per rank) the launch fills."""

    def __init__(self, state, filename, per_rank):
        io0 = per_rank[0]
        n = state.n
        self.state = state
        self.filename = filename
        self.name = io0.name
        self.is_output = io0.is_output
        self.dtype = io0.dtype
        self.shard_axis = io0.shard_axis
        self.shapes = [io.shape for io in per_rank]
        self.nbytes = [io.nbytes for io in per_rank]
        self.cuda = state.cuda
        self.devices = state.devices
        self.first = state.first
        self.data = (ctypes.c_void_p * n)()
        self.bytes = (ctypes.c_size_t * n)(*self.nbytes)
        self.sized = False  # bytes[] holds a Buffer's size, not the tensor's
        self.torch_dtype = self.np_dtype = None
        self.resolve()

    def resolve(self):
        """The dtype objects of torch and NumPy, when loaded (again when a tensor of either comes
        and finds none); True when one was found that was not there."""
        before = (self.torch_dtype, self.np_dtype)
        torch = sys.modules.get("torch")
        if torch is not None:
            self.torch_dtype = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16,
                                "i32": torch.int32, "i64": torch.int64}[self.dtype]
        np = sys.modules.get("numpy")
        if np is not None:
            if self.dtype == "bf16":
                ml = sys.modules.get("ml_dtypes")
                self.np_dtype = np.dtype(ml.bfloat16) if ml is not None else None
            else:
                self.np_dtype = np.dtype({"f32": "<f4", "f16": "<f2", "i32": "<i4", "i64": "<i8"}[self.dtype])
        return (self.torch_dtype, self.np_dtype) != before

    def reset_bytes(self):
        for r, b in enumerate(self.nbytes):
            self.bytes[r] = b
        self.sized = False

    def device_ok(self, device, r):
        if device is None:  # not known: refused
            return False
        return device[0] == "cuda" and device[1] == self.devices[r] if self.cuda else device[0] == "cpu"

    def device_of(self, r):
        return ("cuda", self.devices[r]) if self.cuda else ("cpu", -1)

    def device_need(self, r):
        if self.cuda:
            return "rank %d runs on cuda:%d" % (self.first + r, self.devices[r])
        return "the host backend takes host memory (NumPy arrays, CPU tensors)"


class _Config:
    def __init__(self, state, program, params):
        self.program = program
        self.params = dict(params) if params else None
        pa = _Params(params)
        n = state.n
        per_rank = [program._io(state.world, state.nstreams, pa, state.first + r) for r in range(n)]
        self.io = per_rank[0]
        self.slots = [_Slot(state, program.filename, [per_rank[r][k] for r in range(n)])
                      for k in range(len(self.io))]
        self.names = {s.name for s in self.slots}
        self.bindings = (_lib.Binding * max(len(self.slots), 1))()
        self._name_bytes = [s.name.encode() for s in self.slots]
        for b, s, nb in zip(self.bindings, self.slots, self._name_bytes):
            b.name = nb
            b.data = ctypes.cast(s.data, ctypes.POINTER(ctypes.c_void_p))
            b.bytes = ctypes.cast(s.bytes, ctypes.POINTER(ctypes.c_size_t))
        self._params = pa
        self.args = _lib.RunArgs(pa.n, pa.names, pa.values, len(self.slots), self.bindings)
        self.args_ref = ctypes.byref(self.args)
        self.n = n

    def fill(self, bindings, keep):
        """Each binding's pointer and size into the C arrays, every tensor checked first."""
        n = self.n
        get = _tensors._inspectors.get
        inspector = _tensors.inspector
        if type(bindings) is not dict or len(bindings) != len(self.slots):
            self._explain(bindings)
        for slot in self.slots:
            ts = bindings.get(slot.name)
            if type(ts) is not list and type(ts) is not tuple:
                if ts is None:
                    self._explain(bindings)
                if n != 1:
                    raise BindingError("%s: error: binding '%s': a list of %d tensors (one per rank), got a %s" %
                                       (slot.filename, slot.name, n, type(ts).__name__), slot.name)
                ts = (ts,)
            elif len(ts) != n:
                raise BindingError("%s: error: binding '%s': a list of %d tensors (one per rank), got %d" %
                                   (slot.filename, slot.name, n, len(ts)), slot.name)
            if slot.sized:  # a Buffer gave its own size last time
                slot.reset_bytes()
            data = slot.data
            r = 0
            for t in ts:
                data[r] = (get(type(t)) or inspector(type(t), Buffer))(t, slot, r, keep)
                r += 1

    def _explain(self, bindings):
        """Raises what is wrong with the names of the bindings; returns when nothing is."""
        p = self.program.filename
        if bindings is None and not self.slots:
            bindings = {}
        if not hasattr(bindings, "keys") or not hasattr(bindings, "get"):
            raise BindingError("%s: error: bindings are a dict of name -> one tensor per rank, got a %s" %
                               (p, type(bindings).__name__))
        given = set(bindings.keys())
        for s in self.slots:
            if s.name not in given or bindings.get(s.name) is None:
                raise BindingError("%s: error: no binding for %s '%s' (every input and output is bound: %s)" %
                                   (p, "output" if s.is_output else "input", s.name,
                                    ", ".join(x.name for x in self.slots)), s.name)
        extra = sorted(str(k) for k in given - self.names)
        if extra:
            raise BindingError("%s: error: '%s' is no input or output of the program (they are: %s)" %
                               (p, extra[0], ", ".join(x.name for x in self.slots)), extra[0])


class _State:
    """What a Runtime's handle needs, shared with the finalizers of its objects (none of which
    may hold the Runtime itself)."""

    def __init__(self, handle, nstreams):
        self.handle = handle
        self.n = _lib.hn_runtime_size(handle)  # the ranks driven here: first .. first + n - 1
        self.world = _lib.hn_runtime_world(handle)
        self.first = _lib.hn_runtime_first_rank(handle)
        self.backend = _lib.hn_runtime_backend(handle).decode()  # its name, for messages
        self.cuda = _lib.hn_runtime_device_kind(handle) == _lib.DEVICE_KIND_CUDA  # what it is
        self.devices = [_lib.hn_runtime_device(handle, self.first + r) for r in range(self.n)]
        self.nstreams = nstreams
        self.configs = {}
        self.pending = []  # (kind, rank, handle, keep) to give back on the caller's thread
        self.streams = [set() for _ in range(self.n)]  # hn_runtime_stream_create's handles per rank
        self.stream_arr = (ctypes.c_void_p * self.n)()

    def drain(self):
        while self.pending and self.handle is not None:
            kind, rank, h, keep = self.pending.pop()
            if kind == "graph":  # its tensors (keep) go only after its replays are done
                _lib.hn_runtime_graph_destroy(self.handle, h)
                del keep
            elif kind == "buffer":
                _lib.hn_runtime_free(self.handle, rank, h)
            else:
                self.streams[rank - self.first].discard(h)
                _lib.hn_runtime_stream_destroy(self.handle, rank, h)

    def forget(self, program):
        for key in [k for k in self.configs if k[0] is program]:
            del self.configs[key]
        if program._h is not None:
            _lib.hn_runtime_forget(self.handle, program._h)
        program._runtimes.discard(self)

    def close(self):
        if self.handle is not None:
            self.drain()
            h, self.handle = self.handle, None
            self.configs.clear()
            _lib.hn_runtime_destroy(h)


def _close_runtime(state):
    state.close()  # (a launcher's world's meeting place, made here, goes with the runtime)


def _queue(state, kind, rank, handle, keep=None):
    if state.handle is not None:
        state.pending.append((kind, rank, handle, keep))


# ---- joining as a launcher starts processes ----

_LAUNCHER_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK")


def _launcher_world():
    """(world, rank, local_rank) from a launcher's environment (torchrun, torch.distributed.launch,
    or anything that sets RANK, WORLD_SIZE and LOCAL_RANK), or None outside one or in a world of one."""
    env = os.environ
    if not all(v in env for v in _LAUNCHER_VARS):
        return None
    try:
        rank, world, local = (int(env[v]) for v in _LAUNCHER_VARS)
    except ValueError:
        raise InvalidArgumentError("hirnode: error: RANK=%r, WORLD_SIZE=%r, LOCAL_RANK=%r: expected integers" %
                                   tuple(env[v] for v in _LAUNCHER_VARS)) from None
    if world < 2:
        return None
    if not 0 <= rank < world or local < 0:
        raise InvalidArgumentError("hirnode: error: RANK=%d, LOCAL_RANK=%d in a world of WORLD_SIZE=%d" %
                                   (rank, local, world))
    return world, rank, local


def _default_store():
    """torch.distributed's store where a default process group exists (without importing torch)."""
    dist = sys.modules.get("torch.distributed")
    if dist is None or not dist.is_available() or not dist.is_initialized():
        return None
    try:
        from torch.distributed import distributed_c10d
        return distributed_c10d._get_default_store()
    except (ImportError, AttributeError, RuntimeError):
        return None


def _launcher_store():
    """Whether the C side can meet through its launcher's address: HIRNODE_STORE, or torchrun's
    MASTER_ADDR and MASTER_PORT (rank 0 serves a store on MASTER_PORT + 1)."""
    env = os.environ
    return bool(env.get("HIRNODE_STORE")) or bool(env.get("MASTER_ADDR") and env.get("MASTER_PORT"))


def _world_store(store):
    """A store with set(key, value) and a get(key) that waits for it (torch.distributed's) as the C
    API's hn_world_store, which hn_runtime_create_store meets the world through: rank 0 makes the
    rendezvous directory (0700, its own) and publishes its path, the others read it. Returns the
    structure and the callbacks, which must outlive the call."""

    def set_(ctx, key, value):
        try:
            store.set(key.decode(), value.decode())
            return 0
        except BaseException:  # said by the C side: the store refused the key
            return 1

    def get(ctx, key, out, cap, timeout):
        try:
            if hasattr(store, "wait"):  # torch's stores: wait within the runtime's deadline, not the store's
                import datetime
                store.wait([key.decode()], datetime.timedelta(seconds=timeout))
            v = store.get(key.decode())
        except BaseException:
            return 1
        b = bytes(v) if isinstance(v, (bytes, bytearray)) else str(v).encode()
        if len(b) + 1 > cap:
            return 1
        ctypes.memmove(out, b + b"\0", len(b) + 1)
        return 0

    keep = (_lib.STORE_SET(set_), _lib.STORE_GET(get))
    return _lib.WorldStore(keep[0], keep[1], None), keep


# ---- the runtime ----

class Runtime(_Closing):
    """One thread per rank, the device backend and the communicators (hn_runtime).

    Runtime(ranks=1, backend=None, devices=None, nstreams=None, timeout=None, graphs=None,
            host_delay_us=None, seed=None, world=None, rank=None, rendezvous=None)
    backend: 'auto', 'cuda' or 'host' (None: $HIRNODE_BACKEND, else auto); devices: the device
    ordinal of each rank (None: rank r on device r; ranks defaults to len(devices)). The other
    arguments are hn_runtime_config's (None: its default). A context manager; close() destroys it.
    world, rank, rendezvous: one rank of a world of processes (ranks=1 here; rank is this
    process's; rendezvous a directory every process reaches) — every process makes the same
    collective calls in the same order (run, sync, capture, close: hirnode/runtime.h's
    contract). Ranks in the calls that take one are the world's: first_rank .. first_rank +
    size - 1 are this runtime's; lists of one entry per rank hold those.

    In a process a launcher started (torchrun: RANK, WORLD_SIZE and LOCAL_RANK set, a world of
    more than one), Runtime() with none of ranks, devices, world, rank and rendezvous joins that
    world: world WORLD_SIZE, rank RANK, on device LOCAL_RANK (cuda), meeting the others through
    `store` (anything with set(key, value) and a waiting get(key), as torch.distributed's stores;
    None: torch.distributed's default store when a process group exists) — else through the
    store rank 0's process serves at MASTER_ADDR, port MASTER_PORT + 1 (or $HIRNODE_STORE,
    host:port), or $HIRNODE_RENDEZVOUS. launcher=False keeps such a process to itself.
    """

    def __init__(self, ranks=None, backend=None, devices=None, nstreams=None, timeout=None, graphs=None,
                 host_delay_us=None, seed=None, world=None, rank=None, rendezvous=None, store=None,
                 launcher=True):
        joined = None
        if launcher and ranks is None and devices is None and world is None and rank is None and rendezvous is None:
            joined = _launcher_world()
        if joined is not None:
            world, rank, local = joined
            store = store if store is not None else _default_store()
            if store is None and not os.environ.get("HIRNODE_RENDEZVOUS") and not _launcher_store():
                raise InvalidArgumentError(
                    "hirnode: error: this process is rank %d of a world of %d a launcher started (RANK, WORLD_SIZE): "
                    "to meet the others, pass store= (e.g. torch.distributed's), initialize torch.distributed "
                    "first, set MASTER_ADDR and MASTER_PORT (or HIRNODE_STORE=host:port) for the store rank 0 "
                    "serves, or set HIRNODE_RENDEZVOUS to a directory every process reaches" % (rank, world))
            if (backend or os.environ.get("HIRNODE_BACKEND", "auto")) != "host":
                devices = [local]
                ranks = 1
        else:
            store = None  # (only a launcher's world meets through one)
        self._create(ranks, backend, devices, nstreams, timeout, graphs, host_delay_us, seed, world, rank,
                     rendezvous, store)

    def _create(self, ranks, backend, devices, nstreams, timeout, graphs, host_delay_us, seed, world, rank,
                rendezvous, store):
        cfg = _default_config()
        if devices is not None:
            devices = [operator.index(d) for d in devices]
            if ranks is None:
                ranks = len(devices)
            if len(devices) != ranks:
                raise InvalidArgumentError("hirnode: error: %d ranks, but %d device ordinals" % (ranks, len(devices)))
        cfg.ndev = 1 if ranks is None else operator.index(ranks)
        backend_b = backend.encode() if backend is not None else None
        if backend_b is not None:
            cfg.backend = backend_b
        dev_arr = (ctypes.c_int * len(devices))(*devices) if devices else None
        if devices is not None:
            cfg.devices = dev_arr if devices else None
        for name, value in (("nstreams", nstreams), ("timeout_s", timeout), ("host_delay_us", host_delay_us),
                            ("seed", seed)):
            if value is not None:
                setattr(cfg, name, value)
        if graphs is not None:
            cfg.graphs = 1 if graphs else 0
        if world is not None:
            cfg.world = operator.index(world)
        if rank is not None:
            cfg.rank = operator.index(rank)
        rendezvous_b = os.fsencode(rendezvous) if rendezvous is not None else None
        if rendezvous_b is not None:
            cfg.rendezvous = rendezvous_b
        out, diag = ctypes.c_void_p(), ctypes.c_void_p()
        if store is not None:  # a launcher's world: the C side meets it through the store
            ws, _keep = _world_store(store)
            st = _lib.hn_runtime_create_store(ctypes.byref(cfg), ctypes.byref(ws), ctypes.byref(out),
                                              ctypes.byref(diag))
        else:
            st = _lib.hn_runtime_create_ex(ctypes.byref(cfg), ctypes.byref(out), ctypes.byref(diag))
        msg = _lib.take_string(diag.value)
        if st != _lib.OK:
            raise error(st, "hirnode: error: " + msg if msg else None)
        self._s = _State(out.value, cfg.nstreams)
        self._fin = weakref.finalize(self, _close_runtime, self._s)

    # -- what it is --

    def _h(self):
        h = self._s.handle
        if h is None:
            raise ClosedError("hirnode: error: the runtime is closed")
        return h

    @property
    def closed(self):
        return self._s.handle is None

    @property
    def size(self):
        """The number of ranks this runtime drives (of a world of processes: 1)."""
        self._h()
        return self._s.n

    @property
    def world(self):
        """The ranks of the whole run (size, unless the world spans processes)."""
        self._h()
        return self._s.world

    @property
    def first_rank(self):
        """The first rank this runtime drives (0 unless the world spans processes)."""
        self._h()
        return self._s.first

    @property
    def backend(self):
        """The device backend's name, 'cuda' or 'host' (to print; device_type says what it is)."""
        self._h()
        return self._s.backend

    @property
    def device_type(self):
        """Where the ranks' memory is, as torch names device types: 'cuda' (CUDA device memory of
        each rank's device; launch streams are CUDA streams) or 'cpu' (host memory: the CPU
        emulation; NumPy arrays and CPU tensors bind, streams are the runtime's own)."""
        self._h()
        return "cuda" if self._s.cuda else "cpu"

    @property
    def nstreams(self):
        """The value of `nstreams` in programs."""
        return self._s.nstreams

    def device(self, rank):
        """The device ordinal rank `rank` runs on."""
        self._h()
        return self._s.devices[self._rank(rank) - self._s.first]

    @property
    def devices(self):
        self._h()
        return list(self._s.devices)

    @property
    def error(self):
        """The text of the last failure ('' if none)."""
        return _lib.hn_runtime_error(self._h()).decode("utf-8", "replace")

    def __repr__(self):
        if self._s.handle is None:
            return "<hirnode.Runtime closed>"
        return "<hirnode.Runtime %d ranks on %s, devices %s>" % (self._s.n, self._s.backend, self._s.devices)

    def _rank(self, rank):
        try:
            r = operator.index(rank) if not isinstance(rank, bool) else -1
        except TypeError:
            r = -1
        first, n = self._s.first, self._s.n
        if not first <= r < first + n:
            raise InvalidArgumentError("hirnode: error: rank %r out of range [%d, %d)%s" %
                                       (rank, first, first + n, " (the ranks this process drives)" if first else ""))
        return r

    def _fail(self, st, call=None):
        """The exception for a failed call: hn_runtime_error's text, or for the calls that do not
        write it (call given: they log their reason), the call and the status."""
        if call is not None:
            return error(st, "hirnode: error: %s: %s (the library's log says why)" % (call, _lib.status_string(st)))
        return error(st, _lib.hn_runtime_error(self._s.handle).decode("utf-8", "replace"))

    # -- life --

    def close(self):
        """Destroys the runtime: its threads, streams, buffers and graphs. Idempotent."""
        self._fin()

    destroy = close

    # -- programs --

    def io(self, program, params=None, rank=None):
        """program.io at this runtime's configuration (its world and nstreams), as `rank` (default:
        the first this runtime drives) holds it."""
        self._h()
        return program.io(self._s.world, self._s.nstreams, params, self._s.first if rank is None else rank)

    def _config(self, program, params):
        state = self._s
        key = (program, _params_key(params))
        cfg = state.configs.get(key)
        if cfg is None:
            cfg = _Config(state, program, params)
            if len(state.configs) >= _CONFIGS_KEPT:
                del state.configs[next(iter(state.configs))]
            state.configs[key] = cfg
            program._runtimes.add(state)
        return cfg

    def _streams(self, streams):
        """The C array of streams (None: the runtime's own on every rank)."""
        if streams is None:
            return None
        state = self._s
        n = state.n
        if type(streams) is not list and type(streams) is not tuple:
            if n != 1:
                raise InvalidArgumentError("hirnode: error: streams: a list of %d (one per rank), got a %s" %
                                           (n, type(streams).__name__))
            streams = (streams,)
        elif len(streams) != n:
            raise InvalidArgumentError("hirnode: error: streams: a list of %d (one per rank), got %d" %
                                       (n, len(streams)))
        arr = state.stream_arr
        for r in range(n):
            arr[r] = _stream_handle(state, streams[r], r)
        return arr

    def _bound(self, program, bindings, params, keep):
        """For the calls that wait for the devices anyway: the queued frees first, then the
        handles and the configuration with these bindings filled in."""
        h = self._h()
        self._s.drain()
        ph = program._handle()
        cfg = self._config(program, params)
        cfg.fill(bindings, keep)
        return h, ph, cfg

    def run(self, program, bindings, params=None):
        """Runs the program on every rank and waits for the end (hn_runtime_run). bindings: a dict
        of name -> a list of one tensor per rank (a tensor alone when there is one rank)."""
        keep = []
        h, ph, cfg = self._bound(program, bindings, params, keep)
        st = _lib.hn_runtime_run(h, ph, cfg.args_ref)
        if st:
            raise self._fail(st)

    def launch(self, program, bindings, params=None, streams=None):
        """Issues the program on every rank and returns once issued (hn_runtime_launch): streams[r]
        is rank r's current_stream (an int handle, a hirnode.Stream, an object with .cuda_stream
        such as a torch.cuda.Stream; None: the runtime's own). The tensors must stay alive and
        unchanged by others until the work is done (sync, query, or an event on the stream)."""
        h = self._s.handle
        if h is None:
            self._h()
        ph = program._h
        if ph is None:
            program._handle()
        try:
            cfg = self._s.configs.get((program, tuple(params.items()) if params else None))
        except AttributeError:
            cfg = None
        if cfg is None:
            cfg = self._config(program, params)
        keep = []
        cfg.fill(bindings, keep)
        st = _lib.hn_runtime_launch(h, ph, cfg.args_ref, None if streams is None else self._streams(streams))
        if st:
            raise self._fail(st)

    def sync(self):
        """Waits for every launch and replay issued so far; raises the first failure among them."""
        h = self._h()
        st = _lib.hn_runtime_sync(h)
        self._s.drain()
        if st:
            raise self._fail(st)

    def query(self):
        """True when the launched work is done (its failure raised), False while it runs."""
        st = _lib.hn_runtime_query(self._h())
        if st == _lib.ERR_BUSY:
            return False
        if st:
            raise self._fail(st)
        return True

    def forget(self, program):
        """Gives back what the runtime keeps for a program (its buffers, lowered copies, prepared
        configurations; its graphs become unusable)."""
        self._h()
        self._s.drain()
        self._s.forget(program)

    # -- graphs --

    def capture(self, program, bindings, params=None, streams=None):
        """Records the program for one configuration and these bindings (hn_runtime_capture): a
        Graph to replay. The Graph keeps the bound tensors alive."""
        keep = []
        h, ph, cfg = self._bound(program, bindings, params, keep)
        sarr = self._streams(streams)
        if sarr is not None and self._s.cuda and any(sarr[r] == 1 for r in range(self._s.n)):
            raise InvalidArgumentError("hirnode: error: capture: CUDA cannot capture its default stream (stream 0): "
                                       "capture on another (streams=None: the runtime's own) and replay on any")
        out = ctypes.c_void_p()
        st = _lib.hn_runtime_capture(h, ph, cfg.args_ref, sarr, ctypes.byref(out))
        if st:
            raise self._fail(st)
        return Graph(self, program, cfg, out.value, _keep(bindings, keep))

    # -- memory --

    def alloc(self, rank, nbytes=None, dtype=None, shape=None):
        """Device memory of one rank (hn_runtime_alloc): nbytes, or a dtype and shape (then the
        Buffer binds only where that dtype and shape are expected)."""
        h = self._h()
        rank = self._rank(rank)
        if dtype is not None or shape is not None:
            if dtype not in _lib.DTYPE_SIZE or shape is None:
                raise InvalidArgumentError("hirnode: error: alloc: a dtype of %s and a shape, got %r, %r" %
                                           (", ".join(_lib.DTYPES), dtype, shape))
            shape = tuple(operator.index(d) for d in shape)
            count = 1
            for d in shape:
                count *= d
            size = count * _lib.DTYPE_SIZE[dtype]
            if nbytes is not None and nbytes != size:
                raise InvalidArgumentError("hirnode: error: alloc: %d bytes, but %s%s needs %d" %
                                           (nbytes, dtype, list(shape), size))
            nbytes = size
        if nbytes is None or operator.index(nbytes) < 0:
            raise InvalidArgumentError("hirnode: error: alloc: a number of bytes >= 0, got %r" % (nbytes,))
        self._s.drain()
        out = ctypes.c_void_p()
        st = _lib.hn_runtime_alloc(h, rank, nbytes, ctypes.byref(out))
        if st:
            raise self._fail(st)
        return Buffer(self._s, rank, out.value, nbytes, dtype, shape)

    def free(self, buffer):
        """hn_runtime_free (buffer.free())."""
        buffer.free()

    def register(self, tensor, rank=None):
        """Hands the memory a tensor of this process's rank lies in (a torch tensor from the caching
        allocator, with or without expandable segments, any cudaMalloc memory) to the other processes
        of the world (hn_runtime_register),
        so that `via p2p` reaches it where it lies: the whole allocation, opened by the others once and
        kept until the runtime closes. Collective: every process, for its own rank, in the same order.
        Needed only for `via p2p` across processes (nccl and ll take any tensor); in one process it
        only checks its argument. tensor: a torch tensor, a Buffer, an array, or (address, bytes)."""
        h = self._h()
        # (the rank as given: across processes the library refuses a wrong one in every process alike)
        rank = self.first_rank if rank is None else operator.index(rank)
        ptr, nbytes = _tensors.address_of(tensor, Buffer)
        self._s.drain()
        st = _lib.hn_runtime_register(h, rank, ptr, nbytes)
        if st:
            raise self._fail(st)

    def _copy_args(self, buffer, array, writable):
        import numpy as np
        self._h()
        if not isinstance(buffer, Buffer) or buffer._state is not self._s:
            raise InvalidArgumentError("hirnode: error: a Buffer of this runtime, got %r" % (buffer,))
        if buffer.ptr is None:
            raise ClosedError("hirnode: error: the Buffer was freed")
        a = np.ascontiguousarray(array) if not writable else array
        if not isinstance(a, np.ndarray) or not a.flags.c_contiguous or (writable and not a.flags.writeable):
            raise InvalidArgumentError("hirnode: error: %s: a %sC-contiguous NumPy array, got %s" %
                                       ("download" if writable else "upload", "writable " if writable else "",
                                        type(array).__name__))
        if a.nbytes > buffer.nbytes:
            raise InvalidArgumentError("hirnode: error: %d bytes do not fit the buffer's %d" % (a.nbytes, buffer.nbytes))
        self._s.drain()
        return a, a.__array_interface__["data"][0]

    def upload(self, buffer, array):
        """Copies a host array (anything NumPy can read; C order) to the start of a Buffer."""
        a, ptr = self._copy_args(buffer, array, False)
        st = _lib.hn_runtime_upload(self._s.handle, buffer.rank, buffer.ptr, ptr, a.nbytes)
        if st:
            raise self._fail(st)

    def download(self, buffer, out=None):
        """The Buffer's contents as a NumPy array: into `out` (a writable C-contiguous array) when
        given, else a new array of the Buffer's dtype and shape (uint8 bytes when it has none)."""
        import numpy as np
        if out is None:
            if buffer.dtype is not None:
                if buffer.dtype == "bf16":
                    raise UnsupportedError("hirnode: error: download: NumPy has no bfloat16: pass out= (e.g. a "
                                           "uint16 array of the shape)")
                out = np.empty(buffer.shape, {"f32": "<f4", "f16": "<f2", "i32": "<i4", "i64": "<i8"}[buffer.dtype])
            else:
                out = np.empty(buffer.nbytes, np.uint8)
        a, ptr = self._copy_args(buffer, out, True)
        st = _lib.hn_runtime_download(self._s.handle, buffer.rank, ptr, buffer.ptr, a.nbytes)
        if st:
            raise self._fail(st)
        return out

    def mem_info(self, rank):
        """(free, total) bytes of the rank's device."""
        h = self._h()
        rank = self._rank(rank)
        free_b, total_b = ctypes.c_size_t(), ctypes.c_size_t()
        st = _lib.hn_runtime_mem_info(h, rank, ctypes.byref(free_b), ctypes.byref(total_b))
        if st:
            raise self._fail(st, "mem_info(%d)" % rank)
        return free_b.value, total_b.value

    # -- streams --

    def stream_create(self, rank):
        """A stream of the rank's device made by the backend (hn_runtime_stream_create)."""
        h = self._h()
        rank = self._rank(rank)
        self._s.drain()
        out = ctypes.c_void_p()
        st = _lib.hn_runtime_stream_create(h, rank, ctypes.byref(out))
        if st:
            raise self._fail(st, "stream_create(%d)" % rank)
        self._s.streams[rank - self._s.first].add(out.value)
        return Stream(self._s, rank, out.value)

    def stream_destroy(self, stream):
        stream.destroy()

    # -- tracing --

    def trace_start(self, path):
        """Records every run and launch until trace_stop into `path` (Chrome trace JSON)."""
        h = self._h()
        if not os.fspath(path):
            raise InvalidArgumentError("hirnode: error: trace_start: an empty path")
        st = _lib.hn_runtime_trace_start(h, os.fsencode(path))
        if st:
            raise self._fail(st)  # hn_runtime_error says why: running already, cannot write

    def trace_stop(self):
        st = _lib.hn_runtime_trace_stop(self._h())
        if st:
            raise self._fail(st, "trace_stop()%s" % (", no trace is running" if st == _lib.ERR_INVALID else ""))


def _keep(bindings, capsules):
    """What a graph must keep alive: its tensors (the capsules too)."""
    kept = {k: (list(v) if type(v) in (list, tuple) else [v]) for k, v in bindings.items()}
    kept[None] = capsules
    return kept


def _stream_handle(state, s, r):
    """The native handle of what was given as streams[r], the stream of rank first + r, checked
    where it can be."""
    rank = state.first + r
    if s is None:
        return None
    if isinstance(s, Stream):
        if s._state is not state or s.rank != rank or s.handle is None:
            raise InvalidArgumentError("hirnode: error: streams[%d]: %s, not a live stream of rank %d of this runtime"
                                       % (r, s, rank))
        return s.handle
    if isinstance(s, int) and not isinstance(s, bool):
        h = s
    elif hasattr(s, "cuda_stream"):
        if not state.cuda:
            raise InvalidArgumentError("hirnode: error: streams[%d]: a CUDA stream (%s), but the runtime's backend is "
                                       "%s" % (r, type(s).__name__, state.backend))
        dev = getattr(s, "device_index", None)
        if dev is None and getattr(s, "device", None) is not None:
            dev = getattr(s.device, "index", None)
        if dev is not None and dev != state.devices[r]:
            raise InvalidArgumentError("hirnode: error: streams[%d]: a stream of cuda:%d, but rank %d runs on cuda:%d"
                                       % (r, dev, rank, state.devices[r]))
        h = s.cuda_stream
    else:
        raise InvalidArgumentError("hirnode: error: streams[%d]: an int handle, a hirnode.Stream or an object with "
                                   ".cuda_stream, got a %s" % (r, type(s).__name__))
    if state.cuda:
        return h or 1  # 0, CUDA's default stream, is cudaStreamLegacy (NULL would mean the runtime's own)
    if h not in state.streams[r]:  # the host backend's handles are its own objects: only those it made
        raise InvalidArgumentError("hirnode: error: streams[%d]: %#x is no stream of rank %d made by stream_create "
                                   "(the host backend takes only those)" % (r, h, rank))
    return h


class Graph(_Closing):
    """A captured program (hn_graph): replay(), rebind(bindings), destroy(). Keeps its program and
    the tensors bound at capture (or at the last rebind) alive."""

    def __init__(self, runtime, program, cfg, handle, kept):
        self._runtime = runtime
        self._state = runtime._s
        self.program = program
        self.params = cfg.params
        self._cfg = cfg
        self._g = handle
        # the tensors bound, in a list the finalizer holds too: a graph collected with replays in
        # flight keeps them until drain() has destroyed it (which waits for the replays)
        self._kept = [kept]
        self._fin = weakref.finalize(self, _queue, self._state, "graph", -1, handle, self._kept)

    def _handles(self):
        h = self._state.handle
        if h is None:
            raise ClosedError("hirnode: error: the graph's runtime is closed")
        if self._g is None:
            raise ClosedError("hirnode: error: the graph was destroyed")
        if self.program._h is None:
            raise ClosedError("hirnode: error: the graph's program %s was closed" % self.program.filename)
        return h, self._g

    @property
    def destroyed(self):
        return self._g is None or self._state.handle is None

    def replay(self, streams=None):
        """Issues the captured work on every rank (hn_runtime_replay), ordered with streams[r]."""
        h, g = self._handles()
        st = _lib.hn_runtime_replay(h, g, None if streams is None else self._runtime._streams(streams))
        if st:
            raise self._runtime._fail(st)

    @property
    def in_place(self):
        """Whether the last rebind moved the graph's pointers in place, with no capture
        (hn_runtime_graph_in_place): rebinds after the first do, where the graph learned how."""
        _, g = self._handles()
        return bool(_lib.hn_runtime_graph_in_place(g))

    def rebind(self, bindings):
        """New tensors of the same shapes for the next replays (hn_runtime_graph_rebind)."""
        h, g = self._handles()
        self._state.drain()
        keep = []
        self._cfg.fill(bindings, keep)
        st = _lib.hn_runtime_graph_rebind(h, g, self._cfg.args_ref)
        if st:
            raise self._runtime._fail(st)
        self._kept[0] = _keep(bindings, keep)

    def destroy(self):
        """Frees the graph (waits for its replays). Idempotent."""
        if self._g is not None:
            self._fin.detach()
            if self._state.handle is not None:
                self._state.drain()
                _lib.hn_runtime_graph_destroy(self._state.handle, self._g)
            self._g = None
            self._kept[0] = None

    close = destroy


class Stream:
    """A stream made by Runtime.stream_create; .handle (also .cuda_stream) is the backend's."""

    def __init__(self, state, rank, handle):
        self._state = state
        self.rank = rank
        self.handle = handle
        self._fin = weakref.finalize(self, _queue, state, "stream", rank, handle)

    @property
    def cuda_stream(self):
        return self.handle

    def destroy(self):
        if self.handle is not None:
            self._fin.detach()
            if self._state.handle is not None:
                self._state.drain()
                self._state.streams[self.rank].discard(self.handle)
                _lib.hn_runtime_stream_destroy(self._state.handle, self.rank, self.handle)
            self.handle = None

    def __repr__(self):
        return "<hirnode.Stream rank %d %s>" % (self.rank, "destroyed" if self.handle is None else hex(self.handle))


class Buffer:
    """Device memory of one rank from Runtime.alloc: rank, ptr, nbytes, and dtype/shape when
    allocated with them. Binds as that rank's tensor; freed by free() or when collected."""

    def __init__(self, state, rank, ptr, nbytes, dtype=None, shape=None):
        self._state = state
        self.rank = rank
        self.ptr = ptr
        self.nbytes = nbytes
        self.dtype = dtype
        self.shape = shape
        self._fin = weakref.finalize(self, _queue, state, "buffer", rank, ptr) if ptr else None

    def free(self):
        if self.ptr is not None:
            if self._fin is not None:
                self._fin.detach()
                if self._state.handle is not None:
                    self._state.drain()
                    _lib.hn_runtime_free(self._state.handle, self.rank, self.ptr)
            self.ptr = None

    def __repr__(self):
        what = "%s%s" % (self.dtype, list(self.shape)) if self.dtype else "%d bytes" % self.nbytes
        return "<hirnode.Buffer rank %d %s%s>" % (self.rank, what, " freed" if self.ptr is None else "")


def current_streams(runtime):
    """torch.cuda.current_stream(device) of each rank's device, to launch on what PyTorch runs;
    None on the host backend.

    Inside torch.cuda.graph the current stream is the capturing one, so a launch on these streams
    is captured between the PyTorch ops around it:

        rt.launch(prog, b, streams=hirnode.current_streams(rt))   # once outside: prepares it
        rt.sync()                                                  # nothing in flight to follow
        with torch.cuda.graph(g, capture_error_mode="thread_local"):   # the rank threads issue too
            h = f(x)
            rt.launch(prog, {"X": h, ...}, streams=hirnode.current_streams(rt))
            y = g2(out)
        rt.sync()

    Launches of one program follow each other without a host sync (a launch of another program
    first waits for those in flight, which a capture cannot do). torch.cuda.graph captures the
    streams of one device: every rank on it (one rank, or devices=[0, 0]: examples/python/
    tp_mlp.py --graph), or a process per GPU (examples/python/tp_decode.py --graph under
    torchrun), where `via p2p` launches take flags of their own that the torch graph keeps.
    Keep the runtime and program alive, and do not forget() the program, while the graph may
    replay (it uses their buffers); order its replays and eager launches of the same program
    (one stream, or torch.cuda.synchronize() between them)."""
    if runtime.device_type != "cuda":
        return None
    try:
        import torch
    except ImportError:
        raise UnsupportedError("hirnode: error: current_streams needs torch") from None
    return [torch.cuda.current_stream(d) for d in runtime.devices]
