package main

import (
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"

	"github.com/sampviz/sampviz/engine"
)

// writeModes prints each mode table of the report: one line per output of
// a kind, its verdict and error against the reference, and its distance
// from each other output, then the table's summary in words.
func writeModes(w io.Writer, r *engine.Report) {
	for _, t := range r.Modes {
		fmt.Fprintln(w)
		labels := map[string]string{}
		for _, o := range r.Outputs {
			labels[o.Name] = outputLabel(o)
		}
		fmt.Fprintf(w, "modes: %s (%s)\n", t.Kind, modeMetric(t))
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		head := []string{"output", "verdict", "failed rows"}
		switch {
		case t.Metric == "logit":
			head = append(head, "mean", "p99", "max", "KL", "flips (real/fragile)")
		case t.Metric != "":
			head = append(head, "mean", "p99", "max")
		default:
			head = append(head, "mismatches")
		}
		for _, name := range lineNames(t) {
			head = append(head, "vs "+name)
		}
		fmt.Fprintln(tw, "  "+strings.Join(head, "\t"))
		for _, l := range t.Lines {
			cells := []string{labels[l.Output], verdictWord(l.Pass), fmt.Sprintf("%d of %d", l.FailedRows, l.Rows)}
			switch {
			case t.Metric == "logit":
				cells = append(cells, optSci(l.Mean), optSci(l.P99), optSci(l.Max), optSci(l.KL), optFlips(l))
			case t.Metric != "":
				cells = append(cells, optSci(l.Mean), optSci(l.P99), optSci(l.Max))
			default:
				cells = append(cells, optInt(l.Mismatches))
			}
			against := map[string]engine.ModeDiff{}
			for _, a := range l.Against {
				against[a.Output] = a
			}
			for _, name := range lineNames(t) {
				a, ok := against[name]
				switch {
				case !ok:
					cells = append(cells, "-")
				case a.Max != nil:
					cells = append(cells, engine.FormatSig(float64(*a.Max), 2))
				case a.Differ != nil:
					cells = append(cells, fmt.Sprintf("%d rows differ", *a.Differ))
				case t.Metric == "logprob":
					cells = append(cells, "top-N") // a top-N holds other tokens than the other output
				default:
					cells = append(cells, "")
				}
			}
			fmt.Fprintln(tw, "  "+strings.Join(cells, "\t"))
		}
		tw.Flush()
		fmt.Fprintf(w, "  %s\n", t.Summary)
	}
}

// lineNames lists the outputs of a mode table in order.
func lineNames(t engine.ModeTable) []string {
	names := make([]string, len(t.Lines))
	for i, l := range t.Lines {
		names[i] = l.Output
	}
	return names
}

// modeMetric says what a mode table's numbers measure.
func modeMetric(t engine.ModeTable) string {
	switch t.Metric {
	case "abs":
		return "|output - reference|; vs: the greatest |difference| between two outputs"
	case "logit":
		return "|Δlogit| against the golden logits, KL at T = 1; vs: the greatest |difference| between two outputs"
	case "logprob":
		return "|Δlogprob| in nats against the reference; vs: the greatest |difference| between two outputs of every token's logprobs"
	}
	return "mismatches: rows whose tokens the reference rules out; vs: rows whose tokens differ"
}

// writeAgreement prints each comparison between two outputs in a sentence,
// with the flips of argmax and logits pairs.
func writeAgreement(w io.Writer, r *engine.Report, name func(int64) string) {
	if len(r.Agreement) == 0 {
		return
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "agreement between outputs:")
	for _, a := range r.Agreement {
		mark := ""
		if !a.Pass {
			mark = "FAIL: "
		}
		fmt.Fprintf(w, "  %s%s\n", mark, a.Message)
		for i, f := range a.Flips {
			if i == 8 {
				fmt.Fprintf(w, "    ... and %d more flips\n", len(a.Flips)-i)
				break
			}
			class := "real"
			if f.Fragile {
				class = "fragile"
			}
			apart := fmt.Sprintf("logits %s apart", engine.FormatSig(float64(f.Margin), 2))
			if math.IsInf(float64(f.Margin), 0) {
				apart = "a token outside the vocabulary"
			}
			fmt.Fprintf(w, "    row %d: %s token %s, %s token %s (%s): %s\n", f.Row, a.A, name(int64(f.RefToken)), a.B, name(int64(f.Token)), apart, class)
		}
	}
}

// optSci prints an optional number, "-" when absent.
func optSci(v *engine.Float) string {
	if v == nil {
		return "-"
	}
	return engine.FormatSig(float64(*v), 2)
}

// optInt prints an optional count, "-" when absent.
func optInt(v *int) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprint(*v)
}

// optFlips prints a logits line's real and fragile flips.
func optFlips(l engine.ModeLine) string {
	if l.RealFlips == nil || l.FragileFlips == nil {
		return "-"
	}
	return fmt.Sprintf("%d/%d", *l.RealFlips, *l.FragileFlips)
}

// rowList writes rows as "3, 4 and 7", at most 10 of them.
func rowList(rows []int) string {
	var parts []string
	for i, r := range rows {
		if i == 10 {
			parts = append(parts, fmt.Sprintf("%d more", len(rows)-i))
			break
		}
		parts = append(parts, fmt.Sprint(r))
	}
	if len(parts) < 2 {
		return strings.Join(parts, "")
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
}
