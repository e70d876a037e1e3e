package view

import (
	"fmt"
	"net/url"
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
	Detail  *explain.RowDetail
	// Why says why there is no detail ("" when there is).
	Why string
	// Wait is the run's websocket while its kernels have not finished: the
	// page reloads itself when the run ends ("" otherwise).
	Wait    string
	Log     bool
	Top     int
	Charts  map[string]any
	Failing []int // failing rows, for the previous and next links
	// Trace is the speculative trace step by step (spec_verify rows with a
	// stored trace), Teach the row's teaching page (spec_verify rows).
	Trace *Trace
	Teach string
	// Tree is the draft tree of a spec_tree_verify row with laws.
	Tree *TreeView
	// Spec is the statistics of the row's speculative trials (from the
	// first output judged on many trials), for its own acceptance charts.
	Spec *engine.SpecStats
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
	return q
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
				part += fmt.Sprintf(" (rank %d, reference probability %s)", t.Rank, Sci(t.Ref))
			}
		}
		parts = append(parts, part)
	}
	if len(parts) == 0 {
		return ""
	}
	return strings.Join(parts, "; ") + "."
}
