package compare

import (
	"fmt"
	"math"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/ref"
)

// judgeSpec judges row r of a speculative output: the structural rules of
// SEMANTICS.md "Judging" on spec_tokens (with spec_emitted and spec_accepted
// when present) and on every trial of spec_trials, then the statistics of
// the trials (specTrialStats): those of spec_trials when the output has
// them, else the one trial of spec_tokens. Both judge against the laws of
// the reference with the target supports the trials reveal at boundary
// tokens (revealedLaws).
func (w *worker) judgeSpec(p *plan, r int, rep *engine.RowReport) {
	s := w.specRef(r, p.eps)
	if s.Invalid != "" {
		invalidRow(rep, r, s.Invalid, s.InvalidRule)
		return
	}
	steps := len(s.Drafts) + 1
	var toks []int64
	if p.spec {
		toks = make([]int64, steps)
		for j := range toks {
			toks[j] = p.out.SpecTokens.Int(r*steps + j)
		}
	}
	// Our kernels verify the first trial's drafts as fixed drafts; only an
	// external output's trials come with drafts of their own.
	redrawn := p.trials && w.j.run.DraftTrials != nil && p.rep.External
	if redrawn && !p.spec {
		w.judgeRedrawn(p, s, r, rep)
		return
	}
	var trials [][]int32
	if p.trials && !redrawn {
		trials = readTrials(p.out.SpecTrials, r, steps)
	} else {
		trial := make([]int32, steps)
		for j, t := range toks {
			trial[j] = int32Token(t)
		}
		trials = [][]int32{trial}
	}
	ts, err := countTrials(s, trials, w.j.vocab)
	if err != nil {
		rep.AddFinding(note(engine.RuleAcceptance, -1, "row %d: no trial statistics: %v", r, err))
		if redrawn {
			w.judgeRedrawn(p, s, r, rep)
		}
		return
	}
	laws, changes := revealedLaws(s, ts)
	if !redrawn { // judgeRedrawn says what the trials reveal
		p.slack[r] = laws.slack
		for _, c := range changes {
			rep.AddFinding(note(engine.RuleBoundary, -1, "row %d: %s", r, c))
		}
	}

	if p.spec {
		var emitted, accepted *int64
		if e := p.out.SpecEmitted; e != nil {
			x := e.Int(r)
			emitted = &x
		}
		if a := p.out.SpecAccepted; a != nil {
			x := a.Int(r)
			accepted = &x
			p.recordAccepted(r, laws, x)
		}
		if p.emittedIsAccepted && emitted != nil {
			// The tokens must show a chain that stopped at a rejection: a
			// resampled token at position e is never the draft there (where
			// the draft can be rejected, the residual gives it no mass), so
			// a chain that only lost its bonus token is not taken for it.
			if e, ok := tokensEmitted(toks); ok && int64(e) < *emitted && e < len(s.Drafts) && toks[e] != s.Drafts[e] {
				rep.AddFinding(violation(engine.RuleCounter, -1, "row %d: spec_emitted reports the accepted counter: it is %d, as spec_accepted is on every row, where the tokens show %d accepted (spec_emitted must count the accepted prefix, the tokens committed before the resampled one)", r, *emitted, e))
				emitted = nil // the rule above says it; the layout rules judge the tokens alone
			}
		}
		if rule, msg, tok := specProblem(s, &laws, toks, emitted, accepted, w.j.vocab); msg != "" {
			rep.AddFinding(violation(rule, tok, "row %d: %s", r, msg))
		}
	}
	if redrawn {
		w.judgeRedrawn(p, s, r, rep)
		return
	}
	if p.trials {
		judgeTrialStructure(p.out.SpecTrials, s, &laws, r, w.j.vocab, rep)
	}
	w.specTrialStats(p, s, &laws, ts, trials, r, rep)
}

// readTrials returns the trials of row r of spec_trials t ([T, B, steps])
// as int32 tokens (int32Token), in one allocation; per-trial draft_tokens
// ([T, B, K]) are read the same way.
func readTrials(t *engine.Tensor, r, steps int) [][]int32 {
	n, rows := t.Dim(0), t.Dim(1)
	flat := make([]int32, n*steps)
	all := make([][]int32, n)
	for d := range n {
		at := (d*rows + r) * steps
		for j := range steps {
			flat[d*steps+j] = int32Token(t.Int(at + j))
		}
		all[d] = flat[d*steps : (d+1)*steps : (d+1)*steps]
	}
	return all
}

// judgeTrialStructure judges every trial of row r of spec_trials t on the
// structural rules, and reports how many break one, and the first.
func judgeTrialStructure(t *engine.Tensor, s *ref.SpecRef, laws *specLaws, r, v int, rep *engine.RowReport) {
	n, rows, steps := t.Dim(0), t.Dim(1), len(s.Drafts)+1
	row := make([]int64, steps)
	failed, first := 0, ""
	var firstRule engine.Rule
	firstTok := -1
	for d := range n {
		for j := range row {
			row[j] = t.Int((d*rows+r)*steps + j)
		}
		if rule, msg, tok := specProblem(s, laws, row, nil, nil, v); msg != "" {
			if failed == 0 {
				first, firstRule, firstTok = fmt.Sprintf("trial %d: %s", d, msg), rule, tok
			}
			failed++
		}
	}
	if failed > 0 {
		rep.AddFinding(violation(firstRule, firstTok, "row %d: %d of %d trials break the rules; first, %s", r, failed, n, first))
	}
}

