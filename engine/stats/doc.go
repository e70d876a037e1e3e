// Package stats holds the statistics that judge samplers and speculative
// decoding: goodness of fit of many draws against a reference distribution,
// how many failures chance alone gives over many rows, the seed rules, and
// the acceptance laws of chain speculative sampling (docs/SEMANTICS.md).
//
// Everything here is a pure function of counts, tokens and float64
// distributions: it never reads dumps or tensors, never runs a kernel, never
// computes a reference distribution (engine/ref does, and engine/compare
// passes it here), and never panics on data a user supplied; unusable input
// is an error or a violation sentence.
//
// # Goodness of fit
//
// GoodnessOfFit pools the sparse tail so that every bin expects at least 5
// draws, then runs two tests and reports twice the smaller p-value:
//
//   - an omnibus G-test (or Pearson's X²) over all bins, which sees diffuse
//     biases. Its p-value comes from a chi-square scaled to the statistic's
//     exact null mean and variance, not from the nominal χ² with Bins - 1
//     degrees of freedom: with many bins that expect few draws the nominal
//     law is badly anti-conservative, and Williams' correction is still too
//     liberal. Over 60000 correct rows of 2000 tokens at N = 10^4 (1497
//     bins), the nominal G-test failed at p < 1e-4 in 228 rows, Williams' in
//     16, the moment-matched test in 6 (6 expected; go test -run
//     TestCalibrationDeep -calibration.runs 60000);
//   - the most deviant bin, by its exact binomial tail times the number of
//     bins (Bonferroni), which sees a bias on one or two tokens that the
//     omnibus test dilutes over thousands of bins.
//
// A draw of a token with zero reference mass fails the row whatever the
// p-value. Total variation is reported with its mean for a correct sampler
// at the same N and a McDiarmid bound a correct sampler stays under, and the
// cosine similarity of counts to probabilities (FlashInfer's check) for
// comparison. A 128256-token row costs 2 to 4 ms at N = 10^4 and 5 to 6 ms
// at N = 10^6 on one core (AMD EPYC; BenchmarkGoodnessOfFit), without
// allocating.
//
// Calibration (TestCalibration): over 200 correct rows at N = 10^4 of each of
// a peaked 32000-token, a flat 1000-token, a Zipf 128256-token and a
// two-token distribution, no row fails at DefaultPValue and the omnibus
// p-value falls below 0.05 in 5% of rows (43 and 47 of 800 for G and X²);
// the combined p-value, a Bonferroni bound, in 3.5%.
//
// # Power
//
// The smallest bias caught at p < 1e-6 in 18 of 20 fresh LLM-like rows (Zipf
// with exponent 1.0 to 1.2 over 128256 permuted token ids), measured by
// TestPowerTable (go test -run TestPowerTable -power.table) and asserted
// loosely by TestPower. Each cell gives the size of the bias in its own unit,
// and in parentheses the total variation it puts between the sampler's law
// and the reference where that differs from the size:
//
//	bias (size in)                                N = 10^4          N = 10^5            N = 10^6
//	top token's mass moved to the second (mass)   0.018             0.0056              0.0017
//	temperature off (relative error)              0.040 (TV 0.062)  0.015 (TV 0.023)    0.0044 (TV 0.0069)
//	least probable tokens dropped (tail mass)     0.024             0.011               0.0052
//	draws shifted to the next token id (share)    0.025 (TV 0.022)  0.0026 (TV 0.0023)  0.0003 (TV 0.00026)
//	spec: a rejection resampled from the target,  0.0075            0.00082             0.00008
//	  not the residual (target probability of
//	  the one-hot draft token)
//
// A bias that sends extra draws to one rarely drawn token (the resampling
// mistake; the shift, which moves the top token's mass onto a neighbour) is
// caught by the most deviant bin at sizes that shrink as 1/N; one between
// frequent tokens (top to second) as N^-1/2; diffuse ones (temperature, tail)
// by the omnibus test as N^-0.5 to N^-0.3, since its degrees of freedom grow
// with N. With draft probabilities, the resampling mistake puts
// (1 - a)·TV(residual, target) between the laws, spread over the residual's
// support.
//
// # Many rows
//
// At DefaultPValue = 1e-6, 512 correct rows fail by chance 0.0005 times per
// run (ExpectedFalseAlarms, ChanceLine).
//
// # Speculative decoding
//
// From repeated trials: AcceptanceByPosition (a rate per position among the
// trials that reached it, with a Wilson interval), EmittedHistogram against
// EmittedDistribution, MeanAcceptanceLength as vLLM reports it, and the
// lossless check, PositionCounts against the position's law through
// GoodnessOfFit (engine/compare builds the laws from engine/ref).
package stats
