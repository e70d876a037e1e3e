package stats

import (
	"fmt"
	"math"

	"github.com/sampviz/sampviz/engine"
)

// SeedCheck is the verdict of a seed rule on two sequences of draws.
type SeedCheck struct {
	Pass bool `json:"pass"`
	// Compared is the number of positions compared; Agree how many hold the
	// same token in both; FirstDiff the first position that differs, or -1.
	Compared  int `json:"compared"`
	Agree     int `json:"agree"`
	FirstDiff int `json:"first_diff"`
	// ExpectedAgree and ChanceIdentical are set by DifferentSeedsDiffer: the
	// mean number of agreeing positions for independent seeds, and the
	// probability that independent seeds agree everywhere (0 when it
	// underflows).
	ExpectedAgree   float64 `json:"expected_agree"`
	ChanceIdentical float64 `json:"chance_identical"`
	// Message is one sentence, without a "row N:" prefix.
	Message string `json:"message"`
}

// compare fills the counts of c from a and b.
func compare(a, b []int32) SeedCheck {
	c := SeedCheck{Compared: min(len(a), len(b)), FirstDiff: -1}
	for i := range c.Compared {
		if a[i] == b[i] {
			c.Agree++
		} else if c.FirstDiff < 0 {
			c.FirstDiff = i
		}
	}
	return c
}

// logChernoffTail returns the log of e^-mu (e mu/k)^k, a bound on the
// probability that a sum of independent Bernoulli variables with mean mu
// reaches k, or 0 (no evidence) when k <= mu.
func logChernoffTail(mu float64, k int) float64 {
	kf := float64(k)
	switch {
	case kf <= mu:
		return 0
	case mu <= 0:
		return math.Inf(-1) // agreements where none can happen
	}
	return -mu + kf*(1+math.Log(mu)-math.Log(kf))
}

// SameSeedSame checks that two runs with the same seed and offset drew the
// same tokens: it passes iff a and b have the same length and agree
// everywhere.
func SameSeedSame(a, b []int32) SeedCheck {
	c := compare(a, b)
	switch {
	case len(a) != len(b):
		c.Message = fmt.Sprintf("the same seed gave %d draws, then %d", len(a), len(b))
	case c.FirstDiff >= 0:
		i := c.FirstDiff
		c.Message = fmt.Sprintf("the same seed gave different draws at %d of %d positions, first at position %d (token %d, then %d)",
			c.Compared-c.Agree, c.Compared, i, a[i], b[i])
	default:
		c.Pass = true
		c.Message = fmt.Sprintf("the same seed gave the same %d draws", c.Compared)
	}
	return c
}

// CollisionProbability returns Σ p², the probability that two independent
// draws from probs (divided by their sum) give the same token.
func CollisionProbability(probs []float64) float64 {
	var s, s2 float64
	for _, p := range probs {
		if p > 0 && !math.IsInf(p, 1) {
			s += p
			s2 += p * p
		}
	}
	if s == 0 {
		return 0
	}
	return s2 / (s * s)
}

// DifferentSeedsDiffer checks that two runs with different seeds drew
// independently. Position i of two independent runs holds the same token
// with probability collision[i] (CollisionProbability of the row it was
// drawn from), so they agree everywhere with probability Π collision[i]. The
// check fails when a and b agree everywhere although that chance is below
// threshold (DefaultPValue when 0): the seed did not reach the sampler. When
// the chance is at least threshold (a peaked row, a greedy row, or few
// draws), identical draws are no evidence and the check passes, saying so.
//
// Partial agreement fails too when it is far above chance, as when the seed
// reaches the sampler on some rows only: the number of agreeing positions
// is a sum of independent Bernoulli(collision[i]) with mean μ = Σ
// collision[i], and the check fails when the Chernoff bound on reaching the
// observed count k > μ, e^-μ (eμ/k)^k, is below threshold. The bound is
// above the exact tail, so independent seeds fail less often than
// threshold says. Otherwise partial agreement passes; the message gives the
// count beside μ.
//
// a, b and collision must have the same length; otherwise the check fails
// and says why. A collision value that is not in [0, 1] counts as 1 (no
// evidence).
func DifferentSeedsDiffer(a, b []int32, collision []float64, threshold float64) SeedCheck {
	if threshold == 0 {
		threshold = DefaultPValue
	}
	c := compare(a, b)
	if len(a) != len(b) || len(collision) != len(a) {
		c.Message = fmt.Sprintf("cannot compare seeds: %d and %d draws against %d collision probabilities", len(a), len(b), len(collision))
		return c
	}
	var logChance float64
	for _, q := range collision {
		if !(q >= 0 && q <= 1) {
			q = 1
		}
		c.ExpectedAgree += q
		logChance += math.Log(q)
	}
	c.ChanceIdentical = math.Exp(logChance)
	c.Pass = true
	switch {
	case c.Compared == 0:
		c.Message = "no draws to compare across seeds"
	case c.FirstDiff >= 0:
		if logTail := logChernoffTail(c.ExpectedAgree, c.Agree); logTail < math.Log(threshold) {
			c.Pass = false
			c.Message = fmt.Sprintf("different seeds agree at %d of %d positions; independent seeds (%s on average) agree that often with probability at most %s, under %s",
				c.Agree, c.Compared, engine.FormatSig(c.ExpectedAgree, 3), probWords(math.Exp(logTail), logTail), engine.FormatFloat(threshold))
			break
		}
		c.Message = fmt.Sprintf("different seeds agree at %d of %d positions (independent seeds: %s on average)",
			c.Agree, c.Compared, engine.FormatSig(c.ExpectedAgree, 3))
	case logChance < math.Log(threshold):
		c.Pass = false
		c.Message = fmt.Sprintf("different seeds gave the same %d draws; independent seeds agree everywhere with probability %s, under %s",
			c.Compared, probWords(c.ChanceIdentical, logChance), engine.FormatFloat(threshold))
	default:
		c.Message = fmt.Sprintf("different seeds gave the same %d draws, which independent seeds do with probability %s, so this is no evidence either way",
			c.Compared, probWords(c.ChanceIdentical, logChance))
	}
	return c
}
