"""Tests of fastdeploy_ngram (`make python-test`): dumps written by the Python
port of FastDeploy's CPU ngram_match and hybrid_mtp_ngram pass `sampviz
check`, row for row; a port whose budget ignores the token reserved for every
later row fails on exactly the rows it over-drafts. They need torch (the
writer's) and skip without it, unless SAMPVIZ_REQUIRE_PYTHON=1; SAMPVIZ_BIN
names the sampviz binary (else `go build` makes one).
"""

import copy
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import testenv  # noqa: E402

try:
    import torch  # noqa: F401  (the writer's)
except ImportError:  # pragma: no cover - depends on the machine
    torch = None

SAMPVIZ = None


def setUpModule():
    global SAMPVIZ, fd
    testenv.require_torch(torch)
    import fastdeploy_ngram as fd
    SAMPVIZ = testenv.sampviz_bin()


def check_json(path):
    res = subprocess.run([SAMPVIZ, "check", "--backend", "cpu", "--json", path], capture_output=True, text=True)
    report = json.loads(res.stdout) if res.stdout.strip().startswith("{") else None
    return res.returncode, report, res.stdout + res.stderr


def failing_rows(report, output):
    for o in report["outputs"]:
        if o["name"] == output:
            return sorted(r["row"] for r in o["rows"] if not r["pass"])
    raise AssertionError(f"no output {output} in the report")


MAX_DRAFT = 4
STALE = -5  # what a buffer holds where FastDeploy does not write


def batch(rng, rows, hybrid):
    """A random batch: prompts and generated tokens over a small vocabulary
    (so n-grams match), encoder, inactive and decoding rows, length caps."""
    width_l, width_m = 24, 16
    st = {k: [] for k in ("input_ids", "input_ids_len", "pre_ids", "step_idx", "seq_lens_this_time",
                          "seq_lens_decoder", "max_dec_len", "seq_lens_encoder", "draft_token_num")}
    for _ in range(rows):
        n = rng.randrange(0, width_l + 1)
        st["input_ids"].append([rng.randrange(4) for _ in range(n)] + [0] * (width_l - n))
        st["input_ids_len"].append(n)
        step = rng.randrange(0, width_m)
        st["pre_ids"].append([rng.randrange(4) for _ in range(step + 1)] + [0] * (width_m - step - 1))
        st["step_idx"].append(step)
        kind = rng.randrange(6)
        enc = rng.randrange(1, 9) if kind == 0 and not hybrid else 0
        dec = 0 if kind == 1 else rng.randrange(1, 300)
        st["seq_lens_encoder"].append(enc)
        st["seq_lens_decoder"].append(dec)
        if hybrid:
            st["seq_lens_this_time"].append(rng.randrange(0, 3) if dec else 0)
        else:
            st["seq_lens_this_time"].append(enc)
        st["max_dec_len"].append(step + rng.randrange(0, 8) if rng.randrange(3) == 0 else 4096)
        st["draft_token_num"].append(rng.randrange(0, MAX_DRAFT + 1))
    return st


def run_port(st, hybrid, threshold, ngram=None):
    """Runs the port on a copy of st's buffers; returns what it left."""
    s = copy.deepcopy(st)
    rows = len(s["step_idx"])
    draft_tokens = [[s["pre_ids"][b][s["step_idx"][b]]] + [STALE] * MAX_DRAFT for b in range(rows)]
    if hybrid:
        (ngram or fd.hybrid_mtp_ngram)(s["input_ids"], s["input_ids_len"], s["pre_ids"], s["step_idx"], draft_tokens,
                                       s["seq_lens_this_time"], s["seq_lens_decoder"], s["max_dec_len"], 3, 2,
                                       MAX_DRAFT, threshold)
    else:
        # FastDeploy's ngram_match reads the generated tokens from
        # token_ids_all after each row's prompt.
        token_ids_all = [s["input_ids"][b] + s["pre_ids"][b] for b in range(rows)]
        prompt_lens = [len(s["input_ids"][b]) for b in range(rows)]
        (ngram or fd.ngram_match)(s["input_ids"], s["input_ids_len"], token_ids_all, prompt_lens, s["step_idx"],
                                  s["draft_token_num"], draft_tokens, s["seq_lens_this_time"], s["seq_lens_encoder"],
                                  s["seq_lens_decoder"], s["max_dec_len"], 3, threshold)
    return {"draft_tokens": draft_tokens, "seq_lens_this_time": s["seq_lens_this_time"]}


