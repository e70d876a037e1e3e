package ref

import "github.com/sampviz/sampviz/engine"

// Sample returns the distribution that sampled tokens of row r are judged
// against: the strict renorm distribution. On greedy rows (temperature 0) the
// tokens a sampler may return are the tied maxima: every token not Dropped.
func Sample(run *engine.Run, r int, eps float64) Dist { return Renorm(run, r, false, eps) }
