"""torch tensors bound without copies (skipped without torch): CPU tensors on the host backend
through the attribute fast path and through DLPack, bf16 included; on a machine with GPUs also
CUDA tensors on the cuda backend, torch's streams, and a launch inside torch.cuda.graph."""

import unittest

from helpers import COPY, DTYPES, MLP, OnlyDLPack, backend_runtime, gathered, hirnode, mlp_inputs, np

try:
    import torch
except ImportError:
    torch = None


def to_torch(b, **kw):
    return {k: [torch.from_numpy(a).to(**kw) for a in v] for k, v in b.items()}


@unittest.skipIf(torch is None, "torch is not installed")
class TorchHostTest(unittest.TestCase):
    def setUp(self):
        self.rt = backend_runtime(2)
        self.p = hirnode.Program.parse(MLP, "mlp.hir")

    def tearDown(self):
        self.rt.close()

    def test_cpu_tensors(self):
        b, ref = mlp_inputs(2, 3)
        tb = to_torch(b)
        tb["W1"] = [w.requires_grad_() for w in tb["W1"]]  # read through data_ptr, no autograd involved
        self.rt.run(self.p, tb)
        np.testing.assert_allclose(gathered([y.numpy() for y in tb["Y"]]), ref, rtol=1e-4, atol=1e-4)
        self.rt.launch(self.p, tb)
        self.rt.sync()
        # mixed with NumPy arrays rank by rank
        b, ref = mlp_inputs(2, 4)
        b["X"][1] = torch.from_numpy(b["X"][1])
        self.rt.run(self.p, b)
        np.testing.assert_allclose(gathered(b["Y"]), ref, rtol=1e-4, atol=1e-4)

    def test_torch_loaded_after_the_configuration(self):
        b, ref = mlp_inputs(2, 12)
        self.rt.run(self.p, b)  # NumPy arrays made the configuration
        for cfg in self.rt._s.configs.values():
            for slot in cfg.slots:
                slot.torch_dtype = None  # as if torch had come later
        tb = to_torch(b)
        self.rt.run(self.p, tb)
        np.testing.assert_allclose(gathered([y.numpy() for y in tb["Y"]]), ref, rtol=1e-4, atol=1e-4)

    def test_refusals(self):
        b, _ = mlp_inputs(2)
        cases = [("X", 1, lambda t: t.double(), r"expected f32\[8, 8\], got a torch.Tensor of float64\[8, 8\]: "
                                                 r"wrong dtype"),
                 ("W2", 0, lambda t: t.t(), r"a torch.Tensor of f32\[8, 8\] is not contiguous"),
                 ("Y", 1, lambda t: t.reshape(64), r"expected f32\[8, 8\] \(the rank's shard\), got a torch.Tensor "
                                                   r"of f32\[64\]: wrong shape"),
                 ("X", 0, lambda t: t.to(torch.bfloat16), r"expected f32\[8, 8\], got a torch.Tensor of bf16")]
        for name, rank, change, pattern in cases:
            tb = to_torch(b)
            tb[name][rank] = change(tb[name][rank])
            with self.subTest(name=name), self.assertRaises(hirnode.BindingError) as cm:
                self.rt.launch(self.p, tb)
            self.assertRegex(str(cm.exception), "binding '%s' on rank %d: %s" % (name, rank, pattern))
        if hasattr(torch, "device") and torch.cuda.is_available():
            tb = to_torch(b)
            tb["X"][0] = tb["X"][0].cuda()
            with self.assertRaises(hirnode.BindingError) as cm:
                self.rt.run(self.p, tb)
            self.assertIn("on cuda:0, but the host backend", str(cm.exception))

    def test_dtypes_and_bf16(self):
        p = hirnode.Program.parse(DTYPES, "dtypes.hir")
        g = torch.Generator().manual_seed(5)
        a = torch.randn(6, generator=g).to(torch.bfloat16)
        h = torch.randn(6, generator=g).half()
        i = torch.randint(-1000, 1000, (6,), generator=g, dtype=torch.int32)
        l64 = torch.randint(-2 ** 40, 2 ** 40, (6,), generator=g, dtype=torch.int64)
        outs = {"C": [torch.full((6,), float("nan")) for _ in range(2)],
                "H2": [torch.full((6,), float("nan")).half() for _ in range(2)],
                "I2": [torch.zeros(6, dtype=torch.int32) for _ in range(2)],
                "L2": [torch.zeros(6, dtype=torch.int64) for _ in range(2)]}
        self.rt.run(p, {"A": [a, a.clone()], "H": [h] * 2, "I": [i] * 2, "L": [l64] * 2, **outs})
        for r in range(2):
            self.assertTrue(torch.equal(outs["C"][r], a.float()))
            self.assertTrue(torch.equal(outs["H2"][r], h + h))
            self.assertTrue(torch.equal(outs["I2"][r], i + i))
            self.assertTrue(torch.equal(outs["L2"][r], l64 + l64))

    def test_through_dlpack(self):
        p = hirnode.Program.parse(COPY.replace("f32", "bf16"), "c.hir")
        x = [torch.randn(64).to(torch.bfloat16) for _ in range(2)]
        y = [torch.zeros(64, dtype=torch.bfloat16) for _ in range(2)]
        self.rt.run(p, {"X": [OnlyDLPack(t) for t in x], "Y": [OnlyDLPack(t) for t in y]})
        for r in range(2):
            self.assertTrue(torch.equal(x[r], y[r]))
        with self.assertRaises(hirnode.BindingError) as cm:
            self.rt.run(p, {"X": [OnlyDLPack(torch.zeros(64, 2, dtype=torch.bfloat16)[:, 0])] * 2, "Y": y})
        self.assertIn("a DLPack tensor (OnlyDLPack) of bf16[64] is not contiguous", str(cm.exception))

    def test_graph_keeps_torch_tensors(self):
        b, ref = mlp_inputs(2, 6)
        tb = to_torch(b)
        g = self.rt.capture(self.p, tb)
        y = tb["Y"]
        del tb
        g.replay()
        self.rt.sync()
        np.testing.assert_allclose(gathered([t.numpy() for t in y]), ref, rtol=1e-4, atol=1e-4)
        g.destroy()


