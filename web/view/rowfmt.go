package view

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/explain"
)

// The row page's verdicts and numbers in words: each output's verdict on
// the row, its drift, the row's parameters and filter cuts, and the token
// table's cells.

// RowClass is the CSS class of one output's row verdict: pass, fail, or
// running while the output has not reached the row.
func RowClass(rep *engine.RowReport) string {
	switch {
	case rep == nil:
		return "running"
	case rep.Pass:
		return "pass"
	}
	return "fail"
}

// RowWord says one output's row verdict in a few words.
func RowWord(rep *engine.RowReport) string {
	switch {
	case rep == nil:
		return "waiting for its judgement"
	case rep.Pass:
		return "passes"
	case rep.InvalidInput:
		return "fails on the row's input, not on this output"
	case len(rep.Violations) == 1:
		return "fails 1 rule"
	}
	return fmt.Sprintf("fails %d rules", len(rep.Violations))
}

// RowsClass is the CSS class of a row over every output: fail when one
// fails, running while one has not reached it (or before the outputs are
// known), else pass.
func RowsClass(reps []*engine.RowReport) string {
	if len(reps) == 0 {
		return "running"
	}
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

// RowsWord says RowsClass in words; waiting says whether the run may still
// judge the row (it has not ended).
func RowsWord(reps []*engine.RowReport, waiting bool) string {
	switch RowsClass(reps) {
	case "fail":
		return "fails"
	case "running":
		if !waiting {
			return "not judged"
		}
		for _, r := range reps {
			if r != nil {
				return "waiting for the other outputs' judgements"
			}
		}
		return "waiting for its judgement"
	}
	return "passes"
}

// MatchedText names the reference a passing row matched, if the judge says.
func MatchedText(rep *engine.RowReport) string {
	if rep.Matched == "" {
		return ""
	}
	return " (matched the " + rep.Matched + " reference)"
}

// DriftLine summarises a drift in one line with units.
func DriftLine(d *engine.Drift) string {
	return fmt.Sprintf("Against the %s reference: worst |error| %s at token %d, mean %s; %d of %d values outside atol %s + rtol %s·|ref|; KL %s nats; least atol that passes %s.",
		d.Reference, engine.FormatSig(float64(d.Abs.Max), 4), d.Abs.Index, engine.FormatSig(float64(d.Abs.Mean), 4), d.Mismatched, d.Elements,
		engine.FormatFloat(d.Tolerance.Atol), engine.FormatFloat(d.Tolerance.Rtol), engine.FormatSig(float64(d.KL), 4), engine.FormatSig(float64(d.MinAtol), 4))
}

// RowParamsLine says the row's sampling parameters, and which filters are
// off.
func RowParamsLine(d *explain.RowDetail) string {
	parts := []string{"temperature " + engine.FormatParam(d.Temperature)}
	if d.TopK > 0 && d.TopK < d.Vocab {
		parts = append(parts, "top-k "+strconv.Itoa(d.TopK))
	} else {
		parts = append(parts, "top-k off")
	}
	if d.TopP < 1 {
		parts = append(parts, "top-p "+engine.FormatParam(d.TopP))
	} else {
		parts = append(parts, "top-p off")
	}
	if d.MinP > 0 {
		parts = append(parts, "min-p "+engine.FormatParam(d.MinP))
	} else {
		parts = append(parts, "min-p off")
	}
	return "This row: " + strings.Join(parts, ", ") + "."
}

// CutsLine says in words where the filters cut the row, beside the CDF.
func CutsLine(d *explain.RowDetail) string {
	c := d.Cuts
	var parts []string
	if c.TopKRank > 0 {
		parts = append(parts, fmt.Sprintf("top-k keeps the %d most probable tokens", c.TopKRank))
	}
	if c.TopPMass > 0 {
		parts = append(parts, fmt.Sprintf("top-p stops once %s of the mass is taken, after %d tokens", engine.FormatSig(c.TopPMass, 4), c.TopPRank))
	}
	if c.MinPProb > 0 {
		parts = append(parts, fmt.Sprintf("min-p drops tokens below probability %s, keeping %d", engine.FormatSig(c.MinPProb, 4), c.MinPRank))
	}
	if len(parts) == 0 {
		return fmt.Sprintf("No filter is active: all %d tokens keep their softmax probability.", d.Vocab) + outputCutsText(d)
	}
	return Sentence(strings.Join(parts, "; ")) + fmt.Sprintf(" %d of %d tokens survive every filter.", c.Kept, d.Vocab) + outputCutsText(d)
}

// outputCutsText says where each probability output's own cut is when it
// differs from the reference's.
func outputCutsText(d *explain.RowDetail) string {
	var parts []string
	for i, oc := range d.Cuts.Outputs {
		if oc.Kept == d.Cuts.Kept || i >= len(d.Probs) {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s keeps %d (its last at rank %d, reference mass %s before filters)", d.Probs[i].Label(), oc.Kept, oc.Rank, engine.FormatSig(float64(oc.Mass), 4)))
	}
	if len(parts) == 0 {
		return ""
	}
	return " " + Period(strings.Join(parts, "; "))
}

// ValueAt writes output i's value at token t ("" when it has none).
func ValueAt(t explain.TokenDetail, i int) string {
	if i < len(t.Values) {
		return engine.FormatSig(float64(t.Values[i]), 4)
	}
	return ""
}

// ErrAt writes output i's error against the reference at token t.
func ErrAt(t explain.TokenDetail, i int) string {
	if i < len(t.Values) {
		return engine.FormatSig(float64(t.Values[i]-t.Ref), 4)
	}
	return ""
}

// ErrClass marks an error the strict tolerance does not allow.
func ErrClass(t explain.TokenDetail, i int) string {
	if i >= len(t.Values) {
		return ""
	}
	e := math.Abs(float64(t.Values[i] - t.Ref))
	if math.IsNaN(e) || e > float64(t.Allowed) {
		return "over"
	}
	return ""
}
