package view

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/session"
	"github.com/sampviz/sampviz/web/store"
)

// The run page's header and verdict in words: where the kernels ran, what
// the dump holds, which parameters and tolerances are in force, and the
// verdict before the page script takes over.

// BackendLine says in words where the kernels run.
func BackendLine(d engine.Device) string {
	if d.Backend == "cpu" {
		name := d.Name
		if name == "" {
			name = "this machine's CPU"
		}
		return fmt.Sprintf("CPU backend on %s: no GPU kernels run here, and times are CPU times.", name)
	}
	line := fmt.Sprintf("%s backend on %s", strings.ToUpper(d.Backend), d.Name)
	if d.SMs > 0 {
		line += fmt.Sprintf(" (%d SMs", d.SMs)
		if d.MemoryBytes > 0 {
			line += ", " + engine.FormatBytes(d.MemoryBytes)
		}
		line += ")"
	}
	return line + "."
}

// RowsTokens says how many rows of how many tokens the dump holds.
func RowsTokens(info session.DumpInfo) string {
	if info.Vocab == 0 {
		return fmt.Sprintf("%d rows", info.Rows)
	}
	if k := DraftPositions(&info); k > 0 {
		return fmt.Sprintf("%d rows of %d draft positions and a bonus position, %d tokens each", info.Rows, k, info.Vocab)
	}
	return fmt.Sprintf("%d rows of %d tokens", info.Rows, info.Vocab)
}

// MaxRow is the last row, for the row form's bound.
func MaxRow(info session.DumpInfo) string { return strconv.Itoa(maxInt(info.Rows-1, 0)) }

// ParamsLine says which parameters a run overrides.
func ParamsLine(p engine.Overrides) string {
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

// TolerancesInForce says which tolerances judge the page: tol when the URL
// names some, else the summary's (the defaults for the dtypes), else that
// they are shown when the run finishes.
func TolerancesInForce(sum *Summary, tol *engine.Tolerances) string {
	switch {
	case tol != nil:
		return ToleranceText(*tol)
	case sum != nil:
		return ToleranceText(sum.Tolerances) + " (the defaults for these dtypes)"
	}
	return "the defaults for these dtypes; shown when the run finishes"
}

// VerdictClass is the verdict's CSS class: pass, fail, error or running.
func VerdictClass(st Status, sum *Summary) string {
	switch {
	case sum != nil && sum.Pass:
		return "pass"
	case sum != nil:
		return "fail"
	case st.State == store.Failed || st.State == store.Cancelled:
		return "error"
	}
	return "running"
}

// VerdictText is the verdict line before the page script takes over.
func VerdictText(st Status, sum *Summary) string {
	switch {
	case sum != nil:
		return sum.Sentence
	case st.State == store.Failed:
		return "This run failed: " + st.Message
	case st.State == store.Cancelled:
		return st.Message
	case st.State == store.Queued && st.Ahead > 0:
		return fmt.Sprintf("Waiting: %d run(s) ahead of this one.", st.Ahead)
	case st.State == store.Queued:
		return "Waiting to start."
	}
	return "Running the kernels and judging rows…"
}

// PassClass is the CSS class of a verdict: pass or fail.
func PassClass(pass bool) string {
	if pass {
		return "pass"
	}
	return "fail"
}

// OutputLine says one output's verdict.
func OutputLine(o OutputVerdict) string {
	label := o.Label()
	if w := LogprobsWords(o.Logprobs); w != "" {
		label += ", " + w + ","
	}
	if o.Pass {
		return fmt.Sprintf("%s passes all %d rows.", label, o.Rows)
	}
	s := fmt.Sprintf("%s fails %d of %d rows.", label, o.FailedRows, o.Rows)
	if o.InputRows > 0 {
		s = fmt.Sprintf("%s fails %d of %d rows, %s", label, o.FailedRows, o.Rows, InputRowsText(o.InputRows, o.FailedRows))
	}
	for _, v := range o.Violations {
		s += " Over all rows together: " + v + "."
	}
	return s
}

// DraftPositions returns K of a spec_verify dump from its target_logits
// shape [B, K+1, V], or 0.
func DraftPositions(info *session.DumpInfo) int {
	if info.Op != engine.OpSpecVerify || info.Input != "target_logits" || len(info.Shape) != 3 {
		return 0
	}
	return max(info.Shape[1]-1, 0)
}

// InputRowsText says that n of failed rows fail on their input, not on the
// output: "2 of them on their input (...)".
func InputRowsText(n, failed int) string {
	which := "of them"
	if n == failed {
		which = "all"
		if n == 1 {
			which = "it"
		}
		return fmt.Sprintf("%s on the input, not the output: NaN, +Inf or every token masked in the logits, or a parameter out of range.", which)
	}
	return fmt.Sprintf("%d %s on the input, not the output: NaN, +Inf or every token masked in the logits, or a parameter out of range.", n, which)
}

// LogprobsWords says what a logprobs output was judged as: "raw logprobs,
// every token's" or "processed logprobs, top 20" ("" for other outputs).
func LogprobsWords(lp *engine.LogprobsInfo) string {
	if lp == nil {
		return ""
	}
	if lp.TopN > 0 {
		return fmt.Sprintf("%s logprobs, top %d", lp.Kind, lp.TopN)
	}
	return fmt.Sprintf("%s logprobs, every token's", lp.Kind)
}
