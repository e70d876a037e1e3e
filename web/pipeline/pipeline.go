// Package pipeline is the web server's real Runner: it reads dumps with
// engine/dump, runs a backend's kernels, stores the backend's outputs (and
// the speculative trace) next to the dump so that they can be judged again
// with other tolerances, judges every output with engine/compare, and
// computes from engine/ref what the pages draw (per-row error histograms and
// heatmap buckets, one row in full: its distributions, its sample histogram,
// its speculative laws and trace). The teaching mode's steps run here too,
// on engine/cpu's own pieces (teach.go).
//
// It never decides a verdict itself (engine/compare does) and never speaks
// HTTP (web does).
package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"sort"
	"strings"
	"sync"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/compare"
	"github.com/sampviz/sampviz/engine/dump"
	"github.com/sampviz/sampviz/engine/ref"
	"github.com/sampviz/sampviz/web"
	"github.com/sampviz/sampviz/web/store"
)

// Pipeline runs dumps on a set of backends. Its methods are safe for
// concurrent use, though the web server calls Execute and Rejudge one at a
// time.
type Pipeline struct {
	backends []engine.Backend
	// Workers is the number of rows judged at once (0: every core).
	Workers int
}

var _ web.Runner = (*Pipeline)(nil)

// New returns a pipeline over backends, the default first.
func New(backends ...engine.Backend) *Pipeline {
	return &Pipeline{backends: backends}
}

// Backends implements web.Runner.
func (p *Pipeline) Backends() []engine.Device {
	ds := make([]engine.Device, len(p.backends))
	for i, b := range p.backends {
		ds[i] = b.Device()
	}
	return ds
}

func (p *Pipeline) backend(name string) (engine.Backend, error) {
	var names []string
	for _, b := range p.backends {
		if b.Name() == name {
			return b, nil
		}
		names = append(names, b.Name())
	}
	return nil, fmt.Errorf("this server has no %s backend (it has %s)", name, strings.Join(names, ", "))
}

// load opens a stored dump and builds its run with the job's parameters,
// naming the file as its uploader did in every message.
func load(path, name string, o engine.Overrides) (*engine.Run, *dump.File, error) {
	run, f, err := dump.Load(path, o)
	if err != nil {
		var de *dump.Error
		if errors.As(err, &de) {
			de.File = name
			return nil, nil, &web.BadDumpError{Err: de}
		}
		return nil, nil, fmt.Errorf("load %s: %w", name, err)
	}
	run.Source = name
	return run, f, nil
}

// Inspect implements web.Runner: the dump must parse and build a run.
func (p *Pipeline) Inspect(ctx context.Context, path, name string) (*web.DumpInfo, error) {
	run, f, err := load(path, name, engine.Overrides{})
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info := &web.DumpInfo{
		Op: run.Op, DType: run.InputDType(), Rows: run.Rows(), Vocab: run.Vocab(), External: []string{},
		Source: run.Meta["source"], Notices: append(append([]string(nil), f.Notices...), run.Notices...),
	}
	switch {
	case run.Logits != nil:
		info.Input, info.Shape = "logits", run.Logits.Shape
	case run.TargetLogits != nil:
		info.Input, info.Shape = "target_logits", run.TargetLogits.Shape
	case run.PreIDs != nil:
		info.Input, info.Shape = "pre_ids", run.PreIDs.Shape
	}
	for name := range run.External {
		info.External = append(info.External, name)
	}
	sort.Strings(info.External)
	return info, nil
}

func options(tol *engine.Tolerances) compare.Options {
	if tol == nil {
		return compare.Options{}
	}
	s, n := tol.Strict, tol.Native
	return compare.Options{Strict: &s, Native: &n, PValue: tol.PValue}
}

// Execute implements web.Runner.
func (p *Pipeline) Execute(ctx context.Context, job web.Job, sink web.RowSink) (*engine.Report, error) {
	b, err := p.backend(job.Backend)
	if err != nil {
		return nil, err
	}
	ov := job.Params.Overrides()
	run, f, err := load(job.DumpPath, job.FileName, ov)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	run.SetWorkDefaults(ov)
	out, err := b.Run(ctx, run)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if errors.Is(err, engine.ErrUnsupported) {
			return nil, fmt.Errorf("the %s backend cannot run this dump: %w", b.Name(), err)
		}
		return nil, fmt.Errorf("the %s backend failed: %w", b.Name(), err)
	}
	out.Name, out.External = b.Name(), false
	d := b.Device()
	if err := writeOutputs(job.OutputsPath, out, d); err != nil {
		return nil, err
	}
	rep, err := p.judge(ctx, run, out, job, sink)
	if err != nil {
		return nil, err
	}
	rep.Device = &d
	return rep, nil
}

// Rejudge implements web.Runner.
func (p *Pipeline) Rejudge(ctx context.Context, job web.Job, sink web.RowSink) (*engine.Report, error) {
	run, f, err := load(job.DumpPath, job.FileName, job.Params.Overrides())
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out, of, dev, err := readOutputs(job.OutputsPath)
	if err != nil {
		return nil, err
	}
	defer of.Close()
	rep, err := p.judge(ctx, run, out, job, sink)
	if err != nil {
		return nil, err
	}
	rep.Device = dev
	return rep, nil
}

