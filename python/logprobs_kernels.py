"""logprobs_kernels: real kernels' log probabilities, for sampviz's logprob tolerances.

Writes one dump per set of logits (docs/DUMPS.md), each holding the
logprobs that PyTorch's kernels make of them the ways engines do, as named
outputs (logprobs@MODE, with logprobs_kind@MODE in the metadata):

    raw_f32          log_softmax(logits.float()) on the device (vLLM's raw_logprobs)
    raw_native       log_softmax(logits) in the logits' dtype (a bf16 output)
    raw_cpu          log_softmax(logits.float()) on the CPU (a sequential float32 sum)
    raw_cpu_native   log_softmax(logits) on the CPU in the logits' dtype (16-bit logits only)
    processed_vllm   vLLM V1's processed_logprobs: float32 logits / T (greedy rows / 1),
                     top-k and top-p by sort (apply_top_k_top_p), log_softmax
    processed_top20  its top-20, values and token ids (logprob_token_ids@processed_top20)

and prints, per mode, how far each is from the float64 log-softmax: the
shift every token of a row shares (the error of log Σ exp) and the rest,
per token, against |ref| + max|x/T|. `sampviz check` judges the dumps; every
mode must pass (docs/SEMANTICS.md "Logprobs" has the numbers seen).

    python3 python/logprobs_kernels.py --out DIR [--device cuda]
"""

from __future__ import annotations

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sampviz_capture as sv  # noqa: E402

EPS = 1e-5  # vLLM's _SAMPLING_EPS


