package compare

import (
	"fmt"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/ref"
)

// judgeSpec judges row r of a speculative output: the structural rules of
// SEMANTICS.md "Judging" on spec_tokens (with spec_emitted and spec_accepted
// when present) and on every trial of spec_trials.
func (w *worker) judgeSpec(p *plan, r int, rep *engine.RowReport) {
	s := w.specRef(r, p.eps)
	if s.Invalid != "" {
		invalidRow(rep, r, s.Invalid, s.InvalidRule)
		return
	}
	steps := len(s.Drafts) + 1
	toks := make([]int64, steps)
	if t := p.out.SpecTokens; p.spec {
		for j := range toks {
			toks[j] = t.Int(r*steps + j)
		}
		var emitted, accepted *int64
		if e := p.out.SpecEmitted; e != nil {
			x := e.Int(r)
			emitted = &x
		}
		if a := p.out.SpecAccepted; a != nil {
			x := a.Int(r)
			accepted = &x
		}
		if rule, msg, tok := specProblem(s, toks, emitted, accepted, w.j.vocab); msg != "" {
			rep.AddFinding(violation(rule, tok, "row %d: %s", r, msg))
		}
	}
	if !p.trials {
		return
	}
	t := p.out.SpecTrials
	trials, rows := t.Dim(0), t.Dim(1)
	all := make([][]int64, trials)
	failed, first := 0, ""
	var firstRule engine.Rule
	firstTok := -1
	for d := range trials {
		row := make([]int64, steps)
		for j := range row {
			row[j] = t.Int((d*rows+r)*steps + j)
		}
		all[d] = row
		if rule, msg, tok := specProblem(s, row, nil, nil, w.j.vocab); msg != "" {
			if failed == 0 {
				first, firstRule, firstTok = fmt.Sprintf("trial %d: %s", d, msg), rule, tok
			}
			failed++
		}
	}
	if failed > 0 {
		rep.AddFinding(violation(firstRule, firstTok, "row %d: %d of %d trials break the rules; first, %s", r, failed, trials, first))
	}
	if pv, ok := specTrialsFit(s, all, p.tol.PValue); ok {
		rep.PValue = &pv
		if pv < p.tol.PValue {
			rep.AddFinding(violation(engine.RuleAcceptance, -1, "row %d: %d trials do not follow the speculative-sampling laws (p = %s, threshold %s)", r, trials, sci(pv), sci(p.tol.PValue)))
		}
	}
}

// specProblem checks one chain's output against the structural rules and
// returns the rule broken, a message without the row, and the token it is
// about, or an empty message. emitted and accepted are nil when absent.
func specProblem(s *ref.SpecRef, toks []int64, emitted, accepted *int64, v int) (engine.Rule, string, int) {
	k := len(s.Drafts)
	for j, t := range toks {
		if t < -1 || t >= int64(v) {
			return engine.RuleTokenRange, fmt.Sprintf("token %d at position %d is outside [-1, %d)", t, j, v), int(t)
		}
	}
	c := 0 // tokens before the -1 fill
	for c < len(toks) && toks[c] != -1 {
		c++
	}
	for j := c; j < len(toks); j++ {
		if toks[j] != -1 {
			return engine.RuleStructure, fmt.Sprintf("token %d at position %d follows the -1 fill at position %d", toks[j], j, c), int(toks[j])
		}
	}
	if c == 0 {
		return engine.RuleStructure, "no token precedes the -1 fill (a chain emits at least its resampled or bonus token)", -1
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
	}
	t := toks[e]
	if e < k {
		if !(s.Residual[e][t] > 0 || s.Target[e].Class[t] == ref.Boundary) {
			return engine.RuleSupport, fmt.Sprintf("the resampled token %d at position %d has zero mass under the residual max(p - q, 0)", t, e), int(t)
		}
	} else if !(s.Target[k].Probs[t] > 0 || s.Target[k].Class[t] == ref.Boundary) {
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
