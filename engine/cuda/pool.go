package cuda

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sampviz/sampviz/engine"
)

var (
	_ engine.Backend     = (*Pool)(nil)
	_ io.Closer          = (*Pool)(nil)
	_ engine.DrawCounter = (*Pool)(nil)
	_ engine.DrawCounter = (*placedRun)(nil)
)

// ErrNoGPU is what OpenPool returns, wrapped, for a GPU number the host
// does not have.
var ErrNoGPU = errors.New("no such GPU")

// DownRetry is how long a pool leaves a GPU whose worker could not start
// before it starts that worker again (Pool.Place).
const DownRetry = 30 * time.Second

// Pool is the CUDA backend of a host with several GPUs: one supervised
// worker per GPU (a Backend each, bound to its device by the hello's device
// number), and runs spread across them. Place puts a whole run (its kernels
// and its seed reruns) on the GPU with the fewest runs placed; each GPU
// serves its runs one at a time, in its own queue, so a fault on one GPU
// restarts that GPU's worker only, and the runs of the others go on. A GPU
// whose worker cannot start is down: runs go to the others, and its worker
// is started again in the background (Place). It is safe for concurrent
// use, and must be closed. It never judges and never moves a run from one
// GPU to another.
type Pool struct {
	countsDraws
	workers []*gpuWorker
	reason  string
	// retryAfter is how long a down GPU is left before its worker is
	// started again (DownRetry; shorter in the tests).
	retryAfter time.Duration

	mu sync.Mutex // guards each worker's placed count and retrying

	// ctx ends at Close, and stops the background starts (retries).
	ctx      context.Context
	cancel   context.CancelFunc
	retrying sync.WaitGroup
}

// gpuWorker is one GPU of a pool: its Backend, its turn (one run's kernels
// at a time) and what it is doing.
type gpuWorker struct {
	index int
	b     *Backend
	turn  chan struct{}

	mu      sync.Mutex
	placed  int  // runs placed and not released (guarded by Pool.mu)
	retry   bool // its worker is being started in the background (guarded by Pool.mu)
	busy    bool
	serving string
	served  int64
}

// OpenPool starts one worker per GPU of gpus (CUDA device numbers), or, for
// nil or empty, per GPU the CUDA runtime sees: the first worker (GPU gpus[0], or 0)
// reports the device count (sv_device_count, which honours
// CUDA_VISIBLE_DEVICES; a worker that cannot start on its GPU still
// reports it), and the others start beside each other. opts.Device is
// ignored. A number the host does not have is an error wrapping ErrNoGPU
// that names the GPUs it has. A GPU whose worker does not start is down in
// the pool (GPUs says why); only when no worker starts (or the count of
// GPUs is not known without the first) is it an error, naming each GPU,
// wrapping engine.ErrUnavailable when that is why. On an error no worker
// is left running.
func OpenPool(ctx context.Context, opts Options, gpus []int) (*Pool, error) {
	if len(gpus) == 0 {
		gpus = nil // every GPU, not a pool of none
	}
	first := 0
	if len(gpus) > 0 {
		first = gpus[0]
	}
	opts.Device = first
	b0, err := newBackend(opts)
	if err != nil {
		return nil, fmt.Errorf("GPU %d: %w", first, err)
	}
	err0 := b0.start(ctx)
	count := b0.deviceCount
	if err0 != nil {
		if count < 1 {
			// Without the count, the others cannot be told from GPUs the
			// host lacks. (A first GPU past the count is refused below.)
			b0.Close()
			return nil, noGPU(ctx, opts, first, err0)
		}
	}
	if gpus == nil {
		if count < 1 {
			// A library without sv_device_count: the GPU that answered.
			count = first + 1
		}
		for i := range count {
			gpus = append(gpus, i)
		}
	}
	for _, g := range gpus {
		if count > 0 && (g < 0 || g >= count) {
			b0.Close()
			return nil, fmt.Errorf("GPU %d: %w: CUDA sees %s on this host", g, ErrNoGPU, countGPUs(count))
		}
	}
	p := &Pool{reason: opts.Reason, workers: make([]*gpuWorker, len(gpus)), retryAfter: DownRetry}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	p.workers[0] = &gpuWorker{index: first, b: b0, turn: make(chan struct{}, 1)}
	errs := make([]error, len(gpus))
	if err0 != nil {
		errs[0] = fmt.Errorf("GPU %d: %w", first, err0)
	}
	for i, g := range gpus[1:] {
		o := opts
		o.Device = g
		b, err := newBackend(o)
		if err != nil {
			p.Close()
			return nil, fmt.Errorf("GPU %d: %w", g, err)
		}
		p.workers[i+1] = &gpuWorker{index: g, b: b, turn: make(chan struct{}, 1)}
	}
	var wg sync.WaitGroup
	for i, w := range p.workers[1:] {
		wg.Go(func() {
			if err := w.b.start(ctx); err != nil {
				errs[i+1] = fmt.Errorf("GPU %d: %w", w.index, err)
			}
		})
	}
	wg.Wait()
	for _, w := range p.workers {
		if !w.b.health.isDown() {
			return p, nil
		}
	}
	p.Close()
	return nil, startErrors(errs)
}

