// Package diff compares two judged runs of one op, the before and the
// after of a fix or of an engine's new version: for runs on the same
// inputs, which rows changed verdict, each row's drift before and after,
// the mode tables side by side and, for spec_verify, the acceptance by
// position before and after; for runs on different inputs, their summaries
// and where the inputs part. `sampviz diff` and the web's diff page show
// what it returns. It never runs kernels, never reads files and never
// judges: engine/session judges both runs and hands them here.
package diff

import (
	"fmt"

	"github.com/sampviz/sampviz/engine"
)

// Side is one of the two runs: its inputs and its judgement.
type Side struct {
	// Name says where the run came from: a dump's file name, or a stored
	// run's id.
	Name   string
	Run    *engine.Run
	Report *engine.Report
}

// Refusal is a pair of runs that diff does not compare (runs of two ops).
// Its message is one sentence for the person who asked.
type Refusal struct{ Msg string }

func (e *Refusal) Error() string { return e.Msg }

// Refuse returns the *Refusal of comparing run a of op opA with run b of
// op opB.
func Refuse(a string, opA engine.Op, b string, opB engine.Op) *Refusal {
	return &Refusal{Msg: fmt.Sprintf("%s is a run of op %s and %s one of op %s: diff compares two runs of one op", a, opA, b, opB)}
}

// Diff is run B (after) against run A (before).
type Diff struct {
	A  string    `json:"a"`
	B  string    `json:"b"`
	Op engine.Op `json:"op"`
	// Rows and Vocab are A's; ShapeB is B's when it differs.
	Rows  int `json:"rows"`
	Vocab int `json:"vocab"`
	// Inputs says whether the runs judged the same inputs and, when not,
	// where they first part.
	Inputs Inputs `json:"inputs"`
	// PassA and PassB are the runs' verdicts, FailedA and FailedB their
	// rows where some output fails.
	PassA   bool `json:"pass_a"`
	PassB   bool `json:"pass_b"`
	FailedA int  `json:"failed_a"`
	FailedB int  `json:"failed_b"`
	// Outputs pairs the outputs of A and B by name (ours by being ours,
	// whatever backend ran them), in A's order, then B's new ones.
	Outputs []Output `json:"outputs"`
	// Modes puts A's and B's mode tables of each kind side by side.
	Modes []Modes `json:"modes,omitempty"`
	// Worse says whether anything got worse (`sampviz diff` exits 1), and
	// Why lists each thing in a sentence; Better lists what improved.
	Worse  bool     `json:"worse"`
	Why    []string `json:"why"`
	Better []string `json:"better"`
	// Summary is the comparison in one sentence.
	Summary string `json:"summary"`
}

// Inputs says how the two runs' inputs compare.
type Inputs struct {
	Same bool `json:"same"`
	// Tensor names the first input (tensor or parameter) that differs, and
	// Row the first row where it does (-1 for a shape or a run-wide
	// setting); Why says it in words.
	Tensor string `json:"tensor,omitempty"`
	Row    int    `json:"row"`
	Why    string `json:"why,omitempty"`
}

// Output is one output in A and B.
type Output struct {
	Name     string `json:"name"`
	External bool   `json:"external"`
	Kind     string `json:"kind"`
	// NameB is the output's name in B when it differs (ours on another
	// backend).
	NameB string `json:"name_b,omitempty"`
	// InA and InB say which runs hold it.
	InA bool `json:"in_a"`
	InB bool `json:"in_b"`
	// PassA, PassB, FailedA and FailedB are its verdicts and failing rows.
	PassA   bool `json:"pass_a"`
	PassB   bool `json:"pass_b"`
	FailedA int  `json:"failed_a"`
	FailedB int  `json:"failed_b"`
	// DriftA and DriftB are the greatest error against the reference over
	// the run (probabilities |out - ref|, logits |Δlogit|), when it has one.
	DriftA *engine.Float `json:"drift_a,omitempty"`
	DriftB *engine.Float `json:"drift_b,omitempty"`
	// Fixed and Broken list the rows that went from fail to pass and from
	// pass to fail (same inputs only).
	Fixed  []int `json:"fixed"`
	Broken []int `json:"broken"`
	// Rows holds every row of an output in both runs on the same inputs.
	Rows []Row `json:"rows,omitempty"`
	// Positions puts the pooled acceptance by position of a spec_verify
	// output side by side, with both 95% intervals.
	Positions []Position `json:"positions,omitempty"`
}

// Row is one row of an output before and after.
type Row struct {
	Row   int  `json:"row"`
	PassA bool `json:"pass_a"`
	PassB bool `json:"pass_b"`
	// DriftA and DriftB are the row's greatest |error| against the strict
	// reference (probabilities) or the golden logits, and WithinA and
	// WithinB whether every error is within the tolerance there (float
	// kinds; nil where the row has none).
	DriftA  *engine.Float `json:"drift_a,omitempty"`
	DriftB  *engine.Float `json:"drift_b,omitempty"`
	WithinA *bool         `json:"within_a,omitempty"`
	WithinB *bool         `json:"within_b,omitempty"`
	// Change is "fixed" (fail to pass), "broken" (pass to fail), "worse"
	// (a passing row whose drift grew past the strict tolerance: it passes
	// on the native reference alone), "better" (the reverse), or "".
	Change string `json:"change,omitempty"`
	// ViolationsB are the row's violations in B, for the rows that fail
	// there.
	ViolationsB []string `json:"violations_b,omitempty"`
}

