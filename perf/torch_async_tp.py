#!/usr/bin/env python3
"""PyTorch's async tensor parallelism, the anchor that `hirnode bench overlap`
is measured against in the same lease: for each op and shape, one process
per GPU (torch.multiprocessing), the GEMM alone, the sequential NCCL
collective + GEMM, and PyTorch's fused, pipelined op through its symmetric
memory, each the median over REPS timed runs of ITERS calls (CUDA events,
the slowest rank); per column its ratio to the GEMM alone of the same run
(the GEMM's time / the op's: 1.0 hides all communication), as the table of
`bench overlap` has it. Shapes as `bench overlap` takes them: M the global
rows, K x N each rank's weight:
  ag_matmul  A: each rank's M/world x K rows gathered, C = A B (M x N):
             torch.ops.symm_mem.fused_all_gather_matmul
  matmul_rs  C = reduce_scatter(A B) over rows (M/world x N), A M x K:
             torch.ops.symm_mem.fused_matmul_reduce_scatter
  matmul_ar  C = allreduce(A B): no fused op in PyTorch; the GEMM then
             symm-mem's two-shot allreduce in place, beside NCCL's
Every output is compared with the sequential NCCL one (max relative error).

  python3 perf/torch_async_tp.py --gpus 2 --shapes 32768x16384x8192,16384x8192x8192,4096x8192x8192
NVLink multicast stays off (TORCH_SYMM_MEM_DISABLE_MULTICAST=1,
NCCL_NVLS_ENABLE=0).
"""
import argparse
import sys

from torch_common import join, median_seconds, rel_err, run, slowest  # (multicast off before torch loads)
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

OPS = ("ag_matmul", "matmul_rs", "matmul_ar")


def timed(fn, iters, reps):
    """Median seconds per call of fn over reps runs of iters calls (this rank's)."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()

    def calls():
        for _ in range(iters):
            fn()
    return median_seconds(calls, reps, iters)


def worker(rank, world, port, args):
    import torch.distributed._symmetric_memory as symm_mem

    dev = join(rank, world, port)
    group = dist.group.WORLD.group_name
    if hasattr(symm_mem, "enable_symm_mem_for_group"):  # (needed before 2.8; a no-op or gone after)
        symm_mem.enable_symm_mem_for_group(group)
    rows = []
    for op in args.ops:
        for (M, K, N) in args.shapes:
            if M % world:
                continue
            m = M // world
            gen = torch.Generator(device=dev).manual_seed(1000 * rank + M + K + N)
            scale = K ** -0.5
            B = (torch.randn(K, N, device=dev, generator=gen) * scale).to(torch.bfloat16)
            A_full = torch.randn(M, K, device=dev, generator=gen).to(torch.bfloat16)
            A_shard = A_full[:m].contiguous()
            gathered = torch.empty(M, K, device=dev, dtype=torch.bfloat16)
            C_full = torch.empty(M, N, device=dev, dtype=torch.bfloat16)
            C_shard = torch.empty(m, N, device=dev, dtype=torch.bfloat16)
            row = {"op": op, "shape": f"{M}x{K}x{N}"}
            t = {"gemm alone": timed(lambda: torch.mm(A_full, B, out=C_full), args.iters, args.reps)}
            if op == "ag_matmul":
                def seq():
                    dist.all_gather_into_tensor(gathered, A_shard)
                    return torch.mm(gathered, B, out=C_full)

                def fused():
                    return torch.ops.symm_mem.fused_all_gather_matmul(A_shard, [B], 0, group)[1][0]
            elif op == "matmul_rs":
                def seq():
                    torch.mm(A_full, B, out=C_full)
                    dist.reduce_scatter_tensor(C_shard, C_full)
                    return C_shard

                def fused():
                    return torch.ops.symm_mem.fused_matmul_reduce_scatter(A_full, B, "sum", 0, group)
            else:
                sym = symm_mem.empty(M, N, dtype=torch.bfloat16, device=dev)
                symm_mem.rendezvous(sym, group)

                def seq():
                    torch.mm(A_full, B, out=C_full)
                    dist.all_reduce(C_full)
                    return C_full

                def fused():
                    torch.mm(A_full, B, out=sym)
                    torch.ops.symm_mem.two_shot_all_reduce_(sym, "sum", group)
                    return sym
            want = seq().clone()
            got = fused()
            torch.cuda.synchronize()
            err = rel_err(got, want)
            t["sequential nccl"] = timed(seq, args.iters, args.reps)
            t["torch fused" if op != "matmul_ar" else "gemm + symm-mem two_shot"] = timed(fused, args.iters,
                                                                                        args.reps)
            for k, v in t.items():
                row[k] = slowest(v, dev)
            row["max rel err"] = slowest(err, dev)
            rows.append(row)
    if rank == 0:
        print(f"# PyTorch {torch.__version__}, {world} × {torch.cuda.get_device_name(0)}, bf16, {args.iters} "
              f"calls per timed run, median of {args.reps} runs, the slowest rank; ms per call (ratio to the "
              f"GEMM alone: its time / the column's)")
        print("| op | M K N | GEMM alone (ms) | sequential NCCL | PyTorch fused (async-TP) | max rel err |")
        print("|---|---|---:|---:|---:|---:|")
        for r in rows:
            g = r["gemm alone"]
            fused_key = "torch fused" if r["op"] != "matmul_ar" else "gemm + symm-mem two_shot"
            print(f"| {r['op']} | {r['shape'].replace('x', ' ')} | {g * 1e3:.3f} | "
                  f"{r['sequential nccl'] * 1e3:.3f} ({g / r['sequential nccl']:.3f}) | "
                  f"{r[fused_key] * 1e3:.3f} ({g / r[fused_key]:.3f}) | {r['max rel err']:.2e} |")
        sys.stdout.flush()
    dist.barrier()
    dist.destroy_process_group()


def parse_shapes(text):
    shapes = []
    for s in text.split(","):
        parts = s.lower().split("x")
        if len(parts) != 3:
            raise argparse.ArgumentTypeError(f"{s}: expected MxKxN")
        shapes.append(tuple(int(p) for p in parts))
    return shapes


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpus", type=int, default=torch.cuda.device_count())
    ap.add_argument("--op", default="all", choices=OPS + ("all",))
    ap.add_argument("--shapes", type=parse_shapes, default=parse_shapes("32768x16384x8192,16384x8192x8192,"
                                                                         "4096x8192x8192"))
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--reps", type=int, default=20)
    args = ap.parse_args()
    args.ops = OPS if args.op == "all" else (args.op,)
    return run("torch_async_tp", worker, args)


if __name__ == "__main__":
    sys.exit(main())
