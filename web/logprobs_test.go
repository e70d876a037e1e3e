package web_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"golang.org/x/net/html"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/cpu"
	"github.com/sampviz/sampviz/engine/session"
	"github.com/sampviz/sampviz/scenarios"
	"github.com/sampviz/sampviz/web"
)

// scenarioServed returns the built-in scenario called name as the server
// lists it.
func scenarioServed(t *testing.T, name string) web.Scenario {
	t.Helper()
	for _, s := range scenarios.Catalogue() {
		if s.Name == name {
			return web.Scenario{Name: s.Name, Title: s.Title, Summary: s.Summary, FileName: s.FileName(), Open: s.Open, View: s.View,
				Params: engine.Overrides{Draws: s.Overrides.Draws, Trials: s.Overrides.Trials}}
		}
	}
	t.Fatalf("no scenario %s", name)
	return web.Scenario{}
}

// TestLogprobsPages opens the logprobs-kinds scenario on the real pipeline
// as the home page does and reads what the pages say of its four logprobs
// outputs: the run page's output list (each output's kind, and the note
// that names the other kind), its mode table in nats, and the row page's
// section for each output: the kind on the row, the judge's sentences, the
// chart of the output against the reference with the −inf entries of its
// own, and the token table.
func TestLogprobsPages(t *testing.T) {
	e := &env{t: t, dir: t.TempDir()}
	e.start(web.Config{DataDir: e.dir, Runner: session.New(cpu.New()), Log: quietLog(), Scenarios: []web.Scenario{scenarioServed(t, "logprobs-kinds")}})
	loc := e.openScenario("logprobs-kinds")
	id := runIDs.FindStringSubmatch(loc)[1]
	if got := e.wait(id, ""); got.State != "done" {
		t.Fatalf("run %s ended %s: %s", id, got.State, got.Message)
	}

	t.Run("the run page", func(t *testing.T) {
		page := e.page(loc, http.StatusOK)
		outputs, _ := byTestID(t, page, "verdict")
		for _, want := range []string{
			"logprobs@processed (from the dump), processed logprobs, top 20, passes all 8 rows.",
			"logprobs@raw (from the dump), raw logprobs, every token's, passes all 8 rows.",
			"logprobs@v0_style (from the dump), raw logprobs, top 20, fails 7 of 8 rows.",
		} {
			if !strings.Contains(outputs, want) {
				t.Errorf("the verdict does not say %q", want)
			}
		}
		notes := elements(t, page, "output-note")
		if len(notes) != 1 || !strings.Contains(textOf(notes[0]), "every one of them passes as processed logprobs: are they processed? (set logprobs_kind (or logprobs_kind@v0_style) to processed)") {
			t.Errorf("output notes %d, want the note that names the other kind", len(notes))
		}
		tables := elements(t, page, "mode-table")
		if len(tables) != 1 || attr(tables[0], "data-kind") != "logprobs" {
			t.Fatalf("%d mode tables, want the logprobs one", len(tables))
		}
		var head []string
		for _, th := range findAll(tables[0], "th") {
			head = append(head, textOf(th))
		}
		if want := []string{"output", "verdict", "rows failing", "mean |Δlogprob| (nats)", "P99", "max"}; !slices.Equal(head, want) {
			t.Errorf("mode table head %v, want %v", head, want)
		}
		for _, l := range elements(t, page, "mode-line") {
			cells := findAll(l, "td")
			if len(cells) != 6 || textOf(cells[5]) == "—" {
				t.Errorf("mode line %q has no max |Δlogprob|", textOf(l))
			}
		}
		if got, _ := byTestID(t, page, "logprobs-tolerances"); !strings.Contains(got, "on the log scale, in nats") || !strings.Contains(got, "BF16 rtol 2^-7") {
			t.Errorf("the header says of the logprobs' tolerances %q", got)
		}
		if sel := elements(t, page, "rerun-logprobs-kind"); len(sel) != 1 {
			t.Error("the rerun form does not offer the logprobs kind")
		}
	})

	t.Run("the row page", func(t *testing.T) {
		// Row 2 is at temperature 0 with filters: the processed top-20
		// holds −inf where they drop a token, which raw logprobs do not.
		page := e.page("/runs/"+id+"/rows/2", http.StatusOK)
		sections := map[string]*html.Node{}
		var names []string
		for _, s := range elements(t, page, "row-logprobs") {
			sections[attr(s, "data-output")] = s
			names = append(names, attr(s, "data-output"))
		}
		if want := []string{"logprobs@processed", "logprobs@raw", "logprobs@temperature_twice", "logprobs@v0_style"}; !slices.Equal(names, want) {
			t.Fatalf("logprobs sections %v, want %v", names, want)
		}
		tests := []struct {
			output, kind string
			tokens       int
			violations   []string
			note         string
		}{
			{"logprobs@processed", "Processed logprobs: the log of the distribution the sampler draws from, the logits at temperature 1 (a greedy row: vLLM divides it by 1), then the row's filters", 20, nil, ""},
			{"logprobs@raw", "Raw logprobs: log_softmax(logits) at temperature 1", 21, nil, ""},
			{"logprobs@v0_style", "Raw logprobs: log_softmax(logits) at temperature 1", 20, []string{"tolerance", "support"}, "are they processed?"},
		}
		for _, tt := range tests {
			t.Run(tt.output, func(t *testing.T) {
				s := sections[tt.output]
				if k := within(s, "logprobs-kind"); len(k) != 1 || !strings.HasPrefix(textOf(k[0]), tt.kind) {
					t.Errorf("kind %q, want it to begin %q", textOf(k[0]), tt.kind)
				}
				var rules []string
				for _, li := range findAll(within(s, "logprobs-findings")[0], "li") {
					if attr(li, "class") == "violation" {
						rules = append(rules, strings.Fields(textOf(li))[0])
					}
				}
				if !slices.Equal(rules, tt.violations) {
					t.Errorf("violations %v, want %v", rules, tt.violations)
				}
				notes := within(s, "logprobs-note")
				if (tt.note != "") != (len(notes) == 1) || len(notes) == 1 && !strings.Contains(textOf(notes[0]), tt.note) {
					t.Errorf("%d notes, want one saying %q", len(notes), tt.note)
				}
				if n := len(within(s, "logprobs-token")); n != tt.tokens {
					t.Errorf("%d tokens in the table, want %d", n, tt.tokens)
				}
				if len(within(s, "chart-logprobs")) != 1 {
					t.Error("no chart")
				}
			})
		}
		// The charts: the reference as bars, the output as markers, and
		// the −inf entries as markers of their own.
		var charts map[string]struct {
			Series []struct {
				Name string `json:"name"`
			} `json:"series"`
		}
		if err := json.Unmarshal(jsonScript(t, page, "row-charts"), &charts); err != nil {
			t.Fatal(err)
		}
		series := func(key string) []string {
			var s []string
			for _, x := range charts[key].Series {
				s = append(s, x.Name)
			}
			return s
		}
		for key, want := range map[string][]string{
			"logprobs-0": {"reference (float64, processed)", "logprobs@processed", "−inf (or NaN, +Inf at 0) in the output", "−inf in the reference (dropped)"},
			"logprobs-1": {"reference (float64, raw)", "logprobs@raw"},
			"logprobs-3": {"reference (float64, raw)", "logprobs@v0_style", "−inf (or NaN, +Inf at 0) in the output"},
		} {
			if got := series(key); !slices.Equal(got, want) {
				t.Errorf("chart %s draws %v, want %v", key, got, want)
			}
		}
		// The row API carries the same detail.
		var row struct {
			Detail struct {
				Logprobs []struct {
					Name   string `json:"name"`
					Kind   string `json:"logprobs_kind"`
					TopN   int    `json:"top_n"`
					Tokens []struct {
						Ref   any `json:"ref"`
						Value any `json:"value"`
					} `json:"tokens"`
				} `json:"logprobs"`
			} `json:"detail"`
		}
		if err := json.Unmarshal(readAll(t, e.do("GET", "/api/runs/"+id+"/rows/2", nil)), &row); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, l := range row.Detail.Logprobs {
			got = append(got, l.Name+" "+l.Kind)
		}
		if want := []string{"logprobs@processed processed", "logprobs@raw raw", "logprobs@temperature_twice processed", "logprobs@v0_style raw"}; !slices.Equal(got, want) {
			t.Errorf("the row API's logprobs %v, want %v", got, want)
		}
		if lp := row.Detail.Logprobs; len(lp) == 4 && (lp[0].TopN != 20 || lp[0].Tokens[19].Ref != "-Inf" || lp[0].Tokens[19].Value != "-Inf") {
			t.Errorf("the processed top-20's last entry: top_n %d, ref %v, value %v; want 20 and −inf on both sides", lp[0].TopN, lp[0].Tokens[19].Ref, lp[0].Tokens[19].Value)
		}
	})
}