// startErrors are the errors of a pool none of whose workers started, one
// per GPU, said on one line.
type startErrors []error

func (e startErrors) Error() string {
	msgs := make([]string, 0, len(e))
	for _, err := range e {
		if err != nil {
			msgs = append(msgs, err.Error())
		}
	}
	return strings.Join(msgs, "; ")
}

// Unwrap returns each GPU's error, so errors.Is(err,
// engine.ErrUnavailable) works.
func (e startErrors) Unwrap() []error { return e }

// noGPU explains why GPU first did not open: when GPU 0 opens and CUDA
// sees no GPU first, an error wrapping ErrNoGPU that says how many there
// are; else err, naming GPU first.
func noGPU(ctx context.Context, opts Options, first int, err error) error {
	if first > 0 && errors.Is(err, engine.ErrUnavailable) {
		opts.Device = 0
		if b, err0 := Open(ctx, opts); err0 == nil {
			count := b.deviceCount
			b.Close()
			if count > 0 && first >= count {
				return fmt.Errorf("GPU %d: %w: CUDA sees %s on this host", first, ErrNoGPU, countGPUs(count))
			}
		}
	}
	return fmt.Errorf("GPU %d: %w", first, err)
}

// countGPUs says how many GPUs there are and their numbers: "2 GPUs (0
// to 1)".
func countGPUs(n int) string {
	if n == 1 {
		return "1 GPU (0)"
	}
	return fmt.Sprintf("%d GPUs (0 to %d)", n, n-1)
}

// Name returns "cuda".
func (p *Pool) Name() string { return "cuda" }

// Device describes the first GPU whose worker started, named with the
// numbers of all when there are several ("NVIDIA H100 80GB HBM3, GPUs 0,
// 1").
func (p *Pool) Device() engine.Device {
	first := p.workers[0]
	for _, w := range p.workers {
		// Asked of health, not of the backend: a down GPU's backend is
		// locked while its worker is started again.
		if !w.b.health.isDown() {
			first = w
			break
		}
	}
	d := first.b.Device()
	d.Backend = "cuda"
	if len(p.workers) > 1 {
		nums := make([]string, len(p.workers))
		for i, w := range p.workers {
			nums[i] = strconv.Itoa(w.index)
		}
		d.Name += ", GPUs " + strings.Join(nums, ", ")
	}
	return d
}

// SetReason sets what Device().Reason reports.
func (p *Pool) SetReason(reason string) {
	p.reason = reason
	for _, w := range p.workers {
		w.b.SetReason(reason)
	}
}

// Run runs one op on the GPU with the fewest runs placed (Place).
func (p *Pool) Run(ctx context.Context, run *engine.Run) (*engine.Output, error) {
	b, release := p.Place("")
	defer release()
	return b.Run(ctx, run)
}

