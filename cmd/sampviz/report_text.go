package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/session"
	"github.com/sampviz/sampviz/engine/tokens"
)

// writeTextReport prints a report for a person who reads it once: what was
// judged, a summary table with one line per output, then per output its
// failing rows (at most maxRows; 0 means all), the violations of all rows
// together, the statistics of samplers (goodness of fit; acceptance by
// position, emitted lengths and mean acceptance length beside theory) and
// the notes, then the verdict.
//
// tok, when not nil, gives token ids their text ("6639 ‹␣the›").
func writeTextReport(w io.Writer, r *engine.Report, maxRows int, tok *tokens.Tokenizer) {
	name := tokenName(tok)
	fmt.Fprintf(w, "sampviz check %s\n", r.Source)
	fmt.Fprintf(w, "  %s\n", describeRun(r))
	if r.Device != nil {
		fmt.Fprintf(w, "  backend %s: %s\n", r.Device.Backend, r.Device.Name)
		if r.Device.Reason != "" {
			fmt.Fprintf(w, "  (%s)\n", r.Device.Reason)
		}
	}
	if len(r.Padding) > 0 {
		fmt.Fprintf(w, "  padding: %s %s (never judged; an external output must hold its fill there)\n", plural(len(r.Padding), "row"), rowList(r.Padding))
	}
	for _, n := range r.Notices {
		fmt.Fprintf(w, "  note: %s\n", n)
	}
	fmt.Fprintln(w)
	if len(r.Matches) > 0 {
		writeMatches(w, r)
	}

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  output\tjudged\tverdict\tfailed rows\tdrift")
	for _, o := range r.Outputs {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%d of %d\t%s\n",
			outputLabel(o), o.Kind, verdictWord(o.Pass), o.FailedRows, len(o.Rows), driftSummary(o, name))
	}
	tw.Flush()

	for _, o := range r.Outputs {
		if t := timingLine(o.Timing, r.Device); t != "" {
			fmt.Fprintf(w, "  %s: %s\n", outputLabel(o), t)
		}
	}
	writeModes(w, r)
	writeAgreement(w, r, name)

	for _, o := range r.Outputs {
		if len(o.Notes) == 0 && o.FailedRows == 0 && o.Spec == nil && rowNotes(o) == 0 {
			continue
		}
		fmt.Fprintln(w)
		if o.FailedRows > 0 {
			fmt.Fprintf(w, "%s: %d of %d rows failed%s\n", outputLabel(o), o.FailedRows, len(o.Rows), inputRowsNote(o))
		} else {
			fmt.Fprintf(w, "%s:\n", outputLabel(o))
		}
		shown := 0
		for _, row := range o.Rows {
			if row.Pass {
				continue
			}
			if maxRows > 0 && shown == maxRows {
				fmt.Fprintf(w, "  ... and %d more failing rows (--max-rows 0 shows all)\n", o.FailedRows-shown)
				break
			}
			shown++
			for _, v := range row.Violations {
				fmt.Fprintf(w, "  %s\n", v)
			}
			if tok != nil && row.Token != nil && row.RefToken != nil {
				fmt.Fprintf(w, "    (row %d: token %s, the reference's %s)\n", row.Row, name(*row.Token), name(*row.RefToken))
			}
		}
		for _, v := range o.Violations {
			fmt.Fprintf(w, "  all rows: %s\n", v)
		}
		writeFitSummary(w, o)
		writeSpecStats(w, o)
		for _, n := range o.Notes {
			fmt.Fprintf(w, "  note: %s\n", n)
		}
		writeRowNotes(w, o, maxRows)
	}

	fmt.Fprintln(w)
	fmt.Fprintln(w, verdictLine(r))
}

// inputRowsNote says how many failing rows fail on their input (NaN or
// masked logits, a parameter out of range) rather than on the output.
func inputRowsNote(o engine.OutputReport) string {
	n := 0
	for _, r := range o.Rows {
		if !r.Pass && r.InvalidInput {
			n++
		}
	}
	switch {
	case n == 0:
		return ""
	case n == o.FailedRows:
		return ", all on the input, not the output (NaN, +Inf or masked logits, or a parameter out of range)"
	}
	return fmt.Sprintf(", %d of them on the input, not the output (NaN, +Inf or masked logits, or a parameter out of range)", n)
}

