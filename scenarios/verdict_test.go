package scenarios

import (
	"strings"
	"testing"

	"github.com/sampviz/sampviz/engine"
)

// report builds a two-output report: "cpu" passing every row, and "probs"
// failing row 2 for nan and tolerance, row 1 matched native, and a fragile
// note on row 0.
func report() *engine.Report {
	row := func(r int, matched string, fs ...engine.Finding) engine.RowReport {
		rr := engine.RowReport{Row: r, Pass: true, Matched: matched}
		for _, f := range fs {
			rr.AddFinding(f)
		}
		return rr
	}
	v := func(rule engine.Rule) engine.Finding {
		return engine.Finding{Rule: rule, Severity: engine.Violation, Message: "row 2: " + string(rule), Token: -1}
	}
	n := engine.Finding{Rule: engine.RuleFragile, Severity: engine.Note, Message: "row 0: fragile", Token: 3}
	return &engine.Report{Pass: false, Outputs: []engine.OutputReport{
		{Name: "cpu", Pass: true, Rows: []engine.RowReport{row(0, "strict"), row(1, "strict"), row(2, "strict")}},
		{Name: "probs", External: true, Pass: false, FailedRows: 1, Rows: []engine.RowReport{
			row(0, "strict", n), row(1, "native"), row(2, "", v(engine.RuleTolerance), v(engine.RuleNaN), v(engine.RuleNaN)),
		}},
	}}
}

// expect is the verdict that report gives exactly.
func expect() Expect {
	return Expect{Pass: false, Outputs: []OutputExpect{
		{Name: "cpu", Pass: true, Matched: &Matched{Strict: []int{0, 1, 2}}},
		{Name: "probs", Pass: false,
			Failing: []RowRules{{Row: 2, Rules: []engine.Rule{engine.RuleNaN, engine.RuleTolerance}}},
			Notes:   []RuleRows{{Rule: engine.RuleFragile, Rows: []int{0}}},
			Matched: &Matched{Strict: []int{0}, Native: []int{1}}},
	}}
}

func TestMismatches(t *testing.T) {
	tests := []struct {
		name string
		edit func(e *Expect)
		want []string // substrings of the differences, in order; none: exact
	}{
		{"exact", func(*Expect) {}, nil},
		{"rules listed in another order", func(e *Expect) {
			e.Outputs[1].Failing[0].Rules = []engine.Rule{engine.RuleTolerance, engine.RuleNaN}
		}, nil},
		{"run pass", func(e *Expect) { e.Pass = true }, []string{"run pass is false, want true"}},
		{"output order", func(e *Expect) { e.Outputs[0], e.Outputs[1] = e.Outputs[1], e.Outputs[0] }, []string{"outputs are"}},
		{"missing output", func(e *Expect) { e.Outputs = e.Outputs[:1] }, []string{"outputs are"}},
		{"output pass", func(e *Expect) { e.Outputs[0].Pass = false }, []string{"output cpu: pass is true, want false"}},
		{"row expected to fail passes", func(e *Expect) {
			e.Outputs[0].Failing = []RowRules{{Row: 1, Rules: []engine.Rule{engine.RuleSupport}}}
		}, []string{"row 1 passes, want it to fail"}},
		{"row expected to pass fails", func(e *Expect) { e.Outputs[1].Failing = nil }, []string{"row 2 fails"}},
		{"a rule too few", func(e *Expect) {
			e.Outputs[1].Failing[0].Rules = []engine.Rule{engine.RuleNaN}
		}, []string{"row 2 fails for [nan tolerance], want [nan]"}},
		{"noted rows", func(e *Expect) { e.Outputs[1].Notes[0].Rows = []int{0, 1} }, []string{"rows noted fragile are [0], want [0 1]"}},
		{"matched rows", func(e *Expect) { e.Outputs[1].Matched.Native = nil }, []string{"native reference are [1], want []"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := expect()
			tt.edit(&e)
			got := e.Mismatches(report())
			if len(got) != len(tt.want) {
				t.Fatalf("got %d differences %q, want %d like %q", len(got), got, len(tt.want), tt.want)
			}
			for i, w := range tt.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("difference %d is %q, want it to say %q", i, got[i], w)
				}
			}
		})
	}
	if d := expect().Mismatches(nil); len(d) != 1 {
		t.Errorf("a nil report gives %q, want one difference", d)
	}
}