def vllm_processed(x: torch.Tensor, t: torch.Tensor, k: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
    """vLLM V1's processed_logprobs (vllm/v1/sample/sampler.py@3e342658,
    ops/topk_topp_sampler.py@3babc05a): float32 logits divided by the
    temperature (1 for greedy rows), top-k then top-p by an ascending sort,
    the dropped tokens -inf, then log_softmax in float32."""
    logits = x.to(torch.float32)
    logits = logits / torch.where(t < EPS, torch.ones_like(t), t).unsqueeze(1)
    srt, idx = logits.sort(dim=-1, descending=False)
    kth = srt.gather(1, (srt.shape[1] - k.to(torch.long)).unsqueeze(1))
    srt = srt.masked_fill(srt < kth, float("-inf"))
    drop = srt.softmax(dim=-1).cumsum(dim=-1) <= 1 - p.unsqueeze(1)
    drop[:, -1] = False
    srt = srt.masked_fill(drop, float("-inf"))
    logits = srt.scatter(-1, idx, srt)
    return logits.log_softmax(dim=-1, dtype=torch.float32)


def report(name: str, out: torch.Tensor, x: torch.Tensor, t: torch.Tensor | None) -> None:
    """Prints how far out is from the float64 log-softmax of x at t."""
    xd = x.to(torch.float64).cpu()
    if t is not None:
        xd = xd / torch.where(t < EPS, torch.ones_like(t), t).to(torch.float64).cpu().unsqueeze(1)
    ref = xd.log_softmax(dim=-1)
    out = out.to(torch.float64).cpu()
    worst_shift, worst_rest, worst_rel = 0.0, 0.0, 0.0
    for r in range(out.shape[0]):
        fin = torch.isfinite(out[r]) & torch.isfinite(ref[r])
        if not bool(fin.any()):
            continue
        e = (out[r] - ref[r])[fin]
        if t is not None:  # processed: renormalised over what is kept
            keep = torch.isfinite(out[r])
            e = (out[r] - (xd[r] - torch.logsumexp(xd[r][keep], 0)))[fin]
        shift = float(e.median())
        scale = float(xd[r][torch.isfinite(xd[r])].abs().max())
        rest = (e - shift).abs()
        worst_shift = max(worst_shift, abs(shift))
        worst_rest = max(worst_rest, float(rest.max()))
        worst_rel = max(worst_rel, float((rest / (ref[r][fin].abs() + scale)).max()))
    print(f"  {name:16s} shift {worst_shift:.2e}  rest {worst_rest:.2e}  rest/(|ref|+s) {worst_rel:.2e}")


def dump(name: str, x: torch.Tensor, t: torch.Tensor, k: torch.Tensor, p: torch.Tensor, device: str, out: str) -> None:
    xd = x.to(device)
    td, kd, pd = t.to(device), k.to(device), p.to(device)
    raw_f32 = torch.log_softmax(xd.float(), dim=-1)
    try:
        raw_native = torch.log_softmax(xd, dim=-1)
    except RuntimeError:  # an old CPU build without a half kernel
        raw_native = torch.log_softmax(xd.float(), dim=-1).to(x.dtype)
    raw_cpu = torch.log_softmax(x.float(), dim=-1)
    raw_cpu_native = None
    if x.dtype in (torch.bfloat16, torch.float16):
        try:
            raw_cpu_native = torch.log_softmax(x, dim=-1)
        except RuntimeError:  # an old CPU build without a half kernel
            pass
    proc = vllm_processed(xd, td, kd, pd)
    v20, i20 = proc.topk(20, dim=-1)
    print(f"{name}: {tuple(x.shape)} {x.dtype} on {device}")
    report("raw_f32", raw_f32, x, None)
    report("raw_native", raw_native, x, None)
    report("raw_cpu", raw_cpu, x, None)
    if raw_cpu_native is not None:
        report("raw_cpu_native", raw_cpu_native, x, None)
    report("processed_vllm", proc, x, t)
    tensors = {
        "logits": x, "temperature": t, "top_k": k, "top_p": p,
        "logprobs@raw_f32": raw_f32.cpu(), "logprobs@raw_native": raw_native.cpu(), "logprobs@raw_cpu": raw_cpu,
        "logprobs@processed_vllm": proc.cpu(),
        "logprobs@processed_top20": v20.cpu(), "logprob_token_ids@processed_top20": i20.cpu(),
    }
    if raw_cpu_native is not None:
        tensors["logprobs@raw_cpu_native"] = raw_cpu_native
    meta = {
        "op": "renorm",
        "source": f"python/logprobs_kernels.py (torch {torch.__version__}, {device}"
                  + (f" {torch.cuda.get_device_name()}" if device == "cuda" else "") + ")",
        "logprobs_kind": "raw",
        "logprobs_kind@processed_vllm": "processed",
        "logprobs_kind@processed_top20": "processed",
    }
    path = sv.save(tensors, meta, out=os.path.join(out, name + ".safetensors"))
    print(f"  wrote {path}")


def llm_like(rows: int, vocab: int, dtype, gen) -> torch.Tensor:
    """Logits shaped like a trained model's: a normal body, a long lower
    tail, and a few tokens far above the rest."""
    x = torch.randn(rows, vocab, generator=gen) * 2.5
    x -= torch.rand(rows, vocab, generator=gen).pow(4) * 12
    top = torch.randint(0, vocab, (rows, 8), generator=gen)
    x.scatter_(1, top, x.gather(1, top) + torch.linspace(14, 6, 8).expand(rows, 8))
    return x.to(dtype)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    gen = torch.Generator().manual_seed(25)
    here = os.path.dirname(os.path.abspath(__file__))
    real, _ = sv.load(os.path.join(here, "..", "scenarios", "real-renorm", "real-renorm.safetensors"))
    x = real["logits"]
    b = x.shape[0]
    t = torch.tensor([0.0, 0.3, 0.7, 1.0, 1.3, 0.9] * (b // 6), dtype=torch.float32)
    k = torch.tensor([0, 20, 50, 1000, 0, 40] * (b // 6), dtype=torch.int64)
    p = torch.tensor([1.0, 0.9, 0.95, 1.0, 0.8, 0.5] * (b // 6), dtype=torch.float32)
    vocab = x.shape[1]
    k = torch.where(k == 0, torch.full_like(k, vocab), k)
    dump("real_bf16_32000", x, t, k, p, a.device, a.out)
    for name, rows, v, dtype in (("llm_bf16_151936", 6, 151936, torch.bfloat16),
                                 ("llm_f32_128256", 6, 128256, torch.float32),
                                 ("llm_f16_32000", 6, 32000, torch.float16)):
        x = llm_like(rows, v, dtype, gen)
        k6 = torch.where(k[:rows] >= vocab, torch.full_like(k[:rows], v), k[:rows])
        dump(name, x, t[:rows], k6, p[:rows], a.device, a.out)


if __name__ == "__main__":
    main()
