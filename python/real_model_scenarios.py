"""real_model_scenarios: sampviz's scenarios from a real small model.

Run on a machine with a CUDA GPU, torch, transformers and tokenizers, and
no network (the GPU machine): it trains, from text found on the machine
itself (the installed Python packages' sources and docs), a byte-level BPE
tokenizer of 32000 tokens and two small GPT-2 models, a target (6 layers,
d=384) and a draft (2 layers, d=192), for a few minutes in all, then dumps
what they produce as sampviz scenarios:

    real-softmax   the target's logits, softmax at T=1 by torch
    real-renorm    logits through transformers' own warpers (temperature,
                   top-k, top-p, min-p), in four settings
    real-sample    torch.multinomial draws after those warpers
    real-argmax    greedy tokens
    real-spec      drafts sampled from the draft model, verified against the
                   target by chain speculative sampling, 5000 trials a row

Each dump carries the tokenizer (its vocabulary and decoder, merges left
out: sampviz only decodes) in its metadata under "tokenizer", so every page
and report shows token text. Everything runs from fixed seeds; the losses
reached and the settings go to generator.json beside the dumps; the
committed scenarios record theirs in python/real_model_scenarios.record.json.

    python3 python/real_model_scenarios.py --out build/real-model
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sampviz_capture as sv  # noqa: E402

SEED = 20261127
VOCAB = 32000
SEQ = 256


def corpus(limit_bytes: int) -> list[str]:
    """The text of the installed Python packages: .py, .md, .rst and .txt
    files under sys.path's site folders, in sorted order, up to limit_bytes."""
    roots = sorted({p for p in sys.path if p.endswith(("site-packages", "dist-packages")) and os.path.isdir(p)})
    texts, total = [], 0
    for root in roots:
        for folder, dirs, files in os.walk(root):
            dirs.sort()
            for f in sorted(files):
                if not f.endswith((".py", ".md", ".rst", ".txt")):
                    continue
                try:
                    with open(os.path.join(folder, f), encoding="utf-8") as fh:
                        t = fh.read()
                except (OSError, UnicodeDecodeError):
                    continue
                if len(t) < 200:
                    continue
                texts.append(t)
                total += len(t)
                if total >= limit_bytes:
                    return texts
    return texts


def train_tokenizer(texts: list[str], out: str):
    from tokenizers import ByteLevelBPETokenizer
    tok = ByteLevelBPETokenizer()
    tok.train_from_iterator(texts, vocab_size=VOCAB, min_frequency=2, special_tokens=["<|endoftext|>"])
    path = os.path.join(out, "tokenizer.json")
    tok.save(path)
    return tok, path


def decode_only(path: str) -> str:
    """The tokenizer.json without its merges: what sampviz reads to decode."""
    with open(path, encoding="utf-8") as f:
        t = json.load(f)
    t["model"]["merges"] = []
    return json.dumps(t, ensure_ascii=False, separators=(",", ":"))


def encode(tok, texts: list[str], device) -> torch.Tensor:
    ids = []
    eot = tok.token_to_id("<|endoftext|>")
    for enc in tok.encode_batch(texts):
        ids.extend(enc.ids)
        ids.append(eot)
    return torch.tensor(ids, dtype=torch.int32, device=device)


def train(model, data: torch.Tensor, seconds: float, lr: float, batch: int, gen: torch.Generator) -> dict:
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.1)
    model.train()
    start, step, losses = time.time(), 0, []
    n = data.numel() - SEQ - 1
    while time.time() - start < seconds:
        idx = torch.randint(0, n, (batch,), generator=gen, device=data.device)
        x = torch.stack([data[i:i + SEQ] for i in idx.tolist()]).long()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=x, labels=x).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
        step += 1
    model.eval()
    tail = losses[-50:]
    return {"steps": step, "seconds": round(time.time() - start, 1), "first_loss": round(losses[0], 3),
            "final_loss": round(sum(tail) / len(tail), 3)}


@torch.no_grad()
def last_logits(model, contexts: torch.Tensor) -> torch.Tensor:
    with torch.autocast("cuda", dtype=torch.bfloat16):
        return model(input_ids=contexts.long()).logits[:, -1, :].to(torch.bfloat16)


