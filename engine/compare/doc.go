// Package compare judges outputs against engine/ref's float64 reference and
// fills the engine.Report types: per row and per run, the drift of float
// outputs (Polygraphy's statistics plus what matters for distributions), the
// rules of integer outputs, and every violation in a sentence a person reads
// once. It follows docs/SEMANTICS.md "Judging"; it never runs kernels, never
// does I/O, and never computes a statistic itself: engine/stats does (goodness
// of fit, binomial tests, Wilson intervals, the chance line), on the laws of
// engine/ref.
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
// # Logprobs
//
// An engine's log probabilities (every token's, or a top-N with its ids)
// are judged against ref.LogRow, the float64 log-softmax of the row of
// their kind: raw (temperature 1, no filter) or processed (the renorm
// reference's kept tokens at the row's temperature, 1 on a greedy row).
// The support is that of probabilities on the log scale (-inf exactly
// where the reference drops a token, boundary tokens either way); values
// are within atol + rtol·|ref| in nats, the row's atol growing with its
// largest |logit/T| (LogprobTolerancesFor); a top-N holds the reference's
// N most probable tokens up to near-ties at its cut, each once, sorted.
// The drift statistics are those of float outputs, on the logprobs. A
// failing output whose every failing row passes as the other kind gets a
// note that says so. See logprobs.go.
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
//
// # Statistics of samplers
//
// Many draws per row (samples): besides the support rule above, the counts
// per token are fitted to the strict renorm reference (stats.GoodnessOfFit:
// G-test with pooled sparse bins and a worst-bin test) and the row fails
// when the p-value is below Options.PValue (1e-6), with a sentence that
// gives the p-value, the total variation beside the value a correct sampler
// stays under, and the most deviant bin; RowReport.Fit and PValue carry the
// numbers. Temperature-0 rows are judged on their tokens alone. Boundary
// tokens do not raise false alarms (revealedSupport): the fit's reference is
// the unfiltered reference restricted to the support the draws reveal
// (every kept token, every boundary token drawn, and the boundary tokens the
// reference keeps unless together they expect 10 or more draws and got none)
// and renormalised, with a note when that differs from the reference's own
// decisions. A sample run's external `probs` are judged as renorm
// probabilities; one token per row (`tokens`) is judged on its support and
// noted as weak evidence.
//
// Speculative trials (spec_trials, or the one trial of spec_tokens): the
// laws of ref.SpecVerify, with the target supports the trials reveal at
// boundary tokens (at such positions the acceptance probability and residual
// are recomputed with stats' formulas, and the acceptance band widens by the
// boundary mass, which a sampler may keep or drop unseen), judge per row:
// the acceptance rate of each position among the trials that reached it
// (exact binomial test against a band of ±1e-5 relative around theory,
// acceptSlack: float32 kernels reject where float64 says a = 1 when p and q
// agree to rounding), the emitted-length histogram against its exact law,
// and the lossless check, the tokens at each output position against a_j
// δ(x_j) + (1 - a_j) r_j (and p_K at the bonus), with a 1e-5 share of p_j
// mixed in (residualNoise) so that a kernel's rounding-noise residual draw
// is not impossible. A row's tests share the threshold (Bonferroni:
// RowReport.PValue is the smallest p-value times their number). A resampled
// token with zero float64 residual mass is allowed where p(t) >= q(t)·(1 -
// slack), for the same reason. RowReport.Spec carries every number.
//
// # Over all rows
//
// OutputReport.Spec pools the rows: acceptance by position (Σ accepted / Σ
// reached beside the reach-weighted theory), the emitted lengths summed
// (theory: the rows' laws weighted by their trials), the mean acceptance
// length; Spec.Trials counts every trial of every row. The pooled counts are
// tested too (a binomial at the mean rate is conservative for a sum of
// Bernoulli trials of different rates, Hoeffding 1956), and so is the sum of
// spec_accepted over rows against Σ a_i (each counter counts an independent
// acceptance test at every position). So are the seed rules of
// Options.Reruns: a row whose rerun with the same seed drew another token
// fails; different seeds that drew the same tokens everywhere where chance
// would not fail the output. A failure that belongs to no single row goes to
// OutputReport.Violations and sets Pass to false. Every statistically judged output gets stats.ChanceLine as a note:
// how many rows failed beside how many chance alone would fail.
//
// Not detectable by design: accepting with p/q without the min (u < p/q and
// u < min(1, p/q) are the same event for u < 1) and u <= versus u < (they
// differ with probability 0, or 2^-24 for a float32 uniform).
package compare
