package session

import (
	"context"
	"errors"
	"testing"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/cpu"
)

// placing is a placer whose placed backend runs run; it counts the places
// it gave and those released.
type placing struct {
	run              func(context.Context, *engine.Run) (*engine.Output, error)
	placed, released int
}

func (p *placing) Name() string          { return "gpu" }
func (p *placing) Device() engine.Device { return engine.Device{Backend: "gpu"} }
func (p *placing) Run(ctx context.Context, run *engine.Run) (*engine.Output, error) {
	return p.run(ctx, run)
}

func (p *placing) Place(string) (engine.Backend, func()) {
	p.placed++
	done := false
	return funcBackend(p.run), func() {
		if !done {
			done = true
			p.released++
		}
	}
}

// funcBackend is a backend that runs f.
type funcBackend func(context.Context, *engine.Run) (*engine.Output, error)

func (funcBackend) Name() string          { return "gpu" }
func (funcBackend) Device() engine.Device { return engine.Device{Backend: "gpu"} }
func (f funcBackend) Run(ctx context.Context, run *engine.Run) (*engine.Output, error) {
	return f(ctx, run)
}

// TestPlaceReleased checks that the device a job is placed on is released
// however its kernels end: with an output, an error, or a panic (which the
// server's executor recovers from and goes on: a place never released
// would count against that GPU for good).
func TestPlaceReleased(t *testing.T) {
	tests := []struct {
		name string
		run  func(context.Context, *engine.Run) (*engine.Output, error)
	}{
		{"output", func(ctx context.Context, run *engine.Run) (*engine.Output, error) { return cpu.New().Run(ctx, run) }},
		{"error", func(context.Context, *engine.Run) (*engine.Output, error) { return nil, errors.New("kernel fault") }},
		{"panic", func(context.Context, *engine.Run) (*engine.Output, error) {
			panic("a kernel plan indexed past a slice")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := testDump(t, engine.OpSoftmax, 4, 64, nil)
			p := &placing{run: tt.run}
			func() {
				defer func() { recover() }()
				New(p).Execute(context.Background(), Job{DumpPath: path, FileName: "d.safetensors"}, nil)
			}()
			if p.placed != 1 || p.released != 1 {
				t.Errorf("placed %d, released %d; want 1 and 1", p.placed, p.released)
			}
		})
	}
}
