"""A world of processes from Python (the host backend): every rank a process of its own with a
Runtime(world=, rank=, rendezvous=), buffers of Runtime.alloc bound, the MLP step against
NumPy eagerly and replayed from a capture, a bound NumPy array refused (other processes cannot
reach it), NumPy arrays bound as they are where only the latency path touches them (its peers never
do) and refused with the statement named where the peer copies would, and a process that dies named
by the others."""

import os
import subprocess
import sys
import tempfile
import unittest

from helpers import HERE

WORKER = r"""
import os, sys
sys.path.insert(0, sys.argv[1])
from helpers import MLP, hirnode, mlp_inputs, np
world, rank, rendezvous, mode = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
rt = hirnode.Runtime(backend="host", world=world, rank=rank, rendezvous=rendezvous, timeout=30)
assert (rt.size, rt.world, rt.first_rank) == (1, world, rank), (rt.size, rt.world, rt.first_rank)
p = hirnode.Program.parse(MLP, "mlp.hir")
b, ref = mlp_inputs(world, seed=11)
bufs = {}
for name, parts in b.items():
    a = parts[rank]
    bufs[name] = rt.alloc(rank, dtype="f32", shape=a.shape)
    rt.upload(bufs[name], a)
m = ref.shape[0] // world
want = ref[rank * m:(rank + 1) * m]
if mode == "die":
    if rank == 1:
        os._exit(0)  # gone without a goodbye
    try:
        rt.run(p, bufs)
        rt.run(p, bufs)
    except hirnode.PeerLostError as e:
        sys.exit(0 if "died without leaving the world" in str(e) else 3)
    sys.exit(4)
rt.run(p, bufs)
ok = np.allclose(rt.download(bufs["Y"]), want, rtol=1e-4, atol=1e-4)
rt.upload(bufs["Y"], np.full(want.shape, np.nan, np.float32))
g = rt.capture(p, bufs)
g.replay()
rt.sync()
ok = ok and np.allclose(rt.download(bufs["Y"]), want, rtol=1e-4, atol=1e-4)
g.destroy()
# the runtime's own memory registers everywhere at once (already at one address in every process),
# again at no cost; past its block's end it is refused in every process alike
for k in sorted(bufs):
    rt.register(bufs[k])
rt.register(bufs["Y"])
rt.run(p, bufs)
ok = ok and np.allclose(rt.download(bufs["Y"]), want, rtol=1e-4, atol=1e-4)
try:
    rt.register((bufs["X"].ptr, bufs["X"].nbytes + (64 << 20)))
    ok = False
except hirnode.InvalidArgumentError as e:
    ok = ok and "hn_runtime_register: rank 0: " in str(e) and "run past the end of its block" in str(e)
try:
    rt.run(p, {k: parts[rank] for k, parts in b.items()})
    refused = False
except hirnode.InvalidArgumentError as e:
    refused = "no memory of hn_runtime_alloc" in str(e)
rt.close()
sys.exit(0 if ok and refused else 1)
"""


# NumPy arrays bound as they are: the latency path's peers touch only their own memory, the
# peer copies' read and write the others' buffers (refused, the statement named)
CALLER = r"""
import os, sys
sys.path.insert(0, sys.argv[1])
from helpers import hirnode, np
world, rank, rendezvous = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
rt = hirnode.Runtime(backend="host", world=world, rank=rank, rendezvous=rendezvous, timeout=30)
text = ("param N = 384\n"
        "input  X : f32[N]          replicated\n"
        "output Y : f32[N]          replicated\n"
        "output Z : f32[world, N]   replicated\n"
        "allreduce Y <- X op sum via %s\n"
        "allgather Z <- X via ll\n")
xs = [np.random.default_rng(100 + r).standard_normal(384).astype(np.float32) for r in range(world)]
x, y, z = xs[rank].copy(), np.full(384, np.nan, np.float32), np.full((world, 384), np.nan, np.float32)
ll = hirnode.Program.parse(text % "ll", "caller.hir")
bufs = {"X": x, "Y": y, "Z": z}
ok = True
for k in range(3):
    rt.run(ll, bufs)
    ok = ok and np.allclose(y, sum(xs), rtol=1e-5, atol=1e-5) and np.array_equal(z, np.stack(xs))
    y[...] = np.nan
    z[...] = np.nan
g = rt.capture(ll, bufs)
for k in range(3):
    g.replay()
    rt.sync()
    ok = ok and np.allclose(y, sum(xs), rtol=1e-5, atol=1e-5) and np.array_equal(z, np.stack(xs))
    y[...] = np.nan
g.destroy()
try:
    rt.run(hirnode.Program.parse(text % "p2p", "caller.hir"), bufs)
    said = "not refused"
except hirnode.InvalidArgumentError as e:
    said = str(e)
want = ("binding 'X' on rank %d" % rank, "no memory of hn_runtime_alloc",
        "caller.hir:5:1: `allreduce Y <- X op sum via p2p` (via p2p)", "Runtime.alloc")
refused = all(w in said for w in want) and "Runtime.register" not in said  # (the host backend cannot)
try:
    rt.register(x)
    refused = False
except hirnode.UnsupportedError as e:
    refused = refused and "rank 0: the host backend cannot hand its memory to other processes" in str(e)
# a registration is collective: one process's own mistake is named in every process, none waits
try:
    rt.register((0, 8) if rank == world - 1 else x)
    refused = False
except hirnode.Error as e:
    refused = refused and "rank 0: the host backend cannot" in str(e)
try:
    rt.register(x, rank=(rank + 1) % world)
    refused = False
except hirnode.Error as e:
    refused = refused and "rank 0: not the rank this process drives (0)" in str(e)
rt.run(ll, bufs)  # still usable
ok = ok and np.allclose(y, sum(xs), rtol=1e-5, atol=1e-5)
rt.close()
if not (ok and refused):
    print("ok", ok, "refused:", said)
sys.exit(0 if ok and refused else 1)
"""


