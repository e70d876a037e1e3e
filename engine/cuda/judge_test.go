package cuda

import (
	"context"
	"strings"
	"testing"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/cpu"
)

func TestClassifyRows(t *testing.T) {
	pass := func(r int) engine.RowReport { return engine.RowReport{Row: r, Pass: true} }
	fail := func(r int, v ...string) engine.RowReport { return engine.RowReport{Row: r, Violations: v} }
	tests := []struct {
		name             string
		gpu, host        []engine.RowReport
		invalid          map[int]bool
		failures, shared int
		say              string
	}{
		{"all pass", []engine.RowReport{pass(0), pass(1)}, []engine.RowReport{pass(0), pass(1)}, nil, 0, 0, ""},
		{"gpu alone fails", []engine.RowReport{pass(0), fail(1, "row 1: off")}, []engine.RowReport{pass(0), pass(1)}, nil, 1, 0, "row 1 failed"},
		{"both fail alike", []engine.RowReport{fail(0, "row 0: extra token")}, []engine.RowReport{fail(0, "row 0: extra token")}, nil, 0, 1, "extra token"},
		{"both fail differently", []engine.RowReport{fail(0, "row 0: a")}, []engine.RowReport{fail(0, "row 0: b")}, nil, 1, 0, "row 0 failed"},
		{"invalid row fails", []engine.RowReport{fail(2, "row 2: NaN")}, []engine.RowReport{fail(2, "row 2: NaN")}, map[int]bool{2: true}, 0, 0, ""},
		{"invalid row passes", []engine.RowReport{pass(2)}, []engine.RowReport{fail(2, "row 2: NaN")}, map[int]bool{2: true}, 1, 0, "no distribution but passed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			failures, shared := classifyRows(tt.gpu, tt.host, tt.invalid)
			if len(failures) != tt.failures || len(shared) != tt.shared {
				t.Fatalf("failures %q, shared %q; want %d and %d", failures, shared, tt.failures, tt.shared)
			}
			if all := strings.Join(append(failures, shared...), "; "); !strings.Contains(all, tt.say) {
				t.Errorf("%q does not say %q", all, tt.say)
			}
		})
	}
}

// TestJudgeWiring runs the suite's judge helper on engine/cpu's output
// standing in for the GPU's: with identical outputs no row may count as a
// CUDA failure, whatever the reference says.
func TestJudgeWiring(t *testing.T) {
	rng := newRand(t)
	for _, op := range []engine.Op{engine.OpArgmax, engine.OpRenorm, engine.OpSample} {
		t.Run(string(op), func(t *testing.T) {
			x, invalid := logits(rng, engine.BF16, 6, 300, true)
			run := &engine.Run{Op: op, Logits: x, Params: params(rng, 6, 300, true)}
			out, err := cpu.New().Run(context.Background(), run)
			if err != nil {
				t.Fatal(err)
			}
			if op == engine.OpArgmax {
				for r := range invalid {
					if out.Tokens.Int(r) >= 0 {
						delete(invalid, r) // +Inf is an ordinary maximum for argmax
					}
				}
			}
			judge(t, run, out, out, invalid)
		})
	}
}
