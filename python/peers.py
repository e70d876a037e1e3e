#!/usr/bin/env python3
"""peers.py: the peers that `sampviz bench --peers` times beside its kernels.

For each bench case with a peer, the same op written the way a serving
stack would write it in torch (eager), the same function under
torch.compile, and a Triton kernel where one makes sense:

  argmax            torch.argmax; compiled; a Triton row argmax (first index
                    of the maximum, one program a row, one read).
  softmax           softmax(x.float() / T); compiled; an online softmax in
                    Triton (running max and sum per lane, then one pass that
                    writes).
  renorm            the filters below, then softmax; compiled; no Triton
                    peer.
  sample, filters   vLLM's torch path, vllm-project/vllm
                    vllm/v1/sample/ops/topk_topp_sampler.py (commit 01fa3fe7):
                    logits in float32 divided by T; with top-k, torch.topk's
                    k candidates (as its apply_top_k_only) and on them the
                    top-p mask of apply_top_k_top_p_pytorch (softmax and
                    cumsum ascending, masked where at most 1 - p); top-p
                    alone, apply_top_k_top_p_pytorch on the sorted row
                    (sort, mask, scatter back); softmax, then random_sample's
                    exponential race: q = torch.empty_like(probs)
                    .exponential_(), argmax(probs / q). Compiled; no Triton
                    peer (top-k and top-p need a sort or a selection).
  sample, no filter vLLM's random_sample on softmax(x / T) (the exponential
                    race); compiled; a Triton Gumbel race (argmax of x / T
                    - log(-log u), u from tl.rand: one read, no probs).
  spec_verify       a chain verifier vectorised over rows, after vLLM v0's
                    rejection sampler (vllm/model_executor/layers/
                    rejection_sampler.py): every position's target
                    probabilities, the accept tests u * q(d) < p(d) at once,
                    the first rejection by a cumulative product, the
                    recovered token of every position drawn from
                    max(p - q, 0) (one-hot drafts: p without the draft) by
                    an exponential race, the bonus token from the last
                    position. Compiled; no Triton peer.
  spec_tree_verify  the rule of csrc/spec_tree_verify.cu vectorised over
                    rows (every node's softmax, then the walk level by
                    level; csrc/dev/tree_peer.py times it on its own).
                    Compiled; no Triton peer; no peer with filters.

min-p and ngram_match have no peer. The peers draw from the same laws as
sampviz's kernels (docs/SEMANTICS.md) but never the same tokens: they carry
no Philox streams.

Modes:
  peers.py serve [--device cuda] [--ops LIST] [--match TEXT] [--no-compile]
                 [--no-triton] [--compile-timeout S] [--compile-budget S]
      The protocol of `sampviz bench --peers` (cmd/sampviz/peers.go). The
      first line written is a hello: {"ready": true, "torch": ..., "triton":
      ..., "triton_why": ..., "device": ...}, or {"ready": false, "why":
      "import torch failed: ..."} and the script exits. Then, per request
      line {"name", "shape", "case" (engine/cuda.BenchCase's JSON), "inputs"
      (the safetensors file the bench's worker wrote: every input set
      stacked on a leading dimension), "iters", "warmup"}, one reply line
      {"name", "shape", "peers": [{"peer", "what", "median_us", "b2b_us",
      "compile_s", "error", "skipped"}]}. A compile failure or timeout is
      that peer's "error"; the others go on.
  peers.py check [--device cpu|cuda]
      Each peer's semantics on tiny tensors against a naive implementation
      (exact where the op is, chi-square laws for the samplers, a broken
      verifier that must be caught); with --device cuda, the Triton kernels
      too.

Timing is the bench's (docs/PERF.md): CUDA events around each call, calls
queued behind a GPU spin (torch.cuda._sleep) so that host gaps stay out of
the numbers, warm-up first, the median of the calls; "b2b" is the mean of
the same calls back to back between one pair of events. The calls rotate
over the bench's own input sets. torch.compile's compile time is reported
apart and never in a median.
"""

import argparse
import json
import math
import os
import signal
import statistics
import sys
import time

try:
    import torch
except ImportError as e:  # serve says why in its hello line
    torch = None
    TORCH_IMPORT_ERROR = "import torch failed: %s" % e
else:
    TORCH_IMPORT_ERROR = ""

try:
    import triton
    import triton.language as tl
except Exception as e:  # ImportError, or a broken install; torch's peers go on
    triton = tl = None
    TRITON_IMPORT_ERROR = "import triton failed: %s" % e
else:
    TRITON_IMPORT_ERROR = ""
_TRITON = None  # the Kernels class below, where Triton imports


# --- inputs -----------------------------------------------------------------------

def load_safetensors(path, device="cpu"):
    """The tensors of the safetensors file the bench's worker wrote, as
    {name: tensor on device}, and its metadata: sampviz_capture's dump
    reader (imported here, so that a machine without torch still gets
    serve's hello line saying why)."""
    import sampviz_capture

    tensors, meta = sampviz_capture.load(path)
    return {name: t.to(device) for name, t in tensors.items()}, meta


# --- the torch peers -----------------------------------------------------------------


def softmax_peer(x, temperature):
    """softmax(x / T) in float32, the way an engine writes it."""
    return torch.softmax(x.float() / temperature, -1)


def argmax_peer(x):
    return torch.argmax(x, -1)


def apply_top_k_top_p(logits, k, p):
    """vLLM's apply_top_k_top_p_pytorch (vllm/v1/sample/ops/
    topk_topp_sampler.py), without a CPU sync: sort ascending, mask below
    the k-th largest, mask the low tail whose cumulative probability is at
    most 1 - p (the largest kept), scatter back. k [B] int or None, p [B]
    float or None; logits float32 [B, V], updated in place."""
    if k is None and p is None:
        return logits
    logits_sort, logits_idx = logits.sort(dim=-1, descending=False)
    if k is not None:
        top_k_mask = logits_sort.size(1) - k.to(torch.long)
        top_k_mask = logits_sort.gather(1, top_k_mask.unsqueeze(dim=1))
        top_k_mask = logits_sort < top_k_mask
        logits_sort.masked_fill_(top_k_mask, -float("inf"))
    if p is not None:
        probs_sort = logits_sort.softmax(dim=-1)
        probs_sum = torch.cumsum(probs_sort, dim=-1, out=probs_sort)
        top_p_mask = probs_sum <= 1 - p.unsqueeze(dim=1)
        top_p_mask[:, -1] = False
        logits_sort.masked_fill_(top_p_mask, -float("inf"))
    return logits.scatter_(dim=-1, index=logits_idx, src=logits_sort)


