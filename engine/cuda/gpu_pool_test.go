package cuda

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/session"
)

// gpuPool opens a pool over every GPU and skips unless there are at least
// two. The normal GPU machine has one, so SAMPVIZ_REQUIRE_GPU=1 makes a
// missing second GPU a failure only where SAMPVIZ_REQUIRE_GPUS=2 says that
// the machine has two.
func gpuPool(t *testing.T) *Pool {
	t.Helper()
	require := os.Getenv("SAMPVIZ_REQUIRE_GPU") == "1" && os.Getenv("SAMPVIZ_REQUIRE_GPUS") == "2"
	opts := testOptions(kernelsForTest())
	opts.Watchdog = 5 * time.Minute
	p, err := OpenPool(context.Background(), opts, nil)
	if err != nil {
		if require || os.Getenv("SAMPVIZ_REQUIRE_GPU") == "1" && !errors.Is(err, engine.ErrUnavailable) {
			t.Fatalf("the CUDA pool did not open: %v", err)
		}
		t.Skipf("no CUDA pool: %v", err)
	}
	t.Cleanup(func() { p.Close() })
	if n := len(p.workers); n < 2 {
		if require {
			t.Fatalf("SAMPVIZ_REQUIRE_GPUS=2 but CUDA sees %d GPU", n)
		}
		t.Skipf("needs two GPUs; CUDA sees %d (set SAMPVIZ_REQUIRE_GPUS=2 with SAMPVIZ_REQUIRE_GPU=1 to make this a failure)", n)
	}
	return p
}

// twoGPUShape is the figure: 512 x 128256 bf16 sample runs at the
// default draws per row.
const twoGPURows, twoGPUVocab = 512, 128256

