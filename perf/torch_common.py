"""What the PyTorch anchors (torch_allreduce.py, torch_async_tp.py) share:
NVLink multicast off, one process per GPU meeting over a local TCP port,
the timing of a step between two events, the slowest rank's figure, the
relative error against a reference."""
import os
import socket
import statistics
import sys

os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402


def run(name, worker, args):
    """main()'s end: worker(rank, world, port, args) on args.gpus GPUs; 2 when there are fewer than 2."""
    if args.gpus < 2:
        print("%s: needs 2 or more GPUs" % name, file=sys.stderr)
        return 2
    spawn(worker, args.gpus, args)
    return 0


def median_seconds(issue, reps, per):
    """issue() enqueues one rep's work; the median over reps of its time between two CUDA events,
    divided by per (this rank's; the ranks start every rep together)."""
    times = []
    for _ in range(reps):
        dist.barrier()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        issue()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e-3 / per)
    return statistics.median(times)


def spawn(worker, gpus, args):
    """worker(rank, world, port, args) in one process per GPU; port: a free local one to meet at."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(worker, args=(gpus, port, args), nprocs=gpus, join=True)


def join(rank, world, port):
    """This process's GPU and its NCCL process group; the device."""
    torch.cuda.set_device(rank)
    dev = torch.device("cuda", rank)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            device_id=dev)
    return dev


def slowest(v, dev):
    t = torch.tensor([v], dtype=torch.float64, device=dev)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.item()


def rel_err(got, want):
    got, want = got.float(), want.float()
    return ((got - want).abs().max() / want.abs().max().clamp_min(1e-30)).item()
