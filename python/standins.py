"""Small stand-ins of the engine classes sampviz_capture patches, for its
tests where transformers, vLLM and SGLang are not installed: each is put in
sys.modules under the real module's name, with the names, signatures and
call structure the hooks rely on (the sources the hooks cite), and sampling
that follows each engine's semantics, written from scratch in torch.
"""

from __future__ import annotations

import dataclasses
import sys
import types
import typing

import torch

_EPS = 1e-5


def _module(name: str, **attrs) -> types.ModuleType:
    m = types.ModuleType(name)
    m.__dict__.update(attrs)
    sys.modules[name] = m
    return m


def remove(prefix: str) -> None:
    """Takes the stand-ins of one engine out of sys.modules."""
    for name in [n for n in sys.modules if n == prefix or n.startswith(prefix + ".")]:
        del sys.modules[name]


def _masked(scores, remove_mask):
    return scores.masked_fill(remove_mask, float("-inf"))


# --- transformers -------------------------------------------------------------

def install_transformers():
    """transformers.generation.{logits_process,utils}: the warpers, a list of
    processors, a model whose generate() builds its processors through
    _get_logits_processor (custom processors before the warpers), and
    assisted decoding that calls the module's _speculative_sampling."""

    class LogitsProcessor:
        def __call__(self, input_ids, scores):
            raise NotImplementedError

    class LogitsProcessorList(list):
        def __call__(self, input_ids, scores):
            for p in self:
                scores = p(input_ids, scores)
            return scores

    class TemperatureLogitsWarper(LogitsProcessor):
        def __init__(self, temperature):
            self.temperature = temperature

        def __call__(self, input_ids, scores):
            return scores / self.temperature

    class TopKLogitsWarper(LogitsProcessor):
        def __init__(self, top_k, min_tokens_to_keep=1):
            self.top_k = max(top_k, min_tokens_to_keep)

        def __call__(self, input_ids, scores):
            k = min(self.top_k, scores.shape[-1])
            kth = torch.topk(scores, k).values[..., -1:]
            return _masked(scores, scores < kth)

    class TopPLogitsWarper(LogitsProcessor):
        def __init__(self, top_p, min_tokens_to_keep=1):
            self.top_p, self.keep = top_p, min_tokens_to_keep

        def __call__(self, input_ids, scores):
            ascending, order = torch.sort(scores, descending=False)
            drop = ascending.softmax(dim=-1).cumsum(dim=-1) <= 1 - self.top_p
            drop[..., -self.keep:] = False
            return _masked(scores, drop.scatter(-1, order, drop))

    class MinPLogitsWarper(LogitsProcessor):
        def __init__(self, min_p, min_tokens_to_keep=1):
            self.min_p = min_p

        def __call__(self, input_ids, scores):
            probs = scores.softmax(dim=-1)
            return _masked(scores, probs < self.min_p * probs.amax(dim=-1, keepdim=True))

    lp = _module("transformers.generation.logits_process", LogitsProcessor=LogitsProcessor,
                 LogitsProcessorList=LogitsProcessorList, TemperatureLogitsWarper=TemperatureLogitsWarper,
                 TopKLogitsWarper=TopKLogitsWarper, TopPLogitsWarper=TopPLogitsWarper, MinPLogitsWarper=MinPLogitsWarper)
    utils = _module("transformers.generation.utils")

    def _speculative_sampling(candidate_input_ids, candidate_logits, candidate_length, new_logits, is_done_candidate):
        drafts = candidate_input_ids[:, -candidate_length:]
        q, p = candidate_logits.softmax(dim=-1), new_logits.softmax(dim=-1)
        idx = torch.arange(candidate_length)
        ratio = p[:, idx, drafts[0]] / q[:, idx, drafts[0]]
        accepted = torch.rand_like(ratio) <= ratio
        n = int(((~accepted).cumsum(dim=-1) < 1).sum())
        if is_done_candidate and n == candidate_length:
            return drafts[:, :n], n - 1
        if n < candidate_length:
            residual = (p[:, n] - q[:, n]).clamp(min=0)
            residual = residual / residual.sum()
        else:
            residual = p[:, n]
        t = torch.multinomial(residual, 1)
        return torch.cat([drafts[:, :n], t], dim=-1), n

    class GenerationMixin:
        """A toy decoder: logits of the next token are a row of a fixed
        table picked by the last token, scaled so rows are peaked."""

        def __init__(self, vocab=32, seed=0, scale=3.0):
            g = torch.Generator().manual_seed(seed)
            self.table = torch.randn(vocab, vocab, generator=g) * scale

        def logits(self, input_ids):
            return self.table[input_ids[:, -1]].clone()

        def _get_logits_processor(self, generation_config, logits_processor=None):
            procs = LogitsProcessorList(logits_processor or [])
            c = generation_config
            if c.get("do_sample"):
                if c.get("temperature", 1.0) != 1.0:
                    procs.append(lp.TemperatureLogitsWarper(c["temperature"]))
                if c.get("top_k"):
                    procs.append(lp.TopKLogitsWarper(c["top_k"]))
                if c.get("top_p", 1.0) < 1.0:
                    procs.append(lp.TopPLogitsWarper(c["top_p"]))
                if c.get("min_p"):
                    procs.append(lp.MinPLogitsWarper(c["min_p"]))
            return procs

        def generate(self, input_ids, max_new_tokens=4, logits_processor=None, **config):
            procs = self._get_logits_processor(generation_config=config, logits_processor=logits_processor)
            for _ in range(max_new_tokens):
                scores = procs(input_ids, self.logits(input_ids))
                if config.get("do_sample"):
                    nxt = torch.multinomial(scores.softmax(dim=-1), 1)
                else:
                    nxt = scores.argmax(dim=-1, keepdim=True)
                input_ids = torch.cat([input_ids, nxt], dim=-1)
            return input_ids

        def assisted_step(self, draft, input_ids, k=3, temperature=1.0):
            """One round of assisted decoding with do_sample: the drafter
            proposes k tokens, the target verifies them through the module's
            _speculative_sampling, looked up at call time as the real one is."""
            ids, draft_scores = input_ids, []
            for _ in range(k):
                s = draft.logits(ids) / temperature
                draft_scores.append(s)
                ids = torch.cat([ids, torch.multinomial(s.softmax(dim=-1), 1)], dim=-1)
            candidate_logits = torch.stack(draft_scores, dim=1)
            new_logits = torch.stack([self.logits(ids[:, :input_ids.shape[1] + i]) / temperature for i in range(k + 1)], dim=1)
            return utils._speculative_sampling(ids, candidate_logits, k, new_logits, False)

    utils._speculative_sampling = _speculative_sampling
    utils.GenerationMixin = GenerationMixin
    _module("transformers.generation", logits_process=lp, utils=utils)
    return _module("transformers", __version__="stand-in", generation=sys.modules["transformers.generation"])