# a graph rebound across processes: the first rebind captures again, the later ones move the
# pointers in place in every process (the peer copies hold the other processes' buffers too)
REBIND = r"""
import os, sys
sys.path.insert(0, sys.argv[1])
from helpers import hirnode, np
world, rank, rendezvous = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
rt = hirnode.Runtime(backend=os.environ.get("HN_TEST_BACKEND", "host"), world=world, rank=rank,
                     rendezvous=rendezvous, timeout=30)
text = ("param N = 96\n"
        "input  X : f32[N]        replicated\n"
        "output Z : f32[world, N] replicated\n"
        "output S : f32[N]        replicated\n"
        "allgather Z <- X via p2p\n"
        "allreduce S <- X op sum via p2p\n")
p = hirnode.Program.parse(text, "ag.hir")
sets = []
for s in range(3):
    xs = [np.random.default_rng(200 + 10 * s + r).standard_normal(96).astype(np.float32) for r in range(world)]
    b = {"X": rt.alloc(rank, dtype="f32", shape=(96,)), "Z": rt.alloc(rank, dtype="f32", shape=(world, 96)),
         "S": rt.alloc(rank, dtype="f32", shape=(96,))}
    rt.upload(b["X"], xs[rank])
    sets.append((b, np.stack(xs)))
g = rt.capture(p, sets[0][0])
ok, said = not g.in_place, []
for k, s in enumerate((1, 2, 0, 1)):
    b, want = sets[s]
    rt.upload(b["Z"], np.full((world, 96), np.nan, np.float32))
    rt.upload(b["S"], np.full(96, np.nan, np.float32))
    g.rebind(b)
    said.append(g.in_place)
    ok = ok and g.in_place == (k > 0)
    for i in range(2):
        g.replay()
    rt.sync()
    ok = ok and np.array_equal(rt.download(b["Z"]), want)
    ok = ok and np.allclose(rt.download(b["S"]), want.sum(axis=0), rtol=1e-5, atol=1e-5)
g.destroy()
rt.close()
if not ok:
    print("in place:", said)
sys.exit(0 if ok else 1)
"""


class ProcessWorld(unittest.TestCase):
    def world(self, n, mode, worker=WORKER):
        with tempfile.TemporaryDirectory(prefix="hn-py-") as d:
            env = dict(os.environ)
            for v in ("HIRNODE_WORLD", "HIRNODE_RANK", "HIRNODE_RENDEZVOUS"):
                env.pop(v, None)
            procs = [subprocess.Popen([sys.executable, "-c", worker, HERE, str(n), str(r), d, mode], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT) for r in range(n)]
            out = [p.communicate(timeout=120)[0].decode(errors="replace") for p in procs]
            codes = [p.returncode for p in procs]
            self.assertEqual(os.listdir(d), [], "the rendezvous left files")
        return codes, out

    def test_mlp_across_2_and_4_processes(self):
        for n in (2, 4):
            codes, out = self.world(n, "run")
            self.assertEqual(codes, [0] * n, "\n".join(out))

    def test_caller_memory_where_peers_never_touch_it(self):
        for n in (2, 3):
            codes, out = self.world(n, "caller", CALLER)
            self.assertEqual(codes, [0] * n, "\n".join(out))

    def test_rebind_in_place_across_processes(self):
        for n in (2, 3):
            codes, out = self.world(n, "rebind", REBIND)
            self.assertEqual(codes, [0] * n, "\n".join(out))

    def test_a_process_that_dies_is_named(self):
        codes, out = self.world(2, "die")
        self.assertEqual(codes, [0, 0], "\n".join(out))


if __name__ == "__main__":
    unittest.main()
