package cuda

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sampviz/sampviz/engine"
)

// argmaxRun returns an argmax run on fresh random logits and the expected
// tokens (first index of the maximum).
func argmaxRun(rng *rand.Rand, rows, vocab int) (*engine.Run, []int64) {
	x := make([]float32, rows*vocab)
	for i := range x {
		x[i] = float32(rng.NormFloat64() * 3)
	}
	want := make([]int64, rows)
	for r := range rows {
		best := 0
		for i := 1; i < vocab; i++ {
			if x[r*vocab+i] > x[r*vocab+best] {
				best = i
			}
		}
		want[r] = int64(best)
	}
	return &engine.Run{Op: engine.OpArgmax, Logits: engine.FromFloat32s("logits", engine.F32, []int{rows, vocab}, x)}, want
}

// checkArgmax runs argmax on b and compares with the expected tokens.
func checkArgmax(t *testing.T, b *Backend, rng *rand.Rand) {
	t.Helper()
	run, want := argmaxRun(rng, 5, 1+rng.IntN(300))
	out, err := b.Run(context.Background(), run)
	if err != nil {
		t.Fatalf("argmax after recovery: %v", err)
	}
	got := out.Tokens.Ints()
	for r := range want {
		if got[r] != want[r] {
			t.Fatalf("row %d: token %d, want %d", r, got[r], want[r])
		}
	}
	if out.Name != "cuda" || out.Timing == nil || out.Timing.Bytes == 0 {
		t.Errorf("output name %q timing %+v, want cuda with bytes", out.Name, out.Timing)
	}
}

// TestSupervision plants each fault in a worker on the fake device and
// checks the typed error, whether the worker was replaced, and that the
// next run works.
func TestSupervision(t *testing.T) {
	tests := []struct {
		name      string
		fault     string
		kind      error
		restarted bool
		detail    string
	}{
		{"crash", "crash", ErrCrashed, true, "exit status 3"},
		{"hang past the watchdog", "hang", ErrHung, true, "watchdog"},
		{"sticky CUDA error", "sticky", ErrDeviceFault, true, "illegal memory access"},
		{"recoverable CUDA error", "error", ErrKernel, false, "out of memory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rng := newRand(t)
			b := openFake(t, 2*time.Second)
			checkArgmax(t, b, rng)
			pid := b.workerPID()
			err := b.injectFault(context.Background(), tt.fault, 2*time.Second)
			if !errors.Is(err, tt.kind) {
				t.Fatalf("fault %s: error %v, want %v", tt.fault, err, tt.kind)
			}
			var we *WorkerError
			if !errors.As(err, &we) {
				t.Fatalf("fault %s: error %T, want *WorkerError", tt.fault, err)
			}
			if we.Restarted != tt.restarted {
				t.Errorf("Restarted = %v, want %v", we.Restarted, tt.restarted)
			}
			if !strings.Contains(err.Error(), tt.detail) {
				t.Errorf("error %q does not say %q", err, tt.detail)
			}
			if tt.fault == "crash" && !strings.Contains(we.Stderr, "crashing on purpose") {
				t.Errorf("stderr %q lacks the worker's last words", we.Stderr)
			}
			if alive := b.workerPID(); (alive == 0) != tt.restarted {
				t.Errorf("worker pid after the fault: %d (before %d); restarted %v", alive, pid, tt.restarted)
			}
			checkArgmax(t, b, rng)
			if now := b.workerPID(); tt.restarted == (now == pid) {
				t.Errorf("worker pid %d -> %d; restarted %v", pid, now, tt.restarted)
			}
		})
	}
}

func TestCancelKillsTheRun(t *testing.T) {
	rng := newRand(t)
	b := openFake(t, time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := b.injectFault(ctx, "hang", time.Minute)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error %v, want the context's deadline", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("cancellation took %v", d)
	}
	checkArgmax(t, b, rng)
}

func TestOpenUnavailable(t *testing.T) {
	dir := t.TempDir()
	notLib := filepath.Join(dir, "libsampviz_kernels.so")
	if err := os.WriteFile(notLib, []byte("not an ELF file"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		kernels string
		say     string
	}{
		{"missing library", filepath.Join(dir, "nowhere.so"), "nowhere.so was not found"},
		{"not a library", notLib, "load " + notLib},
		{"no path", "", "no kernel library"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := testOptions(tt.kernels)
			opts.StartTimeout = 30 * time.Second
			b, err := Open(context.Background(), opts)
			if err == nil {
				b.Close()
				t.Fatal("Open succeeded")
			}
			if !errors.Is(err, engine.ErrUnavailable) {
				t.Errorf("error %v does not wrap engine.ErrUnavailable", err)
			}
			if !strings.Contains(err.Error(), tt.say) {
				t.Errorf("error %q does not say %q", err, tt.say)
			}
		})
	}
}

func TestClosedBackend(t *testing.T) {
	rng := newRand(t)
	b := openFake(t, time.Minute)
	checkArgmax(t, b, rng)
	pid := b.workerPID()
	if err := b.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	run, _ := argmaxRun(rng, 2, 10)
	if _, err := b.Run(context.Background(), run); !errors.Is(err, ErrClosed) {
		t.Errorf("Run after Close: %v, want ErrClosed", err)
	}
	// The worker exited and was reaped: signal 0 finds no such process.
	if p, err := os.FindProcess(pid); err == nil {
		if err := p.Signal(syscall.Signal(0)); err == nil {
			t.Errorf("worker %d still runs after Close", pid)
		}
	}
}

func TestLargeRunGrowsSharedMemory(t *testing.T) {
	rng := newRand(t)
	b := openFake(t, time.Minute)
	run, want := argmaxRun(rng, 3, (3<<20)/4+rng.IntN(1000)) // 9 MB of logits: past the first 1 MiB
	out, err := b.Run(context.Background(), run)
	if err != nil {
		t.Fatal(err)
	}
	for r, w := range want {
		if got := out.Tokens.Int(r); got != w {
			t.Errorf("row %d: %d, want %d", r, got, w)
		}
	}
}

func TestCheckWritten(t *testing.T) {
	tests := []struct {
		name    string
		words   []uint32
		poison  uint32
		wantErr string
	}{
		{"all written", []uint32{1, 2, math.Float32bits(0.5)}, poisonFloat, ""},
		{"one left", []uint32{1, poisonToken, 3}, poisonToken, "1 of 3 elements of x unwritten, first at element 1"},
		{"kernel NaN is not poison", []uint32{0x7fffffff}, poisonFloat, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := make([]byte, 4*len(tt.words))
			for i, w := range tt.words {
				b[4*i], b[4*i+1], b[4*i+2], b[4*i+3] = byte(w), byte(w>>8), byte(w>>16), byte(w>>24)
			}
			err := checkWritten("x", b, tt.poison)
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("checkWritten: %v, want %q", err, tt.wantErr)
			}
		})
	}
}