def top_k_top_p_candidates(logits, kmax, k, p):
    """vLLM's top-k/top-p rule over torch.topk's candidates rather than a
    sorted row (as vLLM's apply_top_k_only does for top-k alone): the kmax
    largest logits of each row, descending, those under the row's k-th
    largest masked, then vLLM's top-p mask on them (ascending softmax and
    cumsum, masked where at most 1 - p, the largest kept). Returns (the
    kept logits [B, kmax], -inf where masked; their token ids). kmax is a
    Python int (no device sync), at least every row's k."""
    vals, idx = logits.topk(kmax, dim=-1)
    kth = vals.gather(1, (k.long() - 1).clamp(0, kmax - 1)[:, None])
    vals = vals.masked_fill(vals < kth, -float("inf"))
    if p is not None:
        asc = vals.flip(-1)
        probs_sum = asc.softmax(dim=-1).cumsum(dim=-1)
        top_p_mask = probs_sum <= 1 - p.unsqueeze(dim=1)
        top_p_mask[:, -1] = False
        vals = asc.masked_fill(top_p_mask, -float("inf")).flip(-1)
    return vals, idx


def random_sample(probs):
    """vLLM's random_sample without per-request generators: the exponential
    race argmax(probs / q), q ~ Exp(1), probs overwritten."""
    q = torch.empty_like(probs)
    q.exponential_()
    return probs.div_(q).argmax(dim=-1).view(-1)


def renorm_peer(x, temperature, k, p, kmax=0):
    """The filtered distribution in float32: with top-k (kmax > 0) softmax
    over top_k_top_p_candidates scattered back into the row, else vLLM's
    sorted mask, then softmax."""
    logits = x.to(torch.float32, copy=True).div_(temperature)
    if k is not None and kmax > 0:
        vals, idx = top_k_top_p_candidates(logits, kmax, k, p)
        return torch.zeros_like(logits).scatter_(1, idx, vals.softmax(dim=-1))
    return apply_top_k_top_p(logits, k, p).softmax(dim=-1, dtype=torch.float32)


def sample_peer(x, temperature, k, p, kmax=0):
    """vLLM's sampling in torch: temperature, top-k/top-p, softmax, the
    exponential race. With top-k (kmax > 0) over torch.topk's candidates
    (top_k_top_p_candidates), else over vLLM's sorted row
    (apply_top_k_top_p; the whole row without filters)."""
    logits = x.to(torch.float32, copy=True).div_(temperature)
    if k is not None and kmax > 0:
        vals, idx = top_k_top_p_candidates(logits, kmax, k, p)
        pick = random_sample(vals.softmax(dim=-1, dtype=torch.float32))
        return idx.gather(1, pick[:, None]).squeeze(1)
    logits = apply_top_k_top_p(logits, k, p)
    probs = logits.softmax(dim=-1, dtype=torch.float32)
    return random_sample(probs)


def gumbel_race_peer(x, temperature):
    """The exponential race in log space: argmax(x / T - log E), E ~ Exp(1)
    (the law of the Triton race, written in torch for --check)."""
    logits = x.to(torch.float32) / temperature
    e = torch.empty_like(logits).exponential_()
    return (logits - e.log()).argmax(-1)


def chain_verify(target, drafts, qprobs, temperature, k, p, broken=False):
    """A chain verifier vectorised over rows: target [B, K+1, V] logits,
    drafts [B, K] tokens, qprobs None (one-hot drafts) or [B, K, V] draft
    probabilities (clamped at 0, as the bench's kernel reads them), k and p
    per row or None. Returns (tokens [B, K+1], the accepted drafts then the
    recovered or bonus token, -1 after; accepted [B]). broken draws the
    recovered token from p rather than the residual (a negative control for
    check)."""
    B, K1, V = target.shape
    K = K1 - 1
    logits = target.to(torch.float32, copy=True).div_(temperature).view(B * K1, V)
    if k is not None or p is not None:
        kk = None if k is None else k.repeat_interleave(K1)
        pp = None if p is None else p.repeat_interleave(K1)
        logits = apply_top_k_top_p(logits, kk, pp)
    probs = logits.softmax(dim=-1, dtype=torch.float32).view(B, K1, V)
    d = drafts.long()
    head = probs[:, :K]
    pd = head.gather(2, d[..., None]).squeeze(2)
    if qprobs is None:
        qd = torch.ones_like(pd)
        rec = head.scatter(2, d[..., None], 0.0)
    else:
        q = qprobs.to(torch.float32).clamp_min(0)
        qd = q.gather(2, d[..., None]).squeeze(2)
        rec = (head - q).clamp_min_(0)
    if broken:
        rec = head.clone()
    u = torch.rand(B, K, device=target.device)
    accept = u * qd < pd
    accepted = accept.to(torch.int32).cumprod(1).sum(1)
    recovered = random_sample(rec.reshape(B * K, V)).view(B, K)
    bonus = random_sample(probs[:, K].clone())
    pos = torch.arange(K1, device=target.device)
    tokens = torch.where(pos[None, :K] < accepted[:, None], d, torch.full_like(d, -1))
    tokens = torch.cat([tokens, torch.full_like(d[:, :1], -1)], 1)
    at = accepted.long().clamp_max(K - 1)[:, None]
    last = torch.where(accepted < K, recovered.gather(1, at).squeeze(1), bonus)
    tokens.scatter_(1, accepted.long()[:, None], last[:, None])
    return tokens, accepted


# --- spec_tree_verify's rule (csrc/dev/tree_peer.py times it on its own) -------------


