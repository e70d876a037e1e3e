package web

import (
	"fmt"
	"math"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/explain"
	"github.com/sampviz/sampviz/engine/session"
	"github.com/sampviz/sampviz/web/store"
)

// This file holds the small formatting helpers the templ components call:
// numbers with units, and verdicts in words.

func shapeString(shape []int) string { return engine.FormatShape(shape) }

func rowsTokens(info session.DumpInfo) string {
	if info.Vocab == 0 {
		return fmt.Sprintf("%d rows", info.Rows)
	}
	if k := draftPositions(&info); k > 0 {
		return fmt.Sprintf("%d rows of %d draft positions and a bonus position, %d tokens each", info.Rows, k, info.Vocab)
	}
	return fmt.Sprintf("%d rows of %d tokens", info.Rows, info.Vocab)
}

// statistical reports whether a run's outputs are judged statistically:
// many draws per row of a sample run, many trials per row of a spec_verify
// run (ours through the run's parameters, or the dump's own).
func statistical(d runPageData) bool {
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
		return d.Params.Draws != nil && *d.Params.Draws > 0 || has("samples")
	case engine.OpSpecVerify:
		return d.Params.Trials != nil && *d.Params.Trials > 1 || has("spec_trials")
	}
	return false
}

// showsChart says which of the run page's charts are shown before the
// first chart options arrive (the page script then shows exactly those it
// gets options for).
func showsChart(d runPageData, chart string) bool {
	switch d.Info.Op {
	case engine.OpSoftmax, engine.OpRenorm:
		return chart == "worst" || chart == "hist" || chart == "heat"
	case engine.OpSample:
		if statistical(d) {
			return chart == "pvalue"
		}
	case engine.OpSpecVerify:
		if statistical(d) {
			return chart == "pvalue" || chart == "accept" || chart == "emitted"
		}
	}
	return chart == "worst"
}

// statsHeader is the run header's statistics line before the page script
// takes over: the summary's when the run is done.
func statsHeader(d runPageData) string {
	if d.Summary != nil && d.Summary.StatsLine != "" {
		return d.Summary.StatsLine
	}
	if d.Summary != nil {
		return "No output of this run was judged statistically."
	}
	return "Shown when the run finishes: draws or trials per row, and how the rows compare with theory."
}

func joinNames(names []string) string { return strings.Join(names, ", ") }

func maxRow(info session.DumpInfo) string { return strconv.Itoa(maxInt(info.Rows-1, 0)) }

// sci writes a probability or an error short: 3 significant digits.
func sci(f engine.Float) string {
	v := float64(f)
	switch {
	case math.IsNaN(v):
		return "NaN"
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case v == 0:
		return "0"
	case math.Abs(v) >= 1e-3 && math.Abs(v) < 1e4:
		return strconv.FormatFloat(v, 'g', 4, 64)
	}
	return strconv.FormatFloat(v, 'e', 2, 64)
}