// Position is one draft position's pooled acceptance before and after.
type Position struct {
	Position int                 `json:"position"`
	A        engine.PositionRate `json:"a"`
	B        engine.PositionRate `json:"b"`
}

// Modes is one kind's mode tables in A and B (nil where a run has none).
type Modes struct {
	Kind string            `json:"kind"`
	A    *engine.ModeTable `json:"a"`
	B    *engine.ModeTable `json:"b"`
}

// Compare compares run B with run A. Runs of two ops are a *Refusal.
func Compare(a, b Side) (*Diff, error) {
	if a.Report == nil || b.Report == nil || a.Run == nil || b.Run == nil {
		return nil, fmt.Errorf("diff: a side has no run or no report")
	}
	if a.Run.Op != b.Run.Op {
		return nil, Refuse(a.Name, a.Run.Op, b.Name, b.Run.Op)
	}
	d := &Diff{
		A: a.Name, B: b.Name, Op: a.Run.Op, Rows: a.Run.Rows(), Vocab: a.Run.Vocab(),
		Inputs: compareInputs(a.Run, b.Run),
		PassA:  a.Report.Pass, PassB: b.Report.Pass,
		FailedA: failedRows(a.Report), FailedB: failedRows(b.Report),
		Why: []string{}, Better: []string{},
	}
	for _, pair := range pairOutputs(a.Report, b.Report) {
		d.Outputs = append(d.Outputs, d.output(pair[0], pair[1]))
	}
	d.Modes = sideBySide(a.Report.Modes, b.Report.Modes)
	d.Worse = len(d.Why) > 0
	d.Summary = d.summary()
	return d, nil
}

// failedRows counts the rows where some output fails.
func failedRows(r *engine.Report) int {
	failed := map[int]bool{}
	for _, o := range r.Outputs {
		for _, row := range o.Rows {
			if !row.Pass {
				failed[row.Row] = true
			}
		}
	}
	return len(failed)
}

// pairOutputs pairs the outputs of a and b: ours with ours, the dump's by
// name; an output in one run only is paired with nil.
func pairOutputs(a, b *engine.Report) [][2]*engine.OutputReport {
	key := func(o *engine.OutputReport) string {
		if !o.External {
			return "\x00ours"
		}
		return o.Name
	}
	used := map[string]bool{}
	var pairs [][2]*engine.OutputReport
	for i := range a.Outputs {
		oa := &a.Outputs[i]
		var ob *engine.OutputReport
		for k := range b.Outputs {
			if key(&b.Outputs[k]) == key(oa) {
				ob = &b.Outputs[k]
			}
		}
		used[key(oa)] = true
		pairs = append(pairs, [2]*engine.OutputReport{oa, ob})
	}
	for k := range b.Outputs {
		if ob := &b.Outputs[k]; !used[key(ob)] {
			pairs = append(pairs, [2]*engine.OutputReport{nil, ob})
		}
	}
	return pairs
}

// sideBySide pairs the mode tables of a and b by kind.
func sideBySide(a, b []engine.ModeTable) []Modes {
	var out []Modes
	find := func(ts []engine.ModeTable, kind string) *engine.ModeTable {
		for i := range ts {
			if ts[i].Kind == kind {
				return &ts[i]
			}
		}
		return nil
	}
	for i := range a {
		out = append(out, Modes{Kind: a[i].Kind, A: &a[i], B: find(b, a[i].Kind)})
	}
	for i := range b {
		if find(a, b[i].Kind) == nil {
			out = append(out, Modes{Kind: b[i].Kind, B: &b[i]})
		}
	}
	return out
}

// summary says the comparison in one sentence.
func (d *Diff) summary() string {
	inputs := "on the same inputs"
	if !d.Inputs.Same {
		inputs = "on different inputs (" + d.Inputs.Why + ")"
	}
	s := fmt.Sprintf("%s against %s, %s: %s before, %s after", d.B, d.A, inputs, verdict(d.PassA, d.FailedA), verdict(d.PassB, d.FailedB))
	switch {
	case d.Worse:
		s += "; worse: " + d.Why[0]
		if n := len(d.Why) - 1; n > 0 {
			s += fmt.Sprintf(" (and %d more)", n)
		}
	case len(d.Better) > 0:
		s += "; nothing got worse, and " + plural(len(d.Better), "thing") + " got better"
	default:
		s += "; nothing got worse"
	}
	return s
}

// verdict writes a run's verdict: "pass" or "FAIL (3 rows)".
func verdict(pass bool, failed int) string {
	if pass {
		return "pass"
	}
	if failed == 0 {
		return "FAIL (all rows together)"
	}
	return "FAIL (" + plural(failed, "row") + ")"
}

// plural writes n and word, with an s unless n is 1.
func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}
