#!/usr/bin/env python3
"""A tensor-parallel MLP block driven from Python, checked against the same block on one device.

    Y = relu(Xs @ W1^T + b1) @ W2^T + b2 + X,   Xs = X / 2        (X: [M, D], rows split over the ranks)

--mode split: PyTorch's (or NumPy's) matmuls, hirnode's AllGather before them and ReduceScatter
after; --mode block: the whole block is one hirnode program between PyTorch ops. With torch and
GPUs every rank's tensors are torch CUDA tensors bound without copies and hirnode launches on
the streams torch runs on; --graph captures the whole step inside torch.cuda.graph and replays
it. Without torch (or with --numpy) it runs on the CPU backend with NumPy arrays (--graph then
replays hirnode's own graphs of the collectives); --cpu takes the CPU backend with torch CPU tensors.

    python3 examples/python/tp_mlp.py                          # every GPU a rank (or the CPU backend)
    python3 examples/python/tp_mlp.py --graph                  # inside torch.cuda.graph (ranks on one GPU)
    python3 examples/python/tp_mlp.py --ranks 2 --devices 0,0  # two ranks on one GPU (peer-copy rings)
    python3 examples/python/tp_mlp.py --mode block --dtype bf16
"""

import argparse
import os
import sys

try:
    import hirnode
except ImportError:  # from the repository: the package beside the examples
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
    import hirnode

# Split mode: both collectives in one program, the phase a parameter. Launches of one program
# follow each other with no host sync, while a launch of another program first waits for those
# in flight -- which a torch.cuda.graph capture cannot do. P is each rank's partial sum (its
# own values: "replicated" only says every rank holds the whole shape).
SPLIT = """param M = {M}, D = {D}, PHASE = 0
input  X  : {dt}[M / world, D]  shard(axis 0)
input  P  : {dt}[M, D]          replicated
output Xg : {dt}[M, D]          replicated
output Y  : {dt}[M / world, D]  shard(axis 0)
if PHASE == 0 {{
  allgather Xg <- X{via}
}} else {{
  reduce_scatter Y <- P{via}
}}
"""

# Block mode: the whole MLP, its communication pipelined behind its matmuls.
BLOCK = """param M = {M}, D = {D}, F = {F}
input  X  : {dt}[M / world, D]  shard(axis 0)
input  W1 : {dt}[F / world, D]  shard(axis 0)
input  b1 : {dt}[F / world]     shard(axis 0)
input  W2 : {dt}[D, F / world]  shard(axis 1)
input  b2 : {dt}[D]             replicated
output Y  : {dt}[M / world, D]  shard(axis 0)
H = alloc {dt}[M, F / world]
Z = alloc {dt}[M, F / world]
fill Z <- 0
linear H <- allgather(X), W1, b1 pipelined({pvia})
maximum H <- H, Z
reduce_scatter Y <- linear(H, W2, b2) pipelined({pvia})
"""


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mode", choices=("split", "block"), default="split")
    ap.add_argument("--ranks", type=int, default=None, help="default: every GPU (2 on the CPU backend)")
    ap.add_argument("--devices", default=None, help="device of each rank, e.g. 0,0 (default: rank r on GPU r "
                    "modulo the GPU count)")
    ap.add_argument("--dtype", choices=("f32", "bf16"), default="f32", help="bf16 needs torch")
    ap.add_argument("--graph", action="store_true", help="capture the step once, replay it every step")
    ap.add_argument("--steps", type=int, default=4, help="steps, each with new inputs, each checked")
    ap.add_argument("--numpy", action="store_true", help="NumPy on the CPU backend even when torch is there")
    ap.add_argument("--cpu", action="store_true", help="the CPU backend even with GPUs (torch CPU tensors)")
    ap.add_argument("-M", type=int, default=128)
    ap.add_argument("-D", type=int, default=64)
    ap.add_argument("-F", type=int, default=256)
    return ap.parse_args()


