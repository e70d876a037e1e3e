// Package cpu is sampviz's embedded backend: every op computed the way the
// CUDA kernels in csrc/ compute it, in their precision, so that a machine
// without a GPU still shows what a kernel does. Inputs are read in their
// stored dtype and widened to float32 (Tensor.Floats32), arithmetic is
// float32, probabilities are written as F32 and tokens as I32. Randomness is
// Philox-4x32-10 through engine/philox, and the weights and Gumbel noise use
// engine/f32math, so that for the same seed and offset this package and the
// kernels draw the same tokens, keep the same filter supports, pick the same
// argmax, produce the same spec_verify outputs and traces and the same
// n-gram drafts (docs/SEMANTICS.md, "Kernel semantics"). It is not a
// reference: engine/ref is the float64 truth, and this package never judges
// its own outputs, never does I/O beyond reading /proc/cpuinfo for the
// device name, and never keeps references to a run's tensors.
//
// Besides the Backend, the package exports the row-level pieces that the
// CUDA tests and the web UI reuse: Weights, Sum, Softmax, Argmax, Filter,
// Renorm, the samplers (SampleInverseCDF, SampleGumbel, SampleRejection, CDF
// for many draws), SpecChain and Draft.
//
// # Decisions where docs/SEMANTICS.md leaves room
//
// These are the exact rules this package follows; the kernels follow the same.
//
//   - Temperatures reach the kernels as float32. A row is greedy when
//     float32(T) == 0; its weights are one-hot at the first maximum, so
//     softmax and renorm give one-hot probabilities and every draw (sample,
//     Samples, spec_verify resampling) is the argmax. A temperature that is
//     NaN, negative or not finite in float32 is an error, not a row result.
//   - Filters are off at top_k <= 0 or top_k >= V, at top_p >= 1 (the top-p
//     rule is then not evaluated at all: at top_p = 1 it would still drop
//     tokens whose fixed-point weight is 0) and at min_p <= 0. top_k < 0,
//     top_p outside (0, 1] and min_p outside [0, 1] (in float32) are errors.
//     Greedy rows are not filtered.
//   - Rows without a distribution (a NaN or +Inf logit, or every logit -Inf)
//     give NaN probabilities and token -1 in softmax, renorm and sample,
//     greedy rows included; only argmax treats +Inf as a maximum. F64 logits
//     are rounded to float32 when read: a value beyond the float32 range
//     becomes ±Inf, and values that differ only below float32 resolution tie
//     (the first index wins).
//   - Many draws (Params.Draws > 0): Samples[r, d] is draw d by inverse CDF
//     whatever Params.Method says; Tokens is draw 0 by Params.Method, so with
//     the inverse CDF (or auto on an unfiltered row) Tokens[r] ==
//     Samples[r, 0].
//   - The rejection sampler draws each round's candidate by inverse CDF over
//     the candidates in index order, like the plain inverse CDF. A round
//     whose candidates all have fixed-point weight 0 (impossible when the
//     filters keep the most probable token) gives -1.
//   - spec_verify: q_i(x_i) = 1 for one-hot drafts. A target position
//     without a distribution has NaN probabilities, so its acceptance test
//     fails (u*q < NaN is false); when the chain reaches it (first rejection
//     there, or the bonus) it writes -1 there, spec_emitted is that position,
//     and the trace step has Resampled -1 and P NaN. The bonus position's
//     trace step has Draft -1, U, P and Q 0 and Accepted false. Draft tokens
//     outside [0, V) are an error.
//   - ngram_match takes Params.MaxNgramSize, MaxDraftTokens and Threshold as
//     given (the dump layer applies the defaults 3, 8 and 1024): a zero
//     MaxDraftTokens gives DraftOut [B, 0]. input_ids_len outside [0, L] or
//     step_idx outside [0, M] is an error.
//   - Softmax and renorm divide each weight by a float32 Sum formed as Sum
//     documents (256-element chunks in 8 lanes, then a pairwise tree); the
//     kernels may sum in another order, which is why probabilities are not
//     bit for bit.
package cpu
