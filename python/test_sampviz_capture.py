"""Tests of sampviz_capture (`make python-test`): every plain call round-trips
through `sampviz check` with the verdict it should get, live capture reaches
a running `sampviz serve`, and the engine hooks work on the stand-ins of
standins.py. They need torch (Debian's python3-torch, `make python-deps`)
and skip without it, unless SAMPVIZ_REQUIRE_PYTHON=1 makes that a failure;
SAMPVIZ_BIN names the sampviz binary (else `go build` makes one).
"""

import io
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request
import warnings
import zipfile
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import testenv  # noqa: E402

try:
    import torch
except ImportError:  # pragma: no cover - depends on the machine
    torch = None

SAMPVIZ = None


def setUpModule():
    global SAMPVIZ, sv, gpu, standins
    testenv.require_torch(torch)
    import gpu_capture_check as gpu
    import sampviz_capture as sv
    import standins
    SAMPVIZ = testenv.sampviz_bin()


def check(path, *flags):
    res = subprocess.run([SAMPVIZ, "check", "--backend", "cpu", *flags, str(path)], capture_output=True, text=True)
    return res.returncode, res.stdout + res.stderr


class Case(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="sampviz-capture-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        for key in ("SAMPVIZ_URL", "SAMPVIZ_TOKEN", "SAMPVIZ_DIR"):
            self.addCleanup(os.environ.pop, key, None)
            os.environ.pop(key, None)
        sv._warned.clear()
        sv._server.down_until.clear()
        seed = zlib.crc32(self.id().encode()) + int(os.environ.get("SAMPVIZ_TEST_SEED", "0"))
        self.gen = torch.Generator().manual_seed(seed)
        torch.manual_seed(seed)

    def logits(self, b=4, v=12, scale=2.0):
        return torch.randn(b, v, generator=self.gen) * scale

    def assertVerdict(self, path, want, *flags):
        rc, out = check(path, *flags)
        self.assertEqual(rc, want, f"sampviz check {os.path.basename(str(path))}: exit {rc}, want {want}\n{out}")
        return out

    def files(self, folder=None):
        folder = folder or self.dir
        return sorted(os.path.join(folder, f) for f in os.listdir(folder) if f.endswith(".safetensors"))


def renorm_probs(logits, temperature, top_k, top_p, min_p):
    right, _ = gpu.kept_sets(logits, temperature, top_k, top_p, min_p)
    p = (logits.double() / temperature).masked_fill(~right, float("-inf")).softmax(dim=-1)
    return p.float()


class TestWriter(Case):
    def test_layout(self):
        body = sv.to_safetensors({"logits": torch.tensor([[1.0, -2.0]], dtype=torch.bfloat16),
                                  "top_k": torch.tensor([5], dtype=torch.int64)}, {"op": "renorm"})
        n = int.from_bytes(body[:8], "little")
        self.assertEqual(n % 8, 0)
        header = json.loads(body[8:8 + n])
        self.assertEqual(header["__metadata__"], {"op": "renorm"})
        self.assertEqual(header["logits"], {"dtype": "BF16", "shape": [1, 2], "data_offsets": [0, 4]})
        self.assertEqual(header["top_k"], {"dtype": "I64", "shape": [1], "data_offsets": [4, 12]})
        self.assertEqual(body[8 + n:8 + n + 4], bytes([0x80, 0x3F, 0x00, 0xC0]))  # bf16 1 and -2

    def test_every_dtype_round_trips(self):
        tensors = {str(d).split(".")[1]: (torch.arange(6).reshape(2, 3) % 2).to(d) for d in sv._DTYPES}
        path = sv.save(tensors, {"source": "é"}, out=os.path.join(self.dir, "all.safetensors"))
        back, meta = sv.load(path)
        self.assertEqual(meta, {"source": "é"})
        for k, t in tensors.items():
            self.assertTrue(torch.equal(back[k], t), k)


class TestPlainCalls(Case):
    """Each op: a right output passes (exit 0), a planted fault fails (1)."""

    def test_softmax(self):
        x = self.logits()
        good = torch.softmax(x / 0.7, dim=-1)
        self.assertVerdict(sv.softmax(x, good, temperature=0.7, out=self.dir), 0)
        bad = good.clone()
        bad[1, [0, 1]] = bad[1, [1, 0]]
        self.assertVerdict(sv.softmax(x, bad, temperature=0.7, out=self.dir), 1)

    def test_renorm(self):
        x = self.logits(6, 40)
        args = dict(temperature=0.8, top_k=20, top_p=0.9, min_p=0.05)
        good = renorm_probs(x, 0.8, 20, 0.9, 0.05)
        self.assertVerdict(sv.renorm(x, good, out=self.dir, **args), 0)
        bad = good.clone()
        top2 = bad[3].topk(2).indices
        bad[3, top2] = bad[3, top2.flip(0)]  # the two likeliest tokens swapped
        self.assertVerdict(sv.renorm(x, bad, out=self.dir, **args), 1)

    def test_sample_many_draws(self):
        x = self.logits(3, 10)
        probs = renorm_probs(x, 1.0, 4, 1.0, 0.0)
        draws = torch.multinomial(probs, 4000, replacement=True, generator=self.gen)
        self.assertVerdict(sv.sample(x, draws, top_k=4, out=self.dir), 0, "--draws", "2000")
        unfiltered = torch.multinomial(torch.softmax(x, -1), 4000, replacement=True, generator=self.gen)
        out = self.assertVerdict(sv.sample(x, unfiltered, top_k=4, out=self.dir), 1, "--draws", "2000")
        self.assertIn("zero reference mass", out)

    def test_argmax(self):
        x = self.logits()
        tokens = x.argmax(dim=-1).to(torch.int32)
        self.assertVerdict(sv.argmax(x, tokens, out=self.dir), 0)
        tokens[2] = (tokens[2] + 1) % x.shape[1]
        self.assertVerdict(sv.argmax(x, tokens, out=self.dir), 1)

    def test_spec_verify_trials(self):
        b, k, v = 2, 2, 6
        target = torch.randn(b, k + 1, v, generator=self.gen)
        q = torch.softmax(torch.randn(b, k, v, generator=self.gen), dim=-1)
        drafts = torch.multinomial(q.reshape(-1, v), 1, generator=self.gen).reshape(b, k)
        trials = chain_trials(torch.softmax(target, -1), q, drafts, 3000, self.gen)
        self.assertVerdict(sv.spec_verify(target, drafts, q, spec_trials=trials, out=self.dir), 0, "--trials", "500")
        broken = trials.clone()
        t, r, i = (broken[:, :, :k] != drafts).nonzero()[0].tolist()  # a trial rejected at position i < K
        broken[t, r, k] = drafts[r, 0]  # a token after the -1 fill
        self.assertVerdict(sv.spec_verify(target, drafts, q, spec_trials=broken, out=self.dir), 1, "--trials", "500")

    def test_ngram_match(self):
        ids = torch.tensor([[1, 2, 3, 4, 5, 6, 7, 8], [3, 3, 3, 3, 0, 0, 0, 0]])
        pre = torch.tensor([[9, 2, 3, 0], [7, 8, 0, 0]])
        args = dict(max_draft_tokens=3, out=self.dir)
        good = torch.tensor([[4, 5, 6], [-1, -1, -1]])
        self.assertVerdict(sv.ngram_match(ids, torch.tensor([8, 4]), pre, torch.tensor([3, 2]), good, **args), 0)
        self.assertVerdict(sv.ngram_match(ids, torch.tensor([8, 4]), pre, torch.tensor([3, 2]), good + torch.tensor([[0, 0, 1], [0, 0, 0]]), **args), 1)

    def test_logits_gate(self):
        golden = self.logits().float()
        path = sv.logits_gate(golden, {"bf16": golden.bfloat16(), "eager": golden.clone()}, out=self.dir)
        tensors, meta = sv.load(path)
        self.assertEqual(sorted(tensors), ["logits", "logits@bf16", "logits@eager"])
        self.assertEqual(meta["op"], "logits_gate")
        self.assertVerdict(path, 0)
        # A real top-1 flip: row 1's best token drops far below another.
        bad = golden.clone()
        best = int(bad[1].argmax())
        bad[1, best] = bad[1].min() - 10
        self.assertVerdict(sv.logits_gate(golden, {"graph": bad}, out=self.dir), 1)
        with self.assertRaisesRegex(ValueError, "mode 'a b' is not a name"):
            sv.logits_gate(golden, {"a b": golden}, out=self.dir)

    def test_named_output(self):
        x = self.logits()
        path = sv.softmax(x, torch.softmax(x, -1), name="eager", out=self.dir)
        tensors, _ = sv.load(path)
        self.assertEqual(sorted(tensors), ["logits", "probs@eager"])
        self.assertVerdict(path, 0)

    def test_file_name_and_environment_folder(self):
        os.environ["SAMPVIZ_DIR"] = os.path.join(self.dir, "env")
        self.assertTrue(sv.argmax(self.logits()).startswith(os.environ["SAMPVIZ_DIR"]))
        exact = os.path.join(self.dir, "mine.safetensors")
        self.assertEqual(sv.argmax(self.logits(), out=exact), exact)


def processed_logprobs(logits, temperature, top_k):
    """vLLM's processed_logprobs of rows with one top-k: float32 logits / T
    (greedy rows / 1), the tokens below the k-th -inf, log_softmax."""
    t = torch.where(temperature < 1e-5, torch.ones_like(temperature), temperature)
    z = logits.float() / t.unsqueeze(1)
    kth = z.topk(top_k, dim=-1).values[:, -1:]
    return z.masked_fill(z < kth, float("-inf")).log_softmax(dim=-1)


class TestLogprobs(Case):
    """Logprobs beside a plain call: raw and processed, every token's and a
    top-N, each passing as what it is and failing as what it is not."""

    def setUp(self):
        super().setUp()
        self.x = self.logits(4, 40)
        self.t = torch.tensor([0.7, 1.0, 0.0, 1.3])
        self.tokens = self.x.argmax(dim=-1)

    def call(self, **kw):
        return sv.sample(self.x, tokens=self.tokens, temperature=self.t, top_k=8, out=self.dir, **kw)

    def test_raw_and_processed(self):
        raw = torch.log_softmax(self.x.float(), dim=-1)
        self.assertVerdict(self.call(logprobs=raw, logprobs_kind="raw"), 0)
        self.assertVerdict(self.call(logprobs=raw), 0, "--logprobs-kind", "raw")
        proc = processed_logprobs(self.x, self.t, 8)
        self.assertVerdict(self.call(logprobs=proc, logprobs_kind="processed_logprobs"), 0)
        values, ids = proc.topk(5, dim=-1)
        path = self.call(logprobs=values, logprob_token_ids=ids, logprobs_kind="processed")
        tensors, meta = sv.load(path)
        self.assertEqual(meta["logprobs_kind"], "processed")
        self.assertEqual(tuple(tensors["logprob_token_ids"].shape), (4, 5))
        self.assertVerdict(path, 0)

    def test_named(self):
        proc = processed_logprobs(self.x, self.t, 8)
        path = self.call(logprobs=proc, logprobs_kind="processed", name="engine")
        tensors, meta = sv.load(path)
        self.assertIn("logprobs@engine", tensors)
        self.assertEqual(meta["logprobs_kind@engine"], "processed")
        self.assertVerdict(path, 0)

    def test_confusion_and_temperature(self):
        proc = processed_logprobs(self.x, self.t, 8)
        out = self.assertVerdict(self.call(logprobs=proc, logprobs_kind="raw"), 1)
        self.assertIn("passes as processed logprobs", out)
        hot = processed_logprobs(self.x, self.t * 1.1, 8)
        out = self.assertVerdict(self.call(logprobs=hot, logprobs_kind="processed"), 1)
        self.assertIn("logprobs off", out)
        self.assertNotIn("passes as", out)

    def test_bad_input(self):
        raw = torch.log_softmax(self.x.float(), dim=-1)
        with self.assertRaisesRegex(ValueError, r"logprobs has shape \(4, 5\), but it must be \[4, 40\]"):
            self.call(logprobs=raw[:, :5])
        with self.assertRaisesRegex(ValueError, "logprob_token_ids were given without logprobs"):
            self.call(logprob_token_ids=torch.zeros(4, 5, dtype=torch.int64))
        with self.assertRaisesRegex(ValueError, "logprobs_kind 'raw_logits' must be 'raw' or 'processed'"):
            self.call(logprobs=raw, logprobs_kind="raw_logits")
        with self.assertRaisesRegex(TypeError, "logprob_token_ids has dtype torch.float32"):
            self.call(logprobs=raw[:, :5], logprob_token_ids=raw[:, :5])
        self.assertEqual(self.files(), [])
        values, ids = raw.topk(5, dim=-1)
        ids[2, 4] = ids[2, 1]
        path = sv.save({"logits": self.x, "logprobs": values, "logprob_token_ids": ids}, out=self.dir)
        out = self.assertVerdict(path, 2)
        self.assertIn('tensor "logprob_token_ids": row 2 holds token', out)
        self.assertIn("a top-N names each token once", out)
        path = sv.save({"logits": self.x, "logprobs": raw}, {"logprobs_kind": "sorted"}, out=self.dir)
        self.assertIn("logprobs_kind must be raw or processed", self.assertVerdict(path, 2))


def chain_trials(p, q, drafts, n, gen):
    """n trials of chain speculative sampling: [n, B, K+1], -1 filled."""
    b, k, v = q.shape
    out = torch.full((n, b, k + 1), -1, dtype=torch.int64)
    u = torch.rand(n, b, k, generator=gen)
    for t in range(n):
        for r in range(b):
            for i in range(k + 1):
                if i == k:
                    out[t, r, i] = torch.multinomial(p[r, k], 1, generator=gen)
                    break
                d = drafts[r, i]
                if u[t, r, i] <= min(1.0, float(p[r, i, d] / q[r, i, d])):
                    out[t, r, i] = d
                    continue
                residual = (p[r, i] - q[r, i]).clamp(min=0)
                out[t, r, i] = torch.multinomial(residual / residual.sum(), 1, generator=gen)
                break
    return out


class TestBadInput(Case):
    def test_refused_in_one_sentence(self):
        x = self.logits(2, 5)
        cases = [
            (ValueError, "probs has shape (2, 6), but it must be [2, 5] (B of logits, V of logits)",
             lambda: sv.renorm(x, torch.zeros(2, 6), top_p=0.9, out=self.dir)),
            (ValueError, "probs is on meta, but logits is on cpu: every tensor of one capture must be on one device",
             lambda: sv.softmax(x, torch.empty(2, 5, device="meta"), out=self.dir)),
            (TypeError, "logits has dtype torch.int64, but logits must be a float tensor",
             lambda: sv.softmax(torch.zeros(2, 5, dtype=torch.int64), out=self.dir)),
            (TypeError, "probs has dtype torch.int16, which a dump cannot hold",
             lambda: sv.softmax(x, torch.zeros(2, 5, dtype=torch.int16), out=self.dir)),
            (TypeError, "tokens is a list, not a torch.Tensor", lambda: sv.argmax(x, [1, 2], out=self.dir)),
            (ValueError, "top_p has shape (3,), but it must be one value, or one per row of logits (2)",
             lambda: sv.renorm(x, top_p=torch.tensor([0.9, 0.8, 0.7]), out=self.dir)),
            (ValueError, "draft_tokens has shape (2, 3), but it must be [2, 2] (B of target_logits, K of target_logits)",
             lambda: sv.spec_verify(torch.zeros(2, 3, 5), torch.zeros(2, 3, dtype=torch.int64), out=self.dir)),
            (ValueError, "output name 'a/b' must be letters, digits", lambda: sv.softmax(x, name="a/b", out=self.dir)),
            (ValueError, "logits has shape (5,), but it must be [B, V] with B and V at least 1 (add a batch dimension: logits[None])",
             lambda: sv.softmax(torch.zeros(5), out=self.dir)),
        ]
        for exc, msg, call in cases:
            with self.subTest(msg=msg):
                with self.assertRaises(exc) as ctx:
                    call()
                self.assertIn(msg, str(ctx.exception))
                self.assertEqual(str(ctx.exception).count(". "), 0, "one sentence")
        self.assertEqual(self.files(), [], "nothing written")


class Server:
    """`sampviz serve` on a free loopback port, with a token."""

    def __init__(self, data, token="s3cret"):
        self.token = token
        self.proc = subprocess.Popen([SAMPVIZ, "serve", "--backend", "cpu", "--listen", "127.0.0.1:0", "--data", data,
                                      "--token", token], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        line = self.proc.stdout.readline()
        m = re.search(r"open (http://[^/\s]+)/", line)
        if not m:
            self.proc.kill()
            raise RuntimeError(f"sampviz serve did not start: {line}{self.proc.stdout.read()}")
        self.url = m.group(1)

    def get(self, path):
        req = urllib.request.Request(self.url + path, headers={"Authorization": "Bearer " + self.token})
        with urllib.request.urlopen(req, timeout=10) as res:
            return json.loads(res.read())

    def put(self, name, body):
        req = urllib.request.Request(self.url + "/api/runs/" + name, data=body, method="PUT",
                                     headers={"Authorization": "Bearer " + self.token})
        try:
            with urllib.request.urlopen(req, timeout=10) as res:
                return res.status, json.loads(res.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    def wait(self, run_url):
        run_id = run_url.rstrip("/").rsplit("/", 1)[1]
        deadline = time.time() + 60
        while time.time() < deadline:
            run = self.get("/api/runs/" + run_id)
            if run["state"] in ("done", "failed"):
                return run
            time.sleep(0.2)
        raise AssertionError(f"run {run_id} did not finish")

    def close(self):
        self.proc.terminate()
        self.proc.wait(10)
        self.proc.stdout.close()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class TestLive(Case):
    def setUp(self):
        super().setUp()
        self.server = Server(os.path.join(self.dir, "data"))
        self.addCleanup(self.server.close)

    def test_capture_arrives_and_is_judged(self):
        os.environ.update(SAMPVIZ_URL=self.server.url, SAMPVIZ_TOKEN=self.server.token)
        x = self.logits(4, 30)
        where = sv.renorm(x, renorm_probs(x, 1.0, 0, 0.9, 0.0), top_p=0.9, out=os.path.join(self.dir, "fallback"))
        self.assertTrue(where.startswith(self.server.url + "/runs/"), where)
        run = self.server.wait(where)
        self.assertEqual(run["state"], "done")
        self.assertTrue(run["verdict"]["pass"], run)
        self.assertFalse(os.path.exists(os.path.join(self.dir, "fallback")), "nothing went to the folder")

    def test_wrong_token_falls_back_to_the_folder(self):
        os.environ.update(SAMPVIZ_URL=self.server.url, SAMPVIZ_TOKEN="wrong")
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            where = sv.argmax(self.logits(), out=self.dir)
        self.assertTrue(os.path.isfile(where))
        self.assertTrue(any("SAMPVIZ_TOKEN" in str(x.message) for x in w), [str(x.message) for x in w])

    def test_pt_uploads(self):
        path = os.path.join(self.dir, "capture.pt")
        x = self.logits(2, 8)
        torch.save({"logits": x, "probs": torch.softmax(x, -1)}, path)
        with open(path, "rb") as f:
            status, run = self.server.put("capture.pt", f.read())
        self.assertEqual(status, 201, run)
        self.assertTrue(self.server.wait(run["url"])["verdict"]["pass"])
        status, answer = self.server.put("evil.pt", evil_pt())
        self.assertEqual(status, 400)
        self.assertIn("the pickle asks for os.system", answer["error"])


def evil_pt(touch="pwn"):
    """A torch.save archive whose pickle calls os.system("touch ...")."""
    cmd = f"touch {touch}".encode()
    pkl = b"\x80\x02cos\nsystem\nX" + len(cmd).to_bytes(4, "little") + cmd + b"\x85R."
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("archive/data.pkl", pkl)
    return buf.getvalue()


class TestServerDown(Case):
    def test_engine_keeps_running(self):
        os.environ["SAMPVIZ_URL"] = f"http://127.0.0.1:{free_port()}"
        standins.install_vllm()
        self.addCleanup(standins.remove, "vllm")
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            with sv.vllm_capture(out=self.dir) as cap:
                sampler = sys.modules["vllm.v1.sample.sampler"].Sampler()
                for _ in range(3):
                    out = sampler(self.logits(), vllm_metadata(4))
                    self.assertEqual(tuple(out.sampled_token_ids.shape), (4, 1))
        down = [x for x in w if "does not answer" in str(x.message)]
        self.assertEqual(len(down), 1, [str(x.message) for x in w])
        self.assertEqual(len(self.files()), 3)
        self.assertEqual(len(cap.written), 3)


class TestTorchSave(Case):
    def test_pt_file_and_sglang_folder_in_check(self):
        x = self.logits(3, 9)
        path = os.path.join(self.dir, "dump.pt")
        torch.save({"__metadata__": {"op": "renorm"}, "logits": x.to(torch.bfloat16), "top_k": torch.tensor(3),
                    "probs": renorm_probs(x.to(torch.bfloat16).float(), 1.0, 3, 1.0, 0.0)}, path)
        self.assertVerdict(path, 0)
        folder = os.path.join(self.dir, "sglang_dump_1")
        os.makedirs(folder)
        for i, (name, value) in enumerate([("next_token_logits", x), ("batch_next_token_ids", x.argmax(-1)),
                                           ("temperatures", torch.zeros(3, 1))]):
            torch.save(value, os.path.join(folder, f"forward_pass_id=1___rank=0___name={name}___dump_index={i}.pt"))
        self.assertVerdict(folder, 0)
        evil, touched = os.path.join(self.dir, "evil.pt"), os.path.join(self.dir, "pwned")
        with open(evil, "wb") as f:
            f.write(evil_pt(touched))
        out = self.assertVerdict(evil, 2)
        self.assertIn("evil.pt: archive/data.pkl: the pickle asks for os.system", out)
        self.assertFalse(os.path.exists(touched), "nothing in the pickle was run")


# --- engines ------------------------------------------------------------------

class TestHuggingFace(Case):
    def setUp(self):
        super().setUp()
        standins.install_transformers()
        self.addCleanup(standins.remove, "transformers")
        self.utils = sys.modules["transformers.generation.utils"]
        self.prompts = torch.randint(0, 32, (6, 3), generator=self.gen)
        self.config = dict(do_sample=True, temperature=1.5, top_k=12, top_p=0.9, min_p=0.1, max_new_tokens=5)

    def test_processor_dumps_pass(self):
        model = self.utils.GenerationMixin()
        with sv.hf_capture(model, steps=range(3), out=self.dir) as cap:
            model.generate(self.prompts, **self.config)
        self.assertNotIn("_get_logits_processor", vars(model), "removed")
        self.assertEqual(len(cap.written), 3)
        for path in cap.written:
            tensors, meta = sv.load(path)
            self.assertEqual(meta["op"], "renorm")
            self.assertAlmostEqual(float(tensors["min_p"]), 0.1, places=6)
            self.assertEqual(int(tensors["top_k"]), 12)
            self.assertTrue(torch.allclose(float(tensors["temperature"]) * torch.ones(1), torch.tensor([1.5])))
            self.assertVerdict(path, 0)

    def test_greedy_is_a_softmax_dump(self):
        model = self.utils.GenerationMixin()
        with sv.hf_capture(model, out=self.dir) as cap:
            model.generate(self.prompts, max_new_tokens=2)
        self.assertEqual(len(cap.written), 2)
        self.assertEqual(sv.load(cap.written[0])[1]["op"], "softmax")
        self.assertVerdict(cap.written[0], 0)

    def test_wrong_min_p_fails_on_exactly_the_rows_it_changes(self):
        lp = sys.modules["transformers.generation.logits_process"]
        model = self.utils.GenerationMixin(scale=2.0)
        undo = gpu.swap_min_p(model, gpu.wrong_min_p_class(lp.MinPLogitsWarper), lp.TemperatureLogitsWarper, lp.MinPLogitsWarper)
        with sv.hf_capture(model, out=self.dir) as cap:
            model.generate(self.prompts, **self.config)
        undo()
        changed = 0
        for path in cap.written:
            want = gpu.expected_failing_rows(path)
            changed += len(want)
            rc, report = gpu.judge(SAMPVIZ, path)
            self.assertEqual(gpu.failing_rows(report), want, path)
            self.assertEqual(rc, 1 if want else 0)
        self.assertGreater(changed, 0, "the wrong min-p changed no row: the test proves nothing")
        self.assertLess(changed, len(cap.written) * self.prompts.shape[0], "it changed every row")

    def test_speculative_trials(self):
        target, draft = self.utils.GenerationMixin(vocab=12, seed=1, scale=1.5), self.utils.GenerationMixin(vocab=12, seed=2, scale=1.5)
        ids = torch.randint(0, 12, (1, 2), generator=self.gen)
        with sv.hf_speculative_capture(trials=2000, steps=range(2), out=self.dir) as cap:
            for _ in range(3):
                target.assisted_step(draft, ids, k=3)
        self.assertEqual(len(cap.written), 2)
        tensors, _ = sv.load(cap.written[0])
        self.assertEqual(tuple(tensors["spec_trials"].shape), (2001, 1, 4))
        for path in cap.written:
            self.assertVerdict(path, 0)

    def test_speculative_fault_is_found(self):
        def residual_from_p(candidate_input_ids, candidate_logits, candidate_length, new_logits, is_done_candidate):
            return _from_p(candidate_input_ids, candidate_logits, candidate_length, new_logits)

        self.utils._speculative_sampling = residual_from_p
        target, draft = self.utils.GenerationMixin(vocab=8, seed=1, scale=2.0), self.utils.GenerationMixin(vocab=8, seed=5, scale=2.0)
        with sv.hf_speculative_capture(trials=4000, out=self.dir) as cap:
            target.assisted_step(draft, torch.tensor([[1, 2]]), k=2)
        self.assertVerdict(cap.written[0], 1)

    def test_other_internals_are_refused(self):
        self.utils._speculative_sampling = lambda input_ids, scores: None
        with self.assertRaises(RuntimeError) as ctx:
            sv.hf_speculative_capture()
        self.assertIn("cannot hook transformers stand-in: transformers.generation.utils._speculative_sampling is missing or takes other arguments", str(ctx.exception))


def _from_p(candidate_input_ids, candidate_logits, k, new_logits):
    """Speculative sampling that resamples from p instead of max(p - q, 0)."""
    drafts = candidate_input_ids[:, -k:]
    q, p = candidate_logits.softmax(-1), new_logits.softmax(-1)
    for i in range(k):
        d = int(drafts[0, i])
        if float(torch.rand(())) <= float(p[0, i, d] / q[0, i, d]):
            continue
        return torch.cat([drafts[:, :i], torch.multinomial(p[:, i], 1)], dim=-1), i
    return torch.cat([drafts, torch.multinomial(p[:, k], 1)], dim=-1), k


def vllm_metadata(b, v=12, greedy_row=2):
    md_mod = sys.modules["vllm.v1.sample.metadata"]
    lp = sys.modules["vllm.v1.sample.logits_processor"]
    temperature = torch.tensor([0.7, 1.0, 0.0, 1.3][:b])
    return md_mod.SamplingMetadata(
        temperature=temperature, all_greedy=False, all_random=False,
        top_p=torch.tensor([1.0, 0.8, 1.0, 1.0][:b]), top_k=torch.tensor([5, v, v, v][:b], dtype=torch.int32),
        generators={1: torch.Generator().manual_seed(7)}, max_num_logprobs=None,
        logitsprocs=lp.LogitsProcessors(argmax_invariant=[lp.MinPLogitsProcessor([0, 0, 0, 0.2][:b])]))


class TestVLLM(Case):
    def setUp(self):
        super().setUp()
        standins.install_vllm()
        self.addCleanup(standins.remove, "vllm")
        self.sampler_mod = sys.modules["vllm.v1.sample.sampler"]

    def test_sampler(self):
        sampler = self.sampler_mod.Sampler()
        with sv.vllm_capture(steps=[0, 2], out=self.dir) as cap:
            results = [sampler(self.logits(), vllm_metadata(4)) for _ in range(3)]
        self.assertIs(self.sampler_mod.Sampler.forward.__name__, "forward")
        self.assertEqual(len(cap.written), 2)
        tensors, meta = sv.load(cap.written[1])
        self.assertEqual(tensors["temperature"].tolist(), [0.699999988079071, 1.0, 0.0, 1.2999999523162842])
        self.assertEqual(tensors["top_k"].tolist(), [5, 0, 0, 0])
        self.assertEqual(tensors["min_p"].tolist()[3], 0.20000000298023224)
        self.assertEqual(tensors["tokens"].tolist(), results[2].sampled_token_ids[:, 0].tolist())
        self.assertEqual(json.loads(meta["engine_seeds"]), {"1": 7})
        for path in cap.written:
            self.assertVerdict(path, 0)

    def test_rejection_sampler(self):
        spec_meta = sys.modules["vllm.v1.spec_decode.metadata"].SpecDecodeMetadata
        counts, v = [3, 3, 2], 12
        n = sum(counts)
        md = vllm_metadata(3, v)
        logits = self.logits(n + 3, v)
        drafts = torch.randint(0, v, (n,), generator=self.gen, dtype=torch.int32)
        draft_probs = torch.softmax(torch.randn(n, v, generator=self.gen), -1)
        target_idx, bonus_idx, at = [], [], 0
        for c in counts:
            target_idx += list(range(at, at + c))
            bonus_idx.append(at + c)
            at += c + 1
        metadata = spec_meta(draft_token_ids=drafts, num_draft_tokens=counts,
                             cu_num_draft_tokens=torch.tensor(counts).cumsum(0), target_logits_indices=torch.tensor(target_idx),
                             bonus_logits_indices=torch.tensor(bonus_idx), logits_indices=torch.arange(n + 3))
        rs = sys.modules["vllm.v1.sample.rejection_sampler"].RejectionSampler(self.sampler_mod.Sampler())
        with sv.vllm_capture(out=self.dir) as cap:
            out = rs(metadata, draft_probs, logits, md)
        self.assertEqual(len(cap.written), 1, "one spec_verify dump; the bonus call is not a sample dump")
        tensors, meta = sv.load(cap.written[0])
        self.assertEqual(meta["op"], "spec_verify")
        self.assertEqual(meta["skipped_rows"], "2")
        self.assertEqual(tuple(tensors["target_logits"].shape), (2, 4, v))
        self.assertTrue(torch.equal(tensors["target_logits"][1, :3], logits[4:7]))
        self.assertTrue(torch.equal(tensors["target_logits"][1, 3], logits[7]))
        self.assertEqual(tensors["spec_tokens"].tolist(), out.sampled_token_ids[:2].tolist())
        self.assertVerdict(cap.written[0], 0, "--trials", "1")

    def test_sampler_logprobs(self):
        for mode, n, kind in (("raw_logprobs", 5, "raw"), ("processed_logprobs", -1, "processed"), ("processed_logprobs", 3, "processed")):
            with self.subTest(mode=mode, n=n):
                sampler = self.sampler_mod.Sampler(logprobs_mode=mode)
                md = vllm_metadata(4)
                md.max_num_logprobs = n
                with sv.vllm_capture(out=self.dir) as cap:
                    result = sampler(self.logits(), md)
                tensors, meta = sv.load(cap.written[0])
                self.assertEqual(meta["logprobs_kind"], kind)
                if n > 0:
                    self.assertEqual(tuple(tensors["logprobs"].shape), (4, n))
                    # The first column, the sampled token's, is the dump's tokens.
                    self.assertTrue(torch.equal(tensors["logprob_token_ids"], result.logprobs_tensors.logprob_token_ids[:, 1:].long()))
                else:
                    self.assertEqual(tuple(tensors["logprobs"].shape), (4, 12))
                self.assertVerdict(cap.written[0], 0)

    def test_raw_logprobs_of_other_logits(self):
        class Penalty:
            def apply(self, logits):
                return logits - 0.5 * (torch.arange(logits.shape[1]) % 2)

        sampler = self.sampler_mod.Sampler()
        md = vllm_metadata(4)
        md.max_num_logprobs = 2
        md.logitsprocs.non_argmax_invariant = [Penalty()]
        with sv.vllm_capture(out=self.dir) as cap:
            sampler(self.logits(), md)
        tensors, meta = sv.load(cap.written[0])
        self.assertNotIn("logprobs", tensors)
        self.assertIn("before vLLM's penalties and processors", meta["logprobs_note"])
        self.assertVerdict(cap.written[0], 0)

    def test_other_internals_are_refused(self):
        standins.remove("vllm")
        standins.install_vllm(sample_method=False)
        with self.assertRaises(RuntimeError) as ctx:
            sv.vllm_capture()
        self.assertRegex(str(ctx.exception), r"^sampviz_capture cannot hook vLLM stand-in: Sampler has no sample method, unlike vllm/v1/sample/sampler.py")

    def test_a_failing_capture_never_stops_the_engine(self):
        sampler = self.sampler_mod.Sampler()
        md = vllm_metadata(4)
        md.top_k = "not a tensor"  # the capture fails on it; an all-greedy sampler does not read it
        md.all_greedy = True
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            with sv.vllm_capture(out=self.dir):
                out = sampler(self.logits(), md)
        self.assertEqual(tuple(out.sampled_token_ids.shape), (4, 1))
        self.assertEqual(self.files(), [])
        self.assertTrue(any("capture failed and was skipped" in str(x.message) for x in w), [str(x.message) for x in w])


class TestSGLang(Case):
    def setUp(self):
        super().setUp()
        standins.install_sglang()
        self.addCleanup(standins.remove, "sglang")

    def test_sampler(self):
        sampler = sys.modules["sglang.srt.layers.sampler"].Sampler()
        LogitsProcessorOutput = sys.modules["sglang.srt.layers.logits_processor"].LogitsProcessorOutput
        info = sys.modules["sglang.srt.sampling.sampling_batch_info"].SamplingBatchInfo(
            temperatures=torch.tensor([[0.8], [1.0], [1.2]]), top_ps=torch.tensor([1.0, 0.85, 1.0]),
            top_ks=torch.tensor([4, 1 << 30, 1 << 30], dtype=torch.int32), min_ps=torch.zeros(3))
        x = self.logits(3, 16)
        with sv.sglang_capture(out=self.dir) as cap:
            tokens = sampler(LogitsProcessorOutput(next_token_logits=x.clone()), info)
        tensors, meta = sv.load(cap.written[0])
        self.assertTrue(torch.equal(tensors["logits"], x), "the logits before the sampler's in-place softmax")
        self.assertEqual(tensors["top_k"].tolist(), [4, 0, 0])
        self.assertEqual(tensors["tokens"].tolist(), tokens.tolist())
        self.assertEqual(meta["filter_order"], "joint")
        self.assertVerdict(cap.written[0], 0)

    def test_other_internals_are_refused(self):
        sys.modules["sglang.srt.layers.sampler"].Sampler.forward = lambda self, logits, info: None
        with self.assertRaises(RuntimeError) as ctx:
            sv.sglang_capture()
        self.assertIn("Sampler.forward does not take (logits_output, sampling_info)", str(ctx.exception))


if __name__ == "__main__":
    unittest.main()
