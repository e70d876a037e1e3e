package compare

import "github.com/sampviz/sampviz/engine/ref"

// The statistical checks belong to engine/stats (goodness of fit with pooled
// sparse bins, acceptance by position against theory). The two functions
// below are where they plug in; until they do, they make no test, rows are
// judged on their structural and support rules alone, and the output's notes
// say so.
const (
	fitNote     = "the draws are judged on their support; their goodness of fit against the reference (engine/stats) is not wired in yet"
	specFitNote = "the trials are judged on their structure; acceptance by position and the lossless check (engine/stats) are not wired in yet"
)

// goodnessOfFit tests whether the observed counts per token follow probs (the
// reference distribution) and returns the p-value, and whether a test was
// made. engine/stats.GoodnessOfFit plugs in here.
func goodnessOfFit(counts []int64, probs []float64, threshold float64) (p float64, tested bool) {
	return 0, false
}

// specTrialsFit tests whether the trials of one row (each a [K+1] row of
// tokens, -1 filled) follow the laws of s: acceptance by position against
// s.Accept, emitted lengths against s.Emitted, and the tokens at each
// position against s.Position. engine/stats plugs in here.
func specTrialsFit(s *ref.SpecRef, trials [][]int64, threshold float64) (p float64, tested bool) {
	return 0, false
}
