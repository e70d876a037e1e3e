"""The capture module against real transformers, on the GPU machine.

    make gpu-capture                      # GPU_OUT=gpu-out, SAMPVIZ=gpu-bundle/sampviz
    python3 python/gpu_capture_check.py --sampviz gpu-bundle/sampviz --out gpu-out/capture

Small GPT-2 models made from a config (random weights, no download) generate
on the GPU through sampviz_capture's hooks, and `sampviz check --backend
none --json` judges every dump:

  1. hf_capture on a sampled generation (temperature, top-k, top-p, min-p):
     every dump passes;
  2. the same with a wrong min-p (its threshold measured against the maximum
     probability before temperature, put where transformers' MinPLogitsWarper
     runs): the failing rows of each dump are exactly the rows where that
     changes the kept set, computed here in float64 from the dump itself;
  3. hf_speculative_capture on assisted generation with a drafter (batch 1):
     every dump passes, judged on its spec_trials.

It prints one verdict line per dump and exits 1 when any differs from what
it should be. The helpers (kept_sets, expected_failing_rows, judge,
failing_rows, wrong_min_p_class) are what python/test_sampviz_capture.py runs
against the transformers stand-ins.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sampviz_capture as sv  # noqa: E402


def kept_sets(logits, temperature=1.0, top_k=0, top_p=1.0, min_p=0.0):
    """Returns (right, wrong): the tokens transformers' warpers keep in
    float64 (temperature, top-k, top-p on the renormalised rest, min-p
    against the maximum probability after temperature), and those a min-p
    measured against the maximum probability before temperature keeps."""
    x = logits.to(torch.float64)
    scaled = x / temperature
    keep = torch.ones_like(x, dtype=torch.bool)
    if top_k:
        kth = torch.topk(scaled, min(int(top_k), x.shape[-1]), dim=-1).values[..., -1:]
        keep &= scaled >= kth
    if top_p < 1.0:
        masked = scaled.masked_fill(~keep, float("-inf"))
        probs = masked.softmax(dim=-1)
        order = probs.argsort(dim=-1, descending=True)
        ordered = probs.gather(-1, order)
        exclusive = ordered.cumsum(dim=-1) - ordered
        keep_sorted = exclusive < top_p
        keep &= torch.zeros_like(keep).scatter(-1, order, keep_sorted)
    right = wrong = keep
    if min_p > 0:
        p_after = scaled.masked_fill(~keep, float("-inf")).softmax(dim=-1)
        p_before = x.masked_fill(~keep, float("-inf")).softmax(dim=-1)
        right = keep & (p_after >= min_p * p_after.amax(dim=-1, keepdim=True))
        wrong = keep & (p_after >= min_p * p_before.amax(dim=-1, keepdim=True))
    return right, wrong


def _scalar(tensors, key, default):
    t = tensors.get(key)
    return default if t is None else float(t.reshape(-1)[0])


def expected_failing_rows(path) -> list[int]:
    """The rows of a dump written under the wrong min-p whose kept set
    differs from the right one (the dump's parameters are one per dump)."""
    tensors, _ = sv.load(path)
    right, wrong = kept_sets(tensors["logits"], _scalar(tensors, "temperature", 1.0), int(_scalar(tensors, "top_k", 0)),
                             _scalar(tensors, "top_p", 1.0), _scalar(tensors, "min_p", 0.0))
    return [r for r in range(right.shape[0]) if not torch.equal(right[r], wrong[r])]


def judge(sampviz, path) -> tuple[int, dict]:
    """Runs `sampviz check --backend none --json` and returns its exit code
    and report (empty when the file was refused)."""
    res = subprocess.run([sampviz, "check", "--backend", "none", "--json", str(path)], capture_output=True, text=True)
    try:
        report = json.loads(res.stdout) if res.stdout.strip() else {}
    except json.JSONDecodeError:
        report = {}
    if res.returncode == 2:
        report["error"] = res.stderr.strip()
    return res.returncode, report


def failing_rows(report, output="probs") -> list[int]:
    for o in report.get("outputs", []):
        if o.get("external") and o.get("name") == output:
            return [r["row"] for r in o.get("rows", []) if not r.get("pass")]
    raise KeyError(f"the report has no external output {output}")


def wrong_min_p_class(min_p_warper):
    """A MinPLogitsWarper whose threshold is min_p times the maximum
    probability before temperature (the scores it gets are after it)."""

    class WrongMinP(min_p_warper):
        def __init__(self, min_p, temperature):
            super().__init__(min_p)
            self.temperature = temperature

        def __call__(self, input_ids, scores):
            p_after = scores.softmax(dim=-1)
            p_before = (scores * self.temperature).softmax(dim=-1)
            threshold = self.min_p * p_before.amax(dim=-1, keepdim=True)
            return scores.masked_fill(p_after < threshold, float("-inf"))

    return WrongMinP


def swap_min_p(model, wrong_cls, temperature_cls, min_p_cls):
    """Makes model.generate() use wrong_cls where it would use min_p_cls."""
    get = model._get_logits_processor

    def swapped(*args, **kwargs):
        procs = get(*args, **kwargs)
        t = next((p.temperature for p in procs if isinstance(p, temperature_cls)), 1.0)
        for i, p in enumerate(procs):
            if type(p) is min_p_cls:
                procs[i] = wrong_cls(p.min_p, t)
        return procs

    model._get_logits_processor = swapped
    return lambda: vars(model).pop("_get_logits_processor", None)


def _line(kind, path, ok, detail):
    print(f"{'ok  ' if ok else 'FAIL'} {kind:<10} {os.path.basename(path)}: {detail}")
    return ok


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sampviz", default="gpu-bundle/sampviz")
    ap.add_argument("--out", default="gpu-out/capture")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--trials", type=int, default=2000)
    args = ap.parse_args()
    import transformers
    from transformers import GPT2Config, GPT2LMHeadModel
    from transformers.generation.logits_process import MinPLogitsWarper, TemperatureLogitsWarper

    os.environ.pop("SAMPVIZ_URL", None)
    print(f"transformers {transformers.__version__}, torch {torch.__version__}, device {args.device}"
          + (f" ({torch.cuda.get_device_name()})" if args.device == "cuda" else ""))
    vocab = 512

    def model(seed, layers):
        torch.manual_seed(seed)
        cfg = GPT2Config(vocab_size=vocab, n_positions=128, n_embd=64, n_layer=layers, n_head=2,
                         initializer_range=0.3, bos_token_id=0, eos_token_id=0, pad_token_id=0)
        return GPT2LMHeadModel(cfg).to(args.device).eval()

    target = model(1, 2)
    torch.manual_seed(2)
    prompts = torch.randint(1, vocab, (8, 5), device=args.device)
    sampling = dict(do_sample=True, temperature=1.5, top_k=40, top_p=0.95, min_p=0.1, max_new_tokens=6,
                    pad_token_id=0, eos_token_id=None)
    ok = True

    right_dir, wrong_dir, spec_dir = (os.path.join(args.out, d) for d in ("processor", "wrong-min-p", "speculative"))
    with sv.hf_capture(target, out=right_dir):
        target.generate(prompts, attention_mask=torch.ones_like(prompts), **sampling)
    right = sorted(glob.glob(os.path.join(right_dir, "*.safetensors")))
    ok &= _line("processor", right_dir, len(right) == sampling["max_new_tokens"], f"{len(right)} dumps")
    for path in right:
        rc, report = judge(args.sampviz, path)
        ok &= _line("processor", path, rc == 0, f"exit {rc}, {report.get('rows')} rows" + (f" ({report['error']})" if rc == 2 else ""))

    undo = swap_min_p(target, wrong_min_p_class(MinPLogitsWarper), TemperatureLogitsWarper, MinPLogitsWarper)
    with sv.hf_capture(target, out=wrong_dir):
        target.generate(prompts, attention_mask=torch.ones_like(prompts), **sampling)
    undo()
    differing = 0
    for path in sorted(glob.glob(os.path.join(wrong_dir, "*.safetensors"))):
        want = expected_failing_rows(path)
        differing += len(want)
        rc, report = judge(args.sampviz, path)
        got = failing_rows(report) if rc in (0, 1) else None
        ok &= _line("wrong-min-p", path, got == want and rc == (1 if want else 0),
                    f"exit {rc}, failing rows {got}, rows whose kept set changes {want}")
    print(f"wrong min-p: {differing} of {8 * sampling['max_new_tokens']} rows change their kept set")

    draft = model(3, 1)
    draft.generation_config.num_assistant_tokens = 4
    draft.generation_config.num_assistant_tokens_schedule = "constant"
    with sv.hf_speculative_capture(trials=args.trials, out=spec_dir):
        target.generate(prompts[:1], attention_mask=torch.ones_like(prompts[:1]), assistant_model=draft,
                        do_sample=True, temperature=1.2, top_k=0, max_new_tokens=12, pad_token_id=0, eos_token_id=None)
    spec = sorted(glob.glob(os.path.join(spec_dir, "*.safetensors")))
    ok &= _line("speculative", spec_dir, len(spec) > 0, f"{len(spec)} dumps")
    for path in spec:
        rc, report = judge(args.sampviz, path)
        trials = sv.load(path)[0]["spec_trials"].shape[0]
        ok &= _line("speculative", path, rc == 0, f"exit {rc}, {trials} trials" + (f" ({report['error']})" if rc == 2 else ""))
    print("PASS: every capture judged as it should be" if ok else "FAIL: see the lines above")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