# --- vLLM ------------------------------------------------------------------

def _vllm_top_k_top_p(logits, k, p):
    """vLLM's torch top-k/top-p: sort ascending, mask below the k-th largest,
    then mask the ascending prefix whose mass is <= 1 - p, keeping the last."""
    if k is None and p is None:
        return logits
    ascending, order = logits.sort(dim=-1, descending=False)
    if k is not None:
        kth = ascending.gather(1, (ascending.shape[1] - k.to(torch.long)).unsqueeze(1))
        ascending = ascending.masked_fill(ascending < kth, float("-inf"))
    if p is not None:
        drop = ascending.softmax(dim=-1).cumsum(dim=-1) <= 1 - p.unsqueeze(1)
        drop[:, -1] = False
        ascending = ascending.masked_fill(drop, float("-inf"))
    return ascending.scatter(-1, order, ascending)


def install_vllm(sample_method=True):
    """vllm.v1.sample.{sampler,rejection_sampler,metadata}, vllm.v1.outputs
    and vllm.v1.spec_decode.metadata. sample_method=False leaves out
    Sampler.sample, as an internals change would."""

    @dataclasses.dataclass
    class SamplerOutput:
        sampled_token_ids: torch.Tensor
        logprobs_tensors: object = None

    class LogprobsTensors(typing.NamedTuple):
        logprob_token_ids: torch.Tensor
        logprobs: torch.Tensor
        selected_token_ranks: torch.Tensor

    @dataclasses.dataclass
    class LogitsProcessors:
        argmax_invariant: list = dataclasses.field(default_factory=list)
        non_argmax_invariant: list = dataclasses.field(default_factory=list)

    @dataclasses.dataclass
    class SamplingMetadata:
        temperature: torch.Tensor | None
        all_greedy: bool
        all_random: bool
        top_p: torch.Tensor | None
        top_k: torch.Tensor | None
        generators: dict
        max_num_logprobs: int | None
        logitsprocs: LogitsProcessors
        logprobs_mode_override: object = None

    class MinPLogitsProcessor:
        def __init__(self, min_p):
            self.min_p_cpu = [float(x) for x in min_p]
            self.min_p_count = sum(1 for x in self.min_p_cpu if x)
            self.min_p = torch.tensor(self.min_p_cpu).unsqueeze(1)

        def get_min_p_by_index(self, index):
            return self.min_p_cpu[index]

        def apply(self, logits):
            if not self.min_p_count:
                return logits
            probs = logits.softmax(dim=-1)
            return logits.masked_fill(probs < probs.amax(dim=-1, keepdim=True) * self.min_p, float("-inf"))

    class Sampler:
        """vLLM's V1 Sampler (vllm/v1/sample/sampler.py@3e342658): raw
        logprobs from the logits forward receives, processed ones from
        sample (after temperature, min-p, top-k and top-p), gathered as the
        top-N beside the sampled token (its column first), or every token's
        when max_num_logprobs is -1."""

        def __init__(self, logprobs_mode="raw_logprobs"):
            self.logprobs_mode = logprobs_mode

        def __call__(self, *args, **kwargs):
            return self.forward(*args, **kwargs)

        def forward(self, logits, sampling_metadata, predict_bonus_token=False):
            logits = logits.to(torch.float32)
            n = sampling_metadata.max_num_logprobs
            raw = None
            if n is not None and self.logprobs_mode == "raw_logprobs":
                raw = logits.log_softmax(dim=-1, dtype=torch.float32)
            logits = self.apply_logits_processors(logits, sampling_metadata, predict_bonus_token)
            sampled, processed = self.sample(logits, sampling_metadata)
            if processed is not None:
                raw = processed
            tensors = None
            if n == -1:
                tensors = LogprobsTensors(torch.empty(0), raw, torch.empty(0))
            elif n is not None:
                values, ids = torch.topk(raw, n, dim=-1)
                chosen = sampled.to(torch.int64).unsqueeze(-1)
                tensors = LogprobsTensors(torch.cat((chosen, ids), dim=1).to(torch.int32),
                                          torch.cat((raw.gather(-1, chosen), values), dim=1), torch.zeros(len(raw)))
            return SamplerOutput(sampled_token_ids=sampled.to(torch.int32).unsqueeze(-1), logprobs_tensors=tensors)

        def apply_logits_processors(self, logits, sampling_metadata, predict_bonus_token):
            for p in sampling_metadata.logitsprocs.non_argmax_invariant:
                logits = p.apply(logits)
            return logits

        def _sample(self, logits, md):
            processed = self.logprobs_mode == "processed_logprobs" and md.max_num_logprobs is not None
            greedy = logits.argmax(dim=-1)
            if md.all_greedy:
                return greedy, logits.log_softmax(dim=-1) if processed else None
            t = torch.where(md.temperature < _EPS, torch.ones_like(md.temperature), md.temperature)
            logits = logits / t.unsqueeze(1)
            for p in md.logitsprocs.argmax_invariant:
                logits = p.apply(logits)
            logits = _vllm_top_k_top_p(logits, md.top_k, md.top_p)
            probs = logits.softmax(dim=-1)
            q = torch.empty_like(probs).exponential_()
            for i, g in md.generators.items():
                q[i].exponential_(generator=g)
            sampled = torch.where(md.temperature < _EPS, greedy, (probs / q).argmax(dim=-1))
            return sampled, logits.log_softmax(dim=-1) if processed else None

    if sample_method:
        Sampler.sample = Sampler._sample

    @dataclasses.dataclass
    class SpecDecodeMetadata:
        draft_token_ids: torch.Tensor
        num_draft_tokens: list
        cu_num_draft_tokens: torch.Tensor
        target_logits_indices: torch.Tensor
        bonus_logits_indices: torch.Tensor
        logits_indices: torch.Tensor

        def __post_init__(self):
            self.max_spec_len = max(self.num_draft_tokens)

    class RejectionSampler:
        def __init__(self, sampler):
            self.sampler = sampler

        def __call__(self, *args, **kwargs):
            return self.forward(*args, **kwargs)

        def apply_logits_processors(self, logits, sampling_metadata, metadata):
            return logits

        def forward(self, metadata, draft_probs, logits, sampling_metadata):
            bonus = self.sampler(logits=logits[metadata.bonus_logits_indices], sampling_metadata=sampling_metadata,
                                 predict_bonus_token=True).sampled_token_ids[:, 0]
            target = self.apply_logits_processors(logits[metadata.target_logits_indices].to(torch.float32),
                                                  sampling_metadata, metadata)
            md = sampling_metadata
            starts = [sum(metadata.num_draft_tokens[:i]) for i in range(len(metadata.num_draft_tokens))]
            k = metadata.max_spec_len
            out = torch.full((len(starts), k + 1), -1, dtype=torch.int32)
            for r, (start, n) in enumerate(zip(starts, metadata.num_draft_tokens)):
                t = float(md.temperature[r])
                rows = target[start:start + n]
                greedy = t < _EPS
                if not greedy:
                    rows = _vllm_top_k_top_p(rows / t, None if md.top_k is None else md.top_k[r].repeat(n),
                                             None if md.top_p is None else md.top_p[r].repeat(n))
                p = rows.softmax(dim=-1)
                for pos in range(n):
                    d = int(metadata.draft_token_ids[start + pos])
                    if greedy:
                        tok = int(p[pos].argmax())
                        out[r, pos] = tok
                        if tok != d:
                            break
                        continue
                    qd = 1.0 if draft_probs is None else float(draft_probs[start + pos, d])
                    if qd > 0 and float(p[pos, d]) / qd >= float(torch.rand(())):
                        out[r, pos] = d
                        continue
                    if draft_probs is None:
                        residual = p[pos].clone()
                        residual[d] = 0
                    else:
                        residual = (p[pos] - draft_probs[start + pos]).clamp(min=0)
                    out[r, pos] = int(torch.multinomial(residual / residual.sum(), 1))
                    break
                else:
                    out[r, n] = int(bonus[r])
            return SamplerOutput(sampled_token_ids=out)

    _module("vllm.v1.outputs", SamplerOutput=SamplerOutput, LogprobsTensors=LogprobsTensors)
    _module("vllm.v1.sample.metadata", SamplingMetadata=SamplingMetadata)
    _module("vllm.v1.sample.logits_processor", LogitsProcessors=LogitsProcessors, MinPLogitsProcessor=MinPLogitsProcessor)
    _module("vllm.v1.sample.sampler", Sampler=Sampler)
    _module("vllm.v1.sample.rejection_sampler", RejectionSampler=RejectionSampler)
    _module("vllm.v1.spec_decode.metadata", SpecDecodeMetadata=SpecDecodeMetadata)
    for name in ("vllm.v1.spec_decode", "vllm.v1.sample", "vllm.v1"):
        _module(name)
    return _module("vllm", __version__="stand-in")


