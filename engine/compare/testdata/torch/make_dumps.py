"""Writes the dumps of engine/compare's torch test: outputs computed by
PyTorch itself, the way people compute them, which sampviz must pass without
false alarms, plus one dump with planted faults it must flag on exactly their
rows. Run on a machine with torch and safetensors:

    python3 make_dumps.py OUTDIR

Fixed seeds; CPU computation, so the files do not depend on a GPU.
"""
import sys

import torch
from safetensors.torch import save_file

out = sys.argv[1]
torch.manual_seed(20261122)


def logits(rows, vocab, dtype, masked=0.01):
    x = torch.randn(rows, vocab) * 3
    x[torch.rand(rows, vocab) < masked] = float("-inf")
    return x.to(dtype)


def hf_filter(scores, top_k, top_p, min_p):
    """HF transformers' TopK, TopP and MinP warpers on float32 scores."""
    if top_k > 0:
        kth = torch.topk(scores, top_k)[0][..., -1, None]
        scores = scores.masked_fill(scores < kth, float("-inf"))
    if top_p < 1:
        s, idx = torch.sort(scores, descending=False)
        cum = s.softmax(dim=-1).cumsum(dim=-1)
        remove = cum <= (1 - top_p)
        remove[..., -1:] = False
        scores = scores.masked_fill(remove.scatter(-1, idx, remove), float("-inf"))
    if min_p > 0:
        p = scores.softmax(dim=-1)
        remove = p < min_p * p.max(dim=-1, keepdim=True).values
        scores = scores.masked_fill(remove, float("-inf"))
    return scores


def renorm_rows(x, temps, ks, ps, mps):
    rows = []
    for r in range(x.shape[0]):
        s = x[r].float() / temps[r]
        rows.append(hf_filter(s[None], int(ks[r]), float(ps[r]), float(mps[r])).softmax(-1)[0])
    return torch.stack(rows)


# 1. softmax of bf16 logits in float32, the careful way, 128256 tokens,
#    temperatures from 1e-4 to 2.
x = logits(4, 128256, torch.bfloat16)
t = torch.tensor([1.0, 0.01, 1e-4, 2.0])
save_file({"logits": x, "temperature": t,
           "probs": torch.softmax(x.float() / t[:, None], dim=-1)},
          f"{out}/softmax_bf16_f32.safetensors", metadata={"op": "softmax", "source": "torch softmax(logits.float()/T)"})

# 2. softmax of bf16 logits divided in bf16 by a Python float (as HF's
#    TemperatureLogitsWarper does on bf16 scores), output bf16: passes only
#    through the native reference at low temperatures.
x = logits(4, 32000, torch.bfloat16)
t = torch.tensor([1.0, 0.7, 0.01, 1e-3])
save_file({"logits": x, "temperature": t,
           "probs": torch.stack([torch.softmax(x[r] / float(t[r]), dim=-1) for r in range(4)])},
          f"{out}/softmax_bf16_native.safetensors", metadata={"op": "softmax", "source": "torch (logits/T).softmax(-1) in bf16"})

# 3. fp16 logits, float32 softmax stored as fp16.
x = logits(4, 32000, torch.float16)
t = torch.tensor([1.0, 0.5, 0.05, 3.0])
save_file({"logits": x, "temperature": t,
           "probs": torch.softmax(x.float() / t[:, None], dim=-1).half()},
          f"{out}/softmax_fp16.safetensors", metadata={"op": "softmax", "source": "torch softmax(logits.float()/T).half()"})

# 4. fp32 logits at Qwen's 151936 tokens.
x = logits(2, 151936, torch.float32)
t = torch.tensor([0.8, 1e-3])
save_file({"logits": x, "temperature": t, "probs": torch.softmax(x / t[:, None], dim=-1)},
          f"{out}/softmax_fp32_151936.safetensors", metadata={"op": "softmax", "source": "torch softmax(logits/T), fp32"})

# 5. renorm as Hugging Face's warpers do it (top-k, then top-p on the
#    renormalised mass, then min-p), bf16 logits at GPT-2's 50257 tokens.
x = logits(6, 50257, torch.bfloat16)
temps = torch.tensor([0.7, 1.0, 0.9, 1.2, 0.5, 1.0])
ks = torch.tensor([50, 0, 100, 20, 0, 1000])
ps = torch.tensor([0.9, 0.95, 1.0, 0.8, 0.7, 0.99])
mps = torch.tensor([0.0, 0.05, 0.0, 0.0, 0.1, 0.0])
save_file({"logits": x, "temperature": temps, "top_k": ks, "top_p": ps, "min_p": mps,
           "probs": renorm_rows(x, temps, ks, ps, mps)},
          f"{out}/renorm_hf_bf16.safetensors", metadata={"op": "renorm", "source": "HF TopK/TopP/MinP warpers"})

# 6. greedy: torch.argmax of bf16 logits (ties are common in bf16).
x = logits(16, 32000, torch.bfloat16)
save_file({"logits": x, "tokens": torch.argmax(x, dim=-1)},
          f"{out}/argmax_bf16.safetensors", metadata={"op": "argmax", "source": "torch.argmax"})

# 7. torch.multinomial on HF-filtered probabilities, 20000 draws a row, at
#    128256 tokens.
x = logits(3, 128256, torch.bfloat16)
temps = torch.tensor([1.0, 0.7, 0.9])
ks = torch.tensor([0, 50, 0])
ps = torch.tensor([1.0, 0.9, 0.95])
mps = torch.tensor([0.0, 0.0, 0.02])
p = renorm_rows(x, temps, ks, ps, mps)
save_file({"logits": x, "temperature": temps, "top_k": ks, "top_p": ps, "min_p": mps, "seed": torch.tensor(7),
           "samples": torch.multinomial(p, 20000, replacement=True).to(torch.int32)},
          f"{out}/multinomial_bf16.safetensors", metadata={"op": "sample", "source": "torch.multinomial"})

# 8. planted faults on a bf16 renorm: row 1 has a NaN logit, row 3 drops its
#    second most probable token, row 4 keeps a token top-k removes, row 6 is
#    scaled by 1.05 (outside even bf16's rtol of 1.6e-2). The other rows are
#    correct.
x = logits(8, 32000, torch.bfloat16)
x[1, 17] = float("nan")
temps = torch.full((8,), 0.8)
ks = torch.full((8,), 40)
ps = torch.full((8,), 0.9)
mps = torch.zeros(8)
p = renorm_rows(x, temps, ks, ps, mps)
p[3, p[3].argsort(descending=True)[1]] = 0
p[4, (p[4] == 0).nonzero().flatten()[0]] = 1e-3
p[6] *= 1.05
save_file({"logits": x, "temperature": temps, "top_k": ks, "top_p": ps, "min_p": mps, "probs": p},
          f"{out}/renorm_faults_bf16.safetensors", metadata={"op": "renorm", "source": "HF warpers with planted faults"})
print("wrote 8 dumps to", out)
