// Package webtest provides a fake web.Runner for the server's tests: a
// struct of function fields, so a test sets only the behaviour it needs, and
// a ready-made fake pipeline (NewPipeline) that judges made-up rows of a tiny
// JSON "dump" with fresh random numbers, and random judged rows
// (RandomUpdate, RandomSpecStats) for the tests of web/live and web/view. It
// never runs a kernel and never computes a real reference: it exercises the
// server, not the engine. It never imports web either (web's tests check that
// Runner fits web.Runner), so the packages below web may use it.
package webtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/diff"
	"github.com/sampviz/sampviz/engine/explain"
	"github.com/sampviz/sampviz/engine/lesson"
	"github.com/sampviz/sampviz/engine/session"
)

// Runner is a web.Runner made of functions; nil functions answer with an
// error (or no backends).
type Runner struct {
	BackendsFunc func() []engine.Device
	InspectFunc  func(ctx context.Context, path, name string) (*session.DumpInfo, error)
	// AdmitFunc is Admit; nil admits what InspectFunc describes.
	AdmitFunc   func(ctx context.Context, job session.Job) (*session.DumpInfo, error)
	ExecuteFunc func(ctx context.Context, job session.Job, sink session.Sink) (*engine.Report, error)
	RejudgeFunc func(ctx context.Context, job session.Job, sink session.Sink) (*engine.Report, error)
	RowFunc     func(ctx context.Context, job session.Job, r, top int) (*explain.RowDetail, error)
	TeachFunc   func(ctx context.Context, job session.Job, r int, l lesson.Lesson) (*lesson.State, error)
	// TeachTreeFunc is TeachTree; the fake pipeline leaves it nil.
	TeachTreeFunc func(ctx context.Context, job session.Job, r int, l lesson.TreeLesson) (*lesson.TreeState, error)
	// TeachSampleFunc is TeachSample; the fake pipeline leaves it nil.
	TeachSampleFunc func(ctx context.Context, job session.Job, r int, l lesson.SampleLesson) (*lesson.SampleState, error)
	DiffFunc        func(ctx context.Context, a, b session.Job) (*diff.Diff, error)
	// GPUsFunc is GPUs; nil reports none.
	GPUsFunc func() []engine.GPUState
}

var errNotSet = errors.New("webtest: function not set")

// Backends implements web.Runner.
func (f *Runner) Backends() []engine.Device {
	if f.BackendsFunc == nil {
		return nil
	}
	return f.BackendsFunc()
}

// GPUs is what the server shows of its GPUs (session.Session.GPUs).
func (f *Runner) GPUs() []engine.GPUState {
	if f.GPUsFunc == nil {
		return nil
	}
	return f.GPUsFunc()
}

// Admit implements web.Runner: AdmitFunc, else Inspect of the job's dump.
func (f *Runner) Admit(ctx context.Context, job session.Job) (*session.DumpInfo, error) {
	if f.AdmitFunc != nil {
		return f.AdmitFunc(ctx, job)
	}
	return f.Inspect(ctx, job.DumpPath, job.FileName)
}

// Inspect implements web.Runner.
func (f *Runner) Inspect(ctx context.Context, path, name string) (*session.DumpInfo, error) {
	if f.InspectFunc == nil {
		return nil, errNotSet
	}
	return f.InspectFunc(ctx, path, name)
}

// Execute implements web.Runner.
func (f *Runner) Execute(ctx context.Context, job session.Job, sink session.Sink) (*engine.Report, error) {
	if f.ExecuteFunc == nil {
		return nil, errNotSet
	}
	return f.ExecuteFunc(ctx, job, sink)
}

// Rejudge implements web.Runner.
func (f *Runner) Rejudge(ctx context.Context, job session.Job, sink session.Sink) (*engine.Report, error) {
	if f.RejudgeFunc == nil {
		return nil, errNotSet
	}
	return f.RejudgeFunc(ctx, job, sink)
}

// Row implements web.Runner.
func (f *Runner) Row(ctx context.Context, job session.Job, r, top int) (*explain.RowDetail, error) {
	if f.RowFunc == nil {
		return nil, errNotSet
	}
	return f.RowFunc(ctx, job, r, top)
}

// Teach implements web.Runner.
func (f *Runner) Teach(ctx context.Context, job session.Job, r int, l lesson.Lesson) (*lesson.State, error) {
	if f.TeachFunc == nil {
		return nil, errNotSet
	}
	return f.TeachFunc(ctx, job, r, l)
}