class Torch:
    """The local math and data on torch tensors: CUDA on the cuda backend, CPU on the host one."""

    def __init__(self, torch, dtype, cuda):
        self.t = torch
        self.dtype = {"f32": torch.float32, "bf16": torch.bfloat16}[dtype]
        self.cuda = cuda

    def device(self, d):
        return self.t.device("cuda", d) if self.cuda else self.t.device("cpu")

    def put(self, a, d):
        """A host float64 array to a tensor of the step's dtype on device d."""
        return self.t.from_numpy(a).to(device=self.device(d), dtype=self.dtype).contiguous()

    def empty(self, shape, d):
        return self.t.empty(shape, dtype=self.dtype, device=self.device(d))

    def first(self, xg, w1, b1):
        return self.t.relu(xg @ w1.t() + b1)

    def second(self, h, w2):
        return h @ w2.t()

    def half(self, x):
        return x * 0.5

    def host(self, x):
        return x.float().cpu().double().numpy()

    def poison(self, x):
        x.fill_(float("nan"))

    def add_(self, y, *xs):
        for x in xs:
            y += x
        return y


class NumPy:
    def __init__(self, np):
        self.np = np
        self.cuda = False

    def put(self, a, d):
        return self.np.ascontiguousarray(a, dtype=self.np.float32)

    def empty(self, shape, d):
        return self.np.empty(shape, self.np.float32)

    def first(self, xg, w1, b1):
        return self.np.maximum(xg @ w1.T + b1, 0)

    def second(self, h, w2):
        return self.np.ascontiguousarray(h @ w2.T)

    def half(self, x):
        return x * self.np.float32(0.5)

    def host(self, x):
        return x.astype(self.np.float64)

    def poison(self, x):
        x[...] = self.np.nan

    def add_(self, y, *xs):
        for x in xs:
            y += x
        return y


class Streams:
    """Each rank's stream for its torch ops and hirnode's launches. With one rank per device:
    torch's current stream of the device (hirnode.current_streams), so hirnode's work sits
    between the ops around it, in a torch.cuda.graph capture too. Ranks sharing a device need
    a stream each: forked from the device's current stream at the start of a step and joined
    back at its end (both are captured). None on the CPU backend: the runtime's own streams,
    and the host waits (rt.sync) before NumPy or torch reads what hirnode wrote."""

    def __init__(self, rt, torch):
        self.rt, self.torch = rt, torch
        self.own = None
        if torch is not None and rt.device_type == "cuda" and len(set(rt.devices)) < rt.size:
            self.own = [torch.cuda.Stream(device=d) for d in rt.devices]

    def begin(self):
        if self.torch is None or self.rt.device_type != "cuda":
            return None
        current = hirnode.current_streams(self.rt)
        if self.own is None:
            return current
        for s, c in zip(self.own, current):
            s.wait_stream(c)
        return self.own

    def end(self):
        if self.own is not None:
            for s, d in zip(self.own, self.rt.devices):
                self.torch.cuda.current_stream(d).wait_stream(s)

    def on(self, streams, r):
        """A context that runs rank r's torch ops on its device and stream."""
        if streams is None:
            return _Nothing()
        return _Both(self.torch.cuda.device(self.rt.device(r)), self.torch.cuda.stream(streams[r]))


class _Nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class _Both:
    def __init__(self, a, b):
        self.a, self.b = a, b

    def __enter__(self):
        self.a.__enter__()
        self.b.__enter__()

    def __exit__(self, *exc):
        self.b.__exit__(*exc)
        self.a.__exit__(*exc)
        return False