// TestGPUTwoGPUs is one worker per GPU through the product path (one
// session over a pool, as `sampviz serve --backend cuda` has): two 512 x
// 128256 bf16 sample runs submitted together, one per GPU, against the same
// two one after the other on one GPU; it logs both wall times and their
// ratio, which must be at most 0.6. Then a fault planted on GPU 0's worker
// (the out-of-bounds kernel of TestGPUFaults) fails the run placed there
// while GPU 1's run, in flight beside it, completes with the same judgement
// as before, and only GPU 0's worker restarts.
func TestGPUTwoGPUs(t *testing.T) {
	if quick() {
		t.Skip("SAMPVIZ_GPU_QUICK=1: the two-GPU figure needs full-size runs, and its planted fault is no memcheck finding")
	}
	p := gpuPool(t)
	rng := newRand(t)
	s := session.New(p)
	runs := make([]*engine.Run, 2)
	for i := range runs {
		x, _ := logits(rng, engine.BF16, twoGPURows, twoGPUVocab, false)
		runs[i] = &engine.Run{Op: engine.OpSample, Logits: x, Params: params(rng, twoGPURows, twoGPUVocab, false)}
	}
	ctx := context.Background()
	execute := func(i int, label string) (*engine.Report, time.Duration, error) {
		start := time.Now()
		rep, err := s.Execute(ctx, session.Job{Run: runs[i], Backend: "cuda", Label: label}, nil)
		return rep, time.Since(start), err
	}
	// Warm both workers (device buffers, pinned shared memory) with the
	// same jobs through the session, so that the session fits them to the
	// backend as it will (its draws default counts on the device) and
	// neither measurement pays a first run's costs: two jobs submitted
	// together take one GPU each.
	var wg sync.WaitGroup
	warm := make([]*engine.Report, 2)
	for i := range runs {
		wg.Go(func() {
			var err error
			if warm[i], _, err = execute(i, "warm-up"); err != nil {
				t.Errorf("warm-up run %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	if warm[0].Device.Name == warm[1].Device.Name {
		t.Fatalf("both warm-up runs ran on %s: the measurement would pay a first run's costs", warm[0].Device.Name)
	}

	start := time.Now()
	sequential := make([]*engine.Report, 2)
	for i := range runs {
		rep, d, err := execute(i, "sequential")
		if err != nil {
			t.Fatalf("run %d on one GPU: %v", i, err)
		}
		sequential[i] = rep
		t.Logf("one GPU, run %d: %v on %s (%s)", i, d.Round(time.Millisecond), rep.Device.Name, backendTime(rep))
	}
	oneGPU := time.Since(start)
	for i, rep := range sequential {
		if !strings.HasSuffix(rep.Device.Name, ", GPU "+itoa(p.workers[0].index)) {
			t.Errorf("sequential run %d ran on %s, want GPU %d (the least busy, lowest first)", i, rep.Device.Name, p.workers[0].index)
		}
	}

	start = time.Now()
	together := make([]*engine.Report, 2)
	errs := make([]error, 2)
	for i := range runs {
		wg.Go(func() {
			var d time.Duration
			together[i], d, errs[i] = execute(i, "together")
			t.Logf("two GPUs, run %d: %v", i, d.Round(time.Millisecond))
		})
	}
	wg.Wait()
	twoGPUs := time.Since(start)
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("runs on two GPUs: %v", err)
	}
	if together[0].Device.Name == together[1].Device.Name {
		t.Errorf("both runs submitted together ran on %s", together[0].Device.Name)
	}
	for i := range runs {
		sameJudgement(t, "run "+itoa(i)+" on two GPUs", together[i], sequential[i])
	}
	ratio := twoGPUs.Seconds() / oneGPU.Seconds()
	t.Logf("two %d x %d bf16 sample runs (%d draws per row): one after the other on one GPU %v, together on two GPUs %v, ratio %.2f (target <= 0.6)",
		twoGPURows, twoGPUVocab, runs[0].Params.Draws, oneGPU.Round(time.Millisecond), twoGPUs.Round(time.Millisecond), ratio)
	if ratio > 0.6 {
		t.Errorf("two runs on two GPUs took %.2fx the time of one GPU, want at most 0.6x", ratio)
	}
	kernelsOnlyRatio(t, p, runs)

	// A fault on GPU 0 beside a run on GPU 1: hold GPU 0 while run 1 is
	// placed (it goes to GPU 1), then place run 0 on GPU 0, whose worker
	// launches the out-of-bounds kernel in place of run 0's.
	gpu0, gpu1 := p.workers[0], p.workers[1]
	pid1 := gpu1.b.workerPID()
	_, hold := p.Place("hold")
	var rep1 *engine.Report
	var err1 error
	wg.Go(func() { rep1, _, err1 = execute(1, "beside-the-fault") })
	if !waitUntil(time.Minute, func() bool { return p.GPUs()[1].Runs == 1 }) {
		t.Fatalf("run 1 was never placed on GPU %d: %+v", gpu1.index, p.GPUs())
	}
	hold()
	gpu0.b.plantFault("out_of_bounds")
	_, _, err0 := execute(0, "faulted")
	busy1 := p.GPUs()[1].State == engine.GPUBusy
	wg.Wait()
	t.Logf("fault on GPU %d: %v; GPU %d busy when it came back: %v", gpu0.index, err0, gpu1.index, busy1)
	if !errors.Is(err0, ErrDeviceFault) {
		t.Errorf("run on the faulted GPU: %v, want a device fault", err0)
	}
	if err1 != nil {
		t.Fatalf("run on GPU %d beside the fault: %v", gpu1.index, err1)
	}
	sameJudgement(t, "run 1 beside the fault", rep1, sequential[1])
	if pid := gpu1.b.workerPID(); pid != pid1 {
		t.Errorf("GPU %d's worker changed (pid %d -> %d)", gpu1.index, pid1, pid)
	}
	if st := p.GPUs(); st[0].Restarts != 1 || st[1].Restarts != 0 || !strings.Contains(st[0].Fault, "kernel fault") {
		t.Errorf("GPU states after the fault: %+v; want GPU %d restarted once with its fault, GPU %d never", st, gpu0.index, gpu1.index)
	}
	// GPU 0's fresh worker serves again.
	if _, _, err := execute(0, "after-the-fault"); err != nil {
		t.Errorf("run after the fault: %v", err)
	}
}

// backendTime says how much of a run's wall time its kernels took, with and
// without their transfers: the rest is the judge on the host.
func backendTime(rep *engine.Report) string {
	for _, o := range rep.Outputs {
		if o.Timing != nil && !o.External {
			return "backend " + o.Timing.Wall.Round(time.Millisecond).String() + ", kernels " + o.Timing.Kernel.Round(time.Microsecond).String()
		}
	}
	return "no timing"
}

// kernelsOnlyRatio logs the same figure without the session: the two runs'
// kernels and transfers one after the other on GPU 0, then together on two
// GPUs (what one worker per GPU gains before the judge shares the host).
func kernelsOnlyRatio(t *testing.T, p *Pool, runs []*engine.Run) {
	t.Helper()
	ctx := context.Background()
	start := time.Now()
	for _, run := range runs {
		if _, err := p.workers[0].b.Run(ctx, run); err != nil {
			t.Errorf("kernels on GPU %d: %v", p.workers[0].index, err)
			return
		}
	}
	oneGPU := time.Since(start)
	start = time.Now()
	var wg sync.WaitGroup
	for i, run := range runs {
		wg.Go(func() {
			if _, err := p.workers[i].b.Run(ctx, run); err != nil {
				t.Errorf("kernels on GPU %d: %v", p.workers[i].index, err)
			}
		})
	}
	wg.Wait()
	twoGPUs := time.Since(start)
	t.Logf("kernels and transfers alone: one after the other on one GPU %v, together on two GPUs %v, ratio %.2f",
		oneGPU.Round(time.Millisecond), twoGPUs.Round(time.Millisecond), twoGPUs.Seconds()/oneGPU.Seconds())
}

// sameJudgement fails unless got judged every row of every output as want
// did (same seeds, same draws, whichever GPU ran them).
func sameJudgement(t *testing.T, what string, got, want *engine.Report) {
	t.Helper()
	if got.Pass != want.Pass || len(got.Outputs) != len(want.Outputs) {
		t.Errorf("%s: pass %v with %d outputs, want %v with %d", what, got.Pass, len(got.Outputs), want.Pass, len(want.Outputs))
		return
	}
	for i := range got.Outputs {
		g, _ := json.Marshal(got.Outputs[i].Rows)
		w, _ := json.Marshal(want.Outputs[i].Rows)
		if !bytes.Equal(g, w) {
			t.Errorf("%s: output %s's rows differ from the run on one GPU", what, got.Outputs[i].Name)
		}
	}
}

// waitUntil polls cond for up to d.
func waitUntil(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if cond() {
			return true
		}
		time.Sleep(time.Millisecond)
	}
	return false
}

// TestGPUFailedHelloCountsGPUs asks the real library for GPUs the host does
// not have: a worker whose hello fails on its GPU still reports how many
// GPUs CUDA sees (so a pool starts the others beside a GPU that cannot
// start), and OpenPool refuses each such number with ErrNoGPU naming them.
func TestGPUFailedHelloCountsGPUs(t *testing.T) {
	count := gpuBackend(t).deviceCount
	if count < 1 {
		t.Fatalf("the library reports %d GPUs; sv_device_count should count the GPU that answered", count)
	}
	opts := testOptions(kernelsForTest())
	opts.Device = count
	b, err := Open(context.Background(), opts)
	if err == nil {
		b.Close()
		t.Fatalf("Open on GPU %d of %d succeeded", count, count)
	}
	var we *WorkerError
	if !errors.As(err, &we) || we.devices != count || !errors.Is(err, engine.ErrUnavailable) {
		t.Errorf("Open on GPU %d: %v (devices %d); want unavailable, reporting %d GPUs", count, err, we.devicesOrZero(), count)
	}
	for _, gpus := range [][]int{{count}, {0, count}} {
		p, err := OpenPool(context.Background(), opts, gpus)
		if err == nil {
			p.Close()
			t.Errorf("OpenPool(%v) succeeded on a host of %d GPUs", gpus, count)
			continue
		}
		if want := "CUDA sees " + countGPUs(count) + " on this host"; !errors.Is(err, ErrNoGPU) || !strings.Contains(err.Error(), want) {
			t.Errorf("OpenPool(%v): %v; want ErrNoGPU saying %q", gpus, err, want)
		}
	}
}

// devicesOrZero is e.devices, or 0 for no error.
func (e *WorkerError) devicesOrZero() int {
	if e == nil {
		return 0
	}
	return e.devices
}
