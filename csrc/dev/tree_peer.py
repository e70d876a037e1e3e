#!/usr/bin/env python3
"""tree_peer.py: a torch peer of spec_tree_verify's CUDA kernel (issue 28).

The same lossless rule as csrc/spec_tree_verify.cu (docs/SEMANTICS.md,
spec_tree_verify), written as a torch function vectorised over the rows of a
batch, and timed on the shapes of `sampviz bench --ops spec_tree_verify`
(engine/cuda/bench.go, cmd/sampviz/bench.go): bf16 logits, normal with
standard deviation 2, V = 128256, N = 64 nodes, the first N nodes breadth
first of the tree in which every node has topk children (benchTree), random
candidates, T = 1, no filters, one trial a row; with draft distributions,
every node's draft row is normal with standard deviation 1/V in bf16 (the
kernel cuts nothing for q <= 0, so the peer clamps q at 0). The bench's
filtered tree case (k50 p0.9) has no peer here.

It is dev tooling beside the product, not part of it: it carries no
sampviz semantics of its own (no Philox streams, float32 where the kernel
is exact), only the rule. The walk is sequential over the tree's levels and
a node's siblings, and vectorised over rows: every row takes one step a
level, rows that stopped ride along masked. By default the target
probabilities of every node are computed first (softmax over [B, N, V], as
an engine hands `target_probs` to SGLang's tree kernel); `--probs walk`
computes only the rows the walk visits (one trial needs no more).

Timing follows docs/PERF.md and the bench: CUDA events around each call,
calls queued behind a GPU spin so that host gaps between calls stay out
of the numbers, warm-up first, the median of --iters calls; "b2b" is the
mean of --iters calls between one pair of events (host gaps included,
which is what an eager torch loop pays). Input sets rotate so that the
inputs exceed four times the L2, as the bench's do.

Usage:
  tree_peer.py [--device cuda] [--cases bench|all|LIST] [--iters 50]
               [--probs all|walk] [--no-compile] [--compile-timeout 40]
  tree_peer.py --check [--trials 40000]     (CPU, small shapes)

LIST is comma-separated case keys: topk2-b1, topk4-b64, topk4-q-b64, ...
--check verifies losslessness statistically on random small trees (one-hot
drafts and draft distributions; the law of the first emitted token and of
the second given the first, against the target softmax), and that a broken
variant (no residual update) is caught.
"""

import argparse
import os
import sys
import time

import torch

# The rule and the timing live in python/peers.py (`sampviz bench --peers`
# times the same rule beside the kernel); this script keeps the tree's own
# inputs, options and statistical check.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
from peers import (CompileTimeout, bench_tree, chi2, chi2_sf, level_step, spin_cycles_per_ms,  # noqa: E402
                   target_probs, time_cpu, time_cuda, tree_levels, tree_verify, with_timeout)

VOCAB = 128256
NODES = 64


# --- the bench's inputs ----------------------------------------------------------


class Case:
    def __init__(self, topk, rows, q):
        self.topk, self.rows, self.q = topk, rows, q

    @property
    def name(self):
        # The bench's name and shape, as `sampviz bench` prints them.
        op = "spec_tree_verify topk%d%s" % (self.topk, " q" if self.q else "")
        return "%-26s bf16 B=%d V=%d N=%d" % (op, self.rows, VOCAB, NODES)


def parse_cases(spec):
    if spec == "bench":  # the bench's unfiltered tree cases, in its order
        return [Case(2, 1, False), Case(4, 1, False), Case(2, 64, False), Case(4, 64, False), Case(4, 64, True)]
    if spec == "all":
        return [Case(k, b, q) for q in (False, True) for b in (1, 64) for k in (2, 4)]
    out = []
    for key in spec.split(","):
        parts = key.strip().lower().split("-")
        try:
            topk = int(parts[0].removeprefix("topk"))
            rows = int(parts[-1].removeprefix("b"))
        except ValueError:
            sys.exit("tree_peer: case %r: want topk<K>[-q]-b<B>, bench or all" % key)
        out.append(Case(topk, rows, "q" in parts[1:-1]))
    return out