def bench_tree(nodes, topk):
    """benchTree of engine/cuda/bench.go: the first nodes nodes, breadth
    first, of the tree in which every node has topk children."""
    nxt, sib = [-1] * nodes, [-1] * nodes
    for c in range(1, nodes):
        parent, rank = (c - 1) // topk, (c - 1) % topk
        if rank == 0:
            nxt[parent] = c
        else:
            sib[c - 1] = c
    return nxt, sib


def tree_levels(first_child, next_sibling):
    """Returns (levels, siblings): the depth of the tree(s) plus one and the
    most children of any node; the walk's static loop bounds."""
    fc = first_child.reshape(-1, first_child.shape[-1]).tolist()
    ns = next_sibling.reshape(-1, next_sibling.shape[-1]).tolist()
    levels, siblings = 1, 0
    for f, s in zip(fc, ns):
        depth = [0] * len(f)
        for u in range(len(f)):
            c, m = f[u], 0
            while c >= 0:
                depth[c] = depth[u] + 1
                c, m = s[c], m + 1
            siblings = max(siblings, m)
        levels = max(levels, max(depth) + 1)
    return levels, siblings


def level_step(src, q, temperature, walk, cur, alive, tokens, first_child, next_sibling, u, siblings,
               broken=False):
    """One level of the walk for every row.

    src is [B, N, V]: the target probabilities of every node (walk False), or
    the logits (walk True: the current node's row is softmaxed here at
    temperature). q is None (one-hot drafts) or the draft rows [B, N, V].
    cur [B] is each row's node, alive [B] whether its walk goes on; u
    [B, siblings + 1] the uniforms of the children's tests and of the draw.
    Returns
    (cur, alive, node, token): the node moved to (-1 where none) and the
    token emitted at this level (the accepted child's, or the draw from the
    final residual where the walk stops; -1 for rows already stopped).
    broken skips the residual update (a negative control for checks)."""
    B = cur.shape[0]
    rows = torch.arange(B, device=cur.device)
    row = src[rows, cur]
    if walk:
        if temperature == 0:
            r = torch.nn.functional.one_hot(row.argmax(-1), row.shape[-1]).float()
        else:
            r = torch.softmax(row.float() / temperature, -1)
    else:
        r = row.float()
    if q is not None:
        qrow = q[rows, cur].float().clamp_min(0)
    z = r.sum(-1)  # one-hot drafts keep r unnormalised, z its mass
    child = first_child.gather(1, cur[:, None]).squeeze(1)
    moved = torch.zeros_like(alive)
    node = torch.full_like(cur, -1)
    token = torch.full_like(cur, -1)
    for j in range(siblings):
        has = alive & ~moved & (child >= 0)
        c = child.clamp_min(0)
        x = tokens.gather(1, c[:, None])
        rx = r.gather(1, x).squeeze(1)
        uj = u[:, j]
        if q is None:
            acc = has & (uj * z < rx)  # u < r(x) / z, q(x) = 1
        else:
            qx = qrow.gather(1, x).squeeze(1)
            acc = has & (uj * qx * z < rx)  # u < min(1, r(x) / q(x)); 1 where q(x) = 0 < r(x)
        rej = has & ~acc
        if not broken:
            if q is None:
                # Remove x from the target (unless that leaves nothing).
                cut = rej & (z - rx > 0)
                r.scatter_(1, x, torch.where(cut, torch.zeros_like(rx), rx)[:, None])
                z = torch.where(cut, z - rx, z)
            else:
                res = (r / z[:, None] - qrow).clamp_min(0)
                zr = res.sum(-1)
                cut = rej & (zr > 0)
                r = torch.where(cut[:, None], res, r)
                z = torch.where(cut, zr, z)
        node = torch.where(acc, child, node)
        token = torch.where(acc, x.squeeze(1), token)
        moved = moved | acc
        child = torch.where(has, next_sibling.gather(1, c[:, None]).squeeze(1), torch.full_like(child, -1))
    stop = alive & ~moved
    cdf = torch.cumsum(r, -1)
    pick = (u[:, siblings] * cdf[:, -1])[:, None]
    drawn = torch.searchsorted(cdf, pick, right=True).squeeze(1).clamp_max(r.shape[-1] - 1)
    token = torch.where(stop, drawn, token)
    cur = torch.where(moved, node, cur)
    return cur, moved, node, token


def target_probs(logits, temperature):
    """The target distribution of every node, float32 [B, N, V]."""
    if temperature == 0:
        return torch.nn.functional.one_hot(logits.argmax(-1), logits.shape[-1]).float()
    if temperature == 1:
        return torch.softmax(logits, -1, dtype=torch.float32)
    return torch.softmax(logits.float() / temperature, -1)


def tree_verify(logits, q, tokens, first_child, next_sibling, levels, siblings, temperature=1.0, walk=False,
                step=level_step, probs=target_probs, broken=False):
    """spec_tree_verify's rule over a batch: logits [B, N, V] (any float
    dtype), q None or [B, N, V], tokens [B, N] the candidates (node 0's
    unused), first_child and next_sibling [B, N] (SGLang's
    retrive_next_token and retrive_next_sibling, -1 for none). Returns
    (path [B, levels], emitted tokens [B, levels], accepted [B]): the path's
    nodes root first and the tokens, -1 after, and the accepted count."""
    B = logits.shape[0]
    dev = logits.device
    src = logits if walk else probs(logits, temperature)
    cur = torch.zeros(B, dtype=torch.long, device=dev)
    alive = torch.ones(B, dtype=torch.bool, device=dev)
    nodes, toks = [cur], []
    for d in range(levels):
        u = torch.rand(B, siblings + 1, device=dev)  # a fresh tensor a level: no view for dynamo to guard on
        cur, alive, node, tok = step(src, q, temperature, walk, cur, alive, tokens, first_child, next_sibling, u,
                                     siblings, broken)
        nodes.append(node)
        toks.append(tok)
    path = torch.stack(nodes[:levels], 1)
    emitted = torch.stack(toks, 1)
    accepted = (path >= 0).sum(1) - 1
    return path, emitted, accepted