// rowNotes counts the notes of an output's rows: findings worth reading
// that fail nothing (a fragile argmax, exact ties, a boundary
// renormalisation, a row sum).
func rowNotes(o engine.OutputReport) int {
	n := 0
	for _, row := range o.Rows {
		for _, f := range row.Findings {
			if f.Severity == engine.Note {
				n++
			}
		}
	}
	return n
}

// writeRowNotes prints the notes of an output's rows, as the row pages and
// the JSON report give them: at most maxRows (0: all).
func writeRowNotes(w io.Writer, o engine.OutputReport, maxRows int) {
	total, shown := rowNotes(o), 0
	for _, row := range o.Rows {
		for _, f := range row.Findings {
			if f.Severity != engine.Note {
				continue
			}
			if maxRows > 0 && shown == maxRows {
				fmt.Fprintf(w, "  ... and %d more notes (--max-rows 0 shows all)\n", total-shown)
				return
			}
			shown++
			fmt.Fprintf(w, "  note: %s\n", f.Message)
		}
	}
}

// writeMatches prints the verdict of every semantics preset (`--semantics
// any`), then says whose judgement the rest of the report shows.
func writeMatches(w io.Writer, r *engine.Report) {
	fmt.Fprintln(w, "semantics: the dump's outputs judged under each engine's filter chain")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  preset\tengine\tverdict\tfailed rows\tchain")
	for _, m := range r.Matches {
		failed := fmt.Sprint(m.FailedRows)
		if m.Violations > 0 {
			failed += fmt.Sprintf(" (+%d of all rows)", m.Violations)
		}
		chain := m.Chain
		if m.SameAs != "" {
			chain = "as " + string(m.SameAs) + " on this dump"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", m.Semantics, m.Engine, verdictWord(m.Pass), failed, chain)
	}
	tw.Flush()
	why := "the first that passes"
	if !r.Pass {
		why = "the one with the fewest failures"
	}
	fmt.Fprintf(w, "  below: the judgement under %s (%s)\n\n", r.Semantics, why)
}

// describeRun says what the run is: op, shape and dtype.
func describeRun(r *engine.Report) string {
	switch r.Op {
	case engine.OpNgramMatch:
		return fmt.Sprintf("op %s on %d rows", r.Op, r.Rows)
	case engine.OpSpecVerify, engine.OpSpecTreeVerify:
		return fmt.Sprintf("op %s on %d rows x %d tokens, %s target logits", r.Op, r.Rows, r.Vocab, r.DType)
	}
	return fmt.Sprintf("op %s on %d rows x %d tokens, %s logits", r.Op, r.Rows, r.Vocab, r.DType)
}

// outputLabel names an output so that ours and the dump's are told apart.
func outputLabel(o engine.OutputReport) string {
	if o.External {
		return o.Name + " (dump)"
	}
	return o.Name + " (ours)"
}

func verdictWord(pass bool) string {
	if pass {
		return "pass"
	}
	return "FAIL"
}

// driftSummary gives the numbers that matter for an output's kind on one line.
func driftSummary(o engine.OutputReport, name func(int64) string) string {
	if o.Spec != nil && len(o.Spec.Positions) > 0 {
		return fmt.Sprintf("mean acceptance length %s (theory %s)", engine.FormatSig(float64(o.Spec.MeanAcceptanceLength), 3), engine.FormatSig(float64(o.Spec.TheoryMeanAcceptanceLength), 3))
	}
	if row, ok := leastP(o); ok {
		return fmt.Sprintf("smallest p %s (row %d)", engine.FormatStoredP(*row.PValue), row.Row)
	}
	d := o.Strict
	if d == nil {
		return ""
	}
	if lp := o.Logprobs; lp != nil {
		s := fmt.Sprintf("%s, max |Δ| %s nats at %s, p99 %s", logprobsWhat(lp), engine.FormatSig(float64(d.Abs.Max), 2), strictWorstAt(o, name), engine.FormatSig(float64(d.Abs.P99), 2))
		if lp.TopN == 0 {
			s += fmt.Sprintf(", KL %s", engine.FormatSig(float64(d.KL), 2))
		}
		if d.Mismatched > 0 {
			s += fmt.Sprintf(", %d off", d.Mismatched)
		}
		return s
	}
	s := fmt.Sprintf("max |err| %s at %s, p99 %s, KL %s",
		engine.FormatSig(float64(d.Abs.Max), 2), strictWorstAt(o, name), engine.FormatSig(float64(d.Abs.P99), 2), engine.FormatSig(float64(d.KL), 2))
	if d.Mismatched > 0 {
		s += fmt.Sprintf(", %d off", d.Mismatched)
	}
	return s
}

// logprobsWhat says what a logprobs output holds: "raw, every token" or
// "processed, top-20".
func logprobsWhat(lp *engine.LogprobsInfo) string {
	if lp.TopN > 0 {
		return fmt.Sprintf("%s, top-%d", lp.Kind, lp.TopN)
	}
	return string(lp.Kind) + ", every token"
}

// leastP returns the row with the smallest p-value, if any row has one.
func leastP(o engine.OutputReport) (engine.RowReport, bool) {
	var best engine.RowReport
	found := false
	for _, r := range o.Rows {
		if r.PValue != nil && (!found || *r.PValue < *best.PValue) {
			best, found = r, true
		}
	}
	return best, found
}

// writeFitSummary prints, for an output of many draws per row, the draws,
// the smallest p-value and the largest total variation beside the value a
// correct sampler stays under.
func writeFitSummary(w io.Writer, o engine.OutputReport) {
	var least, worstTV *engine.RowReport
	for i := range o.Rows {
		r := &o.Rows[i]
		if r.Fit == nil {
			continue
		}
		if least == nil || *r.PValue < *least.PValue {
			least = r
		}
		if worstTV == nil || r.Fit.TV > worstTV.Fit.TV {
			worstTV = r
		}
	}
	if least == nil {
		return
	}
	f := worstTV.Fit
	fmt.Fprintf(w, "  goodness of fit (%s-test) of %d draws per row: smallest p %s at row %d; largest TV %s at row %d (a correct sampler stays under %s)\n",
		f.Test, least.Fit.Draws, engine.FormatStoredP(*least.PValue), least.Row, engine.FormatSig(float64(f.TV), 2), worstTV.Row, engine.FormatSig(float64(f.TVBound), 2))
	if pw := o.Power; pw != nil {
		fmt.Fprintf(w, "  power: a bias of total variation %s or more, of any shape, is caught %.0f times in 100 in every row at the p-value threshold (row %d is the least sensitive; the most sensitive catches %s)\n",
			engine.FormatSig(float64(pw.TV), 2), 100*float64(pw.Probability), pw.Row, engine.FormatSig(float64(pw.Best), 2))
		if g := pw.Gain(); g != "" {
			fmt.Fprintf(w, "  power gained: %s\n", g)
		}
	}
}

// writeSpecStats prints the speculative statistics pooled over the rows:
// acceptance by position beside theory, the emitted lengths beside their
// exact law, and the mean acceptance length.
func writeSpecStats(w io.Writer, o engine.OutputReport) {
	s := o.Spec
	if s == nil {
		return
	}
	where, what, length := "position", "a position counts the trials that accepted every earlier one", "emitted length (accepted prefix)"
	if o.Kind == "tree" {
		where, what, length = "depth", "depth d counts the trials that accepted d tokens, and accepted those that accepted one more", "accepted tokens"
	}
	fmt.Fprintf(w, "  acceptance by %s, %d trials over all rows (%s):\n", where, s.Trials, what)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "    %s\treached\taccepted\trate\t95%% CI\ttheory\tp\t\n", where)
	for _, p := range s.Positions {
		fmt.Fprintf(tw, "    %d\t%d\t%d\t%s\t%s–%s\t%s\t%s\t\n", p.Position, p.Reached, p.Accepted,
			engine.FormatPercent(float64(p.Rate)), engine.FormatPercent(float64(p.Lo)), engine.FormatPercent(float64(p.Hi)), engine.FormatPercent(float64(p.Theory)), engine.FormatStoredP(float64(p.PValue)))
	}
	tw.Flush()
	fmt.Fprintf(w, "  %s, trials against theory (p %s):\n", length, engine.FormatStoredP(float64(s.EmittedPValue)))
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "    length\t")
	for j := range s.Emitted {
		fmt.Fprintf(tw, "%d\t", j)
	}
	fmt.Fprint(tw, "\n    trials\t")
	for _, h := range s.Emitted {
		fmt.Fprintf(tw, "%d\t", h)
	}
	fmt.Fprint(tw, "\n    theory\t")
	for _, p := range s.EmittedTheory {
		fmt.Fprintf(tw, "%.1f\t", float64(p)*float64(s.Trials))
	}
	fmt.Fprintln(tw)
	tw.Flush()
	fmt.Fprintf(w, "  mean acceptance length (1 + accepted/trials, as vLLM reports it) %s, theory %s\n",
		engine.FormatSig(float64(s.MeanAcceptanceLength), 4), engine.FormatSig(float64(s.TheoryMeanAcceptanceLength), 4))
}