def warp(logits: torch.Tensor, temperature: float, top_k: int, top_p: float, min_p: float) -> torch.Tensor:
    """transformers' own warpers in generate()'s order, then softmax."""
    from transformers import MinPLogitsWarper, TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper
    scores = logits.float()
    for w in (TemperatureLogitsWarper(temperature), TopKLogitsWarper(top_k), TopPLogitsWarper(top_p), MinPLogitsWarper(min_p)):
        scores = w(None, scores)
    return torch.softmax(scores, dim=-1)


@torch.no_grad()
def spec_trials(p: torch.Tensor, q: torch.Tensor, drafts: torch.Tensor, trials: int, gen: torch.Generator) -> torch.Tensor:
    """Chain speculative sampling (SEMANTICS.md, spec_verify), trials times
    per row: accept draft i with probability min(1, p_i(x)/q_i(x)); at the
    first rejection draw from normalise(max(p_i - q_i, 0)) and stop; when
    every draft is accepted draw the bonus from p_K. p [B, K+1, V], q [B, K,
    V], drafts [B, K]; returns [T, B, K+1] with -1 after the emitted token."""
    b, k1, v = p.shape
    k = k1 - 1
    out = torch.full((trials, b, k1), -1, dtype=torch.int32, device=p.device)
    alive = torch.ones((trials, b), dtype=torch.bool, device=p.device)
    rows = torch.arange(b, device=p.device)
    for i in range(k):
        x = drafts[:, i]
        px, qx = p[rows, i, x], q[rows, i, x]
        ratio = torch.where(qx > 0, px / qx, torch.ones_like(px))
        u = torch.rand((trials, b), generator=gen, device=p.device)
        accept = alive & (u < ratio)
        reject = alive & ~accept
        out[:, :, i] = torch.where(accept, x.int().expand(trials, b), out[:, :, i])
        res = torch.clamp(p[:, i] - q[:, i], min=0)
        res = torch.where(res.sum(-1, keepdim=True) > 0, res, p[:, i])
        res = res / res.sum(-1, keepdim=True)
        draw = torch.multinomial(res, trials, replacement=True, generator=gen).T  # [T, B]
        out[:, :, i] = torch.where(reject, draw.int(), out[:, :, i])
        alive = accept
    bonus = torch.multinomial(p[:, k], trials, replacement=True, generator=gen).T
    out[:, :, k] = torch.where(alive, bonus.int(), out[:, :, k])
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="build/real-model")
    ap.add_argument("--text-mb", type=float, default=40)
    ap.add_argument("--target-seconds", type=float, default=150)
    ap.add_argument("--draft-seconds", type=float, default=60)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.manual_seed(SEED)
    dev = torch.device("cuda")
    gen = torch.Generator(device=dev).manual_seed(SEED)
    record = {"seed": SEED, "vocab": VOCAB, "seq": SEQ, "torch": torch.__version__}
    import tokenizers
    import transformers
    record["transformers"], record["tokenizers"] = transformers.__version__, tokenizers.__version__

    t0 = time.time()
    texts = corpus(int(args.text_mb * 1e6))
    held_out, texts = texts[:200], texts[200:]
    work = tempfile.mkdtemp(prefix="sampviz-real-")
    tok, tok_path = train_tokenizer(texts, work)
    data = encode(tok, texts, dev)
    record["text"] = {"files": len(texts) + len(held_out), "chars": sum(map(len, texts)), "tokens": data.numel(),
                      "tokenizer_seconds": round(time.time() - t0, 1)}
    print("text:", record["text"], flush=True)

    from transformers import GPT2Config, GPT2LMHeadModel
    target = GPT2LMHeadModel(GPT2Config(vocab_size=VOCAB, n_positions=SEQ + 16, n_layer=6, n_embd=384, n_head=6)).to(dev)
    draft = GPT2LMHeadModel(GPT2Config(vocab_size=VOCAB, n_positions=SEQ + 16, n_layer=2, n_embd=192, n_head=3)).to(dev)
    record["target"] = train(target, data, args.target_seconds, 1e-3, 64, gen)
    print("target:", record["target"], flush=True)
    record["draft"] = train(draft, data, args.draft_seconds, 2e-3, 64, gen)
    print("draft:", record["draft"], flush=True)

    # Contexts from held-out files, cut at varied lengths.
    eval_ids = encode(tok, held_out, dev)
    def contexts(n: int, length: int) -> torch.Tensor:
        starts = torch.randint(0, eval_ids.numel() - length - 1, (n,), generator=gen, device=dev)
        return torch.stack([eval_ids[s:s + length] for s in starts.tolist()])

    meta = {"tokenizer": decode_only(tok_path), "model": "sampviz real-model scenarios (GPT-2 6x384 trained here)"}
    src = f"real_model_scenarios.py (transformers {transformers.__version__}, torch {torch.__version__})"
    dumps = {}

    lg = last_logits(target, contexts(12, 96))
    dumps["real-softmax"] = sv.softmax(lg, torch.softmax(lg.float(), -1), temperature=1.0, out=os.path.join(args.out, "real-softmax.safetensors"), source=src, metadata=meta)

    settings = [(0.7, 50, 0.9, 0.0), (1.0, 0, 0.8, 0.05), (1.3, 20, 1.0, 0.0), (0.9, 100, 0.95, 0.02)]
    per = 3  # rows per setting
    lg = last_logits(target, contexts(per * len(settings), 64))
    rows = len(settings) * per
    probs, temp, top_k, top_p, min_p = [], [], [], [], []
    for j, (t, k, p, m) in enumerate(settings):
        part = lg[per * j:per * j + per]
        probs.append(warp(part, t, k if k > 0 else VOCAB, p, m))
        temp += [t] * per
        top_k += [k] * per
        top_p += [p] * per
        min_p += [m] * per
    f = lambda x, dt: torch.tensor(x, dtype=dt, device=dev)  # noqa: E731
    dumps["real-renorm"] = sv.renorm(lg[:rows], torch.cat(probs), temperature=f(temp, torch.float32), top_k=f(top_k, torch.int64),
                                     top_p=f(top_p, torch.float32), min_p=f(min_p, torch.float32), filter_order="top_k_first",
                                     out=os.path.join(args.out, "real-renorm.safetensors"), source=src + ", TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper, MinPLogitsWarper", metadata=meta)

    lg = last_logits(target, contexts(16, 80))
    pw = warp(lg, 0.8, VOCAB, 0.95, 0.0)
    draws = torch.multinomial(pw, 2000, replacement=True, generator=gen).int()
    dumps["real-sample"] = sv.sample(lg, draws, temperature=0.8, top_p=0.95, out=os.path.join(args.out, "real-sample.safetensors"),
                                     source=src + ", torch.multinomial", metadata=meta)

    lg = last_logits(target, contexts(16, 128))
    dumps["real-argmax"] = sv.argmax(lg, lg.float().argmax(-1).int(), out=os.path.join(args.out, "real-argmax.safetensors"), source=src, metadata=meta)

    # Speculative: K = 4 drafts sampled from the draft model, the target's
    # logits at the 4 draft positions and the bonus position.
    K, B = 4, 4
    ctx = contexts(B, 96).long()
    seq, qs = ctx, []
    with torch.no_grad():
        for _ in range(K):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                ql = draft(input_ids=seq).logits[:, -1, :].float()
            q = torch.softmax(ql, -1).to(torch.bfloat16)
            qs.append(q)
            x = torch.multinomial(q.float(), 1, generator=gen)
            seq = torch.cat([seq, x], 1)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            tl = target(input_ids=seq).logits[:, -K - 1:, :].to(torch.bfloat16)
    drafts = seq[:, -K:]
    q = torch.stack(qs, 1)
    p = torch.softmax(tl.float(), -1)
    trials = spec_trials(p, q.float() / q.float().sum(-1, keepdim=True), drafts, 5000, gen)
    dumps["real-spec"] = sv.spec_verify(tl, drafts.int(), q, spec_trials=trials, temperature=1.0,
                                        out=os.path.join(args.out, "real-spec.safetensors"), source=src + ", chain speculative sampling in torch", metadata=meta)
    record["dumps"] = {k: os.path.getsize(v) for k, v in dumps.items()}
    record["seconds"] = round(time.time() - t0, 1)
    with open(os.path.join(args.out, "generator.json"), "w") as fh:
        json.dump(record, fh, indent=2)
    print(json.dumps(record, indent=2))


if __name__ == "__main__":
    main()
