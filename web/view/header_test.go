package view

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/sampviz/sampviz/engine"
)

func TestHeaderLines(t *testing.T) {
	h100 := engine.Device{Backend: "cuda", Name: "NVIDIA H100 80GB HBM3", SMs: 132, MemoryBytes: 80 << 30, CopyBandwidth: 3.0e12}
	cpu := engine.Device{Backend: "cpu", Name: "AMD EPYC"}
	kernel := time.Duration(200+rand.IntN(800)) * time.Microsecond
	bytes := int64(1+rand.IntN(4)) << 30
	tests := []struct {
		name string
		got  string
		want []string
	}{
		{"cuda backend", BackendLine(h100), []string{"CUDA backend on NVIDIA H100 80GB HBM3 (132 SMs, 80 GiB)"}},
		{"cpu backend says so", BackendLine(cpu), []string{"CPU backend on AMD EPYC", "no GPU kernels run here"}},
		{"gpu timing has bandwidth", TimingLine(&Summary{Timing: &engine.Timing{Kernel: kernel, Bytes: bytes, Wall: 3 * kernel}}, h100),
			[]string{"kernel " + Duration(kernel), Bandwidth(float64(bytes) / kernel.Seconds()), "% of the 3.00 TB/s copy bandwidth"}},
		{"cpu timing is wall time", TimingLine(&Summary{Timing: &engine.Timing{Wall: kernel}}, cpu), []string{"on the CPU (wall time", "no kernel time"}},
		{"before the end", TimingLine(nil, h100), []string{"Measured when the run finishes."}},
		{"no kernel", TimingLine(&Summary{}, h100), []string{"No kernel ran: only the dump's outputs were judged."}},
		{"semantics any", TimingLine(&Summary{Matches: []engine.SemanticsMatch{{Semantics: "hf"}}}, h100), []string{"No kernel ran: semantics any judges the dump's outputs under every preset."}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, w := range tt.want {
				if !strings.Contains(tt.got, w) {
					t.Errorf("%q does not say %q", tt.got, w)
				}
			}
		})
	}
}