# --- SGLang ------------------------------------------------------------------

def install_sglang():
    """sglang.srt.layers.sampler.Sampler: next_token_logits divided in place
    by temperatures [B, 1] and softmaxed in place, then top-k and top-p
    joint (exclusive prefix mass over top_p dropped), min-p after them."""

    @dataclasses.dataclass
    class LogitsProcessorOutput:
        next_token_logits: torch.Tensor

    @dataclasses.dataclass
    class SamplingBatchInfo:
        temperatures: torch.Tensor
        top_ps: torch.Tensor
        top_ks: torch.Tensor
        min_ps: torch.Tensor
        is_all_greedy: bool = False
        need_min_p_sampling: bool = False
        has_custom_logit_processor: bool = False

    class Sampler:
        def __call__(self, *args, **kwargs):
            return self.forward(*args, **kwargs)

        def forward(self, logits_output, sampling_info, return_logprob=False, top_logprobs_nums=None, token_ids_logprobs=None):
            logits = logits_output.next_token_logits
            if sampling_info.is_all_greedy:
                return torch.argmax(logits, -1)
            logits.div_(sampling_info.temperatures)
            logits[:] = torch.softmax(logits, dim=-1)
            probs = logits
            ordered, idx = probs.sort(dim=-1, descending=True)
            mass = ordered.cumsum(dim=-1)
            ordered[torch.arange(probs.shape[-1]).view(1, -1) >= sampling_info.top_ks.view(-1, 1)] = 0.0
            ordered[(mass - ordered) > sampling_info.top_ps.view(-1, 1)] = 0.0
            if sampling_info.need_min_p_sampling:
                ordered[ordered < (ordered[:, 0] * sampling_info.min_ps).view(-1, 1)] = 0.0
            pick = torch.multinomial(ordered, 1)
            return torch.gather(idx.to(torch.int32), 1, pick).view(-1)

    _module("sglang.srt.layers.logits_processor", LogitsProcessorOutput=LogitsProcessorOutput)
    _module("sglang.srt.sampling.sampling_batch_info", SamplingBatchInfo=SamplingBatchInfo)
    _module("sglang.srt.layers.sampler", Sampler=Sampler)
    for name in ("sglang.srt.sampling", "sglang.srt.layers", "sglang.srt"):
        _module(name)
    return _module("sglang", __version__="stand-in")
