"""A Python port of FastDeploy's CPU n-gram drafting, and a writer of sampviz
dumps from it.

Ported from FastDeploy's published source (PaddlePaddle/FastDeploy):
  - `ngram_match`: custom_ops/gpu_ops/speculate_decoding/ngram_match.cc
    @66c639ca (`find_candidate_pred_tokens`; the same CPU path is kept in
    ngram_match.cu @00885dd4 after PR #6960 moved the GPU path to two kernels);
  - `hybrid_mtp_ngram`: custom_ops/gpu_ops/speculate_decoding/draft_model/
    ngram_match_mixed.cu @00885dd4 (`find_candidate_pred_tokens_mixed`).

Both functions work in place on plain Python lists of lists, as FastDeploy's
ops work in place on their buffers: `draft_tokens` and `seq_lens_this_time`
are updated, nothing else is. FastDeploy reads the threshold from the
environment (INFER_WITH_REFERENCE_TOKENUM_THRESHOLD, 128 by default, for
ngram_match; SPEC_TOKENUM_THRESHOLD, 1024, for hybrid_mtp_ngram); here it is
an argument.

`dump` writes what a call saw and did as a sampviz dump (docs/DUMPS.md,
ngram_semantics fastdeploy or fastdeploy_hybrid) with sampviz_capture's
writer, so `sampviz check` judges the port against sampviz's reference.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import sampviz_capture as sv  # noqa: E402


def _first_draft(prompt_row, prompt_len, gen_row, step, ngram_sizes, limit):
    """Scans like FastDeploy's CPU loop: for each n (longest first) the
    pattern is gen_row[step+1-n : step+1]; the prompt's windows are scanned
    left to right, then the generated tokens' windows before the current
    one; a window that matches but has nothing after it (before prompt_len,
    or step) is passed over. Returns the draft, or []."""
    for n in ngram_sizes:
        if step < n:
            continue
        pattern = gen_row[step + 1 - n: step + 1]
        for hay, hay_len in ((prompt_row, prompt_len), (gen_row, step)):
            for i in range(0, hay_len - n + 1):
                if hay[i:i + n] != pattern:
                    continue
                start = i + n
                end = min(start + limit, hay_len)
                if start >= end:
                    continue
                return hay[start:end]
    return []


def ngram_match(input_ids, input_ids_len, token_ids_all, prompt_lens, step_idx, draft_token_num, draft_tokens,
                seq_lens_this_time, seq_lens_encoder, seq_lens_decoder, max_dec_len, max_ngram_size=3,
                threshold=128):
    """FastDeploy's ngram_match on the CPU, in place on draft_tokens and
    seq_lens_this_time. token_ids_all[b] holds the prompt, then the
    generated tokens from prompt_lens[b]; step_idx[b] indexes the current
    token among the generated ones."""
    bsz = len(seq_lens_this_time)
    unprocessed = sum(1 for b in range(bsz) if seq_lens_encoder[b] > 0 or seq_lens_decoder[b] > 0)
    for b in range(bsz):
        max_draft = min(draft_token_num[b], max_dec_len[b] - step_idx[b] - 1)
        if seq_lens_encoder[b] > 0:
            continue
        if seq_lens_decoder[b] == 0:
            seq_lens_this_time[b] = 0
            continue
        gen = token_ids_all[b][prompt_lens[b]:]
        seq_lens_this_time[b] = 1
        unprocessed -= 1
        # FastDeploy's CPU path sums seq_lens_this_time[0..b] afresh.
        total = sum(seq_lens_this_time[:b + 1])
        if total + max_draft + unprocessed > threshold:
            max_draft = min(max_draft, threshold - total - unprocessed)
        if total + unprocessed >= threshold - 1:
            continue
        draft = _first_draft(input_ids[b], input_ids_len[b], gen, step_idx[b],
                             range(max_ngram_size, 0, -1), max_draft)
        if draft:
            seq_lens_this_time[b] = len(draft) + 1
            draft_tokens[b][1:1 + len(draft)] = draft


def hybrid_mtp_ngram(input_ids, input_ids_len, pre_ids, step_idx, draft_tokens, seq_lens_this_time,
                     seq_lens_decoder, max_dec_len, max_ngram_size=3, min_ngram_size=1, max_draft_tokens=10,
                     threshold=1024):
    """FastDeploy's hybrid_mtp_ngram on the CPU, in place: the n-gram draft
    goes after the seq_lens_this_time[b] tokens the MTP drafter wrote."""
    bsz = len(seq_lens_this_time)
    unprocessed = sum(1 for b in range(bsz) if seq_lens_decoder[b] > 0)
    for b in range(bsz):
        ori = seq_lens_this_time[b]
        query = min(max_draft_tokens - ori + 1, max_dec_len[b] - step_idx[b] - 1)
        if ori == 0 or query <= 0:
            continue
        unprocessed -= 1
        total = sum(seq_lens_this_time[:b + 1])
        if total + query + unprocessed > threshold:
            query = min(query, threshold - total - unprocessed)
        if total + unprocessed >= threshold - 1:
            continue
        draft = _first_draft(input_ids[b], input_ids_len[b], pre_ids[b], step_idx[b],
                             range(max_ngram_size, min_ngram_size - 1, -1), query)
        if draft:
            seq_lens_this_time[b] = ori + len(draft)
            draft_tokens[b][ori:ori + len(draft)] = draft


def dump(state, after, *, hybrid=False, max_ngram_size=3, min_ngram_size=1, max_draft_tokens=10, threshold=None,
         out=None, source=None):
    """Writes a sampviz dump of one call: state holds the inputs as the
    call saw them (input_ids, input_ids_len, pre_ids, step_idx,
    seq_lens_this_time, seq_lens_decoder, max_dec_len, and for ngram_match
    seq_lens_encoder and draft_token_num), after the buffers it left
    (draft_tokens, seq_lens_this_time). pre_ids[b] are the generated tokens
    (token_ids_all[b][prompt_lens[b]:] for ngram_match), padded to one
    width. Returns the path."""
    import torch

    def t(v):
        return torch.tensor(v, dtype=torch.int64)

    names = ["input_ids", "input_ids_len", "pre_ids", "step_idx", "seq_lens_this_time", "seq_lens_decoder",
             "max_dec_len"]
    if not hybrid:
        names += ["seq_lens_encoder", "draft_token_num"]
    tensors = {n: t(state[n]) for n in names}
    tensors["draft_out"] = t(after["draft_tokens"])
    tensors["seq_lens_this_time_out"] = t(after["seq_lens_this_time"])
    if threshold is None:
        threshold = 1024 if hybrid else 128
    meta = {
        "op": "ngram_match",
        "ngram_semantics": "fastdeploy_hybrid" if hybrid else "fastdeploy",
        "max_ngram_size": str(max_ngram_size), "max_draft_tokens": str(max_draft_tokens),
        "threshold": str(threshold), "source": source or "python/fastdeploy_ngram.py",
    }
    if hybrid:
        meta["min_ngram_size"] = str(min_ngram_size)
    return sv.save(tensors, meta, out=out, tag="fastdeploy-ngram")