// duration writes d with a unit a person reads at a glance.
func duration(d time.Duration) string {
	switch {
	case d <= 0:
		return "0"
	case d < time.Millisecond:
		return fmt.Sprintf("%.1f µs", float64(d)/float64(time.Microsecond))
	case d < time.Second:
		return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%.2f s", d.Seconds())
}

// bandwidth writes bytes per second in GB/s or TB/s (decimal, as GPU
// datasheets do).
func bandwidth(bps float64) string {
	if bps >= 1e12 {
		return fmt.Sprintf("%.2f TB/s", bps/1e12)
	}
	return fmt.Sprintf("%.1f GB/s", bps/1e9)
}

// timingLine says how long the kernels took and, on a GPU, the bandwidth
// they achieved against the copy bandwidth measured at start.
func timingLine(sum *Summary, d engine.Device) string {
	if sum == nil || sum.Timing == nil {
		return "Measured when the run finishes."
	}
	t := sum.Timing
	if d.Backend == "cpu" {
		return fmt.Sprintf("%s on the CPU (wall time; the CPU backend has no kernel time or bandwidth to report).", duration(t.Wall))
	}
	line := fmt.Sprintf("kernel %s", duration(t.Kernel))
	if bw := t.Bandwidth(); bw > 0 {
		line += fmt.Sprintf(", %s achieved", bandwidth(bw))
		if d.CopyBandwidth > 0 {
			line += fmt.Sprintf(" (%.0f%% of the %s copy bandwidth measured at start)", 100*bw/d.CopyBandwidth, bandwidth(d.CopyBandwidth))
		}
	}
	if t.Wall > 0 {
		line += fmt.Sprintf("; %s with transfers", duration(t.Wall))
	}
	return line + "."
}

func ptrText(p *float64) string {
	if p == nil {
		return ""
	}
	return engine.FormatFloat(*p)
}

func intPtrText(p *int) string {
	if p == nil {
		return ""
	}
	return strconv.Itoa(*p)
}

func uintPtrText(p *uint64) string {
	if p == nil {
		return ""
	}
	return strconv.FormatUint(*p, 10)
}

// paramsLine says which parameters a run overrides.
func paramsLine(p engine.Overrides) string {
	if p.Empty() {
		return "as the dump says"
	}
	var parts []string
	if p.Temperature != nil {
		parts = append(parts, "temperature "+engine.FormatFloat(*p.Temperature))
	}
	if p.TopK != nil {
		parts = append(parts, "top-k "+strconv.Itoa(*p.TopK))
	}
	if p.TopP != nil {
		parts = append(parts, "top-p "+engine.FormatFloat(*p.TopP))
	}
	if p.MinP != nil {
		parts = append(parts, "min-p "+engine.FormatFloat(*p.MinP))
	}
	if p.Seed != nil {
		parts = append(parts, "seed "+strconv.FormatUint(*p.Seed, 10))
	}
	if p.Draws != nil {
		parts = append(parts, fmt.Sprintf("%d draws", *p.Draws))
	}
	if p.Trials != nil {
		parts = append(parts, fmt.Sprintf("%d trials", *p.Trials))
	}
	return strings.Join(parts, ", ") + " for every row (the rest as the dump says)"
}

func toleranceText(t engine.Tolerances) string {
	return fmt.Sprintf("strict atol %s, rtol %s; native atol %s, rtol %s; p-value %s",
		engine.FormatFloat(t.Strict.Atol), engine.FormatFloat(t.Strict.Rtol), engine.FormatFloat(t.Native.Atol), engine.FormatFloat(t.Native.Rtol), engine.FormatFloat(t.PValue))
}

func tolerancesLine(sum *Summary, tol *engine.Tolerances) string {
	switch {
	case tol != nil:
		return toleranceText(*tol)
	case sum != nil:
		return toleranceText(sum.Tolerances) + " (the defaults for these dtypes)"
	}
	return "the defaults for these dtypes; shown when the run finishes"
}

// tolValue prefills the re-judge form with the tolerances in force.
func tolValue(d runPageData, name string) string {
	t := d.Tol
	if t == nil && d.Summary != nil {
		t = &d.Summary.Tolerances
	}
	if t == nil {
		return ""
	}
	return toleranceValues(t).Get(name)
}

func verdictClass(st Status, sum *Summary) string {
	switch {
	case sum != nil && sum.Pass:
		return "pass"
	case sum != nil:
		return "fail"
	case st.State == store.Failed:
		return "error"
	}
	return "running"
}

// verdictText is the verdict line before the page script takes over.
func verdictText(st Status, sum *Summary) string {
	switch {
	case sum != nil:
		return sum.Sentence
	case st.State == store.Failed:
		return "This run failed: " + st.Message
	case st.State == store.Queued && st.Ahead > 0:
		return fmt.Sprintf("Waiting: %d run(s) ahead of this one.", st.Ahead)
	case st.State == store.Queued:
		return "Waiting to start."
	}
	return "Running the kernels and judging rows…"
}

func passClass(pass bool) string {
	if pass {
		return "pass"
	}
	return "fail"
}

// outputLine says one output's verdict.
func outputLine(o OutputVerdict) string {
	if o.Pass {
		return fmt.Sprintf("%s passes all %d rows.", o.Label(), o.Rows)
	}
	s := fmt.Sprintf("%s fails %d of %d rows.", o.Label(), o.FailedRows, o.Rows)
	for _, v := range o.Violations {
		s += " Over all rows together: " + v + "."
	}
	return s
}

func rowClass(rep *engine.RowReport) string {
	switch {
	case rep == nil:
		return "running"
	case rep.Pass:
		return "pass"
	}
	return "fail"
}

func rowWord(rep *engine.RowReport) string {
	switch {
	case rep == nil:
		return "no judgement of this row (yet)"
	case rep.Pass:
		return "passes"
	case len(rep.Violations) == 1:
		return "fails 1 rule"
	}
	return fmt.Sprintf("fails %d rules", len(rep.Violations))
}

func rowsClass(reps []*engine.RowReport) string {
	cls := "pass"
	for _, r := range reps {
		switch {
		case r == nil:
			cls = "running"
		case !r.Pass:
			return "fail"
		}
	}
	return cls
}

func rowsWord(reps []*engine.RowReport) string {
	switch rowsClass(reps) {
	case "fail":
		return "fails"
	case "running":
		return "not fully judged yet"
	}
	return "passes"
}

func matchedText(rep *engine.RowReport) string {
	if rep.Matched == "" {
		return ""
	}
	return " (matched the " + rep.Matched + " reference)"
}

// driftLine summarises a drift in one line with units.
func driftLine(d *engine.Drift) string {
	return fmt.Sprintf("Against the %s reference: worst |error| %s at token %d, mean %s; %d of %d values outside atol %s + rtol %s·|ref|; KL %s nats; least atol that passes %s.",
		d.Reference, sci(d.Abs.Max), d.Abs.Index, sci(d.Abs.Mean), d.Mismatched, d.Elements,
		engine.FormatFloat(d.Tolerance.Atol), engine.FormatFloat(d.Tolerance.Rtol), sci(d.KL), sci(d.MinAtol))
}

// shortFloat writes a parameter read from a dump (often a float32 widened
// to float64) with 4 significant digits: 0.77, not 0.7704528570175171.
func shortFloat(v float64) string { return strconv.FormatFloat(v, 'g', 4, 64) }

func rowParamsLine(d *explain.RowDetail) string {
	parts := []string{"temperature " + shortFloat(d.Temperature)}
	if d.TopK > 0 && d.TopK < d.Vocab {
		parts = append(parts, "top-k "+strconv.Itoa(d.TopK))
	} else {
		parts = append(parts, "top-k off")
	}
	if d.TopP < 1 {
		parts = append(parts, "top-p "+shortFloat(d.TopP))
	} else {
		parts = append(parts, "top-p off")
	}
	if d.MinP > 0 {
		parts = append(parts, "min-p "+shortFloat(d.MinP))
	} else {
		parts = append(parts, "min-p off")
	}
	return "This row: " + strings.Join(parts, ", ") + "."
}

// cutsLine says in words where the filters cut the row, beside the CDF.
func cutsLine(d *explain.RowDetail) string {
	c := d.Cuts
	var parts []string
	if c.TopKRank > 0 {
		parts = append(parts, fmt.Sprintf("top-k keeps the %d most probable tokens", c.TopKRank))
	}
	if c.TopPMass > 0 {
		parts = append(parts, fmt.Sprintf("top-p stops once %s of the mass is taken, after %d tokens", shortFloat(c.TopPMass), c.TopPRank))
	}
	if c.MinPProb > 0 {
		parts = append(parts, fmt.Sprintf("min-p drops tokens below probability %s, keeping %d", shortFloat(c.MinPProb), c.MinPRank))
	}
	if len(parts) == 0 {
		return fmt.Sprintf("No filter is active: all %d tokens keep their softmax probability.", d.Vocab)
	}
	return sentence(strings.Join(parts, "; ")) + fmt.Sprintf(" %d of %d tokens survive every filter.", c.Kept, d.Vocab)
}

// rowURL links row r of the page's run, keeping tolerances and the scale.
func rowURL(d *rowPageData, r int, logScale bool) string {
	return withQuery(fmt.Sprintf("/runs/%s/rows/%d", d.Run.ID, r), rowQuery(d, logScale))
}

// rowQuery is the row page's view in the URL: tolerances, scale, top.
func rowQuery(d *rowPageData, logScale bool) url.Values {
	q := toleranceValues(d.Tol)
	if q == nil {
		q = url.Values{}
	}
	if logScale {
		q.Set("log", "1")
	}
	if d.Top != defaultTop {
		q.Set("top", strconv.Itoa(d.Top))
	}
	return q
}

func prevFailing(failing []int, r int) int {
	i := sort.SearchInts(failing, r)
	if i > 0 {
		return failing[i-1]
	}
	return -1
}

func nextFailing(failing []int, r int) int {
	i := sort.SearchInts(failing, r+1)
	if i < len(failing) {
		return failing[i]
	}
	return -1
}

func valueAt(t explain.TokenDetail, i int) string {
	if i < len(t.Values) {
		return sci(t.Values[i])
	}
	return ""
}

func errAt(t explain.TokenDetail, i int) string {
	if i < len(t.Values) {
		return sci(t.Values[i] - t.Ref)
	}
	return ""
}

// errClass marks an error the strict tolerance does not allow.
func errClass(t explain.TokenDetail, i int) string {
	if i >= len(t.Values) {
		return ""
	}
	e := math.Abs(float64(t.Values[i] - t.Ref))
	if math.IsNaN(e) || e > float64(t.Allowed) {
		return "over"
	}
	return ""
}

// chosenLine says which token each token output chose for the row, with its
// reference probability when it is among the tokens shown.
func chosenLine(d *rowPageData) string {
	var parts []string
	for _, o := range d.Outputs {
		tok, ok := d.Detail.Chosen[o.Name]
		if !ok {
			continue
		}
		part := fmt.Sprintf("%s chose token %d", o.Label(), tok)
		for _, t := range d.Detail.Tokens {
			if int64(t.Token) == tok {
				part += fmt.Sprintf(" (rank %d, reference probability %s)", t.Rank, sci(t.Ref))
			}
		}
		parts = append(parts, part)
	}
	if len(parts) == 0 {
		return ""
	}
	return strings.Join(parts, "; ") + "."
}