// tokensEmitted returns the accepted prefix a chain's tokens show: the
// tokens before the -1 fill, less the resampled or bonus one. ok is false
// when the tokens have no such shape (the layout rules say why).
func tokensEmitted(toks []int64) (int, bool) {
	c := 0
	for c < len(toks) && toks[c] != -1 {
		c++
	}
	for _, t := range toks[c:] {
		if t != -1 {
			return 0, false
		}
	}
	return c - 1, c > 0
}

// int32Token narrows a token id for engine/stats; ids beyond int32 (never a
// valid token) become -2, which is neither a token nor the -1 fill.
func int32Token(t int64) int32 {
	if t < math.MinInt32 || t > math.MaxInt32 {
		return -2
	}
	return int32(t)
}

// recordAccepted keeps row r's spec_accepted counter for the run-level check
// of its mean against the sum of the acceptance probabilities.
func (p *plan) recordAccepted(r int, laws specLaws, observed int64) {
	if p.accepted == nil || observed < 0 || observed > int64(len(laws.accept)) {
		return // out of range: a structural violation already
	}
	a := acceptedRow{ok: true, observed: int(observed), tests: len(laws.accept)}
	for i, x := range laws.accept {
		lo, hi := band(x, laws.slack[i])
		a.mean += x
		a.lo += lo
		a.hi += hi
	}
	p.accepted[r] = a
}

// specProblem checks one chain's output against the structural rules and
// returns the rule broken, a message without the row, and the token it is
// about, or an empty message. emitted and accepted are nil when absent.
// Resampled and bonus tokens must have mass under laws (the reference's,
// with the supports the trials reveal), or be boundary tokens.
func specProblem(s *ref.SpecRef, laws *specLaws, toks []int64, emitted, accepted *int64, v int) (engine.Rule, string, int) {
	k := len(s.Drafts)
	c, rule, msg, tok := chainLayout(toks, v)
	if rule != "" {
		return rule, msg, tok
	}
	e := c - 1 // the emitted (accepted) length the tokens show
	if emitted != nil {
		switch x := *emitted; {
		case x < 0 || x > int64(k):
			return engine.RuleStructure, fmt.Sprintf("spec_emitted %d is outside [0, %d]", x, k), -1
		case x != int64(e):
			return engine.RuleStructure, fmt.Sprintf("spec_emitted is %d, so %d tokens should precede the -1 fill, not %d", x, x+1, c), -1
		}
	}
	for j := range e {
		if toks[j] != s.Drafts[j] {
			return engine.RuleStructure, fmt.Sprintf("token %d at position %d is not the draft %d, yet the chain goes on past it", toks[j], j, s.Drafts[j]), int(toks[j])
		}
		// A draft the target gives no mass can never pass u*q < p.
		if x := s.Drafts[j]; s.Accept[j] == 0 && s.Target[j].Class[x] != ref.Boundary {
			return engine.RuleAcceptance, fmt.Sprintf("the draft %d at position %d was accepted, but the target gives it no mass (acceptance probability 0)", x, j), int(x)
		}
	}
	t := toks[e]
	if e < k {
		if !(laws.residual[e][t] > 0 || s.Target[e].Class[t] == ref.Boundary || laws.nearResidual(s, e, int(t))) {
			return engine.RuleSupport, fmt.Sprintf("the resampled token %d at position %d has zero mass under the residual max(p - q, 0)", t, e), int(t)
		}
	} else if !(laws.target[k][t] > 0 || s.Target[k].Class[t] == ref.Boundary) {
		return engine.RuleSupport, fmt.Sprintf("the bonus token %d has zero mass under the target distribution", t), int(t)
	}
	if accepted != nil {
		switch x := *accepted; {
		case x < int64(e):
			return engine.RuleStructure, fmt.Sprintf("spec_accepted %d is below spec_emitted %d", x, e), -1
		case x > int64(k):
			return engine.RuleStructure, fmt.Sprintf("spec_accepted %d is above the %d draft positions", x, k), -1
		}
	}
	return "", "", -1
}

// nearResidual reports whether token t may be resampled at position i
// although its float64 residual max(p_i - q_i, 0) is 0: where p_i(t) > 0
// and q_i(t) exceeds it by no more than the position's slack (float32
// rounding, and the boundary tokens a sampler may keep or drop unseen,
// which renormalise p_i), a sampler's residual can reach t.
func (laws *specLaws) nearResidual(s *ref.SpecRef, i, t int) bool {
	pt := laws.target[i][t]
	if !(pt > 0) {
		return false
	}
	q := 0.0
	switch {
	case s.Draft != nil:
		q = s.Draft[i][t]
	case int64(t) == s.Drafts[i]:
		q = 1
	}
	return pt >= q*(1-laws.slack[i])
}

// chainLayout checks a chain's emitted tokens for what every chain
// verifier's output must hold: each token in [-1, v), a -1 fill after the
// tokens and nothing after it, at least one token. It returns the number
// of tokens before the fill, or the broken rule, a message without the row
// and the token it is about.
func chainLayout(toks []int64, v int) (int, engine.Rule, string, int) {
	for j, t := range toks {
		if t < -1 || t >= int64(v) {
			return 0, engine.RuleTokenRange, fmt.Sprintf("token %d at position %d is outside [-1, %d)", t, j, v), int(t)
		}
	}
	c := 0
	for c < len(toks) && toks[c] != -1 {
		c++
	}
	for j := c; j < len(toks); j++ {
		if toks[j] != -1 {
			return 0, engine.RuleStructure, fmt.Sprintf("token %d at position %d follows the -1 fill at position %d", toks[j], j, c), int(toks[j])
		}
	}
	if c == 0 {
		return 0, engine.RuleStructure, "no token precedes the -1 fill (a chain emits at least its resampled or bonus token)", -1
	}
	return c, "", "", 0
}