# --- the Triton peers ------------------------------------------------------------------


# The Triton peers are defined at module level (Triton resolves the names
# a kernel uses in its module's globals) when Triton imports.
if triton is not None:

    @triton.jit
    def _argmax_rows(x_ptr, out_ptr, V, BLOCK: tl.constexpr):
        # Each lane keeps its own best value and first index; one
        # reduction at the end, none in the loop.
        row = tl.program_id(0)
        base = x_ptr + row.to(tl.int64) * V
        best_v = tl.full([BLOCK], float("-inf"), tl.float32)
        best_i = tl.zeros([BLOCK], tl.int32)
        for start in range(0, V, BLOCK):
            offs = start + tl.arange(0, BLOCK)
            x = tl.load(base + offs, mask=offs < V, other=float("-inf")).to(tl.float32)
            take = x > best_v
            best_v = tl.where(take, x, best_v)
            best_i = tl.where(take, offs, best_i)
        m = tl.max(best_v, 0)
        idx = tl.min(tl.where(best_v == m, best_i, V), 0)
        tl.store(out_ptr + row, idx.to(tl.int64))

    @triton.jit
    def _softmax_online(x_ptr, out_ptr, V, inv_t, BLOCK: tl.constexpr):
        # Pass 1: per-lane running max and rescaled sum; pass 2 writes.
        row = tl.program_id(0)
        base = x_ptr + row.to(tl.int64) * V
        obase = out_ptr + row.to(tl.int64) * V
        m = tl.full([BLOCK], float("-inf"), tl.float32)
        s = tl.zeros([BLOCK], tl.float32)
        for start in range(0, V, BLOCK):
            offs = start + tl.arange(0, BLOCK)
            x = tl.load(base + offs, mask=offs < V, other=float("-inf")).to(tl.float32) * inv_t
            m_new = tl.maximum(m, x)
            # Lanes still at -inf (a masked tail) would give exp(nan).
            alpha = tl.where(m_new == float("-inf"), 0.0, tl.exp(m - m_new))
            beta = tl.where(m_new == float("-inf"), 0.0, tl.exp(x - m_new))
            s = s * alpha + beta
            m = m_new
        mx = tl.max(m, 0)
        total = tl.sum(s * tl.exp(m - mx), 0)
        inv = 1.0 / total
        for start in range(0, V, BLOCK):
            offs = start + tl.arange(0, BLOCK)
            x = tl.load(base + offs, mask=offs < V, other=float("-inf")).to(tl.float32) * inv_t
            tl.store(obase + offs, tl.exp(x - mx) * inv, mask=offs < V)

    @triton.jit
    def _gumbel_race(x_ptr, out_ptr, V, inv_t, seed, BLOCK: tl.constexpr):
        # argmax(x / T - log(-log u)): the exponential race in log space,
        # one read of the row, no probabilities written.
        row = tl.program_id(0)
        base = x_ptr + row.to(tl.int64) * V
        best_v = tl.full([BLOCK], float("-inf"), tl.float32)
        best_i = tl.zeros([BLOCK], tl.int32)
        for start in range(0, V, BLOCK):
            offs = start + tl.arange(0, BLOCK)
            x = tl.load(base + offs, mask=offs < V, other=float("-inf")).to(tl.float32) * inv_t
            u = tl.rand(seed, row * V + offs)
            g = x - tl.log(-tl.log(u))
            take = g > best_v
            best_v = tl.where(take, g, best_v)
            best_i = tl.where(take, offs, best_i)
        m = tl.max(best_v, 0)
        idx = tl.min(tl.where(best_v == m, best_i, V), 0)
        tl.store(out_ptr + row, idx.to(tl.int64))

    class Kernels:
        seed = 0

        @staticmethod
        def argmax(x):
            B, V = x.shape
            out = torch.empty(B, dtype=torch.int64, device=x.device)
            _argmax_rows[(B,)](x, out, V, BLOCK=2048, num_warps=8)
            return out

        @staticmethod
        def softmax(x, temperature):
            B, V = x.shape
            out = torch.empty(B, V, dtype=torch.float32, device=x.device)
            _softmax_online[(B,)](x, out, V, 1.0 / temperature, BLOCK=2048, num_warps=8)
            return out

        @staticmethod
        def gumbel_race(x, temperature):
            B, V = x.shape
            out = torch.empty(B, dtype=torch.int64, device=x.device)
            # Fresh draws each call; seed % 16 == 3 always, so that Triton's
            # specialisation of integer arguments (== 1, % 16 == 0) never
            # recompiles the kernel inside a timed call.
            Kernels.seed = ((Kernels.seed + 16) & 0x7FFFFFF0) | 3
            _gumbel_race[(B,)](x, out, V, 1.0 / temperature, Kernels.seed, BLOCK=2048, num_warps=8)
            return out

    _TRITON = Kernels


def triton_kernels():
    """The Triton peers (a class with argmax, softmax and gumbel_race
    launchers), or None with TRITON_IMPORT_ERROR saying why."""
    return _TRITON


# --- which peers a case has --------------------------------------------------------------


class Peer:
    """One peer of a case: label (torch, torch.compile or triton), what it
    is, and call(set) that runs it on one input set; or none, the reason
    the case has no such peer."""

    def __init__(self, label, what, call=None, none="", compile_fns=None):
        self.label, self.what, self.call, self.none = label, what, call, none
        self.compile_fns = compile_fns  # the compiled peer's: the functions to torch.compile


def filters(case, rows, device):
    """The per-row top-k and top-p tensors of a case (None where off)."""
    k = p = None
    if 0 < case.get("top_k", 0) < case["vocab"]:
        k = torch.full((rows,), case["top_k"], dtype=torch.int32, device=device)
    if 0 < case.get("top_p", 0) < 1:
        p = torch.full((rows,), case["top_p"], dtype=torch.float32, device=device)
    return k, p


