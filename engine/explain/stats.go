package explain

import (
	"cmp"
	"slices"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/compare"
	"github.com/sampviz/sampviz/engine/ref"
)

// maxZeroMassShown bounds the tokens drawn without reference mass that a
// sample histogram lists one by one; the rest fall into its pooled bin.
const maxZeroMassShown = 40

// sampleDetail counts row r's draws of every output that drew many times
// (ours, and the dump's samples; drawn one by one or counted per token), on the top most probable tokens under the
// distribution sampled tokens are judged against (ref.Sample) and on every
// token drawn that it gives no mass. It returns nil when no output drew
// row r many times.
func sampleDetail(run *engine.Run, outs []*engine.Output, r, top int, eps float64) *SampleDetail {
	rows, v := run.Rows(), run.Vocab()
	var drawn []*engine.Output
	for _, o := range outs {
		if s := o.Samples; s != nil && len(s.Shape) == 2 && s.Dim(0) == rows && s.Dim(1) > 0 {
			drawn = append(drawn, o)
		} else if c := o.SampleCounts; s == nil && c != nil && len(c.Shape) == 2 && c.Dim(0) == rows && c.Dim(1) == v && compare.CountsRowProblem(c, r, v) == "" {
			drawn = append(drawn, o)
		}
	}
	if len(drawn) == 0 {
		return nil
	}
	dist := ref.Sample(run, r, eps)
	if !dist.Valid() {
		return nil // the row page says why the row has no distribution
	}
	sd := &SampleDetail{OutOfRange: make([]int64, len(drawn))}
	counts := make([][]int64, len(drawn))
	for i, o := range drawn {
		sd.Outputs = append(sd.Outputs, engine.OutputInfo{Name: o.Name, External: o.External, Kind: "samples"})
		counts[i] = make([]int64, v)
		if o.Samples == nil {
			var sum int64
			for t := range v {
				counts[i][t] = o.SampleCounts.Int(r*v + t) // >= 0: CountsRowProblem
				sum += counts[i][t]
			}
			n := max(int64(o.SampleDraws), sum)
			sd.Draws = append(sd.Draws, int(n))
			sd.OutOfRange[i] = n - sum
			continue
		}
		n := o.Samples.Dim(1)
		sd.Draws = append(sd.Draws, n)
		for k := range n {
			t := o.Samples.Int(r*n + k)
			if t < 0 || t >= int64(v) {
				sd.OutOfRange[i]++
				continue
			}
			counts[i][t]++
		}
	}
	sd.SameAsFirst = make([]bool, len(drawn))
	for i := 1; i < len(drawn); i++ {
		if drawn[0].Samples == nil || drawn[i].Samples == nil {
			// Counts say only whether the same tokens were drawn as often.
			sd.SameAsFirst[i] = sd.Draws[0] == sd.Draws[i] && sd.OutOfRange[0] == sd.OutOfRange[i] && slices.Equal(counts[0], counts[i])
			continue
		}
		sd.SameAsFirst[i] = sameDraws(drawn[0].Samples, drawn[i].Samples, r)
	}
	shown := make([]bool, v)
	bin := func(t int) SampleToken {
		shown[t] = true
		st := SampleToken{Token: t, Ref: engine.Float(dist.Probs[t]), Class: dist.Class[t].String(), Observed: make([]int64, len(drawn))}
		for i := range drawn {
			st.Observed[i] = counts[i][t]
		}
		return st
	}
	for _, t := range dist.Top(min(top, v)) {
		if dist.Probs[t] > 0 {
			sd.Tokens = append(sd.Tokens, bin(t))
		}
	}
	zero := 0
	for t := 0; t < v && zero < maxZeroMassShown; t++ {
		if shown[t] || dist.Probs[t] > 0 {
			continue
		}
		for i := range drawn {
			if counts[i][t] > 0 {
				sd.Tokens = append(sd.Tokens, bin(t))
				zero++
				break
			}
		}
	}
	sd.Other = SampleToken{Token: -1, Observed: make([]int64, len(drawn))}
	rest := 0.0
	for t := 0; t < v; t++ {
		if shown[t] {
			continue
		}
		rest += dist.Probs[t]
		for i := range drawn {
			sd.Other.Observed[i] += counts[i][t]
		}
	}
	sd.Other.Ref = engine.Float(rest)
	return sd
}

