// Package compare judges outputs against engine/ref's float64 reference and
// fills the engine.Report types: per row and per run, the drift of float
// outputs (Polygraphy's statistics plus what matters for distributions), the
// rules of integer outputs, and every violation in a sentence a person reads
// once. It follows docs/SEMANTICS.md "Judging"; it never runs kernels, never
// does I/O, and never decides a statistical question itself (engine/stats
// does: goodnessOfFit and specTrialsFit are where it plugs in).
//
// # Float outputs (softmax, renorm)
//
// Each row is compared with two references, strict and native, each at its
// own tolerance (TolerancesFor); it passes when it is within either
// everywhere with no support violation and holds no NaN or Inf, and
// RowReport.Matched says which. The statistics, per reference:
//
//   - Abs and Rel: |out - ref| and |out - ref| / ref (0 where both are 0,
//     +Inf where only the reference is 0; a reference below 1e-292, far
//     below what any dtype holds, is read 2^-1022 larger so that no division
//     meets a subnormal), with max (and its token), mean, and the median,
//     p90, p95 and p99 interpolated linearly between order statistics as
//     numpy does. Row percentiles are exact: the errors are counted in a
//     histogram of their top 16 bits, and only the buckets that hold the
//     wanted ranks are gathered and selected from; nothing is sorted. Run
//     percentiles come from the merged histograms: each is the upper edge of
//     its bucket, at most 6.25% above the exact value. A NaN output makes
//     Max NaN (Index: the first NaN) and sorts above +Inf.
//   - Mismatched: tokens with |out - ref| > atol + rtol·ref (NaN included).
//   - RowSumError |Σ out - 1|; KL, the generalised Kullback-Leibler
//     divergence Σ ref·log(ref/out) - ref + out (KL(ref||out) when both sum
//     to 1, and never negative when the output does not), each term from the
//     series of s - log1p(s) in the relative error s where |s| < 0.05 and
//     from a log elsewhere, each within 1e-7 relative; TV = ½ Σ |out - ref|;
//     ArgmaxAgree, whether the output's first maximum is a reference maximum.
//   - MinAtol = max(|out - ref| - rtol·ref) and MinRtol = max((|out - ref| -
//     atol) / ref): the least tolerances that would pass (+Inf when no rtol
//     would, or when the output holds NaN).
//   - Support: a token the reference keeps (class Kept) that the output
//     zeroes is missing, unless its reference probability is below what the
//     output dtype can hold (the smallest normal float32, or 2^-24 for F16
//     outputs); a token the reference drops that the output keeps is extra.
//     MissingMass is the reference mass of the missing tokens, ExtraMass the
//     unfiltered reference mass of the extra ones. Boundary tokens may go
//     either way: when they are the only difference, the reference is
//     renormalised over the output's support and a note says so.
//
// Run-level drift sums counts over rows and keeps the worst row-sum error,
// KL, TV, masses and minimum tolerances; its Index is row*V + token. A row
// whose probabilities sum further from 1 than atol + rtol (the looser
// tolerance) gets a note, not a violation: SEMANTICS.md does not fail rows on
// it, and the elementwise check bounds it already.
//
// # Integer outputs
//
// Argmax tokens: any tied maximum is right, a token outside [0, V) is always
// wrong, ties and near-ties (runner-up within the strict tolerance of the
// maximum) are noted as fragile. Sampled tokens and samples: in range and not
// Dropped by the strict renorm reference (boundary tokens allowed);
// temperature-0 rows must be a tied maximum. spec_tokens and every trial of
// spec_trials: ids in [-1, V), -1 only as a fill after the emitted tokens,
// the accepted prefix equal to the drafts, then one resampled (or bonus)
// token with nonzero mass under the residual (or p_K), spec_emitted + 1
// tokens before the fill, spec_emitted <= spec_accepted <= K. draft_out:
// exact equality with ref.NgramMatch, a missing column reading as -1.
//
// Input rows without a reference (NaN or +Inf logits, all masked) are a
// violation on that row for every output, and the row's other checks are
// skipped.
package compare