def case_peers(case, inputs, device):
    """The sets (a list of per-set argument tuples) and the peers of a
    bench case, given its inputs file's tensors. A case without a peer gets
    peers whose none says why."""
    op = case["op"]
    t = case.get("temperature", 0) or 0
    rows = case["rows"]
    none = lambda why: [Peer("torch", "", none=why), Peer("torch.compile", "", none=why), Peer("triton", "", none=why)]
    if case.get("min_p", 0) > 0:
        return [], none("no peer with min-p")
    if op in ("argmax", "softmax", "renorm", "sample"):
        sets = [(x,) for x in inputs["logits"]]
        if op == "argmax":
            tk = triton_kernels()
            return sets, [
                Peer("torch", "torch.argmax", lambda s: argmax_peer(s[0])),
                Peer("torch.compile", "torch.argmax", compile_fns=(argmax_peer, lambda f: (lambda s: f(s[0])))),
                Peer("triton", "row argmax, one read", lambda s: tk.argmax(s[0])) if tk else
                Peer("triton", "", none=TRITON_IMPORT_ERROR)]
        if t <= 0:
            return [], none("no peer at temperature 0 for %s" % op)
        if op == "softmax":
            tk = triton_kernels()
            return sets, [
                Peer("torch", "softmax(x.float() / T)", lambda s: softmax_peer(s[0], t)),
                Peer("torch.compile", "softmax(x.float() / T)",
                     compile_fns=(softmax_peer, lambda f: (lambda s: f(s[0], t)))),
                Peer("triton", "online softmax", lambda s: tk.softmax(s[0], t)) if tk else
                Peer("triton", "", none=TRITON_IMPORT_ERROR)]
        k, p = filters(case, rows, device)
        kmax = case.get("top_k", 0) if k is not None else 0
        how = "torch.topk, then" if kmax else "sort,"
        if op == "renorm":
            what = "vLLM-style: %s the top-p sort/cumsum mask, softmax" % how
            return sets, [
                Peer("torch", what, lambda s: renorm_peer(s[0], t, k, p, kmax)),
                Peer("torch.compile", what, compile_fns=(renorm_peer, lambda f: (lambda s: f(s[0], t, k, p, kmax)))),
                Peer("triton", "", none="no Triton peer")]
        if k is None and p is None:
            tk = triton_kernels()
            return sets, [
                Peer("torch", "vLLM random_sample (softmax, exponential race)", lambda s: sample_peer(s[0], t, None, None)),
                Peer("torch.compile", "vLLM random_sample",
                     compile_fns=(sample_peer, lambda f: (lambda s: f(s[0], t, None, None)))),
                Peer("triton", "Gumbel race, one read", lambda s: tk.gumbel_race(s[0], t)) if tk else
                Peer("triton", "", none=TRITON_IMPORT_ERROR)]
        what = "vLLM-style: %s the top-p sort/cumsum mask, softmax, exponential race" % how
        return sets, [
            Peer("torch", what, lambda s: sample_peer(s[0], t, k, p, kmax)),
            Peer("torch.compile", what, compile_fns=(sample_peer, lambda f: (lambda s: f(s[0], t, k, p, kmax)))),
            Peer("triton", "", none="no Triton peer")]
    if op == "spec_verify":
        if t <= 0:
            return [], none("no peer at temperature 0 for spec_verify")
        k, p = filters(case, rows, device)
        q = inputs.get("qprobs")
        sets = [(inputs["target"][i], inputs["drafts"][i], None if q is None else q[i])
                for i in range(inputs["target"].shape[0])]
        what = "vectorised chain verifier (vLLM v0's rejection sampler)"
        return sets, [
            Peer("torch", what, lambda s: chain_verify(s[0], s[1], s[2], t, k, p)),
            Peer("torch.compile", what, compile_fns=(chain_verify, lambda f: (lambda s: f(s[0], s[1], s[2], t, k, p)))),
            Peer("triton", "", none="no Triton peer")]
    if op == "spec_tree_verify":
        if case.get("top_k", 0) or 0 < case.get("top_p", 0) < 1:
            return [], none("no peer for a filtered tree")
        n = case["nodes"]
        fc = inputs["first_child"].long().expand(rows, n).contiguous()
        ns = inputs["next_sibling"].long().expand(rows, n).contiguous()
        tokens = inputs["tokens"].long()
        levels, siblings = tree_levels(fc[:1], ns[:1])
        q = inputs.get("qprobs")
        sets = [(inputs["target"][i], None if q is None else q[i]) for i in range(inputs["target"].shape[0])]
        what = "tree verifier: every node's softmax, then the walk a level at a time"

        def tree_call(step, probs):
            return lambda s: tree_verify(s[0], s[1], tokens, fc, ns, levels, siblings, t, False, step, probs)

        return sets, [
            Peer("torch", what, tree_call(level_step, target_probs)),
            Peer("torch.compile", what, compile_fns=((level_step, target_probs), lambda fs: tree_call(*fs))),
            Peer("triton", "", none="no Triton peer")]
    return [], none("no peer for %s" % op)


# --- timing ---------------------------------------------------------------------------------


class CompileTimeout(BaseException):
    """Raised by the alarm; a BaseException so that torch's own handlers of
    Exception do not swallow it."""


def with_timeout(seconds, fn):
    """fn(), stopped by CompileTimeout after seconds (SIGALRM)."""

    def alarm(signum, frame):
        raise CompileTimeout()

    old = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(max(1, int(seconds)))
    try:
        return fn()
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def spin_cycles_per_ms():
    """GPU clock cycles of torch.cuda._sleep per millisecond."""
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda._sleep(1000)
    e0.record()
    torch.cuda._sleep(10_000_000)
    e1.record()
    torch.cuda.synchronize()
    return 10_000_000 / max(e0.elapsed_time(e1), 1e-3)


