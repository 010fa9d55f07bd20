#!/usr/bin/env python3
"""What a launch from Python costs over the C call: Runtime.launch (and Graph.replay) of a tiny
program against hn_runtime_launch (hn_runtime_replay) called through ctypes with its arguments
built once, in alternating rounds, host time per call (docs/BENCHMARKS.md, "Python").

    python3 python/bench_launch.py                       # CPU backend, NumPy arrays
    python3 python/bench_launch.py --backend cuda        # GPU: torch tensors on torch's current streams
    python3 python/bench_launch.py --backend cuda --kind buffer --ranks 2

Each round issues --round calls back to back (timed together), then waits for them (not timed);
the rounds of the two ways alternate, and the medians over --rounds rounds are compared.
"""

import argparse
import ctypes
import os
import platform
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # the package beside this script
import hirnode  # noqa: E402
from hirnode import _lib  # noqa: E402

PROGRAM = """# the smallest launch: one copy per input
param N = 256
{decls}
{body}
"""


def program(ntensors):
    decls = "\n".join("input  X%d : f32[N] replicated\noutput Y%d : f32[N] replicated" % (i, i)
                      for i in range(ntensors))
    body = "\n".join("copy Y%d <- X%d" % (i, i) for i in range(ntensors))
    return hirnode.Program.parse(PROGRAM.format(decls=decls, body=body), "bench_launch.hir")


def tensors(rt, kind, ntensors, n=256):
    """{name: [tensor per rank]} of the kind asked, and the raw pointers of the same."""
    b = {}
    for i in range(ntensors):
        for name in ("X%d" % i, "Y%d" % i):
            per_rank = []
            for r in range(rt.size):
                if kind == "numpy":
                    import numpy as np
                    per_rank.append(np.random.default_rng(r).random(n, dtype=np.float32))
                elif kind == "torch":
                    import torch
                    dev = "cuda:%d" % rt.device(r) if rt.device_type == "cuda" else "cpu"
                    per_rank.append(torch.rand(n, device=dev))
                else:
                    per_rank.append(rt.alloc(r, dtype="f32", shape=(n,)))
            b[name] = per_rank
    return b


def pointer(t):
    if isinstance(t, hirnode.Buffer):
        return t.ptr
    if hasattr(t, "data_ptr"):
        return t.data_ptr()
    return t.__array_interface__["data"][0]


def raw_args(rt, bindings, nbytes):
    """hn_run_args with the same pointers, built once (what a C caller would hold)."""
    n = rt.size
    keep = []
    arr = (_lib.Binding * len(bindings))()
    for b, (name, ts) in zip(arr, bindings.items()):
        data = (ctypes.c_void_p * n)(*[pointer(t) for t in ts])
        size = (ctypes.c_size_t * n)(*([nbytes] * n))
        keep += [name.encode(), data, size]
        b.name, b.data, b.bytes = keep[-3], ctypes.cast(data, ctypes.POINTER(ctypes.c_void_p)), \
            ctypes.cast(size, ctypes.POINTER(ctypes.c_size_t))
    args = _lib.RunArgs(0, None, None, len(bindings), arr)
    keep += [arr, args]
    return ctypes.byref(args), keep


def raw_streams(rt, streams):
    if streams is None:
        return None
    return (ctypes.c_void_p * rt.size)(*[s if isinstance(s, int) else (s.cuda_stream or 1) if hasattr(
        s, "cuda_stream") else s.handle for s in streams])


