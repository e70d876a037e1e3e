package view

import (
	"math"
	"strings"
	"testing"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/lesson"
)

// The teaching texts hold the numbers of the lesson, and the identity they
// teach holds on them.
func TestTeachTexts(t *testing.T) {
	p := []float64{0.5, 0.3, 0.2}
	q := []float64{0.2, 0.7, 0.1}
	st := &lesson.State{Steps: 3, Distance: 1, Position: 0, K: 2}
	for i := range p {
		st.Tokens = append(st.Tokens, lesson.Token{Token: 10 + i, P: engine.Float(p[i]), Q: engine.Float(q[i])})
		st.Beta += engine.Float(math.Min(p[i], q[i]))
		st.TV += engine.Float(math.Abs(p[i]-q[i]) / 2)
	}
	st.Last = []lesson.Step{{Step: 3, Draft: 11, U: 0.9, P: 0.3, Q: 0.7, Accepted: false, Token: 10}}
	st.Running = []lesson.TVPoint{{Steps: 3, Emitted: 0.2, Drafts: 0.4}}
	st.TVBars = st.TV
	v := NewTeachView(st, 2)
	for _, want := range []string{"Step 3: the draft proposes token 11", "u·q(x) = 0.63 ≥ p(x): rejected", "token 10"} {
		if !strings.Contains(v.What, want) {
			t.Errorf("what = %q, want %q", v.What, want)
		}
	}
	if !strings.Contains(v.WhyMin, "token 11 is proposed with q = 0.7 but the target wants p = 0.3") || !strings.Contains(v.WhyMin, "β = 0.6") {
		t.Errorf("why min = %q", v.WhyMin)
	}
	// Token 10 lacks 0.3 of 0.4 missing in all: the residual gives it 0.75.
	if !strings.Contains(v.WhyResidual, "1 − β = 0.4") || !strings.Contains(v.WhyResidual, "residual gives it 0.75") {
		t.Errorf("why residual = %q", v.WhyResidual)
	}
	if !strings.Contains(v.WhyP, "After 3 steps") || !strings.Contains(v.Definition, "total variation between p and q is 0.4") {
		t.Errorf("why p = %q, definition %q", v.WhyP, v.Definition)
	}
	if len(v.Last) != 1 || v.Last[0].Verdict != "rejected: residual" || v.Last[0].Accept != "0.429" {
		t.Errorf("last = %+v", v.Last)
	}
}