// strictWorstAt prints where an output's greatest error against the strict
// reference is, "row R token T", read from its rows (a run-level flat
// index skips nothing and misplaced it past NaN and masked rows).
func strictWorstAt(o engine.OutputReport, name func(int64) string) string {
	row, tok := engine.WorstAt(o.Rows, func(r *engine.RowReport) *engine.Drift { return r.Strict })
	if row < 0 {
		return "no row"
	}
	return fmt.Sprintf("row %d token %s", row, name(int64(tok)))
}

// timingLine says how long our kernels took and how fast they moved bytes;
// it is empty for external outputs.
func timingLine(t *engine.Timing, d *engine.Device) string {
	if t == nil || t.Kernel <= 0 {
		return ""
	}
	s := fmt.Sprintf("computed in %s", t.Kernel.Round(time.Microsecond))
	if bw := t.Bandwidth(); bw > 0 && d != nil && d.Backend == "cuda" {
		s += fmt.Sprintf(", %.0f GB/s", bw/1e9)
		if d.CopyBandwidth > 0 {
			s += fmt.Sprintf(" (%.0f%% of the %.0f GB/s copy bandwidth)", 100*bw/d.CopyBandwidth, d.CopyBandwidth/1e9)
		}
	}
	return s
}

// verdictLine is the last line of a report.
func verdictLine(r *engine.Report) string {
	if len(r.Matches) > 0 {
		if r.Pass {
			return "PASS: " + session.MatchSummary(r.Matches) + "."
		}
		return "FAIL: " + session.MatchSummary(r.Matches) + "."
	}
	if r.Pass {
		return fmt.Sprintf("PASS: every row of %s passes.", plural(len(r.Outputs), "output"))
	}
	var failed []string
	for _, o := range r.Outputs {
		switch {
		case o.Pass:
		case o.FailedRows == 0 && len(o.Rows) > 0:
			failed = append(failed, fmt.Sprintf("%s (all rows together)", outputLabel(o)))
		default:
			failed = append(failed, fmt.Sprintf("%s (%s)", outputLabel(o), plural(o.FailedRows, "row")))
		}
	}
	return "FAIL: violations in " + strings.Join(failed, ", ") + "."
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// tokenName names a token id: "6639 ‹␣the›" with a tokenizer that defines
// it, else "6639".
func tokenName(tok *tokens.Tokenizer) func(int64) string {
	return func(id int64) string {
		if tok.Known(id) {
			return strconv.FormatInt(id, 10) + " ‹" + tok.Show(id) + "›"
		}
		return strconv.FormatInt(id, 10)
	}
}
