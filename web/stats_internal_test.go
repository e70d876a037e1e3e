package web

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"net/url"
	"strings"
	"testing"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/explain"
	"github.com/sampviz/sampviz/engine/lesson"
	"github.com/sampviz/sampviz/engine/session"
	"github.com/sampviz/sampviz/web/store"
)

func TestParseLesson(t *testing.T) {
	k := 2 + rand.IntN(6)
	tests := []struct {
		name  string
		query string
		want  lesson.Lesson
		err   string
	}{
		{"defaults", "", lesson.Lesson{Distance: 1}, ""},
		{"everything", "pos=1&temperature=0.5&top_k=40&top_p=0.9&distance=0.25&seed=7&step=100",
			lesson.Lesson{Position: 1, Temperature: ptr(0.5), TopK: ptr(40), TopP: ptr(0.9), Distance: 0.25, Seed: ptr(uint64(7)), Steps: 100}, ""},
		{"greedy target", "temperature=0", lesson.Lesson{Temperature: ptr(0.0), Distance: 1}, ""},
		{"last position", "pos=" + itoa(k-1), lesson.Lesson{Position: k - 1, Distance: 1}, ""},
		{"position past K", "pos=" + itoa(k), lesson.Lesson{}, "not a draft position"},
		{"negative temperature", "temperature=-1", lesson.Lesson{}, "temperature must be >= 0"},
		{"NaN temperature", "temperature=NaN", lesson.Lesson{}, "temperature must be a number"},
		{"top_p 0", "top_p=0", lesson.Lesson{}, "top-p must be in (0, 1]"},
		{"negative top_k", "top_k=-3", lesson.Lesson{}, "top-k must be >= 0"},
		{"distance past 1", "distance=1.01", lesson.Lesson{}, "distance must be in [0, 1]"},
		{"negative seed", "seed=-1", lesson.Lesson{}, "seed must be a whole number"},
		{"too many steps", "step=" + itoa(lesson.MaxSteps+1), lesson.Lesson{}, "step must be in"},
		{"steps not a number", "step=ten", lesson.Lesson{}, "step must be a whole number"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q, _ := url.ParseQuery(tt.query)
			got, err := parseLesson(q, k)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !lessonsEqual(got, tt.want) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func lessonsEqual(a, b lesson.Lesson) bool {
	eq := func(x, y any) bool {
		bx, _ := json.Marshal(x)
		by, _ := json.Marshal(y)
		return string(bx) == string(by)
	}
	return a.Position == b.Position && a.Distance == b.Distance && a.Steps == b.Steps &&
		eq(a.Temperature, b.Temperature) && eq(a.TopK, b.TopK) && eq(a.TopP, b.TopP) && eq(a.Seed, b.Seed)
}

// A lesson's own URL names the same lesson.
func TestLessonQueryRoundTrip(t *testing.T) {
	for range 20 {
		st := &lesson.State{
			Position: rand.IntN(4), Temperature: math.Round(rand.Float64()*200) / 100, TopK: rand.IntN(100),
			TopP: 0.01 + math.Round(rand.Float64()*99)/100, Distance: math.Round(rand.Float64()*20) / 20, Seed: rand.Uint64(),
		}
		steps := rand.IntN(lesson.MaxSteps)
		l, err := parseLesson(lessonQuery(st, steps), 4)
		if err != nil {
			t.Fatal(err)
		}
		if l.Position != st.Position || *l.Temperature != st.Temperature || *l.TopK != st.TopK || *l.TopP != st.TopP ||
			l.Distance != st.Distance || *l.Seed != st.Seed || l.Steps != steps {
			t.Errorf("%+v came back as %+v", st, l)
		}
	}
}

// randomSpecStats makes up one row's speculative statistics over k
// positions, with NaN where a position was never reached.
func randomSpecStats(k, trials int) *engine.SpecStats {
	s := &engine.SpecStats{Trials: trials}
	reached := trials
	for i := range k {
		acc := rand.IntN(reached + 1)
		pr := engine.PositionRate{Position: i, Reached: reached, Accepted: acc, Theory: engine.Float(rand.Float64()), PValue: engine.Float(rand.Float64())}
		if reached > 0 {
			pr.Rate = engine.Float(float64(acc) / float64(reached))
			pr.Lo, pr.Hi = pr.Rate*0.9, min(pr.Rate*1.1, 1)
		} else {
			pr.Rate, pr.Lo, pr.Hi = engine.Float(math.NaN()), engine.Float(math.NaN()), engine.Float(math.NaN())
		}
		s.Positions = append(s.Positions, pr)
		s.Emitted = append(s.Emitted, reached-acc)
		s.EmittedTheory = append(s.EmittedTheory, engine.Float(rand.Float64()/float64(k+1)))
		reached = acc
	}
	s.Emitted = append(s.Emitted, reached)
	s.EmittedTheory = append(s.EmittedTheory, engine.Float(rand.Float64()/float64(k+1)))
	s.MeanAcceptanceLength = engine.Float(1 + rand.Float64()*float64(k))
	s.TheoryMeanAcceptanceLength = engine.Float(1 + rand.Float64()*float64(k))
	s.EmittedPValue = engine.Float(math.NaN())
	return s
}

func TestStatisticalChartsAreValidJSON(t *testing.T) {
	rows, k, trials := 20+rand.IntN(100), 1+rand.IntN(6), 50+rand.IntN(500)
	tol := engine.Tolerances{PValue: 1e-6}
	outs := []engine.OutputInfo{{Name: "cpu", Kind: "spec", Tolerances: &tol}, {Name: "samples", External: true, Kind: "samples"}}
	tp := newTopic("r", "", rows, 100, Status{State: store.Running})
	tp.Outputs(outs)
	reached0 := 0
	for r := 0; r < rows; r++ {
		pv := math.Pow(10, -12*rand.Float64())
		if rand.IntN(10) == 0 {
			pv = 0 // an underflow
		}
		spec := randomSpecStats(k, trials)
		reached0 += spec.Positions[0].Reached
		tp.Row(session.RowUpdate{Output: 0, Report: engine.RowReport{Row: r, Pass: pv > tol.PValue, PValue: &pv, Spec: spec}})
		pv2 := rand.Float64()
		tp.Row(session.RowUpdate{Output: 1, Report: engine.RowReport{Row: r, Pass: true, PValue: &pv2}})
	}
	check := func(t *testing.T, charts []map[string]any) {
		t.Helper()
		b, err := json.Marshal(charts)
		if err != nil {
			t.Fatal(err)
		}
		var got []map[string]json.RawMessage
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		want := [][]string{{"pvalue", "accept", "emitted"}, {"pvalue"}}
		for o, kinds := range want {
			if len(got[o]) != len(kinds) {
				t.Errorf("output %d: charts %v, want %v", o, keys(got[o]), kinds)
			}
			for _, kind := range kinds {
				if got[o][kind] == nil {
					t.Errorf("output %d has no %s chart", o, kind)
				}
			}
		}
		var pv struct {
			Series []struct {
				Name string       `json:"name"`
				Data [][2]float64 `json:"data"`
			} `json:"series"`
		}
		if err := json.Unmarshal(got[0]["pvalue"], &pv); err != nil {
			t.Fatal(err)
		}
		n, line := 0, false
		for _, s := range pv.Series {
			if strings.HasPrefix(s.Name, "fails below p = ") {
				line = true
				continue
			}
			for _, d := range s.Data {
				if d[1] <= 0 || d[1] > 1 {
					t.Errorf("p-value point %v off the log axis", d)
				}
			}
			n += len(s.Data)
		}
		if n != rows || !line {
			t.Errorf("%d p-value points (want %d), threshold line %v", n, rows, line)
		}
	}
	t.Run("while streaming", func(t *testing.T) {
		charts := runCharts(tp.charts, outs, nil, 100, nil)
		check(t, charts)
		// The pooled acceptance at position 0 counts every row's trials.
		b, _ := json.Marshal(charts[0]["accept"])
		if !strings.Contains(string(b), "Wilson") {
			t.Error("the acceptance chart has no interval series")
		}
		if got := tp.charts.Outputs[0].Spec.stats().Positions[0].Reached; got != reached0 {
			t.Errorf("pooled position 0 reached %d, want %d", got, reached0)
		}
	})
	t.Run("final, pooled by the judge", func(t *testing.T) {
		pooled := []*engine.SpecStats{randomSpecStats(k, trials*rows), nil}
		check(t, runCharts(tp.charts, outs, nil, 100, pooled))
	})
	t.Run("restored from stream.json", func(t *testing.T) {
		b, err := json.Marshal(tp.toStored())
		if err != nil {
			t.Fatal(err)
		}
		var st stored
		if err := json.Unmarshal(b, &st); err != nil {
			t.Fatal(err)
		}
		back := topicFromStored("r", "", st)
		check(t, runCharts(back.charts, outs, nil, 100, nil))
		if got := back.charts.Outputs[0].Spec.stats().Positions[0].Reached; got != reached0 {
			t.Errorf("restored pooled position 0 reached %d, want %d", got, reached0)
		}
	})
}

func TestDescribeStep(t *testing.T) {
	sd := &explain.SpecDetail{K: 3}
	tests := []struct {
		name    string
		step    engine.SpecStep
		j, e    int
		outcome string
		say     string
	}{
		{"accepted, p < q", engine.SpecStep{Draft: 5, U: 0.1, P: 0.2, Q: 0.5, Accepted: true, Resampled: -1}, 0, 2, "accepted", "kept with probability min(1, p/q) = 0.4"},
		{"accepted, p >= q", engine.SpecStep{Draft: 5, U: 0.9, P: 0.5, Q: 0.2, Accepted: true, Resampled: -1}, 1, 2, "accepted", "p ≥ q, so min(1, p/q) = 1"},
		{"rejected", engine.SpecStep{Draft: 5, U: 0.9, P: 0.1, Q: 0.5, Accepted: false, Resampled: 8}, 2, 2, "rejected", "residual max(p − q, 0), normalised (orange), which has mass only where the draft proposes less than the target: token 8"},
		{"after the chain stopped", engine.SpecStep{Draft: 5, U: 0.1, P: 0.3, Q: 0.4, Accepted: true, Resampled: -1}, 2, 1, "after", "already stopped at position 1"},
		{"no distribution", engine.SpecStep{Draft: 5, U: 0.1, P: float32(math.NaN()), Q: 0.4, Resampled: -1}, 1, 1, "rejected", "no distribution"},
		{"bonus", engine.SpecStep{Draft: -1, Resampled: 42}, 3, 3, "bonus", "bonus token from the target p at position 3: token 42"},
		{"no bonus", engine.SpecStep{Draft: -1, Resampled: -1}, 3, 1, "none", "No bonus: the chain stopped at position 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cells, say, outcome := describeStep(sd, tt.step, tt.j, tt.e)
			if len(cells) != len(traceHeader) || outcome != tt.outcome || !strings.Contains(say, tt.say) {
				t.Errorf("cells %v, outcome %q, say %q; want outcome %q and %q", cells, outcome, say, tt.outcome, tt.say)
			}
		})
	}
}

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
	v := newTeachView(st, 2)
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