def ngram_match_no_reservation(input_ids, input_ids_len, token_ids_all, prompt_lens, step_idx, draft_token_num,
                               draft_tokens, seq_lens_this_time, seq_lens_encoder, seq_lens_decoder, max_dec_len,
                               max_ngram_size=3, threshold=128):
    """FastDeploy's ngram_match with the reservation left out: each row
    counts its own token and the rows before it, but reserves nothing for
    the rows after it."""
    for b in range(len(seq_lens_this_time)):
        max_draft = min(draft_token_num[b], max_dec_len[b] - step_idx[b] - 1)
        if seq_lens_encoder[b] > 0:
            continue
        if seq_lens_decoder[b] == 0:
            seq_lens_this_time[b] = 0
            continue
        seq_lens_this_time[b] = 1
        total = sum(seq_lens_this_time[:b + 1])
        max_draft = min(max_draft, threshold - total)
        if total >= threshold - 1:
            continue
        draft = fd._first_draft(input_ids[b], input_ids_len[b], token_ids_all[b][prompt_lens[b]:], step_idx[b],
                                range(max_ngram_size, 0, -1), max_draft)
        if draft:
            seq_lens_this_time[b] = len(draft) + 1
            draft_tokens[b][1:1 + len(draft)] = draft


class TestFastDeployPort(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="sampviz-fastdeploy-")
        self.addCleanup(shutil.rmtree, self.dir, True)

    def judge(self, st, after, hybrid, threshold, name):
        path = fd.dump(st, after, hybrid=hybrid, min_ngram_size=2, max_draft_tokens=MAX_DRAFT, threshold=threshold,
                       out=os.path.join(self.dir, name + ".safetensors"))
        return check_json(path)

    def test_ports_pass_row_for_row(self):
        rng = random.Random(int(os.environ.get("SAMPVIZ_TEST_SEED", "0")) + 6960)
        for trial in range(12):
            hybrid = trial % 2 == 1
            st = batch(rng, rng.randrange(1, 24), hybrid)
            threshold = rng.choice([6, 12, 24, 128])
            after = run_port(st, hybrid, threshold)
            rc, report, out = self.judge(st, after, hybrid, threshold, f"trial{trial}")
            with self.subTest(trial=trial, hybrid=hybrid):
                self.assertEqual(rc, 0, out)
                self.assertEqual(failing_rows(report, "draft_out"), [])
                rows = [r["row"] for o in report["outputs"] if o["name"] == "draft_out" for r in o["rows"]]
                self.assertEqual(rows, list(range(len(st["step_idx"]))))

    def test_budget_without_reservation_fails_where_it_overdrafts(self):
        rng = random.Random(26)
        # Every row decodes and matches: the threshold binds.
        st = batch(rng, 10, False)
        for b in range(10):
            st["seq_lens_encoder"][b], st["seq_lens_decoder"][b], st["seq_lens_this_time"][b] = 0, 5, 0
            st["input_ids"][b] = list(range(1, 25))
            st["input_ids_len"][b] = 24
            st["pre_ids"][b] = [9, 3] + [0] * 14
            st["step_idx"][b], st["max_dec_len"][b], st["draft_token_num"][b] = 1, 4096, MAX_DRAFT
        threshold = 20
        good = run_port(st, False, threshold)
        bad = run_port(st, False, threshold, ngram=ngram_match_no_reservation)
        over = [b for b in range(10) if bad["seq_lens_this_time"][b] != good["seq_lens_this_time"][b]]
        self.assertTrue(over, "the reservation changed nothing: the case does not test it")
        rc, report, out = self.judge(st, bad, False, threshold, "no-reservation")
        self.assertEqual(rc, 1, out)
        self.assertEqual(failing_rows(report, "draft_out"), over, out)


if __name__ == "__main__":
    unittest.main()
