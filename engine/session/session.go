// Package session is the one path from a dump to a judged run, behind both
// faces of sampviz: `sampviz check` and `sampviz serve`. It reads the dump
// (engine/dump, the op and parameter tables), runs a backend's kernels with
// the seed reruns the seed rules need, stores our outputs beside the dump
// when asked (so that they can be judged again with other tolerances),
// judges every output with engine/compare, and hands each judged row to a
// Sink as it is ready. It also answers what the row page and the teaching
// mode ask of a stored run (engine/explain, engine/lesson).
//
// A face only chooses the sink: the command line prints the report, the
// server streams rows to its pages and stores the report. So a feature of
// judging appears in both at once, and both give the same report for the
// same dump. It never speaks HTTP and never formats for a page.
package session

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sort"
	"strings"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/compare"
	"github.com/sampviz/sampviz/engine/dump"
)

// Session runs jobs on a set of backends. Its methods are safe for
// concurrent use; the server calls Execute and Rejudge from one goroutine
// per GPU of its backend (one without a GPU).
type Session struct {
	backends []engine.Backend
	// Workers is the number of rows judged at once (0: every core).
	Workers int
	// MaxMemory bounds what one job may hold at its peak (0: no bound):
	// a job that needs more is refused before anything big is read
	// (budget.go).
	MaxMemory int64
	// tokenizers caches the tokenizers row pages show token text with.
	tokenizers tokenizerCache
	// mem is the memory the jobs judged at once share (budget.go).
	mem shared
}

// New returns a session over backends, the default first. With none, jobs
// can only judge the dumps' external outputs.
func New(backends ...engine.Backend) *Session {
	return &Session{backends: backends}
}

// Backends describes the backends a job may use, the default first.
func (s *Session) Backends() []engine.Device {
	ds := make([]engine.Device, len(s.backends))
	for i, b := range s.backends {
		ds[i] = b.Device()
	}
	return ds
}

// NoBackend is the Job.Backend that runs no kernel: only the dump's external
// outputs are judged.
const NoBackend = "none"

// kernels returns the backend that runs run's kernels: b, or nil when the
// op has no kernel (engine.OpSpec.NoKernel: only the dump's outputs are
// judged).
func kernels(b engine.Backend, run *engine.Run) engine.Backend {
	if s := run.Op.Spec(); s != nil && s.NoKernel {
		return nil
	}
	return b
}

// backend returns the backend called name ("": the default), nil for
// NoBackend.
func (s *Session) backend(name string) (engine.Backend, error) {
	if name == NoBackend {
		return nil, nil
	}
	if name == "" && len(s.backends) > 0 {
		return s.backends[0], nil
	}
	var names []string
	for _, b := range s.backends {
		if b.Name() == name {
			return b, nil
		}
		names = append(names, b.Name())
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("this session has no backend to run %s on", name)
	}
	return nil, &InputError{Msg: fmt.Sprintf("this server has no %s backend (it has %s)", name, strings.Join(names, ", "))}
}

// Job is one judgement of one dump.
type Job struct {
	// DumpPath is the dump; FileName is what its uploader called it, used
	// in every message ("" names it after DumpPath).
	DumpPath string
	FileName string
	// Run, when not nil, is judged in place of DumpPath: a run already built
	// (the built-in example).
	Run *engine.Run
	// OutputsPath is where Execute stores our backend's outputs (with the
	// seed reruns and the speculative trace) and where Rejudge, Row and the
	// row page read them; "" stores nothing.
	OutputsPath string
	// Backend names the backend that runs our kernels ("cpu", "cuda"; ""
	// the default; NoBackend none).
	Backend string
	// Label names the job where the GPUs' state shows which job each runs
	// (the server's run id); "" shows none.
	Label string
	// Overrides replace what the dump says, for every row.
	Overrides engine.Overrides
	// Tolerances replace the dtype defaults when not nil; a negative Atol or
	// Rtol keeps the default of that part, and a PValue of 0 the default
	// threshold.
	Tolerances *engine.Tolerances
	// TokenizerPath, when set, is a tokenizer.json (Hugging Face tokenizers)
	// whose token text is shown beside the ids, in place of the dump's own
	// `tokenizer` metadata; TokenizerName is what its uploader called it.
	TokenizerPath string
	TokenizerName string
	// Preset, for a job whose semantics is any, names the preset whose
	// judgement Row describes (the report's Semantics); "" describes the
	// row under the dump's own filter chain.
	Preset engine.Semantics
}

// open builds the job's run from Job.Run, or from the headers of the dump
// at DumpPath read with the job's overrides (dump.Inspect: the big tensors
// are not read yet), named as its uploader named it. The returned File (nil
// for Job.Run) must be closed once the run is no longer used. A dump that
// cannot be used is an *InputError.
func (s *Session) open(job Job) (*engine.Run, *dump.File, error) {
	if job.Run != nil {
		return job.Run, nil, nil
	}
	f, err := dump.OpenWithin(job.DumpPath, job.FileName, s.readLimit())
	if err == nil {
		f.Limit = s.MaxMemory
		var run *engine.Run
		if run, err = dump.Inspect(f, job.Overrides); err == nil {
			if job.FileName != "" {
				run.Source = job.FileName
			}
			return run, f, nil
		}
		f.Close()
	}
	return nil, nil, s.inputError(job, err)
}

