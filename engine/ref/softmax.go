package ref

import (
	"math"

	"github.com/sampviz/sampviz/engine"
)

// Softmax returns the softmax reference of row r of run.Logits: strict, or
// native (the scaled logits first rounded to the input dtype).
func Softmax(run *engine.Run, r int, native bool) Dist {
	var ws Workspace
	var d Dist
	ws.Compute(&d, rowOf(run, r), Temperature(run, r), NoFilter(), native)
	return d
}

// nativeScale returns round_dtype(float32(x) / float32(t)): x scaled the way
// a kernel dividing in the input dtype does (float64 division for F64).
func nativeScale(x, t float64, dt engine.DType) float64 {
	if dt == engine.F64 {
		return x / t
	}
	return engine.RoundToDType(float64(float32(x)/float32(t)), dt)
}

// overflows reports whether scaling the finite or masked logit x gave y that
// is not a finite logit (an overflow to ±Inf, or NaN when float32(t) is 0).
func overflows(x, y float64) bool {
	if math.IsInf(x, -1) {
		return false
	}
	return math.IsNaN(y) || math.IsInf(y, 0)
}

// weight returns exp((x - m)/t), 0 for a masked token.
func weight(x, m, t float64) float64 {
	if math.IsInf(x, -1) {
		return 0
	}
	return math.Exp((x - m) / t)
}