// judge judges ours and the dump's outputs, streaming each row into sink
// with its error summary (computed beside the judge, on every core).
func (p *Pipeline) judge(ctx context.Context, run *engine.Run, ours *engine.Output, job web.Job, sink web.RowSink) (*engine.Report, error) {
	outs := append([]*engine.Output{ours}, compare.ExternalOutputs(run)...)
	opts := options(job.Tolerances)
	opts.Workers = p.Workers
	ew := newErrorWorkers(run, outs, opts, sink)
	infos := make([]web.OutputInfo, len(outs))
	for i, o := range outs {
		tol := ew.tols[i]
		infos[i] = web.OutputInfo{Name: o.Name, External: o.External, Kind: outputKind(o), Tolerances: &tol}
	}
	sink.Outputs(infos)
	rep, err := compare.Judge(ctx, run, outs, opts, ew.submit)
	ew.close()
	if err != nil {
		return nil, err
	}
	return rep, nil
}

// outputKind is what compare judges of an output, in its order of priority.
func outputKind(o *engine.Output) string {
	switch {
	case o.Probs != nil:
		return "probs"
	case o.SpecTokens != nil || o.SpecTrials != nil:
		return "spec"
	case o.Samples != nil:
		return "samples"
	case o.Tokens != nil:
		return "tokens"
	case o.DraftOut != nil:
		return "draft"
	}
	return ""
}

// outputTensors names the tensors of an Output as DUMPS.md names them.
func outputTensors(o *engine.Output) []*engine.Tensor {
	var ts []*engine.Tensor
	add := func(name string, t *engine.Tensor) {
		if t != nil {
			ts = append(ts, &engine.Tensor{Name: name, DType: t.DType, Shape: t.Shape, Data: t.Data})
		}
	}
	add("probs", o.Probs)
	add("tokens", o.Tokens)
	add("samples", o.Samples)
	add("spec_tokens", o.SpecTokens)
	add("spec_emitted", o.SpecEmitted)
	add("spec_accepted", o.SpecAccepted)
	add("spec_trials", o.SpecTrials)
	add("draft_out", o.DraftOut)
	return ts
}

// outputsMeta is what outputs.safetensors records beside the tensors.
type outputsMeta struct {
	Backend string         `json:"backend"`
	Device  engine.Device  `json:"device"`
	Timing  *engine.Timing `json:"timing,omitempty"`
}

// writeOutputs stores our output as safetensors (temp file, then rename),
// with the speculative trace beside it (trace.go) for the row page.
func writeOutputs(path string, o *engine.Output, d engine.Device) error {
	meta, err := json.Marshal(outputsMeta{Backend: o.Name, Device: d, Timing: o.Timing})
	if err != nil {
		return fmt.Errorf("store outputs: %w", err)
	}
	ts := append(outputTensors(o), traceTensors(o.Trace)...)
	return store.WriteFile(path, func(w io.Writer) error {
		return dump.WriteSafetensors(w, ts, map[string]string{"sampviz_outputs": string(meta)})
	})
}

// readOutputs reads what writeOutputs stored. The returned File must be
// closed once the Output is no longer used.
func readOutputs(path string) (*engine.Output, *dump.File, *engine.Device, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, nil, nil, web.ErrNoOutputs
	}
	f, err := dump.Open(path)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("read stored outputs: %w", err)
	}
	var meta outputsMeta
	if err := json.Unmarshal([]byte(f.Meta["sampviz_outputs"]), &meta); err != nil {
		f.Close()
		return nil, nil, nil, fmt.Errorf("read stored outputs: %w", err)
	}
	o := &engine.Output{
		Name: meta.Backend, Timing: meta.Timing,
		Probs: f.Tensor("probs"), Tokens: f.Tensor("tokens"), Samples: f.Tensor("samples"),
		SpecTokens: f.Tensor("spec_tokens"), SpecEmitted: f.Tensor("spec_emitted"), SpecAccepted: f.Tensor("spec_accepted"),
		SpecTrials: f.Tensor("spec_trials"), DraftOut: f.Tensor("draft_out"),
	}
	var dev *engine.Device
	if meta.Device.Backend != "" {
		dev = &meta.Device
	}
	return o, f, dev, nil
}

// errorWorkers compute the error summaries of probability rows on every
// core while the judge goes on, and hand each judged row to the sink, one
// at a time.
type errorWorkers struct {
	run    *engine.Run
	outs   []*engine.Output
	tols   []engine.Tolerances
	renorm bool
	sink   web.RowSink
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

// distCacheSize bounds the cache: a few rows per worker.
const distCacheSize = 16

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
	if len(c.entries) > distCacheSize {
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

func newErrorWorkers(run *engine.Run, outs []*engine.Output, o compare.Options, sink web.RowSink) *errorWorkers {
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
		u := web.RowUpdate{Output: j.out, Report: j.rep}
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
				u.Errors = RowErrors(vals, d.Probs, tol)
			}
		}
		ew.sinkMu.Lock()
		ew.sink.Row(u)
		ew.sinkMu.Unlock()
	}
}

// RowErrors summarises one row's errors |out - ref| against tol: the
// histogram of their sizes, the worst error over what tol allows in each
// vocabulary bucket, and the error and allowance at the token where that
// ratio is greatest.
func RowErrors(out, refp []float64, tol engine.Tolerance) *web.RowErrors {
	e := &web.RowErrors{Buckets: make([]engine.Float, web.HeatBuckets), Token: -1}
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
		e.Hist[web.HistBin(diff)]++
		b := i * web.HeatBuckets / v
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
