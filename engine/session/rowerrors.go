package session

import (
	"math"
	"runtime"
	"sync"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/compare"
	"github.com/sampviz/sampviz/engine/ref"
)

// RowErrors summarises one row's elementwise errors against the reference
// the row is judged by (strict, or native when the row matched native).
type RowErrors struct {
	// Hist counts tokens by |output - reference|: bin 0 holds exact matches,
	// bin i (1..HistBins-1) holds errors in [HistEdge(i), HistEdge(i+1)),
	// and the last bin also holds larger and non-finite errors.
	Hist [HistBins]int `json:"hist"`
	// Buckets holds, for each of up to HeatBuckets equal slices of the
	// vocabulary, the worst error divided by the error the tolerance allows
	// at that token (above 1 breaks the tolerance; +Inf for NaN or Inf).
	Buckets []engine.Float `json:"buckets"`
	// Token is the token where error/allowed is greatest, Worst its error
	// and Allowed what the tolerance allows there: Worst > Allowed exactly
	// when the row breaks the tolerance against this reference.
	Token   int          `json:"token"`
	Worst   engine.Float `json:"worst"`
	Allowed engine.Float `json:"allowed"`
}

// HistBins is the number of bins of RowErrors.Hist.
const HistBins = 26

// HeatBuckets is the number of vocabulary buckets of RowErrors.Buckets.
const HeatBuckets = 40

// HistEdge returns the lower edge of histogram bin i >= 1: bins are half a
// decade wide from 1e-12 up, so bin 25 starts at 1e0.
func HistEdge(i int) float64 { return math.Pow(10, -12+float64(i-1)/2) }

// HistBin returns the bin of an absolute error e.
func HistBin(e float64) int {
	switch {
	case e == 0:
		return 0
	case math.IsNaN(e) || e >= 1:
		return HistBins - 1
	case e < HistEdge(1):
		return 1
	}
	b := 1 + int(math.Floor(2*(math.Log10(e)+12)))
	if b > HistBins-1 {
		b = HistBins - 1
	}
	return b
}

// errorWorkers compute the error summaries of probability rows on every
// core while the judge goes on, and hand each judged row to the sink, one
// at a time.
type errorWorkers struct {
	run    *engine.Run
	outs   []*engine.Output
	tols   []engine.Tolerances
	renorm bool
	sink   Sink
	sinkMu sync.Mutex
	jobs   chan rowJob
	wg     sync.WaitGroup
	dists  distCache
}

// distKey names one row's reference distribution.
type distKey struct {
	row    int
	native bool
	eps    float64
}

// distCache keeps the last few rows' references, so that the outputs of one
// row (ours and the dump's, judged one after the other) share one
// computation, even on different workers.
type distCache struct {
	mu      sync.Mutex
	entries []*distEntry
}

type distEntry struct {
	key   distKey
	ready chan struct{}
	d     ref.Dist
}

// distCacheSize bounds the cache: the strict and native references of the
// row each worker is on, and of one row more. Each holds a few float64s per
// token, so the bound is what the server's memory budget counts
// (budget.go).
func distCacheSize() int { return 2*runtime.GOMAXPROCS(0) + 2 }

// get returns the distribution of key, computing it with compute unless
// another worker has or is computing it. The result must not be changed.
func (c *distCache) get(key distKey, compute func(*ref.Dist)) *ref.Dist {
	c.mu.Lock()
	for _, e := range c.entries {
		if e.key == key {
			c.mu.Unlock()
			<-e.ready
			return &e.d
		}
	}
	e := &distEntry{key: key, ready: make(chan struct{})}
	c.entries = append(c.entries, e)
	if len(c.entries) > distCacheSize() {
		c.entries = c.entries[1:] // readers of the oldest keep their pointer
	}
	c.mu.Unlock()
	compute(&e.d)
	close(e.ready)
	return &e.d
}

type rowJob struct {
	out int
	rep engine.RowReport
}

func newErrorWorkers(run *engine.Run, outs []*engine.Output, o compare.Options, sink Sink) *errorWorkers {
	ew := &errorWorkers{run: run, outs: outs, sink: sink, renorm: run.Op != engine.OpSoftmax, jobs: make(chan rowJob, 64)}
	for _, out := range outs {
		dt := engine.F32
		if out.Probs != nil {
			dt = out.Probs.DType
		}
		ew.tols = append(ew.tols, compare.TolerancesFor(run.InputDType(), dt, o))
	}
	n := runtime.GOMAXPROCS(0)
	for i := 0; i < n; i++ {
		ew.wg.Add(1)
		go ew.work()
	}
	return ew
}

// submit is compare.Judge's onRow.
func (ew *errorWorkers) submit(out int, rep engine.RowReport) {
	ew.jobs <- rowJob{out, rep}
}

func (ew *errorWorkers) close() {
	close(ew.jobs)
	ew.wg.Wait()
}

func (ew *errorWorkers) work() {
	defer ew.wg.Done()
	var ws ref.Workspace
	var vals []float64
	for j := range ew.jobs {
		u := RowUpdate{Output: j.out, Report: j.rep}
		o := ew.outs[j.out]
		if o.Probs != nil && ew.run.Logits != nil && (j.rep.Strict != nil || j.rep.Native != nil) {
			native := j.rep.Matched == "native"
			tol := ew.tols[j.out].Strict
			if native {
				tol = ew.tols[j.out].Native
			}
			eps := ref.BoundaryEps(ew.tols[j.out].Strict.Rtol)
			f := ref.NoFilter()
			if ew.renorm {
				f = ref.RowFilter(ew.run, j.rep.Row, eps)
			}
			d := ew.dists.get(distKey{j.rep.Row, native, eps}, func(d *ref.Dist) {
				ws.Compute(d, ref.RowLogits(ew.run, j.rep.Row), ref.Temperature(ew.run, j.rep.Row), f, native)
			})
			if d.Valid() {
				v := ew.run.Vocab()
				if cap(vals) < v {
					vals = make([]float64, v)
				}
				vals = vals[:v]
				o.Probs.Floats64(j.rep.Row*v, vals)
				u.Errors = measureRow(vals, d.Probs, tol)
			}
		}
		ew.sinkMu.Lock()
		ew.sink.Row(u)
		ew.sinkMu.Unlock()
	}
}

// measureRow summarises one row's errors |out - ref| against tol: the
// histogram of their sizes, the worst error over what tol allows in each
// vocabulary bucket, and the error and allowance at the token where that
// ratio is greatest.
func measureRow(out, refp []float64, tol engine.Tolerance) *RowErrors {
	e := &RowErrors{Buckets: make([]engine.Float, HeatBuckets), Token: -1}
	v := len(out)
	worstRatio := -1.0
	for i := range out {
		diff := out[i] - refp[i]
		if diff < 0 {
			diff = -diff
		}
		allowed := tol.Atol + tol.Rtol*abs(refp[i])
		ratio := diff / allowed
		if diff != diff { // NaN
			ratio = posInf
			diff = posInf
		}
		if allowed == 0 {
			ratio = 0
			if diff > 0 {
				ratio = posInf
			}
		}
		e.Hist[HistBin(diff)]++
		b := i * HeatBuckets / v
		if engine.Float(ratio) > e.Buckets[b] {
			e.Buckets[b] = engine.Float(ratio)
		}
		if ratio > worstRatio {
			worstRatio = ratio
			e.Worst, e.Allowed, e.Token = engine.Float(diff), engine.Float(allowed), i
		}
	}
	return e
}

var posInf = func() float64 { var z float64; return 1 / z }()

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}
