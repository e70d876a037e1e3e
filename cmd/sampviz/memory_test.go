package main

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/cpu"
	"github.com/sampviz/sampviz/engine/dump"
	"github.com/sampviz/sampviz/engine/session"
)

// TestMemoryBudget runs `sampviz check` (this binary, in a process of its
// own) on a set of large dumps with --max-memory at exactly what the
// session estimates each needs (session.Admit), and reads each process's
// peak resident memory: an accepted run must stay within the budget plus
// 10%, and a dump that needs more than its budget must be refused with exit
// status 2 and one sentence, before it takes the memory. It also logs each
// run's peak against its file's size.
func TestMemoryBudget(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector multiplies memory; make memory-test runs this without it")
	}
	if testing.Short() {
		t.Skip("writes and judges ~200 MB of dumps; -short skips it")
	}
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	logits := func(dt engine.DType, shape ...int) *engine.Tensor {
		n := 1
		for _, d := range shape {
			n *= d
		}
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(rng.NormFloat64() * 2)
		}
		return engine.FromFloat32s("logits", dt, shape, x)
	}
	perRow := func(name string, rows int, v float64) *engine.Tensor {
		x := make([]float64, rows)
		for i := range x {
			x[i] = v
		}
		return engine.FromFloat64s(name, engine.F32, []int{rows}, x)
	}
	write := func(name string, meta map[string]string, ts ...*engine.Tensor) string {
		path := filepath.Join(dir, name)
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if strings.HasSuffix(name, ".npz") {
			err = dump.WriteNPZ(f, ts, meta)
		} else {
			err = dump.WriteSafetensors(f, ts, meta)
		}
		if err != nil {
			t.Fatal(err)
		}
		return path
	}
	spec := func(rows, k, v int) []*engine.Tensor {
		tl := logits(engine.F32, rows, k+1, v)
		tl.Name = "target_logits"
		drafts := make([]int64, rows*k)
		for i := range drafts {
			drafts[i] = int64(rng.IntN(v))
		}
		return []*engine.Tensor{tl, engine.FromInts("draft_tokens", engine.I64, []int{rows, k}, drafts)}
	}
	tests := []struct {
		name  string
		path  string
		flags []string
	}{
		{"softmax bf16 256x128256", write("softmax.safetensors", map[string]string{"op": "softmax"}, logits(engine.BF16, 256, 128256)), nil},
		{"renorm f32 64x128256", write("renorm.safetensors", nil, logits(engine.F32, 64, 128256), perRow("top_p", 64, 0.9)), nil},
		{"sample bf16 64x32000, 10^5 draws", write("sample.safetensors", map[string]string{"op": "sample"}, logits(engine.BF16, 64, 32000), perRow("top_p", 64, 0.95)), []string{"--draws", "100000"}},
		{"spec_verify 32x5x4096, 2x10^4 trials", write("spec.safetensors", nil, spec(32, 4, 4096)...), []string{"--trials", "20000"}},
		{"softmax f32 npz 128x32000", write("softmax.npz", map[string]string{"op": "softmax"}, logits(engine.F32, 128, 32000)), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			budget := admit(t, tt.path, tt.flags)
			code, stderr, peak := checkProcess(t, append([]string{"--backend", "cpu", "--max-memory", strconv.FormatInt(budget, 10)}, append(tt.flags, tt.path)...))
			if code != exitOK && code != exitViolated {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			st, _ := os.Stat(tt.path)
			t.Logf("peak %s against a budget of %s (%.2f of it); the file is %s, the peak %.2fx it",
				engine.FormatBytes(peak), engine.FormatBytes(budget), float64(peak)/float64(budget), engine.FormatBytes(st.Size()), float64(peak)/float64(st.Size()))
			if float64(peak) > 1.1*float64(budget) {
				t.Errorf("peak resident memory %s is over the budget %s plus 10%%", engine.FormatBytes(peak), engine.FormatBytes(budget))
			}
			// One byte less than its need: refused, before it takes the memory.
			code, stderr, peak = checkProcess(t, append([]string{"--backend", "cpu", "--max-memory", strconv.FormatInt(budget-1, 10)}, append(tt.flags, tt.path)...))
			if code != exitUnusable || !strings.Contains(stderr, "of memory to judge") || !strings.Contains(stderr, "more than the") {
				t.Errorf("with a budget 1 byte short: exit %d, %q; want 2 and the sentence", code, stderr)
			}
			if peak > 100<<20 {
				t.Errorf("a refused run took %s", engine.FormatBytes(peak))
			}
		})
	}
}

// admit returns what the session estimates `sampviz check --backend cpu
// flags path` needs.
func admit(t *testing.T, path string, flags []string) int64 {
	t.Helper()
	c := newCheckFlags(new(bytes.Buffer))
	if _, err := c.parse(append(flags, path)); err != nil {
		t.Fatal(err)
	}
	info, err := session.New(cpu.New()).Admit(context.Background(), session.Job{DumpPath: path, Overrides: c.overrides})
	if err != nil {
		t.Fatal(err)
	}
	return info.Memory
}

// checkProcess runs this binary as `sampviz check args...` and returns its
// exit status, its stderr and its peak resident memory (VmHWM, peakEnv).
func checkProcess(t *testing.T, args []string) (code int, stderr string, peak int64) {
	t.Helper()
	peakFile := filepath.Join(t.TempDir(), "peak")
	cmd := exec.Command(os.Args[0], append([]string{"check"}, args...)...)
	cmd.Env = append(os.Environ(), mainEnv+"=1", peakEnv+"="+peakFile)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if cmd.ProcessState == nil {
		t.Fatalf("sampviz check %s: %v", strings.Join(args, " "), err)
	}
	b, err := os.ReadFile(peakFile)
	if err != nil {
		t.Skipf("no peak resident memory on this system (/proc/self/status): %v", err)
	}
	kb, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		t.Fatalf("peak %q: %v", b, err)
	}
	return cmd.ProcessState.ExitCode(), strings.TrimSpace(errb.String()), kb << 10
}
