#!/usr/bin/env python3
"""A tensor-parallel decode step in a process per GPU, as inference servers run one.

Launched by torchrun: every process joins hirnode's world by itself (RANK, WORLD_SIZE,
LOCAL_RANK, torch.distributed's store), its weights and activations are torch tensors from
torch's caching allocator, bound as they are, and with --graph the whole step is captured in a
torch.cuda.graph in every process and replayed. Per layer l (H: [T, D], this rank's shards of
the weights):

    A = silu(H @ W1[l]^T)                 column-parallel linear: F / world columns   (torch)
    P = A @ W2[l]^T                       row-parallel linear: a partial sum of D      (torch)
    R = R + allreduce(P);  H = rmsnorm(R) * G[l]                                       (hirnode)

the last line one latency-path kernel per rank (`allreduce_rmsnorm ... via ll`). Every step is
checked against the same layers on one device in float32, and with torch the step is timed
beside the same step written with torch.distributed's NCCL all_reduce and with symmetric
memory's one_shot all-reduce (each then add and rms_norm), captured and replayed in the same
run. Without torch (or with --numpy), the same step runs on the CPU backend with NumPy arrays:
the script then starts its processes itself (--nproc, as torchrun would set them up).

    torchrun --nproc-per-node 2 examples/python/tp_decode.py --graph
    torchrun --nproc-per-node 2 examples/python/tp_decode.py            # eagerly
    torchrun --nproc-per-node 2 examples/python/tp_decode.py --graph --via nccl
    torchrun --nproc-per-node 2 examples/python/tp_decode.py --via p2p  # tensors registered; eagerly
    torchrun --nproc-per-node 2 examples/python/tp_decode.py --graph --via p2p   # ... in torch.cuda.graph
    python3 examples/python/tp_decode.py --numpy --nproc 2              # CPU backend, f32
"""

import argparse
import os
import socket
import statistics
import subprocess
import sys

try:
    import hirnode
except ImportError:  # from the repository: the package beside the examples
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
    import hirnode

# The end of a layer: the partial sums allreduced, added to the residual stream (R in, Rn out)
# and normalized for the next layer, in one kernel per rank.
STEP = """param T = {T}, D = {D}
input  P  : {dt}[T, D] replicated   # this rank's partial sum of the row-parallel linear
input  R  : {dt}[T, D] replicated   # the residual stream
input  G  : {dt}[D]    replicated   # the layer's norm weight
output Y  : {dt}[T, D] replicated   # the next layer's input
output Rn : {dt}[T, D] replicated   # the residual stream after the layer
allreduce_rmsnorm Y, Rn <- P, R, G eps {eps} via {via}
"""
EPS = 1e-6


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--graph", action="store_true", help="capture the step in torch.cuda.graph and replay it "
                    "(the CPU backend: each layer's hirnode call captured, replayed between the NumPy matmuls)")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--tokens", type=int, default=1, help="T: rows of the step (decode: a few)")
    ap.add_argument("--hidden", type=int, default=None, help="D (default 4096 on GPUs, 512 on the CPU backend)")
    ap.add_argument("--ffn", type=int, default=None, help="F, split over the ranks (default 2 D)")
    ap.add_argument("--steps", type=int, default=3, help="steps, each with a new input, each checked")
    ap.add_argument("--reps", type=int, default=200, help="timed replays of each version (torch, --graph)")
    ap.add_argument("--via", choices=("ll", "nccl", "p2p"), default="ll",
                    help="hirnode's communicator for the step: ll fuses it in one kernel; nccl and p2p are the "
                    "allreduce, then the add and the norm (p2p's peers copy from and into the tensors where "
                    "they lie: each process registers them first, Runtime.register)")
    ap.add_argument("--no-register", action="store_true",
                    help="with --via p2p: do not register the tensors (the library then refuses them, naming the "
                    "tensor and the statement)")
    ap.add_argument("--numpy", action="store_true", help="the CPU backend with NumPy arrays (f32)")
    ap.add_argument("--nproc", type=int, default=2, help="without torchrun: processes to start (CPU backend)")
    return ap.parse_args()