def time_cuda(call, sets, iters, warmup, cycles_per_ms):
    """Median and back-to-back mean (us) of call(set) over iters calls."""
    for i in range(warmup):
        call(sets[i % len(sets)])
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for i in range(3):
        call(sets[i % len(sets)])
    host_ms = (time.perf_counter() - t0) / 3 * 1e3  # time to queue one call
    torch.cuda.synchronize()
    batch = 16
    times = []
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(batch)]
    done = 0
    while done < iters:
        n = min(batch, iters - done)
        # Queue the calls behind a spin long enough to hide the host.
        torch.cuda._sleep(int(min(2 + 1.5 * n * host_ms, 2000) * cycles_per_ms))
        for i in range(n):
            events[i][0].record()
            call(sets[(done + i) % len(sets)])
            events[i][1].record()
        torch.cuda.synchronize()
        times += [events[i][0].elapsed_time(events[i][1]) * 1e3 for i in range(n)]
        done += n
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    for i in range(iters):
        call(sets[i % len(sets)])
    e1.record()
    torch.cuda.synchronize()
    return statistics.median(times), e0.elapsed_time(e1) * 1e3 / iters


def time_cpu(call, sets, iters, warmup):
    """Median and mean (us) of call(set) on the CPU (tests)."""
    for i in range(warmup):
        call(sets[i % len(sets)])
    times = []
    for i in range(iters):
        t0 = time.perf_counter()
        call(sets[i % len(sets)])
        times.append((time.perf_counter() - t0) * 1e6)
    return statistics.median(times), statistics.fmean(times)


def first_line(e):
    return (str(e).strip().splitlines() or [""])[0][:160]


class Server:
    """serve mode: answers the bench's requests one line at a time."""

    def __init__(self, args):
        self.args = args
        self.device = torch.device(args.device)
        self.cuda = self.device.type == "cuda"
        self.cpms = spin_cycles_per_ms() if self.cuda else 0
        self.compile_off = ""
        if args.no_compile:
            self.compile_off = "--no-compile"
        elif not hasattr(torch, "compile"):
            self.compile_off = "no torch.compile in torch %s" % torch.__version__
        self.compile_left = args.compile_budget
        self.ops = {o.strip() for o in args.ops.split(",") if o.strip()}

    def hello(self):
        global _TRITON, TRITON_IMPORT_ERROR
        tk = None if self.args.no_triton else triton_kernels()
        why = "--no-triton" if self.args.no_triton else TRITON_IMPORT_ERROR
        if self.args.no_triton:
            _TRITON, TRITON_IMPORT_ERROR = None, "--no-triton"
        name = torch.cuda.get_device_name(self.device) if self.cuda else "cpu"
        triton_version = ""
        if tk is not None:
            import triton
            triton_version = triton.__version__
        return {"ready": True, "torch": torch.__version__, "triton": triton_version, "triton_why": why,
                "device": name, "compile": not self.compile_off, "compile_why": self.compile_off}

    def answer(self, req):
        case = req["case"]
        out = {"name": req.get("name", ""), "shape": req.get("shape", ""), "peers": []}
        label = req.get("name", "") + " " + req.get("shape", "")
        if self.ops and case["op"] not in self.ops or self.args.match not in label:
            out["peers"] = [{"peer": p, "skipped": "not in the script's --ops/--match"}
                            for p in ("torch", "torch.compile", "triton")]
            return out
        try:
            out["peers"] = self.time_case(req)
        finally:
            if self.cuda:  # the case's inputs are gone: hand their memory back before the next case of ours
                torch.cuda.empty_cache()
        return out

    def time_case(self, req):
        inputs, _ = load_safetensors(req["inputs"], self.device)
        sets, peers = case_peers(req["case"], inputs, self.device)
        iters = req.get("iters") or 100
        warmup = req.get("warmup") or 10
        return [self.time_peer(peer, sets, iters, warmup) for peer in peers]

    def time_peer(self, peer, sets, iters, warmup):
        res = {"peer": peer.label, "what": peer.what}
        if peer.none:
            res["skipped"] = peer.none
            return res
        call = peer.call
        if peer.compile_fns is not None:
            if not self.compile_off and self.compile_left <= 0:
                self.compile_off = "the compile budget (%d s) is spent" % self.args.compile_budget
            if self.compile_off:
                res["skipped"] = self.compile_off
                return res
            fns, bind = peer.compile_fns
            try:
                import torch._dynamo as dynamo
            except ImportError:  # a stand-in torch.compile (tests)
                dynamo = None
            if dynamo is not None:
                dynamo.reset()  # each case compiles afresh: no cache limit, no stale guards
            if isinstance(fns, tuple):
                call = bind(tuple(torch.compile(f, dynamic=False) for f in fns))
            else:
                call = bind(torch.compile(fns, dynamic=False))
            t0 = time.perf_counter()
            limit = min(self.args.compile_timeout, self.compile_left)
            try:
                with_timeout(limit, lambda: (call(sets[0]), self.cuda and torch.cuda.synchronize()))
            except CompileTimeout:
                self.compile_left -= time.perf_counter() - t0
                res["error"] = "compile over %d s: stopped" % limit
                # An interrupted compile leaves dynamo in an unknown state.
                self.compile_off = "an earlier compile was stopped"
                return res
            except Exception as e:  # reported per case; the other peers go on
                self.compile_left -= time.perf_counter() - t0
                res["error"] = "compile failed: %s: %s" % (type(e).__name__, first_line(e))
                return res
            spent = time.perf_counter() - t0
            self.compile_left -= spent
            res["compile_s"] = round(spent, 2)
        try:
            if self.cuda:
                med, b2b = time_cuda(call, sets, iters, warmup, self.cpms)
            else:
                med, b2b = time_cpu(call, sets, iters, warmup)
        except Exception as e:
            res["error"] = "failed: %s: %s" % (type(e).__name__, first_line(e))
            return res
        res["median_us"], res["b2b_us"] = round(med, 2), round(b2b, 2)
        return res


def serve(args):
    # The protocol gets its own copy of stdout; fd 1 and sys.stdout then
    # point to stderr, so that nothing a library prints (Inductor, Triton's
    # compilers) can fall between the protocol's lines.
    sys.stdout.flush()
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    if torch is None:
        out.write(json.dumps({"ready": False, "why": TORCH_IMPORT_ERROR}) + "\n")
        out.flush()
        return 0
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        out.write(json.dumps({"ready": False, "why": "torch %s sees no CUDA device" % torch.__version__}) + "\n")
        out.flush()
        return 0
    server = Server(args)
    out.write(json.dumps(server.hello()) + "\n")
    out.flush()
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            req = json.loads(line)
            rep = server.answer(req)
        except Exception as e:  # one bad case never ends the session
            rep = {"error": "%s: %s" % (type(e).__name__, first_line(e))}
        out.write(json.dumps(rep) + "\n")
        out.flush()
    return 0


