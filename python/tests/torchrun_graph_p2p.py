"""`via p2p` inside torch.cuda.graph in a process per GPU, on torch tensors registered across the
processes (GPU machines only: tools/gpu-check.sh runs it under torchrun, with the caching
allocator as it comes and with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True).

    python3 -m torch.distributed.run --nproc-per-node 2 python/tests/torchrun_graph_p2p.py

Per size, the program (allreduce, allgather, allreduce, all via p2p) is captured in a torch graph
again and again; each capture is replayed on fresh random integers (exact in f32), every output
poisoned before and compared with what torch's own all_gather of the inputs gives, then the graph
is reset (its flags go with it). Exit status 0 when every replay on every rank was right."""
import os
import sys

import torch
import torch.distributed as dist

try:
    import hirnode
except ImportError:  # from the repository
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    import hirnode

PROGRAM = """param N = {n}
input  X : f32[N] replicated
output Y : f32[N] replicated
output G : f32[N * world] replicated
T = alloc f32[N]
allreduce T <- X op sum via p2p
allgather G <- X via p2p
allreduce Y <- T op max via p2p
"""


def main():
    local = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local)
    dev = torch.device("cuda", local)
    dist.init_process_group("nccl", device_id=dev)
    rt = hirnode.Runtime()  # joins torchrun's world
    n, rank = rt.world, rt.first_rank
    bad = total = 0
    for size in (4096, 1 << 22):  # 16 KiB; 16 MiB (several of the allocator's segments)
        prog = hirnode.Program.parse(PROGRAM.format(n=size), "torchrun_graph_p2p.hir")
        x, y = torch.empty(size, device=dev), torch.empty(size, device=dev)
        g = torch.empty(size * n, device=dev)
        for t in (x, y, g):
            rt.register(t)
        b = {"X": x, "Y": y, "G": g}
        x.fill_(1.0)
        rt.launch(prog, b, streams=hirnode.current_streams(rt))  # outside a capture first: prepared
        rt.sync()
        torch.cuda.synchronize()
        for cap in range(6):
            gr = torch.cuda.CUDAGraph()
            with torch.cuda.graph(gr, capture_error_mode="thread_local"):
                rt.launch(prog, b, streams=hirnode.current_streams(rt))
            rt.sync()
            for k in range(5):
                gen = torch.Generator(device=dev)
                gen.manual_seed(1000003 * cap + 1009 * k + 17 * rank + size)
                x.copy_(torch.randint(-1000, 1000, (size,), device=dev, generator=gen).float())
                y.fill_(float("nan"))
                g.fill_(float("nan"))
                torch.cuda.synchronize()
                dist.barrier()  # no rank replays into a peer's outputs while that peer poisons them
                gr.replay()
                torch.cuda.synchronize()
                every = [torch.empty_like(x) for _ in range(n)]
                dist.all_gather(every, x)
                right = torch.equal(y, sum(every)) and torch.equal(g, torch.cat(every))
                bad += not right
                total += 1
            gr.reset()
            rt.sync()
    rt.close()
    wrong = torch.tensor([bad], device=dev)
    dist.all_reduce(wrong)
    if rank == 0:
        print("torchrun_graph_p2p: %s: %d replays per rank checked, %d wrong on all ranks"
              % ("ok" if wrong.item() == 0 else "FAILED", total, wrong.item()))
    dist.destroy_process_group()
    return 0 if wrong.item() == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
