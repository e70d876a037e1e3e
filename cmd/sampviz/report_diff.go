package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/diff"
)

// writeDiffText prints a comparison for a person who reads it once: what
// was compared and whether the inputs are the same, one line per output
// (verdicts, greatest error, rows fixed and broken), then per output the
// rows that changed (at most maxRows; 0 means all) with their drift before
// and after, the acceptance by position before and after, the mode tables
// side by side, and last what got worse.
func writeDiffText(w io.Writer, d *diff.Diff, maxRows int) {
	fmt.Fprintf(w, "sampviz diff %s %s\n", d.A, d.B)
	inputs := "the same inputs: rows are compared one by one"
	if !d.Inputs.Same {
		inputs = "different inputs (" + d.Inputs.Why + "): only the summaries are compared"
	}
	fmt.Fprintf(w, "  op %s on %d rows x %d tokens; %s\n", d.Op, d.Rows, d.Vocab, inputs)
	fmt.Fprintf(w, "  A %s: %s; B %s: %s\n\n", d.A, diffVerdict(d.PassA, d.FailedA, -1), d.B, diffVerdict(d.PassB, d.FailedB, -1))

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  output\tA\tB\tmax |err| A\tmax |err| B\tfixed\tbroken")
	for _, o := range d.Outputs {
		a, b := "-", "-"
		if o.InA {
			a = diffVerdict(o.PassA, o.FailedA, rowsOr(o))
		}
		if o.InB {
			b = diffVerdict(o.PassB, o.FailedB, rowsOr(o))
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\t%s\n", diffLabel(o), a, b, optSci(o.DriftA), optSci(o.DriftB), diffRowList(o.Fixed), diffRowList(o.Broken))
	}
	tw.Flush()

	for _, o := range d.Outputs {
		writeChangedRows(w, o, maxRows)
		writePositions(w, o)
	}
	writeModesSideBySide(w, d)

	fmt.Fprintln(w)
	if d.Worse {
		fmt.Fprintf(w, "WORSE: %s\n", d.Why[0])
		for _, why := range d.Why[1:] {
			fmt.Fprintf(w, "  %s\n", why)
		}
		return
	}
	if len(d.Better) > 0 {
		fmt.Fprintf(w, "NOT WORSE: nothing got worse; %s.\n", strings.Join(d.Better, "; "))
		return
	}
	fmt.Fprintln(w, "NOT WORSE: nothing got worse.")
}

// diffVerdict writes an output's verdict: "pass", or "FAIL 3 of 8" (rows
// < 0: "FAIL (3 rows)").
func diffVerdict(pass bool, failed, rows int) string {
	switch {
	case pass:
		return "pass"
	case failed == 0:
		return "FAIL (all rows together)"
	case rows < 0:
		return "FAIL (" + plural(failed, "row") + ")"
	}
	return fmt.Sprintf("FAIL %d of %d", failed, rows)
}

// diffLabel names an output of a comparison as the check report does.
func diffLabel(o diff.Output) string {
	label := outputLabel(engine.OutputReport{Name: o.Name, External: o.External})
	if o.NameB != "" {
		label += " / " + o.NameB
	}
	return label
}

// diffRowList writes rows as "2, 5", "-" for none.
func diffRowList(rows []int) string {
	if len(rows) == 0 {
		return "-"
	}
	return rowList(rows)
}

// writeChangedRows prints the rows of an output whose verdict or drift
// changed, with their drift before and after and, when they fail in B,
// their first violation there.
func writeChangedRows(w io.Writer, o diff.Output, maxRows int) {
	var changed []diff.Row
	for _, r := range o.Rows {
		if r.Change != "" {
			changed = append(changed, r)
		}
	}
	if len(changed) == 0 {
		return
	}
	fmt.Fprintf(w, "\n%s: %s changed\n", diffLabel(o), plural(len(changed), "row"))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  row\tA\tB\tchange")
	for i, r := range changed {
		if maxRows > 0 && i == maxRows {
			fmt.Fprintf(tw, "  ... and %d more rows (--max-rows 0 shows all)\n", len(changed)-i)
			break
		}
		change := r.Change
		if len(r.ViolationsB) > 0 {
			change += ": " + r.ViolationsB[0]
		}
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\n", r.Row, rowSide(r.PassA, r.DriftA), rowSide(r.PassB, r.DriftB), change)
	}
	tw.Flush()
}

// rowSide writes a row's verdict and drift: "FAIL, max |err| 3e-03".
func rowSide(pass bool, drift *engine.Float) string {
	s := verdictWord(pass)
	if drift != nil {
		s += ", max |err| " + engine.FormatSig(float64(*drift), 2)
	}
	return s
}

// writePositions prints a speculative output's acceptance by position
// before and after, with both 95% intervals.
func writePositions(w io.Writer, o diff.Output) {
	if len(o.Positions) == 0 {
		return
	}
	fmt.Fprintf(w, "\n%s: acceptance by position, A against B (95%% intervals):\n", diffLabel(o))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "    position\tA rate\tA 95% CI\tA theory\tB rate\tB 95% CI\tB theory\t")
	for _, p := range o.Positions {
		fmt.Fprintf(tw, "    %d\t%s\t%s–%s\t%s\t%s\t%s–%s\t%s\t\n", p.Position,
			engine.FormatPercent(float64(p.A.Rate)), engine.FormatPercent(float64(p.A.Lo)), engine.FormatPercent(float64(p.A.Hi)), engine.FormatPercent(float64(p.A.Theory)),
			engine.FormatPercent(float64(p.B.Rate)), engine.FormatPercent(float64(p.B.Lo)), engine.FormatPercent(float64(p.B.Hi)), engine.FormatPercent(float64(p.B.Theory)))
	}
	tw.Flush()
}

// writeModesSideBySide prints each kind's mode table of A and B: one line
// per output with its failing rows and error in each run.
func writeModesSideBySide(w io.Writer, d *diff.Diff) {
	for _, m := range d.Modes {
		fmt.Fprintf(w, "\nmodes: %s, A against B\n", m.Kind)
		lines := map[string][2]*engine.ModeLine{}
		var order []string
		for side, t := range []*engine.ModeTable{m.A, m.B} {
			if t == nil {
				continue
			}
			for i := range t.Lines {
				l := &t.Lines[i]
				pair, seen := lines[l.Output]
				if !seen {
					order = append(order, l.Output)
				}
				pair[side] = l
				lines[l.Output] = pair
			}
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  output\tA failed\tA mean\tA p99\tA max\tB failed\tB mean\tB p99\tB max")
		for _, name := range order {
			cells := []string{name}
			for _, l := range lines[name] {
				if l == nil {
					cells = append(cells, "-", "-", "-", "-")
					continue
				}
				cells = append(cells, fmt.Sprintf("%d of %d", l.FailedRows, l.Rows))
				if l.Mismatches != nil {
					cells = append(cells, fmt.Sprintf("%d mismatches", *l.Mismatches), "", "")
					continue
				}
				cells = append(cells, optSci(l.Mean), optSci(l.P99), optSci(l.Max))
			}
			fmt.Fprintln(tw, "  "+strings.Join(cells, "\t"))
		}
		tw.Flush()
		if m.A != nil {
			fmt.Fprintf(w, "  A: %s\n", m.A.Summary)
		}
		if m.B != nil {
			fmt.Fprintf(w, "  B: %s\n", m.B.Summary)
		}
	}
}

// rowsOr returns the rows of an output compared row by row, or -1 when
// they were not (different inputs).
func rowsOr(o diff.Output) int {
	if len(o.Rows) == 0 {
		return -1
	}
	return len(o.Rows)
}
