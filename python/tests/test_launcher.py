"""A world of processes as a launcher starts them (torchrun's RANK, WORLD_SIZE and LOCAL_RANK):
Runtime() with no world arguments joins it, meeting the others through a store — here a stand-in
for torch.distributed's (set, and a get that waits), files in a directory — and runs the MLP
step right, also as two nodes of two (torchrun's LOCAL_WORLD_SIZE), where the latency path across
the nodes is refused; without a store or $HIRNODE_RENDEZVOUS it says what it needs; launcher=False and
explicit arguments keep such a process to itself; a world of one is no world."""

import os
import socket
import subprocess
import sys
import tempfile
import unittest

from helpers import HERE, hirnode

WORKER = r"""
import os, sys, time
sys.path.insert(0, sys.argv[1])
from helpers import MLP, hirnode, mlp_inputs, np

class FileStore:
    '''set(key, value) and a get(key) that waits, as torch.distributed's stores: a file per key'''
    def __init__(self, d):
        self.d = d
    def _path(self, key):
        return os.path.join(self.d, key.replace('/', '_'))
    def set(self, key, value):
        tmp = self._path(key) + '.tmp'
        with open(tmp, 'wb') as f:
            f.write(value.encode() if isinstance(value, str) else value)
        os.rename(tmp, self._path(key))
    def get(self, key):
        for _ in range(3000):
            if os.path.exists(self._path(key)):
                with open(self._path(key), 'rb') as f:
                    return f.read()
            time.sleep(0.01)
        raise TimeoutError(key)

world, rank = int(os.environ['WORLD_SIZE']), int(os.environ['RANK'])
store = FileStore(sys.argv[2]) if sys.argv[2] != 'launcher' else None  # None: MASTER_ADDR's store
for round in range(2):  # two runtimes one after the other: each meets on its own key
    rt = hirnode.Runtime(backend='host', timeout=30, store=store)
    assert (rt.size, rt.world, rt.first_rank) == (1, world, rank), (rt.size, rt.world, rt.first_rank)
    p = hirnode.Program.parse(MLP, 'mlp.hir')
    b, ref = mlp_inputs(world, seed=11 + round)
    bufs = {}
    for name, parts in b.items():
        bufs[name] = rt.alloc(rank, dtype='f32', shape=parts[rank].shape)
        rt.upload(bufs[name], parts[rank])
    m = ref.shape[0] // world
    rt.run(p, bufs)
    ok = np.allclose(rt.download(bufs['Y']), ref[rank * m:(rank + 1) * m], rtol=1e-4, atol=1e-4)
    rt.close()
    if not ok:
        sys.exit(1)
sys.exit(0)
"""


def launcher_env(world, rank):
    env = dict(os.environ)
    for v in ("HIRNODE_WORLD", "HIRNODE_RANK", "HIRNODE_RENDEZVOUS", "HIRNODE_STORE", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(v, None)
    env.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(world))
    return env