// inputError names the uploader's file in a *dump.Error and makes it an
// *InputError (one over MaxMemory when the file needs more memory to read
// than the budget leaves it); other errors are wrapped.
func (s *Session) inputError(job Job, err error) error {
	var de *dump.Error
	if errors.As(err, &de) {
		if job.FileName != "" {
			de.File = job.FileName
		}
		if de.Need > 0 && s.MaxMemory > 0 {
			n := Need{Parts: []NeedPart{{What: de.NeedFor, Bytes: de.Need}, {What: "the process", Bytes: runtimeBytes}}}
			n.Total = de.Need + runtimeBytes
			return &InputError{Err: de, OverBudget: true,
				Msg: fmt.Sprintf("%s needs about %s of memory to read (%s), more than the %s allowed (--max-memory)",
					de.File, engine.FormatBytes(n.Total), n.Words(), engine.FormatBytes(s.MaxMemory))}
		}
		return &InputError{Msg: de.Error(), Err: de}
	}
	return fmt.Errorf("load %s: %w", job.FileName, err)
}

// load opens the job's run (open), checks what running b on it (nil: no
// backend) and judging it would hold against MaxMemory, and then reads its
// tensors. stored says the outputs go to pages (the server).
func (s *Session) load(job Job, b engine.Backend, stored bool) (*engine.Run, *dump.File, error) {
	return s.loadReserved(context.Background(), job, b, stored, nil)
}

// loadReserved is load that, with r not nil, also reserves what the job
// holds at its peak (on b, or on the backend it may fall back to) from the
// budget the jobs judged at once share, before it reads the tensors: it
// waits while the others hold too much, or until ctx ends.
func (s *Session) loadReserved(ctx context.Context, job Job, b engine.Backend, stored bool, r *reservation) (*engine.Run, *dump.File, error) {
	run, f, err := s.open(job)
	if err != nil {
		return nil, nil, err
	}
	b, n, err := s.fit(job, run, f, b, stored)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if r != nil {
		if err := s.reserve(ctx, r, s.peakNeed(run, f, b, n, stored)); err != nil {
			f.Close()
			return nil, nil, err
		}
	}
	if f != nil {
		if err := dump.LoadRun(f, run); err != nil {
			f.Close()
			return nil, nil, s.inputError(job, err)
		}
	}
	return run, f, nil
}

// workers is the number of rows judged at once.
func (s *Session) workers() int {
	if s.Workers > 0 {
		return s.Workers
	}
	return runtime.GOMAXPROCS(0)
}

// DumpInfo describes a dump for the run header and the index.
type DumpInfo struct {
	Op    engine.Op    `json:"op"`
	DType engine.DType `json:"dtype"`
	// Input names the main input tensor ("logits", "target_logits", ...) and
	// Shape is its shape.
	Input string `json:"input"`
	Shape []int  `json:"shape"`
	Rows  int    `json:"rows"`
	Vocab int    `json:"vocab"`
	// External lists the external outputs the dump holds, by DUMPS.md name.
	External []string `json:"external"`
	// Source is the dump's `source` metadata.
	Source  string   `json:"source,omitempty"`
	Notices []string `json:"notices,omitempty"`
	// Memory is what the job was estimated to hold at its peak (budget.go).
	Memory int64 `json:"memory,omitempty"`
	// Tokenizer says where the token text shown beside ids comes from (a
	// file's name, or the dump's metadata); "" when ids are shown bare.
	Tokenizer string `json:"tokenizer,omitempty"`
}

// Inspect reads the headers of the dump at path, which its uploader named
// name, and describes it: the dump must parse and build a run. A dump that
// cannot be used gives an *InputError whose message is one sentence naming
// the file, the tensor and the rule it broke.
func (s *Session) Inspect(ctx context.Context, path, name string) (*DumpInfo, error) {
	return s.Admit(ctx, Job{DumpPath: path, FileName: name, Backend: NoBackend})
}