def weights(np, L, D, F, seed=7):
    """The whole model, float32, the same in every process."""
    g = np.random.default_rng(seed)
    W1 = g.standard_normal((L, F, D)).astype(np.float32) / np.sqrt(D)
    W2 = g.standard_normal((L, D, F)).astype(np.float32) / np.sqrt(F)
    G = (1 + 0.1 * g.standard_normal((L, D))).astype(np.float32)
    return W1, W2, G


def reference(np, H, R, W1, W2, G):
    """The step on one device, float32: the final H and R."""
    for l in range(W1.shape[0]):
        A = H @ W1[l].T
        A = A / (1 + np.exp(-A))
        R = R + A @ W2[l].T
        H = R / np.sqrt((R * R).mean(axis=-1, keepdims=True) + EPS) * G[l]
    return H, R


def step_input(np, k, T, D):
    g = np.random.default_rng(1000 + k)
    return g.standard_normal((T, D)).astype(np.float32), g.standard_normal((T, D)).astype(np.float32)


def rel_err(np, got, want):
    return float(np.abs(got - want).max() / max(np.abs(want).max(), 1e-30))


def spawn(args):
    """Without torchrun: args.nproc copies of this script with a launcher's environment."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = []
    for r in range(args.nproc):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(args.nproc), LOCAL_RANK=str(r),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), HIRNODE_BACKEND="host")
        procs.append(subprocess.Popen([sys.executable] + sys.argv, env=env))
    codes = [p.wait() for p in procs]
    return max(abs(c) for c in codes)


def main():
    args = parse_args()
    import numpy as np
    torch = None
    if not args.numpy:
        try:
            import torch
        except ImportError:
            torch = None
    cuda = torch is not None and torch.cuda.is_available()
    if "RANK" not in os.environ:
        if cuda:
            sys.exit("tp_decode: start it with torchrun --nproc-per-node N (one process per GPU)")
        return spawn(args)
    if cuda:
        import torch.distributed as dist
        os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
        os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
        local = int(os.environ["LOCAL_RANK"])
        torch.cuda.set_device(local)
        dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    rt = hirnode.Runtime(backend=None if cuda else "host")  # joins the launcher's world
    n, rank = rt.world, rt.first_rank
    if args.hidden is None:
        args.hidden = 4096 if cuda else 512
    if args.ffn is None:
        args.ffn = 2 * args.hidden
    L, T, D, F = args.layers, args.tokens, args.hidden, args.ffn
    if F % n:
        sys.exit("tp_decode: --ffn %d must divide by the world (%d)" % (F, n))
    f = F // n
    dt = "bf16" if cuda else "f32"
    prog = hirnode.Program.parse(STEP.format(T=T, D=D, dt=dt, eps=EPS, via=args.via), "tp_decode.hir")
    W1, W2, G = weights(np, L, D, F)
    say = print if rank == 0 else (lambda *a, **k: None)
    say("tp_decode: %d processes, rank 0 on the %s backend, %s, %d layers, T=%d D=%d F=%d, via %s, %s" %
        (n, rt.backend, dt, L, T, D, F, args.via, "graph" if args.graph else "eager"))
    try:
        ok = run_torch(args, torch, rt, prog, np, W1, W2, G, rank, n, f, say) if cuda else \
            run_numpy(args, rt, prog, np, W1, W2, G, rank, f, say)
    except hirnode.Error as e:  # said by the library: the statement, the tensor, the rank
        sys.stderr.write("%s\n" % str(e).rstrip())
        return 2
    rt.close()
    say("tp_decode: %s" % ("ok" if ok else "FAILED"))
    if cuda:
        dist.destroy_process_group()
    return 0 if ok else 1


def run_numpy(args, rt, prog, np, W1, W2, G, rank, f, say):
    """The CPU backend: NumPy arrays bound as they are; every step checked. --graph: each layer's
    call captured once (hirnode's own graphs) and replayed, the host's matmuls between."""
    L, T, D = args.layers, args.tokens, args.hidden
    w1 = [np.ascontiguousarray(W1[l, rank * f:(rank + 1) * f]) for l in range(L)]
    w2 = [np.ascontiguousarray(W2[l, :, rank * f:(rank + 1) * f]) for l in range(L)]
    g = [np.ascontiguousarray(G[l]) for l in range(L)]
    p, y = np.empty((T, D), np.float32), np.empty((T, D), np.float32)
    res = [np.empty((T, D), np.float32), np.empty((T, D), np.float32)]
    if args.via == "p2p" and not args.no_register:
        rt.register(p)  # refused: the CPU backend cannot hand a process's memory to another
    bindings = [{"P": p, "R": res[l % 2], "G": g[l], "Y": y, "Rn": res[(l + 1) % 2]} for l in range(L)]
    graphs = [rt.capture(prog, b) for b in bindings] if args.graph else None
    ok = True
    for k in range(args.steps):
        H, R = step_input(np, k, T, D)
        want_h, want_r = reference(np, H, R, W1, W2, G)
        h = H.copy()
        res[0][...] = R
        for l in range(L):
            a = h @ w1[l].T
            p[...] = (a / (1 + np.exp(-a))) @ w2[l].T
            y[...] = np.nan
            if graphs:
                graphs[l].replay()
                rt.sync()
            else:
                rt.run(prog, bindings[l])
            h = y.copy()
        eh, er = rel_err(np, h, want_h), rel_err(np, res[L % 2], want_r)
        good = eh < 1e-4 and er < 1e-4
        say("step %d: max rel err H %.2e, R %.2e%s" % (k, eh, er, "" if good else "  WRONG"))
        ok &= good
    for gr in graphs or ():
        gr.destroy()
    return ok


def run_torch(args, torch, rt, prog, np, W1, W2, G, rank, n, f, say):
    """torch tensors from the caching allocator bound as they are; hirnode launched on torch's
    stream (captured with it under --graph); checked, then timed beside torch's NCCL and
    symmetric-memory versions of the same step."""
    import torch.distributed as dist
    import torch.distributed._symmetric_memory as symm_mem
    L, T, D, F = args.layers, args.tokens, args.hidden, args.ffn
    dev = torch.device("cuda", torch.cuda.current_device())
    bf = torch.bfloat16
    w1 = [torch.tensor(W1[l, rank * f:(rank + 1) * f], device=dev).to(bf) for l in range(L)]
    w2 = [torch.tensor(W2[l, :, rank * f:(rank + 1) * f], device=dev).to(bf).contiguous() for l in range(L)]
    g = [torch.tensor(G[l], device=dev).to(bf) for l in range(L)]
    # the step's tensors, allocated once (a captured step reuses them)
    h0, r0 = torch.empty((T, D), dtype=bf, device=dev), torch.empty((T, D), dtype=bf, device=dev)
    p = torch.empty((T, D), dtype=bf, device=dev)
    ys = [torch.empty((T, D), dtype=bf, device=dev) for _ in range(L)]
    res = [torch.empty((T, D), dtype=bf, device=dev) for _ in range(2)]
    if args.via == "p2p" and not args.no_register:  # the peer copies reach them in every process
        for t in [p] + ys + res + g:
            rt.register(t)
    group = dist.group.WORLD.group_name
    sym = symm_mem.empty((T, D), dtype=bf, device=dev)
    symm_mem.rendezvous(sym, group)
    sym_out = torch.empty((T, D), dtype=bf, device=dev)

    def mlp(h, l, out):
        torch.matmul(torch.nn.functional.silu(h @ w1[l].t()), w2[l].t(), out=out)

    def step_hirnode():
        h = h0
        res[0].copy_(r0)
        for l in range(L):
            mlp(h, l, p)
            rt.launch(prog, {"P": p, "R": res[l % 2], "G": g[l], "Y": ys[l], "Rn": res[(l + 1) % 2]},
                      streams=hirnode.current_streams(rt))
            h = ys[l]
        return h, res[L % 2]

    def step_nccl():
        h, r = h0, r0
        for l in range(L):
            mlp(h, l, p)
            dist.all_reduce(p)
            r = r + p
            h = torch.nn.functional.rms_norm(r, (D,), g[l], EPS)
        return h, r

    def step_symm():
        h, r = h0, r0
        for l in range(L):
            mlp(h, l, sym)
            torch.ops.symm_mem.one_shot_all_reduce_out(sym, "sum", group, sym_out)
            r = r + sym_out
            h = torch.nn.functional.rms_norm(r, (D,), g[l], EPS)
        return h, r

    versions = [("hirnode via " + args.via, step_hirnode), ("torch NCCL", step_nccl), ("torch symm-mem one_shot", step_symm)]
    ok = True
    graphs = {}
    for name, fn in versions:
        fn()  # outside any capture first: hirnode prepares, NCCL and symmetric memory set up
        rt.sync()
        torch.cuda.synchronize()
        if args.graph:
            gr = torch.cuda.CUDAGraph()
            with torch.cuda.graph(gr, capture_error_mode="thread_local"):
                out = fn()
            rt.sync()  # the captured launches leave nothing to wait for
            graphs[name] = (gr, out)
    for k in range(args.steps):
        H, R = step_input(np, k, T, D)
        want_h, want_r = reference(np, H, R, W1, W2, G)
        h0.copy_(torch.tensor(H, device=dev).to(bf))
        r0.copy_(torch.tensor(R, device=dev).to(bf))
        for name, fn in versions:
            for y in ys:
                y.fill_(float("nan"))
            if args.graph:
                graphs[name][0].replay()
                out = graphs[name][1]
            else:
                out = fn()
            torch.cuda.synchronize()
            eh = rel_err(np, out[0].float().cpu().numpy(), want_h)
            er = rel_err(np, out[1].float().cpu().numpy(), want_r)
            good = eh < 0.05 and er < 0.05  # bf16 through the layers against float32
            worst = torch.tensor([0.0 if good else 1.0], device=dev)
            dist.all_reduce(worst, op=dist.ReduceOp.MAX)
            good = worst.item() == 0.0
            say("step %d, %-24s max rel err H %.2e, R %.2e (rank 0)%s" % (k, name + ":", eh, er,
                                                                      "" if good else "  WRONG on a rank"))
            ok &= good
    # timing: every version's step as it runs (a replay with --graph), the versions taken in turn
    # within each repetition (so that a drift of the machine's speed meets them alike), the
    # slowest rank's median
    times = {name: [] for name, _ in versions}
    for _ in range(args.reps):
        for name, fn in versions:
            issue = graphs[name][0].replay if args.graph else fn
            dist.barrier()
            torch.cuda.synchronize()
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            issue()
            b.record()
            b.synchronize()
            times[name].append(a.elapsed_time(b) * 1e3)
    rows = []
    for name, _ in versions:
        t = torch.tensor([statistics.median(times[name])], dtype=torch.float64, device=dev)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        rows.append((name, t.item()))
    say("\n| version (%d GPUs, %d layers, T=%d, D=%d, F=%d, bf16, %s) | step µs | per layer µs | vs hirnode |" %
        (n, L, T, D, F, "torch.cuda.graph" if args.graph else "eager"))
    say("|---|---:|---:|---:|")
    for name, us in rows:
        say("| %s | %.1f | %.2f | %.3f |" % (name, us, us / L, us / rows[0][1]))
    if args.graph:
        for gr, _ in graphs.values():
            gr.reset()
        rt.sync()
    return ok


if __name__ == "__main__":
    sys.exit(main())