class Launcher(unittest.TestCase):
    def test_processes_a_launcher_started_meet_through_a_store(self):
        for n in (2, 4):
            with tempfile.TemporaryDirectory(prefix="hn-store-") as d:
                made_before = set(os.listdir(tempfile.gettempdir()))
                procs = [subprocess.Popen([sys.executable, "-c", WORKER, HERE, d], env=launcher_env(n, r),
                                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT) for r in range(n)]
                out = [p.communicate(timeout=120)[0].decode(errors="replace") for p in procs]
                self.assertEqual([p.returncode for p in procs], [0] * n, "\n".join(out))
                # rank 0's meeting places are gone with its runtimes
                left = [f for f in set(os.listdir(tempfile.gettempdir())) - made_before if f.startswith("hirnode-rdv-")]
                self.assertEqual(left, [])

    def test_two_nodes_as_torchrun_starts_them(self):
        # --nnodes 2 --nproc-per-node 2: LOCAL_WORLD_SIZE 2 of WORLD_SIZE 4, two nodes; each node
        # meets on its own through the store, rank 0's process serves the link between them; the
        # MLP runs right, and the latency path across the nodes is refused, naming them
        check = WORKER.replace("sys.exit(0)\n", """
import numpy as np
rt = hirnode.Runtime(backend='host', timeout=30, store=store)
p = hirnode.Program.parse('param N = 8\\ninput X : f32[N] replicated\\noutput S : f32[N] replicated\\n'
                          'allreduce S <- X op sum via ll\\n', 'll.hir')
x, s = rt.alloc(rank, dtype='f32', shape=(8,)), rt.alloc(rank, dtype='f32', shape=(8,))
rt.upload(x, np.ones(8, dtype=np.float32))
try:
    rt.run(p, {'X': x, 'S': s})
    sys.exit(2)
except hirnode.Error as e:
    if 'cannot cross nodes' not in str(e) or 'nodes 0 and 1 of 2' not in str(e):
        print(e)
        sys.exit(3)
rt.close()
sys.exit(0)
""")
        with tempfile.TemporaryDirectory(prefix="hn-store-") as d:
            procs = [subprocess.Popen([sys.executable, "-c", check, HERE, d],
                                      env=dict(launcher_env(4, r), LOCAL_RANK=str(r % 2), LOCAL_WORLD_SIZE="2"),
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT) for r in range(4)]
            out = [p.communicate(timeout=120)[0].decode(errors="replace") for p in procs]
            self.assertEqual([p.returncode for p in procs], [0] * 4, "\n".join(out))

    def test_processes_meet_through_the_store_rank_0_serves(self):
        # torchrun's MASTER_ADDR and MASTER_PORT, no store of the caller's: rank 0 serves one on
        # MASTER_PORT + 1 while the world meets
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        made_before = set(os.listdir(tempfile.gettempdir()))
        envs = [dict(launcher_env(2, r), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port - 1)) for r in range(2)]
        procs = [subprocess.Popen([sys.executable, "-c", WORKER, HERE, "launcher"], env=envs[r],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT) for r in range(2)]
        out = [p.communicate(timeout=120)[0].decode(errors="replace") for p in procs]
        self.assertEqual([p.returncode for p in procs], [0, 0], "\n".join(out))
        left = [f for f in set(os.listdir(tempfile.gettempdir())) - made_before if f.startswith("hirnode-rdv-")]
        self.assertEqual(left, [])

    def test_without_a_store_it_says_what_it_needs(self):
        names = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "HIRNODE_RENDEZVOUS", "HIRNODE_STORE", "MASTER_ADDR", "MASTER_PORT")
        saved = {v: os.environ.get(v) for v in names}
        try:
            os.environ.update(RANK="1", WORLD_SIZE="2", LOCAL_RANK="1")
            for v in ("HIRNODE_RENDEZVOUS", "HIRNODE_STORE", "MASTER_ADDR", "MASTER_PORT"):
                os.environ.pop(v, None)
            with self.assertRaises(hirnode.InvalidArgumentError) as e:
                hirnode.Runtime(backend="host")
            self.assertIn("rank 1 of a world of 2", str(e.exception))
            self.assertIn("store=", str(e.exception))
            os.environ.update(RANK="2")
            with self.assertRaises(hirnode.InvalidArgumentError):
                hirnode.Runtime(backend="host")  # a rank outside the world
            os.environ.update(RANK="x")
            with self.assertRaises(hirnode.InvalidArgumentError):
                hirnode.Runtime(backend="host")
            # a store that refuses, or never gives the directory: the C side says which, nothing is left
            class Refusing:
                def set(self, key, value):
                    raise RuntimeError("no")

                def get(self, key):
                    raise TimeoutError(key)
            made_before = set(os.listdir(tempfile.gettempdir()))
            os.environ.update(RANK="0")
            with self.assertRaises(hirnode.Error) as e:
                hirnode.Runtime(backend="host", store=Refusing())
            self.assertIn("rank 0 of a world of 2: the store refused hirnode/rendezvous/2/", str(e.exception))
            left = [f for f in set(os.listdir(tempfile.gettempdir())) - made_before if f.startswith("hirnode-rdv-")]
            self.assertEqual(left, [])
            os.environ.update(RANK="1")
            with self.assertRaises(hirnode.DeadlineError) as e:
                hirnode.Runtime(backend="host", store=Refusing(), timeout=1)
            self.assertIn("rank 1 of a world of 2: the store gave no rendezvous directory", str(e.exception))

            class Waiting(Refusing):  # torch's stores wait within the runtime's deadline
                waited = []

                def wait(self, keys, timeout):
                    self.waited.append((keys, timeout.total_seconds()))
                    raise TimeoutError(keys)
            with self.assertRaises(hirnode.DeadlineError):
                hirnode.Runtime(backend="host", store=Waiting(), timeout=3)
            self.assertEqual(len(Waiting.waited), 1)
            self.assertTrue(Waiting.waited[0][0][0].startswith("hirnode/rendezvous/2/"))
            self.assertEqual(Waiting.waited[0][1], 3)
            # the launcher's address, and no store served there: named within the deadline
            with socket.socket() as so:
                so.bind(("127.0.0.1", 0))
                port = so.getsockname()[1]
            os.environ.update(RANK="1", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port - 1))
            with self.assertRaises(hirnode.Error) as e:
                hirnode.Runtime(backend="host", timeout=1)
            self.assertIn("store 127.0.0.1:%d: no server answered before the deadline" % port, str(e.exception))
            del os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"]
            # kept to itself: launcher=False, or arguments that say how
            os.environ.update(RANK="1")
            with hirnode.Runtime(backend="host", launcher=False) as rt:
                self.assertEqual((rt.size, rt.world), (1, 1))
            with hirnode.Runtime(ranks=2, backend="host") as rt:
                self.assertEqual((rt.size, rt.world), (2, 2))
            # a world of one is no world
            os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0")
            with hirnode.Runtime(backend="host") as rt:
                self.assertEqual((rt.size, rt.world), (1, 1))
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


if __name__ == "__main__":
    unittest.main()