def gpus():
    return torch.cuda.device_count() if torch is not None and torch.cuda.is_available() else 0


@unittest.skipIf(gpus() < 1, "no GPU with torch")
class TorchCudaTest(unittest.TestCase):
    def setUp(self):
        self.n = min(gpus(), 2)
        self.rt = hirnode.Runtime(ranks=self.n, backend="cuda")
        self.p = hirnode.Program.parse(MLP, "mlp.hir")

    def tearDown(self):
        self.rt.close()

    def cuda_bindings(self, seed):
        b, ref = mlp_inputs(self.n, seed)
        return {k: [torch.from_numpy(a).to("cuda:%d" % self.rt.device(r)) for r, a in enumerate(v)]
                for k, v in b.items()}, ref

    def test_on_current_streams(self):
        tb, ref = self.cuda_bindings(1)
        streams = hirnode.current_streams(self.rt)
        self.assertEqual([s.device_index for s in streams], self.rt.devices)
        self.rt.launch(self.p, tb, streams=streams)
        torch.cuda.synchronize()
        self.rt.sync()
        np.testing.assert_allclose(gathered([y.cpu().numpy() for y in tb["Y"]]), ref, rtol=1e-3, atol=1e-3)
        side = [torch.cuda.Stream(device=d) for d in self.rt.devices]
        tb, ref = self.cuda_bindings(2)
        torch.cuda.synchronize()  # the copies to the devices ran on torch's streams, not these
        self.rt.launch(self.p, tb, streams=side)
        self.rt.sync()
        np.testing.assert_allclose(gathered([y.cpu().numpy() for y in tb["Y"]]), ref, rtol=1e-3, atol=1e-3)

    def test_refusals(self):
        tb, _ = self.cuda_bindings(1)
        tb["X"][0] = tb["X"][0].cpu()
        with self.assertRaises(hirnode.BindingError) as cm:
            self.rt.launch(self.p, tb)
        self.assertIn("on cpu, but rank 0 runs on cuda:%d" % self.rt.device(0), str(cm.exception))
        if self.n > 1:
            tb, _ = self.cuda_bindings(1)
            tb["X"][0] = tb["X"][0].to("cuda:%d" % self.rt.device(1))
            with self.assertRaises(hirnode.BindingError) as cm:
                self.rt.launch(self.p, tb)
            self.assertIn("on cuda:%d, but rank 0 runs on cuda:%d" % (self.rt.device(1), self.rt.device(0)),
                          str(cm.exception))
            other = [torch.cuda.current_stream(self.rt.device(1))] * self.n
            with self.assertRaises(hirnode.InvalidArgumentError):
                self.rt.launch(self.p, self.cuda_bindings(1)[0], streams=other)

    def test_inside_torch_cuda_graph(self):
        """One rank: torch ops, a hirnode launch on the capturing stream, torch ops; replayed."""
        rt = hirnode.Runtime(ranks=1, backend="cuda")
        try:
            p = hirnode.Program.parse(COPY, "c.hir")
            x = torch.randn(64, device="cuda")
            y = torch.empty(64, device="cuda")
            rt.launch(p, {"X": x * 2, "Y": y}, streams=hirnode.current_streams(rt))  # prepares it
            rt.sync()
            torch.cuda.synchronize()
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, capture_error_mode="thread_local"):
                doubled = x * 2
                rt.launch(p, {"X": doubled, "Y": y}, streams=hirnode.current_streams(rt))
                out = y + 1
            rt.sync()
            for _ in range(3):
                x.copy_(torch.randn(64, device="cuda"))
                y.fill_(float("nan"))
                g.replay()
                torch.cuda.synchronize()
                self.assertTrue(torch.equal(out, x * 2 + 1))
        finally:
            rt.close()


if __name__ == "__main__":
    unittest.main()
