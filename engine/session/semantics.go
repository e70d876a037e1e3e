package session

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/sampviz/sampviz/engine/compare"

	"github.com/sampviz/sampviz/engine"
)

// Which engine does this output follow? A job whose semantics is any
// (engine.SemanticsAny) runs no kernel: it judges the dump's external
// outputs under every preset of engine.Presets and reports which pass
// (engine.Report.Matches), so a person who does not know their engine's
// filter chain learns it from the data. Presets whose parameters come out
// the same on the dump are judged once.

// matchSemantics judges run's external outputs under every preset, telling
// sink (when not nil) the rows of the report it returns: the first passing
// preset's, or, when none passes, the one with the fewest failures. The
// report passes when some preset does.
func (s *Session) matchSemantics(ctx context.Context, run *engine.Run, job Job, sink Sink) (*engine.Report, error) {
	if err := checkAny(run); err != nil {
		return nil, err
	}
	var (
		matches []engine.SemanticsMatch
		runs    []*engine.Run
		reps    []*engine.Report
		first   = map[string]int{} // a chain's first preset, by chainKey
	)
	for _, p := range engine.Presets() {
		pr := presetRun(run, p)
		m := engine.SemanticsMatch{Semantics: p.Name, Engine: p.Engine, Chain: p.Chain, FirstRow: -1}
		key := chainKey(pr)
		var rep *engine.Report
		if j, ok := first[key]; ok {
			rep = reps[j]
			m.SameAs = matches[j].Semantics
		} else {
			var err error
			if rep, err = s.judge(ctx, pr, nil, nil, job, nil); err != nil {
				return nil, err
			}
			first[key] = len(matches)
		}
		m.Pass = rep.Pass
		for _, o := range rep.Outputs {
			m.FailedRows += o.FailedRows
			m.Violations += len(o.Violations)
			if m.First == "" {
				m.First, m.FirstRow = firstViolation(o)
			}
		}
		matches, runs, reps = append(matches, m), append(runs, pr), append(reps, rep)
	}

	chosen := bestMatch(matches)
	rep := reps[chosen]
	if sink != nil {
		var err error
		if rep, err = s.judge(ctx, runs[chosen], nil, nil, job, sink); err != nil {
			return nil, err
		}
	}
	out := *rep
	out.Notices = slices.Clone(rep.Notices)
	out.Semantics, out.Matches, out.Pass = matches[chosen].Semantics, matches, false
	for _, m := range matches {
		out.Pass = out.Pass || m.Pass
	}
	if len(first) == 1 {
		out.Notices = append(out.Notices, fmt.Sprintf("every preset judges this dump alike: op %s and its parameters leave no room for the filter chain to differ", run.Op))
	}
	return &out, nil
}

// checkAny refuses a job with semantics any whose dump holds no external
// output: there is nothing to judge under the presets (Admit refuses it
// before a run is queued).
func checkAny(run *engine.Run) error {
	if run.Params.Semantics == engine.SemanticsAny && len(run.External) == 0 {
		return &InputError{Msg: fmt.Sprintf("%s: semantics any judges the dump's external outputs under every preset, and the dump holds none", run.Source)}
	}
	return nil
}

// presetRun returns run with p's filter chain (engine.Preset.Apply, which
// any leaves to this): the same tensors, its own parameters and notices.
func presetRun(run *engine.Run, p *engine.Preset) *engine.Run {
	pr := *run
	pr.Params.MinP = slices.Clone(run.Params.MinP)
	pr.Notices = slices.Clone(run.Notices)
	if !run.Op.Spec().Takes("semantics") {
		pr.Params.Semantics = p.Name
		return &pr
	}
	notice, _ := p.Apply(&pr.Params, func(string) string { return "" }) // no value conflicts under any
	if notice != "" {
		pr.Notices = append(pr.Notices, notice)
	}
	return &pr
}

// chainKey tells apart the parameters that can change a judgement under
// two presets: the same key, the same judgement.
func chainKey(run *engine.Run) string {
	if !run.Op.Spec().Takes("semantics") {
		return ""
	}
	p := &run.Params
	return fmt.Sprint(p.FilterOrder, " ", p.TopKTies, " ", p.TemperatureOrder, " ", p.MinP)
}

// bestMatch returns the index of the first passing preset, or, when none
// passes, of the one with the fewest failures (the first of equals).
func bestMatch(ms []engine.SemanticsMatch) int {
	best := 0
	for i, m := range ms {
		if m.Pass {
			return i
		}
		if m.FailedRows+m.Violations < ms[best].FailedRows+ms[best].Violations {
			best = i
		}
	}
	return best
}

// firstViolation returns the first violation of an output, a row's or the
// output's, or "", and its row (-1 for none or the output's).
func firstViolation(o engine.OutputReport) (string, int) {
	for _, r := range o.Rows {
		if len(r.Violations) > 0 {
			return o.Name + ": " + r.Violations[0], r.Row
		}
	}
	if len(o.Violations) > 0 {
		return o.Name + ": all rows: " + o.Violations[0], -1
	}
	return "", -1
}

// MatchSummary says in one sentence which presets pass: "the outputs follow
// hf, sglang and flashinfer (3 of 6 presets)", or that none does.
func MatchSummary(ms []engine.SemanticsMatch) string {
	var pass []string
	for _, m := range ms {
		if m.Pass {
			pass = append(pass, string(m.Semantics))
		}
	}
	if len(pass) == 0 {
		return fmt.Sprintf("the outputs follow none of the %d presets", len(ms))
	}
	names := pass[0]
	if len(pass) > 1 {
		names = strings.Join(pass[:len(pass)-1], ", ") + " and " + pass[len(pass)-1]
	}
	return fmt.Sprintf("the outputs follow %s (%d of %d presets)", names, len(pass), len(ms))
}

// LogprobTolerances is the judge's tolerance table for logprobs outputs,
// by dtype (docs/SEMANTICS.md, "Logprobs"), for pages that say how they
// are judged.
func LogprobTolerances() []compare.ToleranceRow { return compare.LogprobTable() }
