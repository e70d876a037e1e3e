package cpu

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sampviz/sampviz/engine"
)

var _ engine.Backend = (*Backend)(nil)

// Backend runs every op on the CPU in the kernels' precision, rows in
// parallel. It is safe for concurrent use.
type Backend struct {
	workers int
	device  engine.Device
}

// New returns a Backend that runs rows on GOMAXPROCS goroutines.
func New() *Backend {
	return &Backend{
		workers: runtime.GOMAXPROCS(0),
		device: engine.Device{
			Backend: "cpu",
			Name:    fmt.Sprintf("%s (%d cores)", cpuModel(), runtime.NumCPU()),
		},
	}
}

// cpuModel returns the "model name" of /proc/cpuinfo, or GOARCH when it
// cannot be read.
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		key, value, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(key) == "model name" {
			if v := strings.TrimSpace(value); v != "" {
				return v
			}
		}
	}
	return runtime.GOARCH
}

// Name returns "cpu".
func (b *Backend) Name() string { return "cpu" }

// Device describes the CPU: its model and core count.
func (b *Backend) Device() engine.Device { return b.device }

// Run executes run.Op the way the kernels do (docs/SEMANTICS.md "Kernel
// semantics") and returns an Output named "cpu" with Timing set: Kernel and
// Wall are the compute time, Bytes what an ideal kernel moves (inputs read
// once, outputs written once). It returns an error wrapping
// engine.ErrUnsupported for an unknown op or sampling method or a missing or
// malformed input tensor, a plain error for out-of-range parameters or token
// ids, and ctx.Err() when ctx ends first. It never writes to run's tensors.
func (b *Backend) Run(ctx context.Context, run *engine.Run) (*engine.Output, error) {
	start := time.Now()
	op := ops[run.Op]
	if op == nil {
		return nil, fmt.Errorf("op %q: %w", run.Op, engine.ErrUnsupported)
	}
	out, bytes, err := op(b, ctx, run)
	if err != nil {
		return nil, err
	}
	elapsed := time.Since(start)
	out.Name = "cpu"
	out.Timing = &engine.Timing{Kernel: elapsed, Wall: elapsed, Bytes: bytes}
	return out, nil
}

// ops are the CPU twins of the op table's ops (engine.OpSpec), one file
// each: argmax.go, softmax.go, renorm.go, sample.go, spec_verify.go,
// spec_tree_verify.go, ngram.go. Each returns its output and the bytes an ideal kernel moves.
var ops = map[engine.Op]func(b *Backend, ctx context.Context, run *engine.Run) (*engine.Output, int64, error){
	engine.OpArgmax:         (*Backend).argmax,
	engine.OpSoftmax:        (*Backend).softmax,
	engine.OpRenorm:         (*Backend).renorm,
	engine.OpSample:         (*Backend).sample,
	engine.OpSpecVerify:     (*Backend).specVerify,
	engine.OpSpecTreeVerify: (*Backend).specTreeVerify,
	engine.OpNgramMatch:     (*Backend).ngramMatch,
}

// scratch is one worker's reusable row buffers.
type scratch struct {
	x, w, p   []float32
	w1        []float32 // weights at temperature 1 (temperature_order last)
	keep      []bool
	filter    filter
	rejection rejection
	cdf       CDF
}

// floats returns buf resized to n, reallocated only when too small.
func floats(buf *[]float32, n int) []float32 {
	if cap(*buf) < n {
		*buf = make([]float32, n)
	}
	return (*buf)[:n]
}

// bools returns buf resized to n, reallocated only when too small.
func bools(buf *[]bool, n int) []bool {
	if cap(*buf) < n {
		*buf = make([]bool, n)
	}
	return (*buf)[:n]
}

// forEachRow calls work for rows 0..rows-1 on the backend's workers, each
// with its own scratch. It stops at the first error, or when ctx ends, and
// returns that error.
func (b *Backend) forEachRow(ctx context.Context, rows int, work func(s *scratch, r int) error) error {
	var (
		next     atomic.Int64
		stop     atomic.Bool
		once     sync.Once
		firstErr error
		wg       sync.WaitGroup
	)
	fail := func(err error) {
		once.Do(func() { firstErr = err })
		stop.Store(true)
	}
	for range min(max(b.workers, 1), rows) {
		wg.Go(func() {
			s := new(scratch)
			for !stop.Load() {
				r := int(next.Add(1) - 1)
				if r >= rows {
					return
				}
				if err := ctx.Err(); err != nil {
					fail(err)
					return
				}
				if err := work(s, r); err != nil {
					fail(err)
					return
				}
			}
		})
	}
	wg.Wait()
	return firstErr
}

// ctxCheckEvery is how many draws or trials a row makes between checks of
// its context.
const ctxCheckEvery = 1 << 12