// TeachTree implements web.Runner.
func (f *Runner) TeachTree(ctx context.Context, job session.Job, r int, l lesson.TreeLesson) (*lesson.TreeState, error) {
	if f.TeachTreeFunc == nil {
		return nil, errNotSet
	}
	return f.TeachTreeFunc(ctx, job, r, l)
}

// TeachSample implements web.Runner.
func (f *Runner) TeachSample(ctx context.Context, job session.Job, r int, l lesson.SampleLesson) (*lesson.SampleState, error) {
	if f.TeachSampleFunc == nil {
		return nil, errNotSet
	}
	return f.TeachSampleFunc(ctx, job, r, l)
}

// Diff implements web.Runner.
func (f *Runner) Diff(ctx context.Context, a, b session.Job) (*diff.Diff, error) {
	if f.DiffFunc == nil {
		return nil, errNotSet
	}
	return f.DiffFunc(ctx, a, b)
}

// Dump is the fake pipeline's dump format: a JSON object. Its bytes are
// what a test uploads.
type Dump struct {
	// Magic must be "sampviz-fake-dump".
	Magic string `json:"magic"`
	Rows  int    `json:"rows"`
	Vocab int    `json:"vocab"`
	// Fail lists the rows where the external output breaks the tolerance.
	Fail []int `json:"fail,omitempty"`
	// Fault, when set, makes the backend fail with this message.
	Fault string `json:"fault,omitempty"`
	// Pad makes the file larger (for size-limit tests).
	Pad string `json:"pad,omitempty"`
	// Op is "" (softmax), "sample" or "spec_verify": what the fake judges.
	// Sample dumps get a samples output judged by made-up goodness of fit,
	// spec_verify dumps a spec output with made-up speculative statistics
	// over K draft positions and a trace of 3 trials; Fail rows fail their
	// statistical test.
	Op string `json:"op,omitempty"`
	K  int    `json:"k,omitempty"`
}

// The fake's statistical outputs: draws per row of a sample dump, trials
// per row of a spec_verify dump, and the traced trials.
const (
	FakeDraws       = 10000
	FakeTrials      = 400
	FakeTraceTrials = 3
)

// Magic is Dump.Magic's value.
const Magic = "sampviz-fake-dump"

// Bytes encodes d as a fake dump file.
func (d Dump) Bytes() []byte {
	d.Magic = Magic
	b, _ := json.Marshal(d)
	return b
}

// Pipeline is the fake pipeline's state that tests read.
type Pipeline struct {
	// RowDelay is slept after each judged row.
	RowDelay time.Duration
	// Gate, when not nil, is received from before a run starts.
	Gate chan struct{}

	mu       sync.Mutex
	executed int
	rejudged int
	diffed   int
}

// Diffed returns how many comparisons Diff made.
func (p *Pipeline) Diffed() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.diffed
}

// Executed returns how many runs Execute finished.
func (p *Pipeline) Executed() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.executed
}

// Rejudged returns how many judgements Rejudge finished.
func (p *Pipeline) Rejudged() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.rejudged
}

// CPU is the fake's only backend.
var CPU = engine.Device{Backend: "cpu", Name: "Fake CPU", Reason: "webtest"}

// DefaultTolerances are what the fake judges with when a job names none.
var DefaultTolerances = engine.Tolerances{
	Strict: engine.Tolerance{Atol: 1e-5, Rtol: 1.3e-6},
	Native: engine.Tolerance{Atol: 1e-5, Rtol: 1.3e-6},
	PValue: 1e-3,
}

