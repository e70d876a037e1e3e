package compare

import "github.com/sampviz/sampviz/engine"

// DefaultPValue is the p-value threshold of the statistical checks when
// Options.PValue is 0.
const DefaultPValue = 1e-6

// Options tune a judgement. The zero value judges with the table's
// tolerances on every core.
type Options struct {
	// Strict and Native replace the table's tolerances for every output (nil:
	// from the table, SEMANTICS.md "Judging"). A negative Atol or Rtol keeps
	// the table's value for that part, so that "--rtol 1e-3" alone keeps the
	// table's atol.
	Strict, Native *engine.Tolerance
	// PValue is the threshold of the statistical checks (0: DefaultPValue).
	PValue float64
	// Workers is the number of rows judged at once (0: runtime.GOMAXPROCS(0)).
	Workers int
	// Reruns, when set, are our sampler's tokens from two more runs of a
	// sample run, for the seed rules.
	Reruns *Reruns
}

// ToleranceRow is one line of the default tolerance table.
type ToleranceRow struct {
	DType engine.DType
	engine.Tolerance
}

// toleranceTable is SEMANTICS.md's table (torch.testing's defaults).
var toleranceTable = []ToleranceRow{
	{engine.F64, engine.Tolerance{Atol: 1e-7, Rtol: 1e-7}},
	{engine.F32, engine.Tolerance{Atol: 1e-5, Rtol: 1.3e-6}},
	{engine.F16, engine.Tolerance{Atol: 1e-5, Rtol: 1e-3}},
	{engine.BF16, engine.Tolerance{Atol: 1e-5, Rtol: 1.6e-2}},
}

// ToleranceTable returns the default tolerances per float dtype, most
// precise first (what `sampviz check --tolerances` prints).
func ToleranceTable() []ToleranceRow { return append([]ToleranceRow(nil), toleranceTable...) }

// DefaultTolerance returns the table's tolerance for d; integer and invalid
// dtypes get the F64 entry (they rank as F64 in engine.DType.Precision).
func DefaultTolerance(d engine.DType) engine.Tolerance {
	for _, row := range toleranceTable {
		if row.DType == d {
			return row.Tolerance
		}
	}
	return toleranceTable[0].Tolerance
}

// TolerancesFor returns the tolerances that judge an output of dtype out on
// inputs of dtype in: strict is the entry of the less precise of the two,
// native the output's entry, each replaced (in part or whole) by o.
func TolerancesFor(in, out engine.DType, o Options) engine.Tolerances {
	looser := in
	if out.Precision() < in.Precision() {
		looser = out
	}
	t := engine.Tolerances{
		Strict: override(DefaultTolerance(looser), o.Strict),
		Native: override(DefaultTolerance(out), o.Native),
		PValue: o.PValue,
	}
	if t.PValue == 0 {
		t.PValue = DefaultPValue
	}
	return t
}

// override returns def with the non-negative parts of o.
func override(def engine.Tolerance, o *engine.Tolerance) engine.Tolerance {
	if o == nil {
		return def
	}
	if o.Atol >= 0 {
		def.Atol = o.Atol
	}
	if o.Rtol >= 0 {
		def.Rtol = o.Rtol
	}
	return def
}

// The tolerances of logprobs (docs/SEMANTICS.md "Logprobs"): on the log
// scale, in nats, by output dtype. A row allows |out - ref| <= atol +
// rtol·|ref| with the row's atol the table's plus logprobScale·s, s the
// greatest |logit|/T of the row (ref.LogRow.Scale).
//
//   - atol covers the error of log Σ exp, which shifts every token of a row
//     alike: a float32 sum over 10^5 tokens in sequence (PyTorch's CPU
//     kernel) is off by up to about 4e-5 (relative), a tree sum (its CUDA
//     kernel) by about 1e-6; 1e-4 nats is twice the worst seen.
//   - rtol is one ulp of the output dtype relative to |ref| (its machine
//     epsilon): the rounding of the output itself, and of a value the
//     kernel rounded once more before (PyTorch's CPU bf16 kernel rounds log
//     Σ exp to bf16 first: up to 1.03 ulp seen). F64 outputs get float32's:
//     engines compute log-softmax in float32 and may store it wider
//     (vLLM's Python floats).
//   - logprobScale·s covers the float32 rounding of the scaled logits x/T,
//     of the maximum subtracted from them, or of max + log Σ exp where a
//     kernel subtracts that (PyTorch's CPU kernel): about 3 half-ulps of
//     the largest |x/T|, whatever the output dtype.
var logprobTable = []ToleranceRow{
	{engine.F64, engine.Tolerance{Atol: 1e-4, Rtol: 0x1p-23}},
	{engine.F32, engine.Tolerance{Atol: 1e-4, Rtol: 0x1p-23}},
	{engine.F16, engine.Tolerance{Atol: 1e-4, Rtol: 0x1p-10}},
	{engine.BF16, engine.Tolerance{Atol: 1e-4, Rtol: 0x1p-7}},
}

// logprobScale multiplies a row's scale (LogRow.Scale) in its atol:
// 2^-22, two float32 ulps of 1.
const logprobScale = 0x1p-22

// LogprobRowAtol returns the atol of a logprobs row under tolerance t,
// scale the row's greatest |logit|/T (ref.LogRow.Scale).
func LogprobRowAtol(t engine.Tolerance, scale float64) float64 { return t.Atol + logprobScale*scale }

// LogprobTolerance returns the logprob table's tolerance for an output of
// dtype d (integer and invalid dtypes get the F64 entry).
func LogprobTolerance(d engine.DType) engine.Tolerance {
	for _, row := range logprobTable {
		if row.DType == d {
			return row.Tolerance
		}
	}
	return logprobTable[0].Tolerance
}

// LogprobTable returns the logprob tolerances per output dtype, most
// precise first (what `sampviz check --tolerances` prints below the
// table of probabilities).
func LogprobTable() []ToleranceRow { return append([]ToleranceRow(nil), logprobTable...) }

// LogprobTolerancesFor returns the tolerances that judge logprobs of
// dtype out: the output's entry for both references (the inputs are
// exact numbers, so their dtype adds nothing), each replaced (in part or
// whole) by o.
func LogprobTolerancesFor(out engine.DType, o Options) engine.Tolerances {
	def := LogprobTolerance(out)
	t := engine.Tolerances{Strict: override(def, o.Strict), Native: override(def, o.Native), PValue: o.PValue}
	if t.PValue == 0 {
		t.PValue = DefaultPValue
	}
	return t
}
