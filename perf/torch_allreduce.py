#!/usr/bin/env python3
"""PyTorch's decode-size allreduces in CUDA graphs: the anchor that
`hirnode bench collectives --graph` is measured against in the same run.

One process per GPU (torch.multiprocessing), bf16, for each size: ITERS
calls captured in one torch.cuda.graph, each repetition one replay timed
with CUDA events, per call = median replay / ITERS, the slowest rank's:
  nccl          torch.distributed.all_reduce (NCCL)
  one_shot      torch.ops.symm_mem.one_shot_all_reduce_out, the input
                already in the symmetric buffer
  one_shot+copy the same after copying the input into the symmetric
                buffer, as a server that does not own its activations'
                memory does
  two_shot      torch.ops.symm_mem.two_shot_all_reduce_ (in place)
and, with --hidden, the fused step's anchor: one_shot + residual add +
torch.nn.functional.rms_norm (three kernels). Every result is checked
against the sum of every rank's random input (max relative error).

  python3 perf/torch_allreduce.py --gpus 2 --sizes 8K,32K,128K,512K,2M
NVLink multicast stays off (TORCH_SYMM_MEM_DISABLE_MULTICAST=1,
NCCL_NVLS_ENABLE=0).
"""
import argparse
import sys

from torch_common import join, median_seconds, rel_err, run, slowest  # (multicast off before torch loads)
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402


def parse_size(s):
    s = s.strip().upper().rstrip("B")
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(s[-1:], 1)
    return int(float(s[:-1] if s[-1:] in "KMG" else s) * mult)


def timed(fn, iters, reps):
    """fn() issues one call; ITERS of them captured in one graph; the median
    replay over reps, per call, in µs (this rank's)."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):  # warm-up outside the graph (NCCL, symm-mem set up here)
            fn()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(iters):
            fn()
    g.replay()
    torch.cuda.synchronize()
    return median_seconds(g.replay, reps, iters) * 1e6


def worker(rank, world, port, args):
    import torch.distributed._symmetric_memory as symm_mem

    dev = join(rank, world, port)
    group = dist.group.WORLD.group_name
    most = max(args.sizes) // 2
    buf = symm_mem.empty(most, dtype=torch.bfloat16, device=dev)
    symm_mem.rendezvous(buf, group)
    rows = []
    for size in args.sizes:
        n = size // 2
        gen = [torch.Generator(device=dev).manual_seed(1000 * r + n) for r in range(world)]
        xs = [torch.randn(n, device=dev, generator=gen[r]).to(torch.bfloat16) for r in range(world)]
        want = sum(x.float() for x in xs)
        x = xs[rank]
        out = torch.empty_like(x)
        sym = buf[:n]
        row = {"bytes": size}
        errs = {}

        def nccl():
            out.copy_(x)
            dist.all_reduce(out)

        # checked once eagerly, then timed (nccl's timing includes its copy: a graph replays in place)
        nccl()
        errs["nccl"] = rel_err(out, want)
        t = torch.empty_like(x)

        def nccl_only():
            dist.all_reduce(t)

        t.copy_(x)
        row["nccl"] = timed(nccl_only, args.iters, args.reps)

        sym.copy_(x)
        torch.ops.symm_mem.one_shot_all_reduce_out(sym, "sum", group, out)
        torch.cuda.synchronize()
        errs["one_shot"] = rel_err(out, want)
        row["one_shot"] = timed(lambda: torch.ops.symm_mem.one_shot_all_reduce_out(sym, "sum", group, out),
                                args.iters, args.reps)

        def with_copy():
            sym.copy_(x)
            torch.ops.symm_mem.one_shot_all_reduce_out(sym, "sum", group, out)

        row["one_shot+copy"] = timed(with_copy, args.iters, args.reps)

        sym.copy_(x)
        torch.ops.symm_mem.two_shot_all_reduce_(sym, "sum", group)
        torch.cuda.synchronize()
        errs["two_shot"] = rel_err(sym, want)
        sym.copy_(x)
        row["two_shot"] = timed(lambda: torch.ops.symm_mem.two_shot_all_reduce_(sym, "sum", group),
                                args.iters, args.reps)

        if args.hidden and n % args.hidden == 0:
            h = args.hidden
            res = torch.randn(n, device=dev, generator=torch.Generator(device=dev).manual_seed(7)).to(torch.bfloat16)
            w = torch.rand(h, device=dev, generator=torch.Generator(device=dev).manual_seed(8)).to(torch.bfloat16)
            y = torch.empty_like(x)

            def fused():
                torch.ops.symm_mem.one_shot_all_reduce_out(sym, "sum", group, out)
                torch.add(out, res, out=y)
                return torch.nn.functional.rms_norm(y.view(-1, h), (h,), w, 1e-6)

            sym.copy_(x)
            z = fused()
            ref_y = (want + res.float()).to(torch.bfloat16).float().view(-1, h)
            ref = ref_y * torch.rsqrt(ref_y.pow(2).mean(-1, keepdim=True) + 1e-6) * w.float()
            errs["norm"] = rel_err(z, ref)
            row["one_shot+add+rmsnorm"] = timed(fused, args.iters, args.reps)
        for k in list(row):
            if k != "bytes":
                row[k] = slowest(row[k], dev)
        row["max rel err"] = slowest(max(errs.values()), dev)
        rows.append(row)
    if rank == 0:
        cols = [k for k in rows[0] if k != "bytes"]
        print(f"# PyTorch {torch.__version__}, {world} × {torch.cuda.get_device_name(0)}, bf16, {args.iters} calls "
              f"per torch.cuda.graph, median of {args.reps} replays, per call (µs), slowest rank")
        print("| bytes | " + " | ".join(cols) + " |")
        print("|---:|" + "---:|" * len(cols))
        for r in rows:
            b = r["bytes"]
            label = f"{b >> 20} MiB" if b >= 1 << 20 and b % (1 << 20) == 0 else f"{b >> 10} KiB"
            print(f"| {label} | " + " | ".join(
                f"{r[c]:.2e}" if c == "max rel err" else f"{r[c]:.2f}" for c in cols) + " |")
        sys.stdout.flush()
    dist.barrier()
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpus", type=int, default=torch.cuda.device_count())
    ap.add_argument("--sizes", default="8K,16K,32K,64K,128K,512K,2M")
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--hidden", type=int, default=0, help="also the fused step's anchor, rows of this many elements")
    args = ap.parse_args()
    args.sizes = [parse_size(s) for s in args.sizes.split(",")]
    return run("torch_allreduce", worker, args)


if __name__ == "__main__":
    sys.exit(main())
