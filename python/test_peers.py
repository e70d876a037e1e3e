"""Tests of peers.py (`make python-test`), on the CPU: every peer's semantics
against a naive implementation (peers.py check, the Triton kernels left to
the GPU machine), the serve protocol that `sampviz bench --peers` speaks on a
small inputs file of the bench's layout, and the hello line that says why
when torch does not import. They need torch and skip without it, unless
SAMPVIZ_REQUIRE_PYTHON=1.
"""

import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import testenv  # noqa: E402

try:
    import torch
except ImportError:  # pragma: no cover - depends on the machine
    torch = None

SCRIPT = os.path.join(HERE, "peers.py")


def setUpModule():
    global peers
    testenv.require_torch(torch)
    import peers


def write_safetensors(path, tensors, meta):
    """A safetensors file of the bench's layout (engine/cuda/bench_inputs.go),
    by sampviz_capture's writer."""
    import sampviz_capture

    with open(path, "wb") as f:
        f.write(sampviz_capture.to_safetensors(tensors, meta))


class CheckTest(unittest.TestCase):
    def test_every_peer_against_its_naive_rule(self):
        for name, ok, detail in peers.run_checks("cpu", trials=20000, seed=11):
            with self.subTest(name):
                self.assertTrue(ok, "%s: %s" % (name, detail))


class LoadTest(unittest.TestCase):
    def test_round_trip(self):
        g = torch.Generator().manual_seed(3)
        want = {"logits": (torch.randn(2, 3, 5, generator=g)).to(torch.bfloat16),
                "drafts": torch.randint(0, 5, (2, 3, 4), generator=g, dtype=torch.int32),
                "f": torch.randn(4, generator=g)}
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "in.safetensors")
            write_safetensors(path, want, {"op": "argmax", "sets": "2"})
            got, meta = peers.load_safetensors(path)
        self.assertEqual(meta, {"op": "argmax", "sets": "2"})
        for name, t in want.items():
            with self.subTest(name):
                self.assertEqual(got[name].dtype, t.dtype)
                self.assertTrue(torch.equal(got[name], t))

    def test_bad_dtype_names_file_and_tensor(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "bad.safetensors")
            h = json.dumps({"x": {"dtype": "F8_E4M3", "shape": [1], "data_offsets": [0, 1]}}).encode()
            with open(path, "wb") as f:
                f.write(struct.pack("<Q", len(h)) + h + b"\0")
            with self.assertRaisesRegex(ValueError, "bad.safetensors: tensor x has dtype F8_E4M3"):
                peers.load_safetensors(path)