# --- check: each peer against a naive implementation ------------------------------------------


def chi2_sf(x, k):
    """Upper tail of the chi-square law with k degrees of freedom
    (Wilson-Hilferty)."""
    if k <= 0:
        return 1.0
    z = ((x / k) ** (1 / 3) - (1 - 2 / (9 * k))) / math.sqrt(2 / (9 * k))
    return 0.5 * math.erfc(z / math.sqrt(2))


def chi2(counts, probs):
    """Chi-square statistic and degrees of freedom of counts against probs,
    cells with an expected count under 5 pooled into one (infinite where
    counts fall where nothing is expected)."""
    n = sum(counts)
    stat, cells, pool_o, pool_e = 0.0, 0, 0, 0.0
    for o, p in zip(counts, probs):
        e = n * p
        if e < 5:
            pool_o, pool_e = pool_o + o, pool_e + e
            continue
        stat += (o - e) ** 2 / e
        cells += 1
    if pool_o > 0 and pool_e < 1e-9:
        return float("inf"), max(cells, 1)
    if pool_e > 0:
        stat += (pool_o - pool_e) ** 2 / pool_e
        cells += 1
    return stat, cells - 1


def naive_filtered(logits, temperature, k, p):
    """The filtered distribution of one row, naively, in float64: softmax
    of x / T over the k largest, then the fewest largest tokens whose mass
    reaches p, renormalised (vLLM's rule where no two logits tie)."""
    x = [float(v) / temperature for v in logits]
    order = sorted(range(len(x)), key=lambda i: -x[i])
    if k:
        order = order[:k]
    m = max(x[i] for i in order)
    w = {i: math.exp(x[i] - m) for i in order}
    z = sum(w.values())
    kept, mass = [], 0.0
    for i in order:
        kept.append(i)
        mass += w[i] / z
        if p and mass >= p:
            break
    zk = sum(w[i] for i in kept)
    return [w[i] / zk if i in kept else 0.0 for i in range(len(x))]


def law_p(tokens, probs):
    """The chi-square p-value of the tokens against probs."""
    counts = torch.bincount(tokens.reshape(-1).long(), minlength=len(probs)).tolist()
    s, dof = chi2(counts, probs)
    return chi2_sf(s, dof)