def rounds(calls, sync, nrounds, per_round):
    """Median microseconds per call of each callable, rounds alternating between them."""
    times = [[] for _ in calls]
    for _ in range(nrounds):
        for i, call in enumerate(calls):
            t0 = time.perf_counter_ns()
            for _ in range(per_round):
                call()
            times[i].append((time.perf_counter_ns() - t0) / per_round / 1e3)
            sync()
    return [statistics.median(t) for t in times], [statistics.quantiles(t, n=10) for t in times]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", default="auto", help="auto, cuda or host (default auto)")
    ap.add_argument("--ranks", type=int, default=1)
    ap.add_argument("--kind", choices=("numpy", "torch", "buffer"), default=None,
                    help="what is bound (default: torch tensors on cuda when torch is there, numpy on host)")
    ap.add_argument("--tensors", type=int, default=1, help="inputs (and as many outputs) of the program")
    ap.add_argument("--rounds", type=int, default=400)
    ap.add_argument("--round", type=int, default=8, help="calls per round")
    ap.add_argument("--streams", choices=("none", "own", "torch"), default=None,
                    help="none: the runtime's; own: from stream_create; torch: hirnode.current_streams "
                         "(default: torch on cuda with torch, else none)")
    args = ap.parse_args()

    rt = hirnode.Runtime(ranks=args.ranks, backend=args.backend)
    have_torch = True
    try:
        import torch  # noqa: F401
    except ImportError:
        have_torch = False
    kind = args.kind or ("torch" if rt.device_type == "cuda" and have_torch else "numpy" if rt.device_type == "cpu"
                         else "buffer")
    smode = args.streams or ("torch" if rt.device_type == "cuda" and have_torch else "none")
    streams = None
    if smode == "own":
        streams = [rt.stream_create(r) for r in range(rt.size)]
    elif smode == "torch":
        streams = hirnode.current_streams(rt)
    prog = program(args.tensors)
    b = tensors(rt, kind, args.tensors)
    nbytes = 256 * 4
    args_ref, keep = raw_args(rt, b, nbytes)
    sarr = raw_streams(rt, streams)
    h, ph = rt._s.handle, prog._h
    launch_c = _lib.hn_runtime_launch

    def c_launch():
        st = launch_c(h, ph, args_ref, sarr)
        if st:
            raise hirnode.errors.error(st, rt.error)

    def py_launch():
        rt.launch(prog, b, streams=streams)

    def sync():
        rt.sync()
        if smode == "torch":
            torch.cuda.synchronize()

    # warm: the first launch prepares the configuration
    py_launch()
    c_launch()
    sync()
    (c_us, py_us), (c_q, py_q) = rounds([c_launch, py_launch], sync, args.rounds, args.round)

    graph = rt.capture(prog, b)  # on the runtime's streams (CUDA cannot capture its default stream); replayed on any
    replay_c = _lib.hn_runtime_replay
    gh = graph._g

    def c_replay():
        st = replay_c(h, gh, sarr)
        if st:
            raise hirnode.errors.error(st, rt.error)

    def py_replay():
        graph.replay(streams)

    py_replay()
    sync()
    (cr_us, pyr_us), (cr_q, pyr_q) = rounds([c_replay, py_replay], sync, args.rounds, args.round)

    # a C call through ctypes that does nothing (what any ctypes call costs)
    size_fn = _lib.hn_runtime_size
    t0 = time.perf_counter_ns()
    for _ in range(100000):
        size_fn(h)
    ctypes_us = (time.perf_counter_ns() - t0) / 100000 / 1e3

    print("# hirnode %s, python %s, %s backend, %d rank(s) on devices %s, %d input(s) + %d output(s) of f32[256] "
          "(%s), streams: %s" % (hirnode.__version__, platform.python_version(), rt.backend, rt.size, rt.devices,
                                 args.tensors, args.tensors, kind, smode))
    print("# %s, %s; %d rounds of %d calls, rounds alternating; us of host time per call: median (p10..p90)" %
          (platform.node(), time.strftime("%Y-%m-%d %H:%M %Z"), args.rounds, args.round))
    print("%-8s %22s %22s %10s" % ("call", "C through ctypes", "hirnode (Python)", "overhead"))
    for name, c, p, cq, pq in (("launch", c_us, py_us, c_q, py_q), ("replay", cr_us, pyr_us, cr_q, pyr_q)):
        print("%-8s %7.2f (%5.2f..%5.2f) %7.2f (%5.2f..%5.2f) %10.2f" % (name, c, cq[0], cq[-1], p, pq[0], pq[-1],
                                                                     p - c))
    print("# a ctypes call that does nothing (hn_runtime_size): %.2f us" % ctypes_us)
    graph.destroy()
    rt.close()


if __name__ == "__main__":
    main()