// Admit describes the job's dump as Inspect does and checks that the job
// (its backend's outputs with its overrides' draws and trials, the judge,
// and with an OutputsPath the pages) fits in MaxMemory; one that does not
// is an *InputError with OverBudget set. It reads headers, and streams the
// compressed tensors the job uses through their checks (dump.File.Verify)
// without keeping them, so that a job it admits fails for no fault of its
// dump's.
func (s *Session) Admit(ctx context.Context, job Job) (*DumpInfo, error) {
	b, err := s.backend(job.Backend)
	if err != nil {
		return nil, err
	}
	run, f, err := s.open(job)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if err := checkAny(run); err != nil {
		return nil, err
	}
	b, n, err := s.fit(job, run, f, b, job.OutputsPath != "")
	if err != nil {
		return nil, err
	}
	if f != nil {
		// What Execute will inflate must inflate as it declares: refused
		// now, in the words Execute would use, rather than once the job
		// runs.
		if err := f.Verify(ctx, dump.UsedTensors(f, run)...); err != nil {
			return nil, s.inputError(job, err)
		}
	}
	info := &DumpInfo{
		Op: run.Op, DType: run.InputDType(), Rows: run.Rows(), Vocab: run.Vocab(), External: []string{},
		Source: run.Meta["source"], Memory: n.Total,
	}
	if f != nil {
		info.Notices = append(info.Notices, f.Notices...)
	}
	info.Notices = append(info.Notices, run.Notices...)
	_, from, notices, err := s.tokenizer(job, run)
	if err != nil {
		return nil, err
	}
	info.Tokenizer = from
	info.Notices = append(info.Notices, notices...)
	switch run.Op.Spec().Inputs[0].Name {
	case "logits":
		info.Input, info.Shape = "logits", run.Logits.Shape
	case "target_logits":
		info.Input, info.Shape = "target_logits", run.TargetLogits.Shape
	case "input_ids":
		// The header of an ngram_match run shows what it drafts from.
		info.Input, info.Shape, info.DType = "pre_ids", run.PreIDs.Shape, run.PreIDs.DType
	}
	for name := range run.External {
		info.External = append(info.External, name)
	}
	sort.Strings(info.External)
	return info, nil
}

// options turns a job's tolerances into the judge's options.
func options(tol *engine.Tolerances) compare.Options {
	if tol == nil {
		return compare.Options{}
	}
	s, n := tol.Strict, tol.Native
	return compare.Options{Strict: &s, Native: &n, PValue: tol.PValue}
}

// fit gives run, opened from job's dump f, the defaults of the backend
// that will run its kernels (b, or none where the run needs none) and checks
// its draws and its need (with stored outputs: stored) against the
// session's bounds; it returns that backend and the need. Admit and load
// both take this one step, so a job admitted is loaded the same way.
func (s *Session) fit(job Job, run *engine.Run, f *dump.File, b engine.Backend, stored bool) (engine.Backend, Need, error) {
	b, err := fitBackend(job, run, b)
	if err != nil {
		return nil, Need{}, err
	}
	n := need(run, f, b, s.workers(), stored)
	if err := overBudget(run.Source, n, s.MaxMemory); err != nil {
		return nil, Need{}, err
	}
	return b, n, nil
}

// fitBackend is fit's first step, which a comparison's admission takes for
// each side too: the backend whose kernels run run (kernels; nil: none), the
// run's defaults on it, and its draws checked (drawsFit).
func fitBackend(job Job, run *engine.Run, b engine.Backend) (engine.Backend, error) {
	b = kernels(b, run)
	if b != nil {
		run.SetWorkDefaults(job.Overrides)
		run.SetBackendDefaults(job.Overrides, b)
	}
	if err := drawsFit(run, b); err != nil {
		return nil, err
	}
	return b, nil
}

// drawsFit refuses the draws a row of a sample run that b (nil: none)
// cannot make, before anything runs: the parameter's range is
// engine.MaxDraws, what a backend that counts its draws
// (engine.DrawCounter) makes, and its rows × draws are at most
// engine.MaxCountedDraws, what it counts inside the worker's watchdog; kept
// draws (keep_draws 1) and any other backend's are at most
// engine.MaxKeptDraws a row.
func drawsFit(run *engine.Run, b engine.Backend) error {
	if b == nil {
		return nil
	}
	if sp := run.Op.Spec(); sp == nil || !sp.Takes("draws") {
		return nil
	}
	d, keep := run.Params.Draws, run.Params.KeepDraws
	dc, counts := b.(engine.DrawCounter)
	switch {
	case counts && !keep:
		if m := dc.MaxDraws(); d > m {
			return &InputError{Msg: fmt.Sprintf("%s: draws %d is more than the %d a row the %s backend counts", run.Source, d, m, b.Name())}
		}
		if rows := int64(run.Rows()); rows > 0 && int64(d) > engine.MaxCountedDraws/rows {
			return &InputError{Msg: fmt.Sprintf("%s: %d rows of %d draws are %d counted draws, more than the %d a run the %s backend counts inside its worker's watchdog (fewer draws or rows)",
				run.Source, rows, d, rows*int64(d), int64(engine.MaxCountedDraws), b.Name())}
		}
	case d <= engine.MaxKeptDraws:
	case keep:
		return &InputError{Msg: fmt.Sprintf("%s: draws %d with keep_draws 1 is more than the %d a row kept one by one (keep_draws 0 has the cuda backend count up to %d)",
			run.Source, d, engine.MaxKeptDraws, engine.MaxDraws)}
	default:
		return &InputError{Msg: fmt.Sprintf("%s: draws %d is more than the %d a row the %s backend makes (the cuda backend counts up to %d)",
			run.Source, d, engine.MaxKeptDraws, b.Name(), engine.MaxDraws)}
	}
	return nil
}