def make_sets(case, dev, l2):
    """Input sets for case, enough of them that they exceed 4x the L2."""
    g = torch.Generator(device="cpu").manual_seed(case.rows * 1000 + case.topk)
    nxt, sib = bench_tree(NODES, case.topk)
    fc = torch.tensor(nxt, device=dev).expand(case.rows, NODES).contiguous()
    ns = torch.tensor(sib, device=dev).expand(case.rows, NODES).contiguous()
    tokens = torch.randint(0, VOCAB, (case.rows, NODES), generator=g).to(dev)
    tokens[:, 0] = 0
    one = case.rows * NODES * VOCAB * 2 * (2 if case.q else 1)
    sets = 1 if one >= 4 * l2 else min(-(-4 * l2 // one), 256)
    out = []
    for s in range(sets):
        gd = torch.Generator(device=dev).manual_seed(1 + s)
        logits = (torch.randn(case.rows, NODES, VOCAB, generator=gd, device=dev) * 2).to(torch.bfloat16)
        q = None
        if case.q:
            q = (torch.randn(case.rows, NODES, VOCAB, generator=gd, device=dev) / VOCAB).to(torch.bfloat16)
        out.append((logits, q))
    return fc, ns, tokens, out


# --- timing --------------------------------------------------------------------


def run_bench(args):
    dev = torch.device(args.device)
    cuda = dev.type == "cuda"
    if cuda:
        props = torch.cuda.get_device_properties(dev)
        l2 = getattr(props, "L2_cache_size", 0) or 50 << 20
        print("device: %s, torch %s, L2 %d MiB; probs=%s, %d timed calls (warm-up %d)"
              % (props.name, torch.__version__, l2 >> 20, args.probs, args.iters, args.warmup), flush=True)
        cpms = spin_cycles_per_ms()
    else:
        l2 = 0
        print("device: cpu, torch %s; probs=%s" % (torch.__version__, args.probs), flush=True)
    walk = args.probs == "walk"
    compile_off = ""  # why the compiled rows are skipped
    if args.no_compile:
        compile_off = "--no-compile"
    elif not hasattr(torch, "compile"):
        compile_off = "no torch.compile in torch %s" % torch.__version__
    else:
        # One code object (level_step) is compiled once per case's shapes.
        try:
            torch._dynamo.config.cache_size_limit = max(torch._dynamo.config.cache_size_limit, 64)
        except AttributeError:
            pass
    compile_left = args.compile_budget
    row = "%-55s %-14s %10s %10s  %s"
    print(row % ("case", "peer", "median us", "b2b us", "note"))
    t_start = time.perf_counter()
    for case in parse_cases(args.cases):
        torch.manual_seed(0)
        fc, ns, tokens, sets = make_sets(case, dev, l2)
        levels, siblings = tree_levels(fc[:1], ns[:1])
        peers = [("torch eager", level_step, target_probs)]
        if not args.no_compile:
            peers.append(("torch.compile", None, None))
        for label, step, probs in peers:
            note = ""
            if label == "torch.compile":
                if not compile_off and compile_left <= 0:
                    compile_off = "compile budget (%d s) spent" % args.compile_budget
                if compile_off:
                    print(row % (case.name, label, "-", "-", "skipped: " + compile_off), flush=True)
                    continue
                step = torch.compile(level_step, dynamic=False)
                probs = torch.compile(target_probs, dynamic=False)

            def call(s, step=step, probs=probs):
                return tree_verify(s[0], s[1], tokens, fc, ns, levels, siblings, 1.0, walk, step, probs)

            if label == "torch.compile":
                t0 = time.perf_counter()
                limit = min(args.compile_timeout, compile_left)
                try:
                    with_timeout(limit,
                                 lambda: (call(sets[0]), cuda and torch.cuda.synchronize()))
                except CompileTimeout:
                    compile_left -= time.perf_counter() - t0
                    print(row % (case.name, label, "-", "-", "compile over %d s: stopped" % limit),
                          flush=True)
                    # An interrupted compile leaves dynamo in an unknown state.
                    compile_off = "an earlier compile was stopped"
                    continue
                except Exception as e:  # report it; the eager rows go on
                    compile_left -= time.perf_counter() - t0
                    msg = (str(e).strip().splitlines() or [""])[0][:100]
                    print(row % (case.name, label, "-", "-", "compile failed: %s: %s" % (type(e).__name__, msg)),
                          flush=True)
                    compile_off = "an earlier compile failed"  # the later ones would fail alike: keep the time
                    continue
                spent = time.perf_counter() - t0
                compile_left -= spent
                note = "compiled in %.1f s" % spent
            if cuda:
                med, b2b = time_cuda(call, sets, args.iters, args.warmup, cpms)
            else:
                med, b2b = time_cpu(call, sets, args.iters, args.warmup)
            print(row % (case.name, label, "%.1f" % med, "%.1f" % b2b, note), flush=True)
        del sets
        if cuda:
            torch.cuda.empty_cache()
    print("total %.1f s" % (time.perf_counter() - t_start))


# --- the statistical check -------------------------------------------------------


def random_tree(n, gen):
    """A random tree of n nodes in SGLang's layout: parents before children,
    children of a node in index order linked as siblings."""
    parent = [-1] + [int(torch.randint(0, c, (1,), generator=gen)) for c in range(1, n)]
    fc, ns = [-1] * n, [-1] * n
    last = [-1] * n
    for c in range(1, n):
        p = parent[c]
        if last[p] < 0:
            fc[p] = c
        else:
            ns[last[p]] = c
        last[p] = c
    return parent, fc, ns


def check_one(trial_seed, vocab, n, topk_q, trials, temperature, broken):
    """Runs one random tree over trials rows and returns the p-values of the
    first token's law and of the second's given the first."""
    gen = torch.Generator().manual_seed(trial_seed)
    parent, fc, ns = random_tree(n, gen)
    # The target of a node depends on the tokens of its path only (a model of
    # the prefix), so duplicate siblings share their targets.
    prefix_logits = {}

    def logits_of(prefix):
        if prefix not in prefix_logits:
            prefix_logits[prefix] = torch.randn(vocab, generator=gen) * 1.5
        return prefix_logits[prefix]

    B = trials
    levels, siblings = tree_levels(torch.tensor([fc]), torch.tensor([ns]))
    fct = torch.tensor(fc).expand(B, n).contiguous()
    nst = torch.tensor(ns).expand(B, n).contiguous()
    q = None
    if topk_q:
        # Draft rows: per node, a distribution fixed for the tree; the
        # children's tokens are drawn from their parent's row in every trial.
        qrows = torch.softmax(torch.randn(n, vocab, generator=gen) * 1.5, -1)
        qrows[:, int(torch.randint(0, vocab, (1,), generator=gen))] = 0  # a token the draft never proposes
        qrows /= qrows.sum(-1, keepdim=True)
        tok = torch.zeros(B, n, dtype=torch.long)
        for c in range(1, n):
            tok[:, c] = torch.multinomial(qrows[parent[c]], B, replacement=True, generator=gen)
        q = qrows.expand(B, n, vocab)
    else:
        tok = torch.zeros(B, n, dtype=torch.long)
        for c in range(1, n):
            tok[:, c] = int(torch.randint(0, vocab, (1,), generator=gen))
    # Logits per row and node: the node's prefix in that row.
    logits = torch.empty(B, n, vocab)
    prefixes = {}
    for b in range(B) if topk_q else [0]:
        for c in range(n):
            pre = () if c == 0 else prefixes[(b, parent[c])] + (int(tok[b, c]),)
            prefixes[(b, c)] = pre
            logits[b, c] = logits_of(pre)
    if not topk_q:
        logits[:] = logits[0]
    torch.manual_seed(trial_seed)
    path, emitted, accepted = tree_verify(logits, q, tok, fct, nst, levels, siblings, temperature, walk=False,
                                          broken=broken)
    assert (emitted[:, 0] >= 0).all()
    p_root = torch.softmax(logits_of(()) / temperature, -1).tolist()
    first = torch.bincount(emitted[:, 0], minlength=vocab).tolist()
    s, k = chi2(first, p_root)
    pv = [chi2_sf(s, k)]
    # The second token given the first, where the walk went on: the law of
    # the target after that one-token prefix.
    stat2, dof2 = 0.0, 0
    for y in range(vocab):
        sel = (emitted[:, 0] == y) & (emitted[:, 1] >= 0)
        if int(sel.sum()) < 50:
            continue
        cnt = torch.bincount(emitted[sel, 1], minlength=vocab).tolist()
        s, k = chi2(cnt, torch.softmax(logits_of((y,)) / temperature, -1).tolist())
        stat2, dof2 = stat2 + s, dof2 + k
    pv.append(chi2_sf(stat2, dof2) if dof2 > 0 else 1.0)
    return pv


def run_check(args):
    torch.set_num_threads(max(1, torch.get_num_threads()))
    alpha = 1e-4
    ok = True
    t0 = time.perf_counter()
    plan = [("one-hot", False), ("q", True)]
    for label, qmode in plan:
        worst, tested = 1.0, 0
        for seed in range(args.trees):
            vocab = 4 + seed % 5
            n = 3 + seed % 8
            trials = args.trials if not qmode else max(args.trials // 4, 2000)
            pv = check_one(1000 + seed, vocab, n, qmode, trials, 1.0 if seed % 3 else 0.7, False)
            worst = min(worst, *pv)
            tested += len(pv)
        good = worst > alpha / tested
        ok &= good
        print("check %-8s %2d random trees (V 4-8, 3-10 nodes): %d chi-square tests, smallest p %.3g (bound %.1g): %s"
              % (label, args.trees, tested, worst, alpha / tested, "ok" if good else "FAILED"), flush=True)
        # The negative control: without the residual update the rule is not
        # lossless, and the check must say so on a tree with siblings.
        worst_b = 1.0
        for seed in range(3):
            pv = check_one(2000 + seed, 5, 8, qmode, args.trials, 1.0, True)
            worst_b = min(worst_b, *pv)
        caught = worst_b < 1e-6
        ok &= caught
        print("check %-8s broken variant (no residual update): smallest p %.3g: %s"
              % (label, worst_b, "caught" if caught else "NOT CAUGHT"), flush=True)
    # Greedy: T = 0 follows the first child whose token is the argmax.
    gen = torch.Generator().manual_seed(7)
    nxt, sib = bench_tree(21, 4)
    logits = torch.randn(32, 21, 50, generator=gen)
    tok = torch.randint(0, 50, (32, 21), generator=gen)
    tok[:16, 2] = logits[:16, 0].argmax(-1)  # half the rows: the root's second child is right
    fc = torch.tensor(nxt).expand(32, 21).contiguous()
    ns = torch.tensor(sib).expand(32, 21).contiguous()
    lv, sb = tree_levels(fc[:1], ns[:1])
    path, emitted, acc = tree_verify(logits, None, tok, fc, ns, lv, sb, 0.0)
    want = []
    for b in range(32):
        u, seq = 0, []
        while True:
            best = int(logits[b, u].argmax())
            c = nxt[u]
            while c >= 0 and int(tok[b, c]) != best:
                c = sib[c]
            seq.append(best)
            if c < 0:
                break
            u = c
        want.append(seq + [-1] * (lv - len(seq)))
    good = emitted.tolist() == want
    ok &= good
    print("check greedy   T=0, 32 rows of a 21-node topk4 tree: %s" % ("ok" if good else "FAILED"))
    print("check %s in %.1f s" % ("passed" if ok else "FAILED", time.perf_counter() - t0))
    return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda", help="cuda (default) or cpu (tests)")
    ap.add_argument("--cases", default="bench",
                    help="bench (the bench's five unfiltered tree cases), all (B 1 and 64, topk 2 and 4, "
                         "one-hot and q), or keys like topk2-b1,topk4-q-b64")
    ap.add_argument("--iters", type=int, default=50, help="timed calls a case (default 50)")
    ap.add_argument("--warmup", type=int, default=5, help="warm-up calls a case (default 5)")
    ap.add_argument("--probs", choices=["all", "walk"], default="all",
                    help="all: softmax every node first (default); walk: only the rows the walk visits")
    ap.add_argument("--no-compile", action="store_true", help="skip the torch.compile rows")
    ap.add_argument("--compile-timeout", type=int, default=40, help="seconds one case's compile may take")
    ap.add_argument("--compile-budget", type=int, default=60, help="seconds all compiles may take")
    ap.add_argument("--check", action="store_true", help="verify losslessness statistically (CPU, small shapes)")
    ap.add_argument("--trees", type=int, default=12, help="random trees per draft kind in --check")
    ap.add_argument("--trials", type=int, default=40000, help="rows (trials) per tree in --check")
    args = ap.parse_args()
    if args.check:
        return run_check(args)
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        sys.exit("tree_peer: no CUDA device (use --device cpu for a test run)")
    run_bench(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
