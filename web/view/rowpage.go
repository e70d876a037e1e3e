package view

import (
	"fmt"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/explain"
	"github.com/sampviz/sampviz/engine/session"
	"github.com/sampviz/sampviz/web/store"
)

// What the row page shows, and its links to other rows.

// RowPage is what the row page shows.
type RowPage struct {
	Run     store.Run
	Info    session.DumpInfo
	J       store.Judgement
	Tol     *engine.Tolerances
	Query   url.Values
	Row     int
	Outputs []engine.OutputInfo
	Reports []*engine.RowReport
	// Notes are each output's notes over every row, by name, once the
	// judgement is final.
	Notes map[string][]string
	// Preset is the preset a run judged with semantics any shows ("" for
	// other runs).
	Preset engine.Semantics
	Detail *explain.RowDetail
	// Why says why there is no detail ("" when there is).
	Why string
	// Wait is the run's websocket while the row is not judged by every
	// output: the page reloads itself once it is, or when the run ends (""
	// otherwise).
	Wait    string
	Log     bool
	Top     int
	Charts  map[string]any
	Failing []int // failing rows, for the previous and next links
	// Trace is the speculative trace step by step (spec_verify rows with a
	// stored trace), Teach the row's teaching page (spec_verify,
	// spec_tree_verify and sample rows).
	Trace *Trace
	Teach string
	// Tree is the draft tree of a spec_tree_verify row with laws.
	Tree *TreeView
	// Spec is the statistics of the row's speculative trials (from the
	// first output judged on many trials), for its own acceptance charts.
	Spec *engine.SpecStats
	// AllOutputs asks for every probability output on one chart
	// (?outputs=all); otherwise a row with more than two draws the
	// reference beside ours and the outputs that fail it (ShownProbs).
	AllOutputs bool
	// Shown lists the probability outputs the charts draw (indices in
	// Detail.Probs).
	Shown []int
}

// DefaultTop is how many tokens the row page shows unless ?top= says.
const DefaultTop = 20

// RowURL links row r of the page's run, keeping tolerances and the scale.
func RowURL(d *RowPage, r int, logScale bool) string {
	return WithQuery(fmt.Sprintf("/runs/%s/rows/%d", d.Run.ID, r), RowQuery(d, logScale))
}

// RowQuery is the row page's view in the URL: tolerances, scale, top.
func RowQuery(d *RowPage, logScale bool) url.Values {
	q := ToleranceValues(d.Tol)
	if q == nil {
		q = url.Values{}
	}
	if logScale {
		q.Set("log", "1")
	}
	if d.Top != DefaultTop {
		q.Set("top", strconv.Itoa(d.Top))
	}
	if d.AllOutputs {
		q.Set("outputs", "all")
	}
	return q
}

// maxFocusProbs is how many probability outputs the row page draws on one
// chart unless asked for all of them.
const maxFocusProbs = 2

// ShownProbs returns the indices (in detail.Probs) of the probability
// outputs the row page's charts draw: every one when all is set or when
// there are at most two; else ours and the outputs that fail the row, at
// most two, in order (the first two when none fails).
func ShownProbs(detail *explain.RowDetail, outs []engine.OutputInfo, reps []*engine.RowReport, all bool) []int {
	if detail == nil {
		return nil
	}
	n := len(detail.Probs)
	if all || n <= maxFocusProbs {
		idx := make([]int, n)
		for i := range idx {
			idx[i] = i
		}
		return idx
	}
	fails := map[string]bool{}
	for i, o := range outs {
		if i < len(reps) && reps[i] != nil && !reps[i].Pass {
			fails[o.Name] = true
		}
	}
	var idx []int
	for i, p := range detail.Probs {
		if !p.External && len(idx) < maxFocusProbs {
			idx = append(idx, i)
		}
	}
	for i, p := range detail.Probs {
		if p.External && fails[p.Name] && len(idx) < maxFocusProbs {
			idx = append(idx, i)
		}
	}
	for i := range detail.Probs {
		if len(idx) >= maxFocusProbs {
			break
		}
		if !slices.Contains(idx, i) {
			idx = append(idx, i)
		}
	}
	slices.Sort(idx)
	return idx
}

// ShownLine says which outputs the row page's charts draw, and how many
// more there are.
func ShownLine(d *RowPage, shown []int) string {
	if d.Detail == nil || len(d.Detail.Probs) <= maxFocusProbs {
		return ""
	}
	var names, hidden []string
	for i, p := range d.Detail.Probs {
		if slices.Contains(shown, i) {
			names = append(names, p.Name)
		} else {
			hidden = append(hidden, p.Name)
		}
	}
	if len(hidden) == 0 {
		return fmt.Sprintf("Every output on one chart: the reference and %s.", listWords(names))
	}
	return fmt.Sprintf("The charts draw the reference beside %s (ours and the outputs that fail this row); %s not drawn: %s.", listWords(names), verbFor(len(hidden), "1 more output is", strconv.Itoa(len(hidden))+" more outputs are"), strings.Join(hidden, ", "))
}

// PrevFailing returns the failing row before r, or -1.
func PrevFailing(failing []int, r int) int {
	i := sort.SearchInts(failing, r)
	if i > 0 {
		return failing[i-1]
	}
	return -1
}

// NextFailing returns the failing row after r, or -1.
func NextFailing(failing []int, r int) int {
	i := sort.SearchInts(failing, r+1)
	if i < len(failing) {
		return failing[i]
	}
	return -1
}

// ChosenLine says which token each token output chose for the row, with its
// reference probability when it is among the tokens shown.
func ChosenLine(d *RowPage) string {
	var parts []string
	for _, o := range d.Outputs {
		tok, ok := d.Detail.Chosen[o.Name]
		if !ok {
			continue
		}
		part := fmt.Sprintf("%s chose token %s", o.Label(), Tokens(d.Detail.Text).Label(tok))
		for _, t := range d.Detail.Tokens {
			if int64(t.Token) == tok {
				part += fmt.Sprintf(" (rank %d, reference probability %s)", t.Rank, engine.FormatSig(float64(t.Ref), 4))
			}
		}
		parts = append(parts, part)
	}
	if len(parts) == 0 {
		return ""
	}
	return strings.Join(parts, "; ") + "."
}

// OutputsURL links this row with every output on one chart (all) or the
// outputs in focus.
func OutputsURL(d *RowPage, all bool) string {
	e := *d
	e.AllOutputs = all
	return RowURL(&e, d.Row, d.Log)
}

// TopChoices are the token counts the row page offers beside its charts.
var TopChoices = []int{20, 60, 200}

// TopLink is one choice of how many tokens the row page shows.
type TopLink struct {
	N       int
	Href    string
	Current bool
}

// TopLinks links this row with each of TopChoices tokens shown (and the
// current count when the URL named another).
func TopLinks(d *RowPage) []TopLink {
	ns := slices.Clone(TopChoices)
	if !slices.Contains(ns, d.Top) {
		ns = append(ns, d.Top)
		slices.Sort(ns)
	}
	var links []TopLink
	for _, n := range ns {
		e := *d
		e.Top = n
		links = append(links, TopLink{N: n, Href: RowURL(&e, d.Row, d.Log), Current: n == d.Top})
	}
	return links
}

// PresetLine says under which preset a row of a run judged with semantics
// any is shown ("" for other runs).
func PresetLine(d *RowPage) string {
	if d.Preset == "" {
		return ""
	}
	return fmt.Sprintf("This run was judged under every engine's filter chain (semantics any); this row is shown under %s, the preset of the run page's verdict.", d.Preset)
}
