package view

import (
	"fmt"
	"net/url"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/session"
	"github.com/sampviz/sampviz/web/store"
)

// What the run page shows, and what of it depends on the run's op and
// progress.

// RunPage is what the run page shows.
type RunPage struct {
	Run     store.Run
	Info    session.DumpInfo
	Params  engine.Overrides
	Own     store.Judgement
	J       store.Judgement
	Tol     *engine.Tolerances
	Status  Status
	Summary *Summary
	// Device is where the run's kernels ran (from the report), or the
	// backend it is queued for.
	Device   engine.Device
	Backends []engine.Device
	// Query is the URL query naming the judgement (tolerances).
	Query url.Values
	// View holds the page's view state from the URL.
	View   RunView
	Script RunScript
	// Candidates are the recent finished runs of the same op the page
	// offers to compare with (once this run has finished).
	Candidates []CompareCandidate
}

// RunView is the row table's and charts' state, kept in the URL.
type RunView struct {
	Failing bool   `json:"failing"`
	Sort    string `json:"sort"`
	Output  int    `json:"output"`
	// Focus is the comparison section the page opens on: "modes" (the mode
	// tables), "agree" (the agreement between outputs), "padding" (the
	// padded lanes), or "".
	Focus string `json:"focus,omitempty"`
}

// RunScript is the JSON the page script starts from.
type RunScript struct {
	Run     string  `json:"run"`
	WS      string  `json:"ws"`
	RowBase string  `json:"row_base"`
	Query   string  `json:"query"`
	Rows    int     `json:"rows"`
	Vocab   int     `json:"vocab"`
	View    RunView `json:"view"`
	// Finished says the page was rendered with the final report: the
	// comparison sections and the runs to compare with are in it.
	Finished bool `json:"finished"`
}

// Statistical reports whether a run's outputs are judged statistically:
// many draws per row of a sample run, many trials per row of a spec_verify
// run (ours through the run's parameters, or the dump's own).
func Statistical(d RunPage) bool {
	has := func(name string) bool {
		for _, e := range d.Info.External {
			if e == name {
				return true
			}
		}
		return false
	}
	if d.Summary != nil && d.Summary.StatsLine != "" {
		return true
	}
	switch d.Info.Op {
	case engine.OpSample:
		return d.Params.Draws != nil && *d.Params.Draws > 0 || has("samples") || has("sample_counts")
	case engine.OpSpecVerify:
		return d.Params.Trials != nil && *d.Params.Trials > 1 || has("spec_trials")
	}
	return false
}

// ShowsChart says which of the run page's charts are shown before the
// first chart options arrive (the page script then shows exactly those it
// gets options for).
func ShowsChart(d RunPage, chart string) bool {
	switch d.Info.Op {
	case engine.OpSoftmax, engine.OpRenorm:
		return chart == "worst" || chart == "hist" || chart == "heat"
	case engine.OpSample:
		if Statistical(d) {
			return chart == "pvalue"
		}
	case engine.OpSpecVerify:
		if Statistical(d) {
			return chart == "pvalue" || chart == "accept" || chart == "emitted"
		}
	}
	return chart == "worst"
}

// StatsHeader is the run header's statistics line before the page script
// takes over: the summary's when the run is done.
func StatsHeader(d RunPage) string {
	if d.Summary != nil && d.Summary.StatsLine != "" {
		return d.Summary.StatsLine
	}
	if d.Summary != nil {
		return "No output of this run was judged statistically."
	}
	return "Shown when the run finishes: draws or trials per row, and how the rows compare with theory."
}

// TolValue prefills the re-judge form with the tolerances in force.
func TolValue(d RunPage, name string) string {
	t := d.Tol
	if t == nil && d.Summary != nil {
		t = &d.Summary.Tolerances
	}
	if t == nil {
		return ""
	}
	return ToleranceValues(t).Get(name)
}

// Focused reports whether the page opened on comparison section f.
func Focused(d RunPage, f string) bool { return d.View.Focus == f }

// FocusClass marks the section the page opened on.
func FocusClass(d RunPage, f string) string {
	if Focused(d, f) {
		return "focus"
	}
	return ""
}

// RowHref links row r of the page's run with its judgement's tolerances,
// and every output on one chart when all is set.
func RowHref(d RunPage, r int, all bool) string {
	q := url.Values{}
	for k, v := range d.Query {
		q[k] = v
	}
	if all {
		q.Set("outputs", "all")
	}
	return WithQuery(fmt.Sprintf("/runs/%s/rows/%d", d.Run.ID, r), q)
}

// RowLinker returns RowHref for the page's rows.
func RowLinker(d RunPage, all bool) func(int) string {
	return func(r int) string { return RowHref(d, r, all) }
}

// FocusWaiting says where the view the page opened on will appear.
func FocusWaiting(focus string) string {
	what := map[string]string{
		"modes":   "The mode tables",
		"agree":   "The agreement between outputs",
		"padding": "The padded lanes",
	}[focus]
	if what == "" {
		what = "This view"
	}
	return what + " appear here when the run finishes: they come with its final report."
}