// Tokens a spec_verify position shows: the most probable under the target,
// under the draft and under the residual.
const (
	specTopP        = 12
	specTopQ        = 8
	specTopResidual = 6
)

// specDetail returns the laws of chain speculative sampling on row r
// (ref.SpecVerify) on the tokens worth drawing at each position: the most
// probable under p, q and the residual, the draft, and every token the trace
// tr (nil when none) resampled there. It attaches tr.
func specDetail(run *engine.Run, r int, eps float64, tr *RowTrace) *SpecDetail {
	s := ref.SpecVerify(run, r, eps)
	k := len(s.Drafts)
	sd := &SpecDetail{K: k, Drafts: s.Drafts, OneHot: s.Draft == nil, Invalid: s.Invalid}
	mal := 1.0
	for j, e := range s.Emitted {
		sd.Emitted = append(sd.Emitted, engine.Float(e))
		mal += float64(j) * e
	}
	if len(s.Emitted) == k+1 {
		sd.MeanAcceptanceLength = engine.Float(mal)
	}
	for _, a := range s.Accept {
		sd.Accept = append(sd.Accept, engine.Float(a))
	}
	for i := 0; i <= k && i < len(s.Target); i++ {
		pos := SpecPosition{Position: i}
		p := &s.Target[i]
		if !p.Valid() {
			pos.Invalid = "the target has no distribution here: " + p.Invalid
			sd.Positions = append(sd.Positions, pos)
			continue
		}
		var q, res []float64
		if i < k && s.Draft != nil && i < len(s.Draft) {
			q = s.Draft[i]
		}
		if i < k && i < len(s.Residual) {
			res = s.Residual[i]
		}
		want := map[int]bool{}
		for _, t := range p.Top(specTopP) {
			want[t] = true
		}
		for _, t := range ref.TopIndices(q, specTopQ) {
			want[t] = true
		}
		for _, t := range ref.TopIndices(res, specTopResidual) {
			want[t] = true
		}
		if i < k {
			want[int(s.Drafts[i])] = true
		}
		if tr != nil {
			for _, steps := range tr.Step {
				if i < len(steps) && steps[i].Resampled >= 0 && int(steps[i].Resampled) < len(p.Probs) {
					want[int(steps[i].Resampled)] = true
				}
			}
		}
		for t := range want {
			pos.Tokens = append(pos.Tokens, specToken(&s, i, t))
		}
		sortSpecTokens(pos.Tokens)
		sd.Positions = append(sd.Positions, pos)
	}
	sd.Trace = tr
	return sd
}

// specToken returns p, q and the residual of token t at position i of s.
func specToken(s *ref.SpecRef, i, t int) SpecToken {
	k := len(s.Drafts)
	st := SpecToken{Token: t, P: engine.Float(s.Target[i].Probs[t])}
	if i < k {
		switch {
		case s.Draft != nil && i < len(s.Draft):
			st.Q = engine.Float(s.Draft[i][t])
		case int64(t) == s.Drafts[i]:
			st.Q = 1
		}
		if i < len(s.Residual) && s.Residual[i] != nil {
			st.Residual = engine.Float(s.Residual[i][t])
		}
	}
	return st
}

// sortSpecTokens orders tokens by target probability, then draft
// probability, then id.
func sortSpecTokens(ts []SpecToken) {
	slices.SortFunc(ts, func(a, b SpecToken) int {
		if c := cmp.Compare(b.P, a.P); c != 0 {
			return c
		}
		if c := cmp.Compare(b.Q, a.Q); c != 0 {
			return c
		}
		return cmp.Compare(a.Token, b.Token)
	})
}

// sameDraws reports whether row r of two [B, N] sample tensors holds the
// same tokens in the same order.
func sameDraws(a, b *engine.Tensor, r int) bool {
	n := a.Dim(1)
	if b.Dim(1) != n {
		return false
	}
	for k := range n {
		if a.Int(r*n+k) != b.Int(r*n+k) {
			return false
		}
	}
	return true
}
