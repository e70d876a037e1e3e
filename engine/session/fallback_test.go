package session

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/cpu"
)

// refusing is a backend whose kernels serve nothing: every run fails with
// err.
type refusing struct{ err error }

func (refusing) Name() string          { return "gpu" }
func (refusing) Device() engine.Device { return engine.Device{Backend: "gpu", Name: "no kernels"} }
func (b refusing) Run(context.Context, *engine.Run) (*engine.Output, error) {
	return nil, b.err
}

// TestExecuteFallsBackWhereKernelsRefuse: a run the default backend's
// kernels do not serve (ErrUnsupported) runs on the session's next backend
// and says so; a fault is never hidden that way.
func TestExecuteFallsBackWhereKernelsRefuse(t *testing.T) {
	// The cuda backend's refusal of a filter order it has no kernel for
	// (engine/cuda resolveParams), as the fake backend gives it.
	unsupported := fmt.Errorf("filter_order min_p_first has no GPU kernel: %w", engine.ErrUnsupported)
	fault := errors.New("kernel fault on the GPU: an illegal memory access was encountered")
	tests := []struct {
		name     string
		backends []engine.Backend
		device   string // the backend that ran, "" for an error
		notice   string
		err      string
	}{
		{"refused, cpu beside it", []engine.Backend{refusing{unsupported}, cpu.New()}, "cpu",
			"the gpu backend cannot run this dump: filter_order min_p_first has no GPU kernel; our output is the cpu backend's", ""},
		{"refused, nothing beside it", []engine.Backend{refusing{unsupported}}, "", "", "has no GPU kernel"},
		{"a fault", []engine.Backend{refusing{fault}, cpu.New()}, "", "", "the gpu backend failed: kernel fault"},
		{"cpu first", []engine.Backend{cpu.New(), refusing{unsupported}}, "cpu", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := testDump(t, engine.OpSoftmax, 4, 64, nil)
			rep, err := New(tt.backends...).Execute(context.Background(), Job{DumpPath: path, FileName: "d.safetensors"}, nil)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want one saying %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if rep.Device == nil || rep.Device.Backend != tt.device {
				t.Errorf("ran on %+v, want the %s backend", rep.Device, tt.device)
			}
			if rep.Outputs[0].Name != tt.device {
				t.Errorf("our output is named %q, want %q", rep.Outputs[0].Name, tt.device)
			}
			has := slices.Contains(rep.Notices, tt.notice)
			if tt.notice != "" && !has {
				t.Errorf("notices %q, want %q", rep.Notices, tt.notice)
			}
			if tt.notice == "" && slices.ContainsFunc(rep.Notices, func(n string) bool { return strings.Contains(n, "our output is") }) {
				t.Errorf("notices %q say a fallback that did not happen", rep.Notices)
			}
		})
	}
}
