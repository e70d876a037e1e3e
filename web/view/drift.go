package view

import (
	"strconv"

	"github.com/sampviz/sampviz/engine"
)

// The run page's drift table: each float output's error against each
// reference over the whole run, as `sampviz check` and the JSON report give
// it.

// RunDrift is one output's drift against one reference over every row.
type RunDrift struct {
	engine.OutputInfo
	// Reference is "strict", "native" or "golden"; Unit is "nats" for
	// logprobs, "" for probabilities.
	Reference string           `json:"reference"`
	Unit      string           `json:"unit,omitempty"`
	Tolerance engine.Tolerance `json:"tolerance"`
	Mean      engine.Float     `json:"mean"`
	P99       engine.Float     `json:"p99"`
	Max       engine.Float     `json:"max"`
	// Row and Token are where Max is (-1 when no row was compared).
	Row   int          `json:"row"`
	Token int          `json:"token"`
	KL    engine.Float `json:"kl"`
	// Mismatched of Elements values are outside the tolerance; MinAtol is
	// the least atol that passes at the tolerance's rtol.
	Mismatched int          `json:"mismatched"`
	Elements   int          `json:"elements"`
	MinAtol    engine.Float `json:"min_atol"`
}

// driftLines lists rep's run-level drifts, strict before native, output
// by output. The place of the greatest error is read from the rows, so it
// is a real row and token whatever rows were left out (NaN inputs, masked
// rows, padding).
func driftLines(rep *engine.Report) []RunDrift {
	var lines []RunDrift
	for _, o := range rep.Outputs {
		unit := ""
		if o.Logprobs != nil {
			unit = "nats"
		}
		for _, pick := range []func(*engine.RowReport) *engine.Drift{
			func(r *engine.RowReport) *engine.Drift { return r.Strict },
			func(r *engine.RowReport) *engine.Drift { return r.Native },
		} {
			d := pick(&engine.RowReport{Strict: o.Strict, Native: o.Native})
			if d == nil {
				continue
			}
			row, tok := engine.WorstAt(o.Rows, pick)
			lines = append(lines, RunDrift{
				OutputInfo: engine.OutputInfo{Name: o.Name, External: o.External, Kind: o.Kind},
				Reference:  d.Reference, Unit: unit, Tolerance: d.Tolerance,
				Mean: d.Abs.Mean, P99: d.Abs.P99, Max: d.Abs.Max, Row: row, Token: tok, KL: d.KL,
				Mismatched: d.Mismatched, Elements: d.Elements, MinAtol: d.MinAtol,
			})
		}
	}
	return lines
}

// HasDrift reports whether a summary has a drift table to show.
func HasDrift(s *Summary) bool { return s != nil && len(s.Drift) > 0 }

// DriftAt says where a run drift's greatest error is ("row 3, token 17").
func DriftAt(l RunDrift) string {
	if l.Row < 0 {
		return ""
	}
	return "row " + itoa(l.Row) + ", token " + itoa(l.Token)
}

// DriftTolerance writes the tolerance a drift is judged by.
func DriftTolerance(l RunDrift) string {
	return "atol " + engine.FormatFloat(l.Tolerance.Atol) + " + rtol " + engine.FormatFloat(l.Tolerance.Rtol) + "·|ref|"
}

// DriftOff says how many values are outside the tolerance.
func DriftOff(l RunDrift) string {
	return itoa(l.Mismatched) + " of " + itoa(l.Elements)
}

// DriftNumber writes one of a drift's errors with its unit.
func DriftNumber(l RunDrift, v engine.Float) string {
	if l.Unit != "" {
		return engine.FormatSig(float64(v), 4) + " " + l.Unit
	}
	return engine.FormatSig(float64(v), 4)
}

func itoa(n int) string { return strconv.Itoa(n) }
