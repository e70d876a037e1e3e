package compare

import "github.com/sampviz/sampviz/engine"

// judgeArgmax judges row r's argmax token: it must be one of the tied
// maxima; a near-tie within tolerance is a note (fragile).
func (w *worker) judgeArgmax(p *plan, r int, rep *engine.RowReport) {
	v := int64(w.j.vocab)
	tok := p.out.Tokens.Int(r)
	rep.Token = &tok
	a := w.argmaxRef(r)
	if a.Invalid != "" {
		invalidRow(rep, r, a.Invalid, a.InvalidRule)
		return
	}
	want := int64(a.Tokens[0])
	rep.RefToken = &want
	switch {
	case tok < 0 || tok >= v:
		rep.AddFinding(violation(engine.RuleTokenRange, int(tok), "row %d: token %d is outside [0, %d)", r, tok, v))
	case !a.Has(tok):
		logit := w.j.run.Logits.Float(r*int(v) + int(tok))
		l := engine.FormatDistinct(logit, a.Max)
		rep.AddFinding(violation(engine.RuleToken, int(tok), "row %d: token %d is not the argmax: its logit %s is %s below the maximum %s at token %d",
			r, tok, l[0], engine.FormatSig(a.Max-logit, 2), l[1], want))
	}
	tol := p.tol.Strict
	switch {
	case len(a.Tokens) > 1:
		rep.AddFinding(note(engine.RuleFragile, a.Tokens[0], "row %d: %d tokens tie for the maximum logit %s (first %s); any of them is right",
			r, len(a.Tokens), engine.FormatSig(a.Max, 2), firstTokens(a.Tokens, 4)))
	case a.RunnerUpToken >= 0 && tol.Allows(a.RunnerUp, a.Max):
		l := engine.FormatDistinct(a.RunnerUp, a.Max)
		rep.AddFinding(note(engine.RuleFragile, a.RunnerUpToken, "row %d: fragile: the runner-up logit %s at token %d is within tolerance of the maximum %s at token %d",
			r, l[0], a.RunnerUpToken, l[1], a.Tokens[0]))
	}
}