// Place chooses the GPU that serves a run called label (the server's run
// id, shown in GPUState.Run): the one with the fewest runs placed, the
// lowest number first among equals, and a GPU whose worker could not start
// (down) only when every one is so; then the run starts that GPU's worker
// itself. Each other down GPU whose last failed start is at least
// DownRetry old has its worker started again in the background, so that
// a later run can go there. The returned backend runs every op of that run
// on that GPU; release, called once the run's kernels are done, frees its
// place (calling it again does nothing). Place never waits.
func (p *Pool) Place(label string) (engine.Backend, func()) {
	p.mu.Lock()
	best, bestDown := p.workers[0], p.workers[0].b.health.isDown()
	for _, w := range p.workers[1:] {
		down := w.b.health.isDown()
		if bestDown && !down || down == bestDown && w.placed < best.placed {
			best, bestDown = w, down
		}
	}
	best.placed++
	for _, w := range p.workers {
		if w != best {
			p.retry(w)
		}
	}
	p.mu.Unlock()
	var once sync.Once
	return &placedRun{pool: p, w: best, label: label}, func() {
		once.Do(func() {
			p.mu.Lock()
			best.placed--
			p.mu.Unlock()
		})
	}
}

// GPUs reports each GPU's state, in the pool's order.
func (p *Pool) GPUs() []engine.GPUState {
	out := make([]engine.GPUState, len(p.workers))
	p.mu.Lock()
	for i, w := range p.workers {
		out[i].Runs = w.placed
	}
	p.mu.Unlock()
	for i, w := range p.workers {
		st := &out[i]
		st.Index, st.State = w.index, engine.GPUIdle
		w.mu.Lock()
		if w.busy {
			st.State, st.Run = engine.GPUBusy, w.serving
		}
		st.Served = w.served
		w.mu.Unlock()
		w.b.health.state(st)
	}
	return out
}

// retry starts w's worker again in the background when w is down, its
// last failed start at least retryAfter old, and no start of it is under
// way. p.mu is held.
func (p *Pool) retry(w *gpuWorker) {
	at, down := w.b.health.downSince()
	if !down || w.retry || time.Since(at) < p.retryAfter || p.ctx == nil || p.ctx.Err() != nil {
		return
	}
	w.retry = true
	p.retrying.Go(func() {
		// A failure is recorded in its health: down, from now.
		w.b.start(p.ctx)
		p.mu.Lock()
		w.retry = false
		p.mu.Unlock()
	})
}

// Close stops every worker, and the starts under way.
func (p *Pool) Close() error {
	// Under p.mu, so that no start begins once Close waits for them.
	p.mu.Lock()
	if p.cancel != nil {
		p.cancel()
	}
	p.mu.Unlock()
	p.retrying.Wait()
	var wg sync.WaitGroup
	for _, w := range p.workers {
		if w != nil {
			wg.Go(func() { w.b.Close() })
		}
	}
	wg.Wait()
	return nil
}

// worker returns the pool's worker on GPU index (the tests).
func (p *Pool) worker(index int) *gpuWorker {
	for _, w := range p.workers {
		if w.index == index {
			return w
		}
	}
	return nil
}

// placedRun is a run placed on one GPU of a pool.
type placedRun struct {
	countsDraws
	pool  *Pool
	w     *gpuWorker
	label string
}

// Name returns "cuda".
func (r *placedRun) Name() string { return "cuda" }

// Device describes the run's GPU, its number in the name when the pool has
// several ("NVIDIA H100 80GB HBM3, GPU 1").
func (r *placedRun) Device() engine.Device {
	d := r.w.b.Device()
	if len(r.pool.workers) > 1 {
		d.Name += ", GPU " + strconv.Itoa(r.w.index)
	}
	return d
}

// Run waits for the GPU's turn (or ctx's end) and runs the op on it.
func (r *placedRun) Run(ctx context.Context, run *engine.Run) (*engine.Output, error) {
	w := r.w
	select {
	case w.turn <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-w.turn }()
	w.mu.Lock()
	w.busy, w.serving = true, r.label
	w.mu.Unlock()
	// However the run ends, a panic included (the server recovers and
	// goes on), the GPU stops reading busy.
	defer func() {
		w.mu.Lock()
		w.busy, w.serving = false, ""
		w.served++
		w.mu.Unlock()
	}()
	return w.b.Run(ctx, run)
}