def run_checks(device="cpu", trials=40000, seed=5):
    """Runs every check; returns [(name, ok, detail)]."""
    dev = torch.device(device)
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    results = []
    alpha = 1e-5

    def record(name, ok, detail):
        results.append((name, bool(ok), detail))

    V = 7
    logits = torch.randn(3, V, generator=gen) * 2
    # argmax: first index of the maximum, ties included.
    x = logits.clone()
    x[1, 5] = x[1, 2] = x[1].max() + 1
    want = [max(range(V), key=lambda i: (float(r[i]), -i)) for r in x]
    got = argmax_peer(x.to(dev)).tolist()
    record("argmax", got == want, "got %s, want %s" % (got, want))
    # softmax against float64 math.
    t = 0.7
    got = softmax_peer(logits.to(torch.bfloat16).to(dev), t).cpu()
    ref = [naive_filtered(r.to(torch.bfloat16).float().tolist(), t, 0, 0) for r in logits]
    err = max(abs(float(g) - w) for gr, wr in zip(got, ref) for g, w in zip(gr, wr))
    record("softmax", err < 1e-6, "largest error %.2g" % err)
    # renorm: vLLM's mask against the naive rule, for the bench's filters.
    for k, p, kmax in ((3, 0.9, 0), (3, 0.9, 5), (0, 0.8, 0), (4, 0, 0), (4, 0, 4)):
        kt = torch.full((3,), k, dtype=torch.int32, device=dev) if k else None
        pt = torch.full((3,), p, dtype=torch.float32, device=dev) if p else None
        got = renorm_peer(logits.to(dev), t, kt, pt, kmax).cpu()
        ref = [naive_filtered(r.tolist(), t, k, p) for r in logits]
        err = max(abs(float(g) - w) for gr, wr in zip(got, ref) for g, w in zip(gr, wr))
        record("renorm k=%d p=%g (%s)" % (k, p, "topk %d" % kmax if kmax else "sort"), err < 1e-5,
               "largest error %.2g" % err)
    # The samplers: the law of many draws from one row.
    row = logits[0]
    many = row.expand(trials, V).contiguous().to(dev)
    for name, fn, k, p in (("sample k3 p0.9 (sort)", sample_peer, 3, 0.9),
                           ("sample k3 p0.9 (topk 5)", lambda x, t, k, p: sample_peer(x, t, k, p, 5), 3, 0.9),
                           ("sample p0.8 (sort)", sample_peer, 0, 0.8),
                           ("sample plain (vLLM race)", sample_peer, 0, 0),
                           ("Gumbel race (log space)", lambda x, t, k, p: gumbel_race_peer(x, t), 0, 0)):
        kt = torch.full((trials,), k, dtype=torch.int32, device=dev) if k else None
        pt = torch.full((trials,), p, dtype=torch.float32, device=dev) if p else None
        pv = law_p(fn(many.clone(), t, kt, pt).cpu(), naive_filtered(row.tolist(), t, k, p))
        record(name, pv > alpha, "p %.3g" % pv)
    # The same sampler judged against the unfiltered law must fail (the check can fail).
    kt = torch.full((trials,), 3, dtype=torch.int32, device=dev)
    pv = law_p(sample_peer(many.clone(), t, kt, None).cpu(), naive_filtered(row.tolist(), t, 0, 0))
    record("sample k3 against the unfiltered law (must be caught)", pv < 1e-9, "p %.3g" % pv)
    # The chain verifier: losslessness of the first two emitted tokens.
    for qmode in (False, True):
        for broken in (False, True):
            K = 3
            tl = torch.randn(K + 1, V, generator=gen) * 1.5
            target = tl.expand(trials, K + 1, V).contiguous()
            if qmode:
                qrow = torch.softmax(torch.randn(K, V, generator=gen) * 1.5, -1)
                drafts = torch.stack([torch.multinomial(qrow[i], trials, replacement=True, generator=gen)
                                      for i in range(K)], 1)
                q = qrow.expand(trials, K, V).contiguous().to(dev)
            else:
                drafts = torch.randint(0, V, (1, K), generator=gen).expand(trials, K).contiguous()
                q = None
            tokens, accepted = chain_verify(target.to(dev), drafts.to(torch.int32).to(dev), q, 1.0, None, None,
                                            broken)
            tokens, accepted = tokens.cpu(), accepted.cpu()
            shape_ok = bool(((tokens >= 0).sum(1) == accepted + 1).all())
            p0 = law_p(tokens[:, 0], torch.softmax(tl[0], -1).tolist())
            on = accepted >= 1
            p1 = law_p(tokens[on, 1], torch.softmax(tl[1], -1).tolist()) if int(on.sum()) > 100 else 1.0
            pv = min(p0, p1)
            label = "chain verifier %s" % ("q" if qmode else "one-hot")
            if broken:
                record(label + ", broken residual (must be caught)", pv < 1e-9, "p %.3g" % pv)
            else:
                record(label, pv > alpha and shape_ok, "p %.3g, emitted = accepted + 1: %s" % (pv, shape_ok))
    # The chain verifier with filters: the first token follows the filtered target.
    K = 2
    tl = torch.randn(K + 1, V, generator=gen) * 0.5  # flat enough that the filters keep several tokens
    drafts = torch.randint(0, V, (1, K), generator=gen).expand(trials, K).contiguous()
    kt = torch.full((trials,), 3, dtype=torch.int32, device=dev)
    pt = torch.full((trials,), 0.9, dtype=torch.float32, device=dev)
    tokens, _ = chain_verify(tl.expand(trials, K + 1, V).contiguous().to(dev), drafts.to(torch.int32).to(dev), None,
                             0.7, kt, pt)
    law = naive_filtered(tl[0].tolist(), 0.7, 3, 0.9)
    pv = law_p(tokens[:, 0].cpu(), law)
    kept = sum(1 for w in law if w > 0)
    record("chain verifier one-hot, k3 p0.9 T0.7", pv > alpha and kept >= 2, "p %.3g, %d tokens kept" % (pv, kept))
    # The tree verifier: the first token's law on a small one-hot tree.
    nxt, sib = bench_tree(7, 2)
    tl = torch.randn(7, V, generator=gen) * 1.5
    tl[1:] = tl[0]  # one model: every node's target is the root's
    cand = torch.randint(0, V, (7,), generator=gen)
    fc = torch.tensor(nxt).expand(trials, 7).contiguous().to(dev)
    ns = torch.tensor(sib).expand(trials, 7).contiguous().to(dev)
    levels, siblings = tree_levels(fc[:1], ns[:1])
    _, emitted, _ = tree_verify(tl.expand(trials, 7, V).to(dev), None, cand.expand(trials, 7).to(dev), fc, ns,
                                levels, siblings, 1.0)
    pv = law_p(emitted[:, 0].cpu(), torch.softmax(tl[0], -1).tolist())
    record("tree verifier one-hot", pv > alpha, "p %.3g" % pv)
    # The Triton kernels against the torch peers, on the GPU.
    if dev.type == "cuda":
        tk = triton_kernels()
        if tk is None:
            record("triton", False, TRITON_IMPORT_ERROR)
        else:
            big = (torch.randn(5, 70001, device=dev) * 2).to(torch.bfloat16)
            big[2, 9] = big[2, 60000] = big[2].max() + 1
            record("triton argmax", tk.argmax(big).tolist() == argmax_peer(big).tolist(), "against torch.argmax")
            err = float((tk.softmax(big, t) - softmax_peer(big, t)).abs().max())
            record("triton softmax", err < 1e-6, "largest error %.2g" % err)
            rowd = row.to(torch.bfloat16).to(dev).expand(trials, V).contiguous()
            pv = law_p(tk.gumbel_race(rowd, t).cpu(), naive_filtered(row.to(torch.bfloat16).float().tolist(), t, 0, 0))
            record("triton Gumbel race", pv > alpha, "p %.3g" % pv)
    return results


def check(args):
    t0 = time.perf_counter()
    results = run_checks(args.device, args.trials)
    for name, ok, detail in results:
        print("check %-55s %s (%s)" % (name, "ok" if ok else "FAILED", detail))
    ok = all(r[1] for r in results)
    print("check %s in %.1f s" % ("passed" if ok else "FAILED", time.perf_counter() - t0))
    return 0 if ok else 1


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=["serve", "check"])
    ap.add_argument("--device", default=None, help="cuda (serve's default) or cpu (check's default)")
    ap.add_argument("--ops", default="", help="serve: time only these ops (comma-separated)")
    ap.add_argument("--match", default="", help="serve: time only the cases whose name and shape contain this")
    ap.add_argument("--no-compile", action="store_true", help="serve: skip the torch.compile peers")
    ap.add_argument("--no-triton", action="store_true", help="serve: skip the Triton peers")
    ap.add_argument("--compile-timeout", type=int, default=40, help="seconds one compile may take (default 40)")
    ap.add_argument("--compile-budget", type=int, default=100,
                    help="seconds all compiles of a session may take (default 100)")
    ap.add_argument("--trials", type=int, default=40000, help="check: draws a sampler's law is judged on")
    args = ap.parse_args(argv)
    if args.mode == "check":
        if torch is None:
            print(TORCH_IMPORT_ERROR)
            return 1
        args.device = args.device or "cpu"
        return check(args)
    args.device = args.device or os.environ.get("SAMPVIZ_PEERS_DEVICE", "cuda")
    return serve(args)


if __name__ == "__main__":
    sys.exit(main())
