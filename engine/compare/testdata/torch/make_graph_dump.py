"""Writes graph_eager.safetensors, the dump of engine/compare's
TestTorchGraphDump: one real torch sampler run eagerly and replayed from a
CUDA graph (torch.cuda.graphs) with the same seed, so that sampviz says
whether the two modes draw the same tokens. Run on a machine with a CUDA GPU
and torch (no other package):

    python3 make_graph_dump.py OUTDIR

The sampler is vLLM's random sampling: probs = softmax(logits / T) in
float32, then argmax(probs / q) with q ~ Exponential(1) drawn from the CUDA
generator (torch.Tensor.exponential_), for 16 rows of 32000 bf16 logits.
Each mode makes N = 64 draws per row, reseeding the generator with one seed
first:

- eager: the sampler called N times;
- graph: the sampler captured once in a torch.cuda.CUDAGraph, the graph
  replayed N times (CUDA graphs read the generator's seed and offset at
  replay, so the draws should be eager's);
- graph_stale: the same graph replayed N more times without reseeding, as an
  engine that forgets to reset its generator does, while it still declares
  the seed.

The dump holds logits, temperature, and for each mode its draws
(samples@MODE, [16, 64]), its first draw per row (tokens@MODE), and the seed
and offset it declares (seed@MODE, offset@MODE): modes that declare one seed
and offset must draw the same tokens (docs/SEMANTICS.md "Agreement between
outputs"). The metadata records what torch.equal says of each mode against
eager (agree_graph, agree_graph_stale), which the Go test holds sampviz's
verdict to. The safetensors file is written by hand, so no package beyond
torch is needed.
"""
import json
import struct
import sys

import torch

ROWS, VOCAB, DRAWS, SEED = 16, 32000, 64, 20261127


def sample(logits, temperature):
    """vLLM's random sampling: argmax(softmax(logits / T) / q), q ~ Exp(1)."""
    probs = torch.softmax(logits.float() / temperature[:, None], dim=-1)
    q = torch.empty_like(probs).exponential_(1)
    return probs.div_(q).argmax(dim=-1)


def eager_draws(logits, temperature):
    torch.cuda.manual_seed(SEED)
    return torch.stack([sample(logits, temperature) for _ in range(DRAWS)], dim=1)


def capture(logits, temperature):
    """Captures the sampler on static inputs; returns the graph and its output."""
    static_logits, static_t = logits.clone(), temperature.clone()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):  # warm up outside the graph, as capture requires
            sample(static_logits, static_t)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_out = sample(static_logits, static_t)
    return graph, static_out


def replay_draws(graph, static_out, reseed):
    if reseed:
        torch.cuda.manual_seed(SEED)
    draws = []
    for _ in range(DRAWS):
        graph.replay()
        draws.append(static_out.clone())
    return torch.stack(draws, dim=1)


def tensor_bytes(t):
    """A tensor's bytes, little-endian and row-major, and its safetensors dtype."""
    t = t.detach().contiguous().cpu()
    names = {torch.bfloat16: "BF16", torch.float32: "F32", torch.int64: "I64"}
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().tobytes(), names[t.dtype]
    return t.numpy().tobytes(), names[t.dtype]


def write_safetensors(path, tensors, metadata):
    header, blobs, offset = {"__metadata__": metadata}, [], 0
    for name, t in tensors.items():
        data, dtype = tensor_bytes(t)
        header[name] = {"dtype": dtype, "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    head = json.dumps(header, separators=(",", ":")).encode()
    head += b" " * (-len(head) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(head)))
        f.write(head)
        for b in blobs:
            f.write(b)


def main():
    out = sys.argv[1]
    assert torch.cuda.is_available(), "make_graph_dump.py needs a CUDA GPU"
    torch.manual_seed(SEED)
    logits = (torch.randn(ROWS, VOCAB) * 3).to(torch.bfloat16).cuda()
    temperature = torch.linspace(0.6, 1.2, ROWS, dtype=torch.float32).cuda()

    eager = eager_draws(logits, temperature)
    graph, static_out = capture(logits, temperature)
    graph_draws = replay_draws(graph, static_out, reseed=True)
    stale = replay_draws(graph, static_out, reseed=False)
    torch.cuda.synchronize()

    seed = torch.full((ROWS,), SEED, dtype=torch.int64)
    zero = torch.zeros(ROWS, dtype=torch.int64)
    tensors = {"logits": logits, "temperature": temperature, "seed": seed}
    for mode, draws in (("eager", eager), ("graph", graph_draws), ("graph_stale", stale)):
        tensors[f"samples@{mode}"] = draws.to(torch.int64)
        tensors[f"tokens@{mode}"] = draws[:, 0].to(torch.int64)
        tensors[f"seed@{mode}"] = seed
        tensors[f"offset@{mode}"] = zero
    agree = {mode: torch.equal(eager, draws) for mode, draws in (("graph", graph_draws), ("graph_stale", stale))}
    metadata = {
        "op": "sample",
        "source": f"torch {torch.__version__} on {torch.cuda.get_device_name()}, make_graph_dump.py: "
                  "vLLM random sampling eagerly and replayed from a CUDA graph",
        "agree_graph": str(agree["graph"]).lower(),
        "agree_graph_stale": str(agree["graph_stale"]).lower(),
    }
    path = f"{out}/graph_eager.safetensors"
    write_safetensors(path, tensors, metadata)
    print(f"wrote {path}: graph agrees with eager: {agree['graph']}, stale graph agrees: {agree['graph_stale']}")


if __name__ == "__main__":
    main()
