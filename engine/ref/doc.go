// Package ref computes sampviz's float64 reference for every op: the
// distributions of softmax, renorm and sample, the set of tied maxima of
// argmax, the exact laws of chain speculative sampling, and the exact drafts
// of n-gram matching. engine/compare judges every output against it, and the
// web UI draws one row from it (top tokens, the CDF with its top-k, top-p and
// min-p cuts, each token classed kept, dropped or boundary).
//
// ref is the judge, not a contender: it is written to be obviously correct,
// follows docs/SEMANTICS.md ("Reference semantics", "Filters", "Boundary
// tokens") to the letter, and never imitates a kernel's float32 arithmetic
// (engine/f32math and engine/philox are for kernels; ref uses neither). It
// never panics on data: NaN and Inf in logits are reported as invalid rows.
//
// # How a row is computed
//
// Weights are exp((x - m)/T) in float64 on the exact stored values. Every sum
// that normalises or decides a filter (the weight total, the mass ahead of a
// token for top-p, the top-k mass) is exactly rounded (Shewchuk's algorithm,
// as Python's math.fsum), so the result does not depend on the order of
// addition. Tokens are then grouped by equal probability, most probable first,
// and the filters are decided group by group: that is what "tokens of equal
// probability are decided together" means.
//
// Two paths build the groups. The simple path computes one exp per element
// and sorts the elements; it serves float32 and float64 logits and is the
// version to read. The fast path serves BF16 and F16 logits: a row of those
// holds at most 65536 distinct values, so it counts them in a histogram on
// their bit patterns and computes one exp per distinct value. Both feed the
// same exact sums and the same group decisions, so they give bit-identical
// results (the tests check this on random rows).
//
// # Decisions where docs/SEMANTICS.md is silent
//
//   - Probabilities of a renormalised row are w_i / sum(w over the kept
//     tokens), one rounding; with no filter active Probs is Base.
//   - The top-p boundary test counts, as "tied tokens ahead", every other
//     token of the same probability, also under top_k_ties=lowest_index.
//   - The most probable token is Kept by every filter (it always survives),
//     except the tokens of a tied top group that lowest_index drops.
//   - Tokens of zero reference probability (masked, or exp underflowed in
//     float64) are Dropped whatever the filters say.
//   - At temperature 0 (greedy) all mass is on the lowest index of the
//     maximum, which is Kept; the other tied maxima are Boundary (a sampler may
//     return any of them, SEMANTICS.md "sampled tokens") and every other token
//     is Dropped. The native reference at temperature 0 equals the strict one.
//   - The native reference of F64 logits divides in float64 (a kernel working
//     in the input dtype would), so it equals the strict reference up to the
//     order of subtraction and division.
//   - Temperatures are read as kernels receive them (float32): a row is
//     greedy when float32(T) is 0, and a temperature that is NaN, negative
//     or infinite in float32 makes the row invalid (RuleParameter).
//   - spec_verify: a row is invalid when a target position has no
//     distribution, a draft token is outside [0, V), or the draft probs hold
//     NaN, Inf or a negative value. The laws are still computed for the valid
//     positions, with acceptance 0 at an invalid one (the kernel ends the
//     chain there).
//   - ngram_match: step_idx and input_ids_len are clamped to the tensors'
//     widths, so a malformed dump cannot index out of range.
package ref