class ServeTest(unittest.TestCase):
    def serve(self, requests, env=None):
        res = subprocess.run([sys.executable, SCRIPT, "serve", "--device", "cpu", "--no-compile"],
                             input="".join(json.dumps(r) + "\n" for r in requests), capture_output=True,
                             text=True, env=env, timeout=300)
        self.assertEqual(res.returncode, 0, res.stderr)
        return [json.loads(line) for line in res.stdout.splitlines()]

    def test_cases(self):
        g = torch.Generator().manual_seed(5)
        V = 64
        with tempfile.TemporaryDirectory() as d:
            files = {
                "argmax": ({"logits": (torch.randn(2, 3, V, generator=g) * 2).to(torch.bfloat16)},
                           {"op": "argmax", "dtype": 0, "rows": 3, "vocab": V, "temperature": 0}),
                "sample": ({"logits": (torch.randn(1, 4, V, generator=g) * 2).to(torch.bfloat16)},
                           {"op": "sample", "dtype": 0, "rows": 4, "vocab": V, "temperature": 0.7,
                            "top_k": 5, "top_p": 0.9}),
                "spec_verify": ({"target": (torch.randn(1, 2, 4, V, generator=g) * 2).to(torch.bfloat16),
                                 "drafts": torch.randint(0, V, (1, 2, 3), generator=g, dtype=torch.int32)},
                                {"op": "spec_verify", "dtype": 0, "rows": 2, "vocab": V, "k": 3,
                                 "temperature": 1}),
                "ngram_match": ({"x": torch.zeros(1, dtype=torch.int32)},
                                {"op": "ngram_match", "dtype": 2, "rows": 1, "prompt_len": 8, "gen_len": 4}),
            }
            reqs = []
            for name, (tensors, case) in files.items():
                path = os.path.join(d, name + ".safetensors")
                write_safetensors(path, tensors, {"op": case["op"], "sets": "1"})
                reqs.append({"name": name, "shape": "tiny", "case": case, "inputs": path, "iters": 3, "warmup": 1})
            lines = self.serve(reqs)
        hello, replies = lines[0], lines[1:]
        self.assertTrue(hello["ready"], hello)
        self.assertEqual(hello["device"], "cpu")
        self.assertEqual(len(replies), len(reqs))
        want = {  # per case: the peers timed, and those skipped
            "argmax": ({"torch"}, {"torch.compile"}),
            "sample": ({"torch"}, {"torch.compile", "triton"}),
            "spec_verify": ({"torch"}, {"torch.compile", "triton"}),
            "ngram_match": (set(), {"torch", "torch.compile", "triton"}),
        }
        for rep in replies:
            with self.subTest(rep["name"]):
                timed = {p["peer"] for p in rep["peers"] if p.get("median_us", 0) > 0}
                skipped = {p["peer"] for p in rep["peers"] if p.get("skipped")}
                self.assertEqual(timed, want[rep["name"]][0], rep)
                self.assertTrue(want[rep["name"]][1] <= skipped, rep)
        triton = [p for p in replies[1]["peers"] if p["peer"] == "triton"][0]
        self.assertEqual(triton["skipped"], "no Triton peer")

    def test_without_torch_the_hello_says_why(self):
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "torch.py"), "w") as f:
                f.write("raise ImportError('No module named torch (a test stand-in)')\n")
            env = dict(os.environ, PYTHONPATH=d)
            lines = self.serve([], env=env)
        self.assertEqual(lines, [{"ready": False,
                                  "why": "import torch failed: No module named torch (a test stand-in)"}])


if __name__ == "__main__":
    unittest.main()


class CompileTest(unittest.TestCase):
    """The compiled peers' path with a stand-in torch.compile (Debian's
    torch has none): its time is reported apart, and a compile that fails
    is that peer's error while the other peers of the case go on."""

    def setUp(self):
        self.had = hasattr(torch, "compile")
        self.old = getattr(torch, "compile", None)

    def tearDown(self):
        if self.had:
            torch.compile = self.old
        else:
            del torch.compile

    def server(self):
        args = argparse.Namespace(
            device="cpu", no_compile=False, no_triton=True, compile_budget=100, compile_timeout=40, ops="", match="")
        return peers.Server(args)

    def case(self):
        g = torch.Generator().manual_seed(2)
        inputs = {"logits": (torch.randn(1, 3, 16, generator=g) * 2).to(torch.bfloat16)}
        return peers.case_peers({"op": "softmax", "rows": 3, "vocab": 16, "temperature": 0.7}, inputs, "cpu")

    def test_compiled(self):
        compiled = []

        def fake_compile(fn, dynamic=None):
            compiled.append(fn)
            return fn

        torch.compile = fake_compile
        sets, ps = self.case()
        s = self.server()
        res = [s.time_peer(p, sets, 3, 1) for p in ps]
        self.assertEqual(compiled, [peers.softmax_peer])
        self.assertEqual(res[1]["peer"], "torch.compile")
        self.assertGreater(res[1]["median_us"], 0)
        self.assertIn("compile_s", res[1])

    def test_compile_failure_is_that_peers_error(self):
        def fake_compile(fn, dynamic=None):
            def broken(*a):
                raise RuntimeError("Inductor said no\nmore lines")
            return broken

        torch.compile = fake_compile
        sets, ps = self.case()
        res = [self.server().time_peer(p, sets, 3, 1) for p in ps]
        self.assertEqual(res[1]["error"], "compile failed: RuntimeError: Inductor said no")
        self.assertGreater(res[0]["median_us"], 0)  # the eager peer was timed all the same
