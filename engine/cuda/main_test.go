package cuda

import (
	"context"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"
)

// testWorkerEnv makes this test binary, re-executed by a Backend, serve as
// the worker (so the tests need no separate binary).
const testWorkerEnv = "SAMPVIZ_CUDA_TEST_WORKER"

func TestMain(m *testing.M) {
	if os.Getenv(testWorkerEnv) == "1" {
		os.Exit(WorkerMain())
	}
	code := m.Run()
	if gpuShared != nil {
		gpuShared.Close()
	}
	os.Exit(code)
}

// testOptions starts workers from this test binary.
func testOptions(kernels string, env ...string) Options {
	opts := Options{
		Kernels: kernels,
		Command: []string{os.Args[0]},
		Env:     append([]string{testWorkerEnv + "=1"}, env...),
	}
	// $SAMPVIZ_WORKER_WRAPPER (e.g. compute-sanitizer) wraps the workers:
	// they run the kernels, this test process runs none.
	if w := strings.Fields(os.Getenv(WrapperEnv)); len(w) > 0 {
		opts.Command = append(w, os.Args[0])
		opts.Stderr = os.Stderr
	}
	return opts
}

// openFake opens a backend on the fake device (no GPU needed).
func openFake(t *testing.T, watchdog time.Duration) *Backend {
	t.Helper()
	opts := testOptions(os.Args[0], fakeEnv+"=1")
	opts.Watchdog = watchdog
	b, err := Open(context.Background(), opts)
	if err != nil {
		t.Fatalf("Open (fake device): %v", err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// newRand returns a freshly seeded generator and logs the seed, so a
// failure can be replayed.
func newRand(t *testing.T) *rand.Rand {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	t.Logf("random seed %d", seed)
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}
