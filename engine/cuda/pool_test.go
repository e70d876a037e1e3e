package cuda

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/session"
)

// fakeRunDelay is how long a fake GPU takes per run in the pool's tests:
// long enough that two runs are surely in flight together.
const fakeRunDelay = 400 * time.Millisecond

// openFakePool opens a pool over gpus of a fake host with n GPUs.
func openFakePool(t *testing.T, n int, gpus []int) *Pool {
	t.Helper()
	opts := testOptions(os.Args[0], fakeEnv+"=1", fakeGPUsEnv+"="+itoa(n), fakeDelayEnv+"="+fakeRunDelay.String())
	opts.Watchdog = 10 * time.Second
	p, err := OpenPool(context.Background(), opts, gpus)
	if err != nil {
		t.Fatalf("OpenPool (%d fake GPUs, %v): %v", n, gpus, err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func TestOpenPoolGPUs(t *testing.T) {
	tests := []struct {
		name    string
		gpus    []int
		down    string // SAMPVIZ_WORKER_FAKE_DOWN: GPUs whose worker cannot start
		want    []int
		wantOff []int // the GPUs down at start
		wantErr string
		kind    error // what the error wraps
	}{
		{"every GPU", nil, "", []int{0, 1, 2}, nil, "", nil},
		{"an empty list: every GPU", []int{}, "", []int{0, 1, 2}, nil, "", nil},
		{"one named", []int{2}, "", []int{2}, nil, "", nil},
		{"two named", []int{2, 0}, "", []int{2, 0}, nil, "", nil},
		{"past the last", []int{3}, "", nil, nil, "GPU 3: no such GPU: CUDA sees 3 GPUs (0 to 2) on this host", ErrNoGPU},
		{"one past the last", []int{0, 7}, "", nil, nil, "GPU 7: no such GPU", ErrNoGPU},
		{"past the last, the first down", []int{0, 7}, "0", nil, nil, "GPU 7: no such GPU", ErrNoGPU},
		{"only past the last, every one down", []int{5}, "0,1,2", nil, nil, "GPU 5: no such GPU: CUDA sees 3 GPUs", ErrNoGPU},
		{"one down", nil, "1", []int{0, 1, 2}, []int{1}, "", nil},
		{"the first down", nil, "0", []int{0, 1, 2}, []int{0}, "", nil},
		{"the first named down", []int{2, 1}, "2", []int{2, 1}, []int{2}, "", nil},
		{"all but one down", nil, "0,2", []int{0, 1, 2}, []int{0, 2}, "", nil},
		{"every one down", nil, "0,1,2", nil, nil, "GPU 0: backend unavailable: starting the worker: init: fake GPU 0 does not start (SAMPVIZ_WORKER_FAKE_DOWN): all CUDA-capable devices are busy or unavailable; GPU 1: ", engine.ErrUnavailable},
		{"every named one down", []int{1, 2}, "1,2", nil, nil, "fake GPU 2 does not start", engine.ErrUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := testOptions(os.Args[0], fakeEnv+"=1", fakeGPUsEnv+"=3", fakeDownEnv+"="+tt.down)
			p, err := OpenPool(context.Background(), opts, tt.gpus)
			if tt.wantErr != "" {
				if err == nil {
					p.Close()
					t.Fatalf("OpenPool(%v) succeeded, want %q", tt.gpus, tt.wantErr)
				}
				if !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, tt.kind) {
					t.Fatalf("OpenPool(%v): %v, want %q wrapping %v", tt.gpus, err, tt.wantErr, tt.kind)
				}
				return
			}
			if err != nil {
				t.Fatalf("OpenPool(%v): %v", tt.gpus, err)
			}
			defer p.Close()
			var got, off []int
			for _, st := range p.GPUs() {
				got = append(got, st.Index)
				if st.State == engine.GPUDown {
					off = append(off, st.Index)
					want := "fake GPU " + itoa(st.Index) + " does not start"
					if !strings.Contains(st.Fault, want) {
						t.Errorf("GPU %d down at start: fault %q, want one saying %q", st.Index, st.Fault, want)
					}
					continue
				}
				if st.State != engine.GPUIdle || st.Name == "" || st.Restarts != 0 {
					t.Errorf("GPU %d at start: %+v, want idle, named, no restarts", st.Index, st)
				}
			}
			if !equalInts(got, tt.want) || !equalInts(off, tt.wantOff) {
				t.Errorf("GPUs %v, down %v; want %v, down %v", got, off, tt.want, tt.wantOff)
			}
			if d := p.Device(); d.Backend != "cuda" || !strings.HasPrefix(d.Name, "fake GPU") {
				t.Errorf("pool device %+v, want the cuda backend named after a GPU that started", d)
			}
			// Runs go to the GPUs that started.
			for range len(tt.want) {
				b, release := p.Place("r")
				defer release()
				if i := b.(*placedRun).w.index; slicesContains(tt.wantOff, i) {
					t.Errorf("a run placed on GPU %d, which is down, beside GPUs that are up", i)
				}
			}
		})
	}
}

func slicesContains(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestPoolSpreadsRuns places two runs together: they go to different GPUs,
// both GPUs show busy with their run, and the two finish in about the
// time of one.
func TestPoolSpreadsRuns(t *testing.T) {
	rng := newRand(t)
	p := openFakePool(t, 2, nil)
	a, releaseA := p.Place("run-a")
	defer releaseA()
	b, releaseB := p.Place("run-b")
	defer releaseB()
	ga, gb := a.(*placedRun).w.index, b.(*placedRun).w.index
	if ga == gb {
		t.Fatalf("both runs placed on GPU %d", ga)
	}
	if !strings.HasSuffix(a.Device().Name, ", GPU "+itoa(ga)) {
		t.Errorf("placed device %q does not name GPU %d", a.Device().Name, ga)
	}
	start := time.Now()
	var wg sync.WaitGroup
	for _, pb := range []engine.Backend{a, b} {
		run, want := argmaxRun(rng, 4, 50+rng.IntN(200))
		wg.Go(func() {
			out, err := pb.Run(context.Background(), run)
			if err != nil {
				t.Errorf("%s: %v", pb.Device().Name, err)
				return
			}
			for r, w := range want {
				if got := out.Tokens.Int(r); got != w {
					t.Errorf("%s row %d: token %d, want %d", pb.Device().Name, r, got, w)
				}
			}
		})
	}
	busy := waitFor(t, func() bool {
		n := 0
		for _, st := range p.GPUs() {
			if st.State == engine.GPUBusy {
				n++
			}
		}
		return n == 2
	})
	if busy {
		for _, st := range p.GPUs() {
			want := map[int]string{ga: "run-a", gb: "run-b"}[st.Index]
			if st.Run != want || st.Runs != 1 {
				t.Errorf("GPU %d: run %q, %d placed; want %q, 1", st.Index, st.Run, st.Runs, want)
			}
		}
	} else {
		t.Errorf("the two GPUs were never busy together: %+v", p.GPUs())
	}
	wg.Wait()
	if d := time.Since(start); d > 2*fakeRunDelay-fakeRunDelay/4 {
		t.Errorf("two runs on two GPUs took %v; one takes %v, so they did not overlap", d, fakeRunDelay)
	}
	for _, st := range p.GPUs() {
		if st.State != engine.GPUIdle || st.Served != 1 {
			t.Errorf("GPU %d after: %+v, want idle with 1 served", st.Index, st)
		}
	}
	// With both released, the next run goes to the first GPU again.
	releaseA()
	releaseB()
	if c, release := p.Place("run-c"); c.(*placedRun).w.index != 0 {
		t.Errorf("run placed on GPU %d of two idle ones, want 0", c.(*placedRun).w.index)
		release()
	} else {
		release()
	}
}

// waitFor polls cond for up to the fake run delay.
func waitFor(t *testing.T, cond func() bool) bool {
	t.Helper()
	deadline := time.Now().Add(fakeRunDelay)
	for time.Now().Before(deadline) {
		if cond() {
			return true
		}
		time.Sleep(5 * time.Millisecond)
	}
	return false
}

// TestPoolFaultIsolation plants a fault in one GPU's run while the other
// GPU runs: that run fails with the fault's sentence, only its worker
// restarts (or none, for an error the context survives), and the other's
// run completes intact on the same worker process.
func TestPoolFaultIsolation(t *testing.T) {
	tests := []struct {
		fault     string
		kind      error
		restarted bool
		say       string
	}{
		{"sticky", ErrDeviceFault, true, "illegal memory access"},
		{"crash", ErrCrashed, true, "exit status 3"},
		{"error", ErrKernel, false, "out of memory"},
	}
	for _, tt := range tests {
		t.Run(tt.fault, func(t *testing.T) {
			rng := newRand(t)
			p := openFakePool(t, 2, nil)
			bad, good := p.worker(0), p.worker(1)
			badPID, goodPID := bad.b.workerPID(), good.b.workerPID()
			bad.b.plantFault(tt.fault)
			runBad, _ := argmaxRun(rng, 3, 40)
			runGood, want := argmaxRun(rng, 6, 100+rng.IntN(100))
			var errBad, errGood error
			var outGood *engine.Output
			var wg sync.WaitGroup
			wg.Go(func() { _, errBad = (&placedRun{pool: p, w: bad, label: "bad"}).Run(context.Background(), runBad) })
			wg.Go(func() {
				outGood, errGood = (&placedRun{pool: p, w: good, label: "good"}).Run(context.Background(), runGood)
			})
			wg.Wait()
			if !errors.Is(errBad, tt.kind) || !strings.Contains(errBad.Error(), tt.say) {
				t.Fatalf("faulted run: %v, want %v saying %q", errBad, tt.kind, tt.say)
			}
			if errGood != nil {
				t.Fatalf("the other GPU's run: %v", errGood)
			}
			for r, w := range want {
				if got := outGood.Tokens.Int(r); got != w {
					t.Errorf("the other GPU's row %d: token %d, want %d", r, got, w)
				}
			}
			if pid := good.b.workerPID(); pid != goodPID {
				t.Errorf("the other GPU's worker changed: pid %d -> %d", goodPID, pid)
			}
			states := p.GPUs()
			restarts := map[bool]int{true: 1, false: 0}[tt.restarted]
			if st := states[0]; st.Restarts != restarts || tt.restarted && (!strings.Contains(st.Fault, tt.say) || st.FaultAt.IsZero()) {
				t.Errorf("faulted GPU: %+v, want %d restarts and a fault saying %q", st, restarts, tt.say)
			}
			if st := states[1]; st.Restarts != 0 || st.Fault != "" {
				t.Errorf("the other GPU: %+v, want no restart and no fault", st)
			}
			// The faulted GPU serves its next run (on a new worker when restarted).
			checkArgmax(t, bad.b, rng)
			if pid := bad.b.workerPID(); (pid != badPID) != tt.restarted {
				t.Errorf("faulted GPU's worker pid %d -> %d; restarted %v", badPID, pid, tt.restarted)
			}
		})
	}
}

// TestPoolThroughSession is the product path on two fake GPUs: two jobs
// executed together by one session run on different GPUs, and a fault
// planted on GPU 0 fails its job with the fault's sentence while GPU 1's
// job is judged and passes.
func TestPoolThroughSession(t *testing.T) {
	rng := newRand(t)
	p := openFakePool(t, 2, nil)
	s := session.New(p)
	p.worker(0).b.plantFault("sticky")
	runA, _ := argmaxRun(rng, 4, 64)
	runB, _ := argmaxRun(rng, 4, 64)
	var repA, repB *engine.Report
	var errA, errB error
	var wg sync.WaitGroup
	wg.Go(func() { repA, errA = s.Execute(context.Background(), session.Job{Run: runA, Label: "a"}, nil) })
	// Placed second, b goes to GPU 1 whichever job reaches Place first
	// only if a holds GPU 0: wait until it does.
	if !waitFor(t, func() bool { return p.GPUs()[0].Runs == 1 }) {
		t.Fatalf("job a was never placed: %+v", p.GPUs())
	}
	wg.Go(func() { repB, errB = s.Execute(context.Background(), session.Job{Run: runB, Label: "b"}, nil) })
	wg.Wait()
	if errA == nil || !errors.Is(errA, ErrDeviceFault) || !strings.Contains(errA.Error(), "the cuda backend failed") {
		t.Errorf("job on the faulted GPU: report %v, error %v; want the cuda backend's device fault", repA != nil, errA)
	}
	if errB != nil {
		t.Fatalf("job on the other GPU: %v", errB)
	}
	if !repB.Pass || repB.Device == nil || !strings.HasSuffix(repB.Device.Name, ", GPU 1") {
		t.Errorf("job on the other GPU: pass %v, device %+v; want a pass on GPU 1", repB.Pass, repB.Device)
	}
	gpus := s.GPUs()
	if len(gpus) != 2 || gpus[0].Restarts != 1 || gpus[1].Restarts != 0 {
		t.Errorf("session's GPUs after the fault: %+v; want GPU 0 restarted once, GPU 1 never", gpus)
	}
}

// TestPoolAvoidsDownGPU makes GPU 0's worker unable to start again after a
// crash: GPU 0 shows down with the reason, its run fails as unavailable,
// and the next run is placed on GPU 1 though both have none placed.
func TestPoolAvoidsDownGPU(t *testing.T) {
	rng := newRand(t)
	p := openFakePool(t, 2, nil)
	w0 := p.worker(0)
	if err := w0.b.injectFault(context.Background(), "crash", 5*time.Second); !errors.Is(err, ErrCrashed) {
		t.Fatalf("crash: %v", err)
	}
	w0.b.opts.Command = []string{"/nonexistent/sampviz-worker"}
	run, _ := argmaxRun(rng, 2, 20)
	_, err := (&placedRun{pool: p, w: w0}).Run(context.Background(), run)
	if !errors.Is(err, engine.ErrUnavailable) {
		t.Fatalf("run on a GPU whose worker cannot start: %v, want ErrUnavailable", err)
	}
	st := p.GPUs()[0]
	if st.State != engine.GPUDown || !strings.Contains(st.Fault, "/nonexistent/sampviz-worker") || st.Restarts != 1 {
		t.Errorf("GPU 0: %+v, want down, saying which worker did not start, 1 restart", st)
	}
	b, release := p.Place("next")
	defer release()
	if got := b.(*placedRun).w.index; got != 1 {
		t.Errorf("run placed on GPU %d, want 1 (GPU 0 is down)", got)
	}
}

// TestPoolCountsDraws checks that a pool, and a run placed on one of its
// GPUs, count a sample run's draws as the Backend they drive does: the
// session sizes our outputs and the draws default by engine.DrawCounter,
// and serve's cuda backend is always a pool.
func TestPoolCountsDraws(t *testing.T) {
	tests := []struct {
		name string
		b    engine.Backend
	}{
		{"backend", &Backend{}},
		{"pool", &Pool{}},
		{"placed run", &placedRun{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			run := &engine.Run{Op: engine.OpSample}
			run.SetWorkDefaults(engine.Overrides{})
			run.SetBackendDefaults(engine.Overrides{}, tt.b)
			if run.Params.Draws != engine.DefaultCountedDraws || !run.BackendDraws {
				t.Errorf("draws default %d (backend's %v), want %d, the backend's", run.Params.Draws, run.BackendDraws, engine.DefaultCountedDraws)
			}
			if !engine.CountsDraws(tt.b, run) {
				t.Errorf("CountsDraws = false, want true")
			}
		})
	}
}

// TestPlacedRunEndsIdle ends a placed run every way it can end: each time
// the GPU reads idle again, with the run counted served and its turn free
// (a second run on it does not wait), a panic in the backend included.
func TestPlacedRunEndsIdle(t *testing.T) {
	rng := newRand(t)
	p := openFakePool(t, 2, nil)
	run, _ := argmaxRun(rng, 2, 30)
	tests := []struct {
		name      string
		run       *engine.Run
		wantPanic bool
		wantErr   bool
	}{
		{"ok", run, false, false},
		{"unsupported", &engine.Run{Op: engine.OpSoftmax}, false, true},
		// A nil run panics in the backend (it reads run.Op): the server
		// recovers from such panics and goes on, so the GPU must not read
		// busy for good.
		{"panic", nil, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := p.worker(1)
			before := p.GPUs()[1].Served
			var err error
			panicked := func() (panicked bool) {
				defer func() { panicked = recover() != nil }()
				_, err = (&placedRun{pool: p, w: w, label: tt.name}).Run(context.Background(), tt.run)
				return false
			}()
			if panicked != tt.wantPanic || (err != nil) != tt.wantErr {
				t.Fatalf("panicked %v, error %v; want panic %v, error %v", panicked, err, tt.wantPanic, tt.wantErr)
			}
			st := p.GPUs()[1]
			if st.State != engine.GPUIdle || st.Run != "" || st.Served != before+1 {
				t.Errorf("GPU 1 after the run: %+v; want idle, no run, %d served", st, before+1)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if _, err := (&placedRun{pool: p, w: w, label: "next"}).Run(ctx, run); err != nil {
				t.Errorf("the next run on GPU 1: %v (its turn was not given back?)", err)
			}
		})
	}
}

// TestPoolRetriesDownGPU opens a pool whose GPU 1 cannot start its worker.
// Runs placed before the cool-down go to GPU 0 and leave GPU 1 alone; the
// first placed after it starts GPU 1's worker in the background: a GPU
// mended since comes up and takes the next run beside GPU 0, one still
// broken stays down, its failure dated anew.
func TestPoolRetriesDownGPU(t *testing.T) {
	const coolDown = 300 * time.Millisecond
	tests := []struct {
		name    string
		mended  bool
		wantUp  bool
		wantRun int // where a second run at once goes
	}{
		{"mended", true, true, 1},
		{"still broken", false, false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rng := newRand(t)
			opts := testOptions(os.Args[0], fakeEnv+"=1", fakeGPUsEnv+"=2", fakeDownEnv+"=1")
			p, err := OpenPool(context.Background(), opts, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			setRetry := func(d time.Duration) {
				p.mu.Lock()
				p.retryAfter = d
				p.mu.Unlock()
			}
			w1 := p.worker(1)
			firstDown, _ := w1.b.health.downSince()

			// Before the cool-down (an hour, so that a slow machine does
			// not pass it): no start is tried.
			setRetry(time.Hour)
			b, release := p.Place("early")
			if i := b.(*placedRun).w.index; i != 0 {
				t.Errorf("early run placed on GPU %d, want 0", i)
			}
			release()
			time.Sleep(100 * time.Millisecond)
			if at, down := w1.b.health.downSince(); !down || !at.Equal(firstDown) {
				t.Fatalf("GPU 1 before the cool-down: down %v since %v; want down since %v, not tried again", down, at, firstDown)
			}

			if tt.mended {
				w1.b.mu.Lock()
				w1.b.opts.Env = slices.DeleteFunc(slices.Clone(w1.b.opts.Env), func(e string) bool { return strings.HasPrefix(e, fakeDownEnv+"=") })
				w1.b.mu.Unlock()
			}
			setRetry(coolDown)
			time.Sleep(coolDown)
			b, release = p.Place("after")
			if i := b.(*placedRun).w.index; i != 0 {
				t.Errorf("the run that set off the retry placed on GPU %d, want 0 (GPU 1 was still down)", i)
			}
			run, want := argmaxRun(rng, 3, 40)
			out, err := b.Run(context.Background(), run)
			if err != nil {
				t.Fatalf("run on GPU 0: %v", err)
			}
			for r, w := range want {
				if got := out.Tokens.Int(r); got != w {
					t.Errorf("row %d: token %d, want %d", r, got, w)
				}
			}
			// The background start ends, one way or the other.
			deadline := time.Now().Add(10 * time.Second)
			for {
				p.mu.Lock()
				busy := w1.retry
				p.mu.Unlock()
				if !busy || time.Now().After(deadline) {
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
			st := p.GPUs()[1]
			if up := st.State != engine.GPUDown; up != tt.wantUp {
				t.Fatalf("GPU 1 after its retry: %+v; want up %v", st, tt.wantUp)
			}
			if at, down := w1.b.health.downSince(); down && !at.After(firstDown) {
				t.Errorf("GPU 1 still down since %v, its first failure: the retry was not tried", at)
			}
			// With GPU 0 holding a run, the next goes to GPU 1 when it is up.
			c, releaseC := p.Place("next")
			defer releaseC()
			if i := c.(*placedRun).w.index; i != tt.wantRun {
				t.Errorf("a run beside GPU 0's placed on GPU %d, want %d", i, tt.wantRun)
			}
			release()
			if tt.wantUp {
				checkArgmax(t, w1.b, rng)
			}
		})
	}
}