def main():
    args = parse_args()
    try:
        import numpy as np
    except ImportError:
        sys.exit("tp_mlp: needs NumPy (Debian: apt-get install python3-numpy, for /usr/bin/python3)")
    torch = None
    if not args.numpy:
        try:
            import torch
        except ImportError:
            torch = None
    cuda = torch is not None and torch.cuda.is_available() and not args.cpu
    if args.dtype == "bf16" and torch is None:
        sys.exit("tp_mlp: bf16 needs torch (NumPy has no bfloat16)")
    ngpu = torch.cuda.device_count() if cuda else 0
    if args.devices is not None:
        devices = [int(d) for d in args.devices.split(",")]
        ranks = len(devices) if args.ranks is None else args.ranks
        if len(devices) != ranks:
            sys.exit("tp_mlp: %d ranks, %d devices" % (ranks, len(devices)))
    else:
        ranks = args.ranks or (ngpu if cuda else 2)
        devices = [r % ngpu for r in range(ranks)] if cuda else None
    if args.M % ranks or args.F % ranks:
        sys.exit("tp_mlp: M (%d) and F (%d) must divide by the ranks (%d)" % (args.M, args.F, ranks))
    rt = hirnode.Runtime(ranks=ranks, backend="cuda" if cuda else "host", devices=devices)
    if cuda:
        torch.cuda.set_device(rt.device(0))  # where torch.cuda.graph captures
    if args.graph and cuda and len(set(rt.devices)) > 1:
        sys.exit("tp_mlp: torch.cuda.graph captures one device: --graph needs every rank on one GPU "
                 "(e.g. --ranks 2 --devices 0,0)")
    shared = len(set(rt.devices)) < rt.size and rt.device_type == "cuda"
    ops = Torch(torch, args.dtype, cuda) if torch is not None else NumPy(np)
    n, M, D, F = rt.size, args.M, args.D, args.F
    m, f = M // n, F // n
    # NCCL refuses two ranks of one communicator on one device: the peer-copy rings instead
    fmt = dict(M=M, D=D, F=F, dt=args.dtype, via=" via p2p" if shared else "", pvia="via=p2p" if shared else "")
    prog = hirnode.Program.parse((SPLIT if args.mode == "split" else BLOCK).format(**fmt), "tp_mlp_%s.hir" % args.mode)
    streams = Streams(rt, torch if cuda else None)
    host = rt.device_type == "cpu"

    # the weights: global, then each rank's shard on its device
    g = np.random.default_rng(2024)
    W1 = g.standard_normal((F, D)) / np.sqrt(D)
    b1 = g.standard_normal(F) * 0.1
    W2 = g.standard_normal((D, F)) / np.sqrt(F)
    b2 = g.standard_normal(D) * 0.1
    dev = rt.devices
    w1 = [ops.put(W1[r * f:(r + 1) * f], dev[r]) for r in range(n)]
    bb1 = [ops.put(b1[r * f:(r + 1) * f], dev[r]) for r in range(n)]
    w2 = [ops.put(W2[:, r * f:(r + 1) * f], dev[r]) for r in range(n)]
    bb2 = [ops.put(b2, dev[r]) for r in range(n)]
    # what the collectives write, allocated once (the captured step reuses them)
    xg = [ops.empty((M, D), dev[r]) for r in range(n)]
    y = [ops.empty((m, D), dev[r]) for r in range(n)]

    def step(x):
        """One step on the ranks' shards x[r]; returns the output shards (no host sync on GPUs)."""
        ss = streams.begin()
        for r in range(n):  # what hirnode writes, poisoned: a step that did not write it fails
            with streams.on(ss, r):
                ops.poison(y[r])
                ops.poison(xg[r])
        xs = []
        for r in range(n):
            with streams.on(ss, r):
                xs.append(ops.half(x[r]))
        if args.mode == "block":
            rt.launch(prog, {"X": xs, "W1": w1, "b1": bb1, "W2": w2, "b2": bb2, "Y": y}, streams=ss)
            if host:
                rt.sync()
        else:
            p = [None] * n
            io = {"X": xs, "P": xg, "Xg": xg, "Y": y}  # P unread in phase 0: any tensor of its shape
            rt.launch(prog, io, params={"PHASE": 0}, streams=ss)
            if host:
                rt.sync()
            for r in range(n):
                with streams.on(ss, r):
                    p[r] = ops.second(ops.first(xg[r], w1[r], bb1[r]), w2[r])
            io = {"X": xs, "P": p, "Xg": xg, "Y": y}
            rt.launch(prog, io, params={"PHASE": 1}, streams=ss)
            if host:
                rt.sync()
        out = []
        for r in range(n):
            with streams.on(ss, r):
                out.append(ops.add_(y[r] + 0, bb2[r], x[r]) if args.mode == "split" else ops.add_(y[r] + 0, x[r]))
        streams.end()
        return out

    def reference(X):
        """The block on one device, in float64 from the same rounded inputs."""
        r = lambda a: ops.host(ops.put(a, dev[0]))  # noqa: E731  (the step's dtype, back to float64)
        Xr = r(X)
        H = np.maximum((Xr * 0.5) @ r(W1).T + r(b1), 0)
        return H @ r(W2).T + r(b2) + Xr

    def check(k, X, out):
        got = np.concatenate([ops.host(o) for o in out])
        ref = reference(X)
        err = np.abs(got - ref).max() / max(1.0, np.abs(ref).max())
        tol = 1e-3 if args.dtype == "f32" else 5e-2
        ok = err <= tol
        print("tp_mlp: step %d: max error %.2e (relative to max |Y|; tolerance %.0e): %s" %
              (k, err, tol, "ok" if ok else "MISMATCH"))
        return ok

    def new_input(k):
        X = np.random.default_rng(k).standard_normal((M, D))
        return X, [ops.put(X[r * m:(r + 1) * m], dev[r]) for r in range(n)]

    print("tp_mlp: %s mode, %d ranks on the %s backend (devices %s%s), %s, M=%d D=%d F=%d, %s, %s" %
          (args.mode, n, rt.backend, rt.devices, ", via p2p" if shared else "", args.dtype, M, D, F,
           "torch" if torch is not None else "NumPy", "graph" if args.graph else "eager"))
    ok = True
    if not args.graph:
        for k in range(args.steps):
            X, x = new_input(k)
            out = step(x)
            if cuda:
                torch.cuda.synchronize()
            ok &= check(k, X, out)
    elif cuda:
        # torch.cuda.graph: the inputs live in static tensors; a step outside the capture first
        # (it prepares hirnode's configurations: allocations a capture forbids), then the host
        # waits, so that no launch in flight is left for the captured ones to follow
        X, static_x = new_input(0)
        step(static_x)
        rt.sync()
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, capture_error_mode="thread_local"):
            static_out = step(static_x)
        rt.sync()  # the captured launches leave nothing to wait for; the next eager one follows none
        for k in range(args.steps):
            X, x = new_input(k + 1)
            for r in range(n):
                static_x[r].copy_(x[r])
            graph.replay()
            torch.cuda.synchronize()
            ok &= check(k, X, static_out)
    else:
        # the CPU backend: hirnode's own graphs of the collectives, replayed with the host math between
        X, x = new_input(0)
        xs = [ops.half(a) for a in x]
        p = [ops.empty((M, D), dev[r]) for r in range(n)]
        if args.mode == "block":
            graphs = [rt.capture(prog, {"X": xs, "W1": w1, "b1": bb1, "W2": w2, "b2": bb2, "Y": y})]
        else:
            io = {"X": xs, "P": p, "Xg": xg, "Y": y}
            graphs = [rt.capture(prog, io, params={"PHASE": 0}), rt.capture(prog, io, params={"PHASE": 1})]
        for k in range(args.steps):
            X, x = new_input(k + 1)
            for r in range(n):
                xs[r][...] = ops.half(x[r])
                ops.poison(y[r])
                ops.poison(xg[r])
            graphs[0].replay()
            rt.sync()
            if args.mode == "split":
                for r in range(n):
                    p[r][...] = ops.second(ops.first(xg[r], w1[r], bb1[r]), w2[r])
                graphs[1].replay()
                rt.sync()
            out = [ops.add_(y[r] + 0, bb2[r], x[r]) if args.mode == "split" else ops.add_(y[r] + 0, x[r])
                   for r in range(n)]
            ok &= check(k, X, out)
        for gr in graphs:
            gr.destroy()
    rt.close()
    print("tp_mlp: %s" % ("ok" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
