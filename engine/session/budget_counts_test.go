package session

import (
	"context"
	"testing"

	"github.com/sampviz/sampviz/engine"
)

// countingBackend is a DrawCounter that runs nothing: need only asks what
// it is.
type countingBackend struct{ name string }

func (c countingBackend) Name() string          { return c.name }
func (c countingBackend) Device() engine.Device { return engine.Device{} }
func (c countingBackend) Run(context.Context, *engine.Run) (*engine.Output, error) {
	return nil, engine.ErrUnsupported
}
func (c countingBackend) DefaultDraws() int { return engine.DefaultCountedDraws }
func (c countingBackend) MaxDraws() int     { return engine.MaxDraws }

// drawing returns a backend called name with Backend's methods only: one
// that returns every draw.
func drawing(name string) engine.Backend {
	return struct{ engine.Backend }{countingBackend{name: name}}
}

// TestBudgetCountsDraws checks that the memory a sample run needs for our
// outputs follows the counts (V a row) on a backend that counts its draws,
// and the draws (N a row) on one that returns them or when the run keeps
// them; and that the draws default follows the backend.
func TestBudgetCountsDraws(t *testing.T) {
	const rows, vocab = 64, 50000
	counting := countingBackend{name: "cuda"}
	drawn := drawing("cpu")
	tests := []struct {
		name      string
		b         engine.Backend
		draws     *int
		keep      bool
		wantDraws int
		// wantPerRow is what our outputs hold a row, before the heap's slack.
		wantPerRow int64
	}{
		{"counted, default draws", counting, nil, false, engine.DefaultCountedDraws, 4*(1+vocab) + 8},
		{"counted, 10^9 draws", counting, ptr(engine.MaxDraws), false, engine.MaxDraws, 4*(1+vocab) + 8},
		{"counted but kept", counting, ptr(1000), true, 1000, 4*(1+1000) + 8},
		{"drawn, default draws", drawn, nil, false, engine.DefaultDraws, 4*(1+engine.DefaultDraws) + 8},
		{"drawn, 7 draws", drawn, ptr(7), false, 7, 4*(1+7) + 8},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			run := &engine.Run{Op: engine.OpSample, Logits: engine.NewTensor("logits", engine.BF16, rows, vocab)}
			o := engine.Overrides{Draws: tt.draws}
			if tt.draws != nil {
				run.Params.Draws = *tt.draws
			}
			run.SetWorkDefaults(o)
			run.SetBackendDefaults(o, tt.b)
			run.Params.KeepDraws = tt.keep
			if run.Params.Draws != tt.wantDraws {
				t.Errorf("draws %d, want %d", run.Params.Draws, tt.wantDraws)
			}
			n := need(run, nil, tt.b, 1, false)
			var ours int64 = -1
			for _, p := range n.Parts {
				if p.What == "our outputs" {
					ours = p.Bytes
				}
			}
			if want := int64(heapSlack * float64(rows*tt.wantPerRow)); ours != want {
				t.Errorf("our outputs %d bytes, want %d", ours, want)
			}
		})
	}
}
