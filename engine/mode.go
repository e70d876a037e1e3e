package engine

import (
	"fmt"
	"strings"
)

// A dump may hold several outputs of one kind, each named after an @: the
// output tensor probs@eager is the probs of the mode "eager" (an execution
// mode, a rank, an engine). The plain name (probs) is the output without a
// mode. A mode's companions share its name (spec_emitted@v2 goes with
// spec_tokens@v2), and a mode may declare the seed and offset it drew with
// (seed@v2, offset@v2), which is what makes two modes' draws comparable
// (docs/DUMPS.md "Named outputs").

// MaxNamedOutputs is the most named outputs one dump may hold: enough for
// every mode of a gate table, few enough that comparing every pair stays
// cheap.
const MaxNamedOutputs = 16

// maxModeLen bounds a mode's name, so that reports and tables stay readable.
const maxModeLen = 64

// SplitName splits a tensor name TENSOR@MODE into its tensor and its mode;
// a name without an @ has mode "".
func SplitName(name string) (tensor, mode string) {
	tensor, mode, _ = strings.Cut(name, "@")
	return tensor, mode
}

// HasMode reports whether a tensor name is named after a mode (holds an @,
// even with nothing after it).
func HasMode(name string) bool { return strings.Contains(name, "@") }

// ModeProblem says why mode cannot name an output, or "" when it can: a
// mode is 1 to 64 letters, digits, '_', '-' and '.'.
func ModeProblem(mode string) string {
	if mode == "" || len(mode) > maxModeLen {
		return fmt.Sprintf("the name after @ must be 1 to %d characters, not %d", maxModeLen, len(mode))
	}
	for _, c := range mode {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.'
		if !ok {
			return fmt.Sprintf("the name after @ may hold letters, digits, '_', '-' and '.', not %q", c)
		}
	}
	return ""
}

// Companion reports whether the output tensor called name only makes sense
// beside another of the same mode (spec_emitted and spec_accepted beside
// spec_tokens, logprob_token_ids beside logprobs: TensorSpec.With);
// companions do not count as outputs of their own.
func Companion(name string) bool {
	o := OutputSpec(name)
	return o != nil && o.With != ""
}

// Declares reports whether the tensor called name (without its mode) is one
// a mode may declare for itself: its seed or offset.
func Declares(name string) bool { return name == "seed" || name == "offset" }

// DeclaredSeeds are the seed and offset of every row that one output
// declares it drew with (seed@MODE, offset@MODE), resolved like the run's
// own (the dump's offset, or 0, where the mode gives no offset@MODE).
type DeclaredSeeds struct {
	Seed, Offset []uint64
}

// Same reports whether row r drew with the same seed and offset in d and e.
func (d *DeclaredSeeds) Same(e *DeclaredSeeds, r int) bool {
	return d.Seed[r] == e.Seed[r] && d.Offset[r] == e.Offset[r]
}