// NewPipeline returns a Runner over the Dump format and its state: Inspect
// checks the dump like a parser would; Execute writes an outputs file and
// judges an own "cpu" output (always passing) and an external "probs"
// output (failing on Dump.Fail rows, and everywhere when the tolerances are
// tightened below 1e-9); Row describes a row with random probabilities.
func NewPipeline() (*Runner, *Pipeline) {
	p := &Pipeline{}
	r := &Runner{
		BackendsFunc: func() []engine.Device { return []engine.Device{CPU} },
		InspectFunc:  inspect,
	}
	r.ExecuteFunc = func(ctx context.Context, job session.Job, sink session.Sink) (*engine.Report, error) {
		d, err := readDump(job.DumpPath, job.FileName)
		if err != nil {
			return nil, err
		}
		if p.Gate != nil {
			select {
			case <-p.Gate:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		if d.Fault != "" {
			return nil, errors.New(d.Fault)
		}
		if err := os.MkdirAll(filepath.Dir(job.OutputsPath), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(job.OutputsPath, []byte("fake outputs"), 0o644); err != nil {
			return nil, err
		}
		rep, err := p.judge(ctx, d, job, sink)
		if err == nil {
			p.mu.Lock()
			p.executed++
			p.mu.Unlock()
		}
		return rep, err
	}
	r.RejudgeFunc = func(ctx context.Context, job session.Job, sink session.Sink) (*engine.Report, error) {
		if _, err := os.Stat(job.OutputsPath); err != nil {
			return nil, session.ErrNoOutputs
		}
		d, err := readDump(job.DumpPath, job.FileName)
		if err != nil {
			return nil, err
		}
		rep, err := p.judge(ctx, d, job, sink)
		if err == nil {
			p.mu.Lock()
			p.rejudged++
			p.mu.Unlock()
		}
		return rep, err
	}
	r.RowFunc = func(ctx context.Context, job session.Job, row, top int) (*explain.RowDetail, error) {
		d, err := readDump(job.DumpPath, job.FileName)
		if err != nil {
			return nil, err
		}
		switch d.Op {
		case "sample":
			return sampleRow(d, row, top), nil
		case "spec_verify":
			return specRow(d, row), nil
		}
		return rowDetail(d, row, top), nil
	}
	r.DiffFunc = func(ctx context.Context, a, b session.Job) (*diff.Diff, error) {
		d, err := fakeDiff(a, b)
		if err == nil {
			p.mu.Lock()
			p.diffed++
			p.mu.Unlock()
		}
		return d, err
	}
	r.TeachFunc = func(ctx context.Context, job session.Job, row int, l lesson.Lesson) (*lesson.State, error) {
		d, err := readDump(job.DumpPath, job.FileName)
		if err != nil {
			return nil, err
		}
		if d.Op != "spec_verify" {
			return nil, &lesson.Error{Msg: "The fake teaches only spec_verify dumps."}
		}
		if l.Position < 0 || l.Position >= d.K {
			return nil, &lesson.Error{Msg: fmt.Sprintf("Position %d is not a draft position.", l.Position)}
		}
		return fakeLesson(d, row, l), nil
	}
	return r, p
}

func inspect(ctx context.Context, path, name string) (*session.DumpInfo, error) {
	d, err := readDump(path, name)
	if err != nil {
		return nil, err
	}
	switch d.Op {
	case "sample":
		return &session.DumpInfo{
			Op: engine.OpSample, DType: engine.F32, Input: "logits", Shape: []int{d.Rows, d.Vocab},
			Rows: d.Rows, Vocab: d.Vocab, External: []string{}, Source: "webtest",
		}, nil
	case "spec_verify":
		return &session.DumpInfo{
			Op: engine.OpSpecVerify, DType: engine.F32, Input: "target_logits", Shape: []int{d.Rows, d.K + 1, d.Vocab},
			Rows: d.Rows, Vocab: d.Vocab, External: []string{}, Source: "webtest",
		}, nil
	}
	return &session.DumpInfo{
		Op: engine.OpSoftmax, DType: engine.F32, Input: "logits", Shape: []int{d.Rows, d.Vocab},
		Rows: d.Rows, Vocab: d.Vocab, External: []string{"probs"}, Source: "webtest",
	}, nil
}

// readDump reads and checks a fake dump; what is wrong with it is a
// *session.InputError naming the file, the tensor and the rule.
func readDump(path, name string) (Dump, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Dump{}, err
	}
	if len(b) == 0 {
		return Dump{}, inputError(fmt.Errorf("%s: the file is empty (0 bytes), not a dump (safetensors, .npz, .npy or .pt)", name))
	}
	var d Dump
	if err := json.Unmarshal(b, &d); err != nil {
		var se *json.SyntaxError
		if len(b) > 0 && b[0] == '{' && errors.As(err, &se) && se.Offset >= int64(len(b)) {
			return Dump{}, inputError(fmt.Errorf("%s: truncated: the file ends after %d bytes, inside its header", name, len(b)))
		}
		return Dump{}, inputError(fmt.Errorf("%s: the first 8 bytes give a header length of %d bytes, more than the file holds", name, len(b)*1000))
	}
	if d.Magic != Magic {
		return Dump{}, inputError(fmt.Errorf("%s: tensor \"logits\": missing", name))
	}
	if d.Rows <= 0 || d.Vocab <= 0 {
		return Dump{}, inputError(fmt.Errorf("%s: tensor logits: shape [%d, %d] must have at least one row and one token", name, d.Rows, d.Vocab))
	}
	switch {
	case d.Op != "" && d.Op != "sample" && d.Op != "spec_verify":
		return Dump{}, inputError(fmt.Errorf("%s: metadata \"op\": %q is not one the fake judges", name, d.Op))
	case d.Op == "spec_verify" && (d.K <= 0 || d.K >= d.Vocab):
		return Dump{}, inputError(fmt.Errorf("%s: tensor draft_tokens: %d draft positions for %d tokens", name, d.K, d.Vocab))
	}
	return d, nil
}

// judge makes up a judgement of d with fresh random errors.
func (p *Pipeline) judge(ctx context.Context, d Dump, job session.Job, sink session.Sink) (*engine.Report, error) {
	tol := DefaultTolerances
	if job.Tolerances != nil {
		tol = *job.Tolerances
	}
	if d.Op != "" {
		return p.judgeStats(ctx, d, job, tol, sink)
	}
	outs := []engine.OutputInfo{{Name: "cpu", Kind: "probs"}, {Name: "probs", External: true, Kind: "probs"}}
	sink.Outputs(outs)
	fail := map[int]bool{}
	for _, r := range d.Fail {
		fail[r] = true
	}
	rng := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	rep := &engine.Report{
		Pass: true, Op: engine.OpSoftmax, Source: job.FileName, Rows: d.Rows, Vocab: d.Vocab, DType: engine.F32,
		Device: &CPU, Tolerances: tol,
	}
	for _, info := range outs {
		or := engine.OutputReport{Name: info.Name, External: info.External, Kind: info.Kind, Pass: true}
		if !info.External {
			or.Timing = &engine.Timing{Wall: 3 * time.Millisecond, Bytes: int64(d.Rows * d.Vocab * 8)}
		}
		rep.Outputs = append(rep.Outputs, or)
	}
	// Rows go out row by row, every output of a row before the next row.
	for r := 0; r < d.Rows; r++ {
		for o, info := range outs {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			// Our output is a few float32 ulps off; a failing external row is
			// off by 1e-3 at a random token.
			worst := 1e-7 * (0.5 + rng.Float64())
			token := rng.IntN(d.Vocab)
			ref := 1 / float64(d.Vocab) * (0.5 + rng.Float64())
			if info.External && fail[r] {
				worst = 1e-3 * (1 + rng.Float64())
			}
			allowed := tol.Strict.Atol + tol.Strict.Rtol*ref
			row := engine.RowReport{Row: r, Pass: worst <= allowed, Matched: "strict"}
			if row.Pass {
				row.Violations = []string{}
			} else {
				row.AddFinding(engine.Finding{
					Rule: engine.RuleTolerance, Severity: engine.Violation, Token: token,
					Message: fmt.Sprintf("row %d: 1 of %d probabilities off; greatest absolute difference %s at token %d (allowed %s)", r, d.Vocab, engine.FormatSig(float64(worst), 2), token, engine.FormatSig(float64(allowed), 2)),
				})
				row.Matched = ""
			}
			row.Strict = &engine.Drift{
				Reference: "strict", Tolerance: tol.Strict, Elements: d.Vocab,
				Abs:     engine.ErrorStats{Max: engine.Float(worst), Mean: engine.Float(worst / 10), Index: token},
				MinAtol: engine.Float(math.Max(0, worst-tol.Strict.Rtol*ref)), KL: engine.Float(worst * worst),
			}
			if !row.Pass {
				row.Strict.Mismatched = 1
			}
			errs := &session.RowErrors{Token: token, Worst: engine.Float(worst), Allowed: engine.Float(allowed), Buckets: make([]engine.Float, session.HeatBuckets)}
			for t := 0; t < d.Vocab; t++ {
				e := worst * rng.Float64() / 4
				if t == token {
					e = worst
				}
				errs.Hist[session.HistBin(e)]++
				b := t * session.HeatBuckets / d.Vocab
				if v := engine.Float(e / allowed); v > errs.Buckets[b] {
					errs.Buckets[b] = v
				}
			}
			or := &rep.Outputs[o]
			or.Rows = append(or.Rows, row)
			if !row.Pass {
				or.Pass, rep.Pass = false, false
				or.FailedRows++
			}
			sink.Row(session.RowUpdate{Output: o, Report: row, Errors: errs})
		}
		if p.RowDelay > 0 {
			time.Sleep(p.RowDelay)
		}
	}
	return rep, nil
}

// rowDetail makes up row r's distributions.
func rowDetail(d Dump, r, top int) *explain.RowDetail {
	rng := rand.New(rand.NewPCG(rand.Uint64(), uint64(r)))
	probs := make([]float64, d.Vocab)
	sum := 0.0
	for i := range probs {
		probs[i] = math.Exp(3 * rng.NormFloat64())
		sum += probs[i]
	}
	for i := range probs {
		probs[i] /= sum
	}
	order := make([]int, d.Vocab)
	for i := range order {
		order[i] = i
	}
	// Selection by probability, most probable first.
	for i := 0; i < len(order); i++ {
		for j := i + 1; j < len(order); j++ {
			if probs[order[j]] > probs[order[i]] {
				order[i], order[j] = order[j], order[i]
			}
		}
	}
	det := &explain.RowDetail{
		Row: r, Vocab: d.Vocab, Op: engine.OpSoftmax, Temperature: 1, TopP: 1,
		Probs: []engine.OutputInfo{{Name: "cpu", Kind: "probs"}, {Name: "probs", External: true, Kind: "probs"}},
		Cuts:  explain.Cuts{Kept: d.Vocab},
	}
	failing := false
	for _, f := range d.Fail {
		failing = failing || f == r
	}
	mass := 0.0
	for rank, t := range order {
		mass += probs[t]
		det.CDF = append(det.CDF, explain.CDFPoint{Rank: rank + 1, Mass: engine.Float(mass)})
		if rank >= top {
			continue
		}
		ext := probs[t] * (1 + 1e-7*rng.NormFloat64())
		if failing && rank == 0 {
			ext = probs[t] - 1e-3
		}
		det.Tokens = append(det.Tokens, explain.TokenDetail{
			Token: t, Rank: rank + 1, Base: engine.Float(probs[t]), Ref: engine.Float(probs[t]), Class: "kept",
			Values:  []engine.Float{engine.Float(float32(probs[t])), engine.Float(ext)},
			Allowed: engine.Float(1e-5 + 1.3e-6*probs[t]),
		})
	}
	return det
}

// inputError is a dump the fake cannot use, as the session reports one.
func inputError(err error) *session.InputError {
	return &session.InputError{Msg: err.Error(), Err: err}
}

// fakeDiff compares two fake dumps' external outputs row by row: a row
// fails where its dump lists it in Fail. Dumps of two ops are refused as
// the session refuses them.
func fakeDiff(a, b session.Job) (*diff.Diff, error) {
	da, err := readDump(a.DumpPath, a.FileName)
	if err != nil {
		return nil, err
	}
	db, err := readDump(b.DumpPath, b.FileName)
	if err != nil {
		return nil, err
	}
	opOf := func(d Dump) engine.Op {
		if d.Op == "" {
			return engine.OpSoftmax
		}
		return engine.Op(d.Op)
	}
	if opOf(da) != opOf(db) {
		r := diff.Refuse(a.FileName, opOf(da), b.FileName, opOf(db))
		return nil, &session.InputError{Msg: r.Msg, Err: r}
	}
	fails := func(d Dump) map[int]bool {
		m := map[int]bool{}
		for _, r := range d.Fail {
			m[r] = true
		}
		return m
	}
	fa, fb := fails(da), fails(db)
	same := da.Rows == db.Rows && da.Vocab == db.Vocab
	d := &diff.Diff{A: a.FileName, B: b.FileName, Op: opOf(da), Rows: da.Rows, Vocab: da.Vocab,
		Inputs: diff.Inputs{Same: same, Row: -1}, PassA: len(fa) == 0, PassB: len(fb) == 0, FailedA: len(fa), FailedB: len(fb),
		Why: []string{}, Better: []string{}}
	if !same {
		d.Inputs.Tensor, d.Inputs.Why = "logits", fmt.Sprintf("logits has shape [%d, %d] in A and [%d, %d] in B", da.Rows, da.Vocab, db.Rows, db.Vocab)
	}
	o := diff.Output{Name: "probs", External: true, Kind: "probs", InA: true, InB: true, PassA: d.PassA, PassB: d.PassB,
		FailedA: d.FailedA, FailedB: d.FailedB, Fixed: []int{}, Broken: []int{}}
	for r := 0; same && r < da.Rows; r++ {
		row := diff.Row{Row: r, PassA: !fa[r], PassB: !fb[r]}
		switch {
		case fa[r] && !fb[r]:
			row.Change = "fixed"
			o.Fixed = append(o.Fixed, r)
			d.Better = append(d.Better, fmt.Sprintf("row %d of probs went from fail to pass", r))
		case !fa[r] && fb[r]:
			row.Change = "broken"
			o.Broken = append(o.Broken, r)
			d.Why = append(d.Why, fmt.Sprintf("row %d of probs went from pass to fail", r))
		}
		o.Rows = append(o.Rows, row)
	}
	d.Outputs = []diff.Output{o}
	d.Worse = len(d.Why) > 0
	d.Summary = fmt.Sprintf("%s against %s: %d rows fixed, %d broken", b.FileName, a.FileName, len(o.Fixed), len(o.Broken))
	return d, nil
}
