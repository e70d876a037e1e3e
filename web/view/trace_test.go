package view

import (
	"math"
	"strings"
	"testing"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/explain"
)

func TestDescribeStep(t *testing.T) {
	sd := &explain.SpecDetail{K: 3}
	tests := []struct {
		name    string
		step    engine.SpecStep
		j, e    int
		outcome string
		say     string
	}{
		{"accepted, p < q", engine.SpecStep{Draft: 5, U: 0.1, P: 0.2, Q: 0.5, Accepted: true, Resampled: -1}, 0, 2, "accepted", "kept with probability min(1, p/q) = 0.4"},
		{"accepted, p >= q", engine.SpecStep{Draft: 5, U: 0.9, P: 0.5, Q: 0.2, Accepted: true, Resampled: -1}, 1, 2, "accepted", "p ≥ q, so min(1, p/q) = 1"},
		{"rejected", engine.SpecStep{Draft: 5, U: 0.9, P: 0.1, Q: 0.5, Accepted: false, Resampled: 8}, 2, 2, "rejected", "residual max(p − q, 0), normalised (orange), which has mass only where the draft proposes less than the target: token 8"},
		{"after the chain stopped", engine.SpecStep{Draft: 5, U: 0.1, P: 0.3, Q: 0.4, Accepted: true, Resampled: -1}, 2, 1, "after", "already stopped at position 1"},
		{"no distribution", engine.SpecStep{Draft: 5, U: 0.1, P: float32(math.NaN()), Q: 0.4, Resampled: -1}, 1, 1, "rejected", "no distribution"},
		{"bonus", engine.SpecStep{Draft: -1, Resampled: 42}, 3, 3, "bonus", "bonus token from the target p at position 3: token 42"},
		{"no bonus", engine.SpecStep{Draft: -1, Resampled: -1}, 3, 1, "none", "No bonus: the chain stopped at position 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cells, say, outcome := describeStep(sd, nil, tt.step, tt.j, tt.e)
			if len(cells) != len(TraceHeader) || outcome != tt.outcome || !strings.Contains(say, tt.say) {
				t.Errorf("cells %v, outcome %q, say %q; want outcome %q and %q", cells, outcome, say, tt.outcome, tt.say)
			}
		})
	}
}
