package session

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/compare"
	"github.com/sampviz/sampviz/engine/dump"
)

// Sink receives a judgement as it happens.
type Sink interface {
	// Outputs names the outputs being judged, in report order, before the
	// first row.
	Outputs(outs []engine.OutputInfo)
	// Row delivers one judged row of one output, never concurrently with
	// another call.
	Row(u RowUpdate)
}

// RowUpdate is one judged row of one output, with what the charts need.
type RowUpdate struct {
	// Output indexes the outputs given to Sink.Outputs.
	Output int
	Report engine.RowReport
	// Errors is set for probability outputs.
	Errors *RowErrors
}

// Execute runs job.Backend's kernels on the dump with job.Overrides (and, on
// a sample run, twice more for the seed rules), stores what they produced at
// job.OutputsPath when it is set, then judges them and the dump's external
// outputs with job.Tolerances, telling sink (when not nil) the outputs before
// the first row and every row as soon as it is judged. A dump or parameter
// that cannot be used is an *InputError; a kernel fault is an error whose
// message says what failed, in words a person reads; ctx's end is ctx's
// error.
func (s *Session) Execute(ctx context.Context, job Job, sink Sink) (*engine.Report, error) {
	var r reservation
	defer r.free()
	rep, _, f, err := s.execute(ctx, job, sink, &r)
	f.Close()
	return rep, err
}

// execute is Execute, returning the judged run and its dump's File (nil
// for Job.Run), which the caller must close. With r not nil, it reserves
// the job's memory into r before reading the dump (loadReserved).
func (s *Session) execute(ctx context.Context, job Job, sink Sink, r *reservation) (*engine.Report, *engine.Run, *dump.File, error) {
	b, err := s.backend(job.Backend)
	if err != nil {
		return nil, nil, nil, err
	}
	run, f, err := s.loadReserved(ctx, job, b, job.OutputsPath != "", r)
	if err != nil {
		return nil, nil, nil, err
	}
	if run.Params.Semantics == engine.SemanticsAny {
		rep, err := s.matchSemantics(ctx, run, job, sink) // semantics.go
		return rep, run, f, err
	}
	var (
		ours   *engine.Output
		reruns *compare.Reruns
		device *engine.Device
	)
	fail := func(err error) (*engine.Report, *engine.Run, *dump.File, error) {
		f.Close()
		return nil, nil, nil, err
	}
	var fallback string
	if b = kernels(b, run); b != nil {
		// One device runs the job's kernels and its seed reruns, and is
		// free for the next job while this one is judged (gpus.go).
		placed, release := place(b, job.Label)
		// Released once the kernels end, however they end: a panic the
		// server recovers from must not hold the device's place for good.
		defer release()
		// The fallback takes the run only where its draws and its memory
		// fit, as Session.fit asks of the backend the job named.
		fits := func(other engine.Backend) error {
			if err := drawsFit(run, other); err != nil {
				return err
			}
			return overBudget(run.Source, need(run, f, other, s.workers(), job.OutputsPath != ""), s.MaxMemory)
		}
		ours, b, fallback, err = s.runOrFallBack(ctx, placed, run, fits)
		if err == nil && run.Op == engine.OpSample {
			if reruns, err = seedReruns(ctx, b, run); err != nil {
				err = fmt.Errorf("%w (seed reruns)", err)
			}
		}
		release()
		if err != nil {
			return fail(err)
		}
		d := b.Device()
		device = &d
		if job.OutputsPath != "" {
			if err := writeOutputs(job.OutputsPath, ours, reruns, d); err != nil {
				return fail(err)
			}
		}
	}
	rep, err := s.judge(ctx, run, ours, reruns, job, sink)
	if err != nil {
		return fail(err)
	}
	rep.Device = device
	if fallback != "" {
		rep.Notices = append(slices.Clone(rep.Notices), fallback)
	}
	return rep, run, f, nil
}

// runOrFallBack runs b on run. When b cannot (its kernels do not serve the
// op, mode or filter chain: engine.ErrUnsupported) and another backend of
// the session can, our output is that backend's, and notice says so; the
// backend returned is the one that ran. It never falls back from a fault,
// a hang or a cancelled run, nor to a backend whose outputs need more
// memory than fits allows (the job was admitted for b's: a counting
// backend's V counts a row where the other returns every draw); that
// refusal is fits' *InputError, naming the backend.
func (s *Session) runOrFallBack(ctx context.Context, b engine.Backend, run *engine.Run, fits func(engine.Backend) error) (out *engine.Output, ran engine.Backend, notice string, err error) {
	out, err = runBackend(ctx, b, run)
	if err == nil || !errors.Is(err, engine.ErrUnsupported) {
		return out, b, "", err
	}
	for _, other := range s.backends {
		if other == b || other.Name() == b.Name() {
			continue
		}
		// The counting backend's draws default is not the other's.
		draws, also := run.Params.Draws, ""
		if d := fallbackDraws(run, other); d != draws {
			run.Params.Draws = d
			also = fmt.Sprintf(", with its default %d draws a row", d)
		}
		why := strings.TrimSuffix(err.Error(), ": "+engine.ErrUnsupported.Error())
		if budgetErr := fits(other); budgetErr != nil {
			run.Params.Draws = draws
			var ie *InputError
			if errors.As(budgetErr, &ie) {
				return nil, b, "", &InputError{Msg: fmt.Sprintf("%s; on the %s backend, %s", why, other.Name(), ie.Msg), Err: ie.Err, OverBudget: ie.OverBudget}
			}
			return nil, b, "", budgetErr
		}
		if o, otherErr := runBackend(ctx, other, run); otherErr == nil {
			return o, other, fmt.Sprintf("%s; our output is the %s backend's%s", why, other.Name(), also), nil
		}
		run.Params.Draws = draws
	}
	return nil, b, "", err
}

// fallbackDraws is the draws a row run takes on other when other takes
// over: other's default when the run had its backend's default, else the
// draws the run names.
func fallbackDraws(run *engine.Run, other engine.Backend) int {
	if run.BackendDraws {
		return engine.DefaultDrawsOn(other)
	}
	return run.Params.Draws
}

// Rejudge judges the outputs that Execute stored at job.OutputsPath (with
// their seed reruns) and the dump's external outputs with job.Tolerances,
// without running kernels, telling sink as Execute does. It returns
// ErrNoOutputs when nothing was stored there.
func (s *Session) Rejudge(ctx context.Context, job Job, sink Sink) (*engine.Report, error) {
	var r reservation
	defer r.free()
	rep, _, f, err := s.rejudge(ctx, job, sink, &r)
	f.Close()
	return rep, err
}

// rejudge is Rejudge, returning the judged run and its dump's File (nil
// for Job.Run), which the caller must close. With r not nil, it reserves
// the job's memory into r before reading the dump (loadReserved).
func (s *Session) rejudge(ctx context.Context, job Job, sink Sink, r *reservation) (*engine.Report, *engine.Run, *dump.File, error) {
	run, f, err := s.loadReserved(ctx, job, nil, true, r)
	if err != nil {
		return nil, nil, nil, err
	}
	if run.Params.Semantics == engine.SemanticsAny {
		rep, err := s.matchSemantics(ctx, run, job, sink) // semantics.go
		return rep, run, f, err
	}
	st, err := readOutputs(job.OutputsPath)
	if err != nil {
		f.Close()
		return nil, nil, nil, err
	}
	defer st.Close()
	rep, err := s.judge(ctx, run, st.ours, st.reruns, job, sink)
	if err != nil {
		f.Close()
		return nil, nil, nil, err
	}
	rep.Device = st.device
	return rep, run, f, nil
}

// runBackend runs b on run and names the output after b.
func runBackend(ctx context.Context, b engine.Backend, run *engine.Run) (*engine.Output, error) {
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
	return out, nil
}

// otherSeed is added to every row's seed for the rerun that must draw
// differently (the golden ratio's 64-bit fraction: far from any seed a
// person picks by hand).
const otherSeed = 0x9e3779b97f4a7c15

// seedReruns runs our sampler twice more on a sample run, one token per row
// (Draws 0), first with the same seeds and offsets, then with other seeds,
// for the seed rules (compare.Reruns); our output is the judgement's first.
func seedReruns(ctx context.Context, b engine.Backend, run *engine.Run) (*compare.Reruns, error) {
	rerun := *run
	rerun.Params.Draws = 0
	same, err := runBackend(ctx, b, &rerun)
	if err != nil {
		return nil, err
	}
	rerun.Params.Seed = make([]uint64, len(run.Params.Seed))
	for r, s := range run.Params.Seed {
		rerun.Params.Seed[r] = s + otherSeed
	}
	other, err := runBackend(ctx, b, &rerun)
	if err != nil {
		return nil, err
	}
	return &compare.Reruns{Output: 0, SameSeed: same.Tokens, OtherSeed: other.Tokens}, nil
}

// judge judges ours (when not nil) and the dump's external outputs,
// streaming each row into sink (when not nil) with its error summary,
// computed beside the judge on every core.
func (s *Session) judge(ctx context.Context, run *engine.Run, ours *engine.Output, reruns *compare.Reruns, job Job, sink Sink) (*engine.Report, error) {
	var outs []*engine.Output
	if ours != nil {
		outs = append(outs, ours)
	}
	outs = append(outs, compare.ExternalOutputs(run)...)
	if len(outs) == 0 {
		return nil, &InputError{Msg: fmt.Sprintf("%s: nothing to judge: no backend runs our kernels and the dump holds no external outputs", run.Source)}
	}
	opts := options(job.Tolerances)
	opts.Workers = s.Workers
	if ours != nil {
		opts.Reruns = reruns
	}
	var onRow func(int, engine.RowReport)
	if sink != nil {
		ew := newErrorWorkers(run, outs, opts, sink)
		defer ew.close()
		infos := make([]engine.OutputInfo, len(outs))
		for i, o := range outs {
			tol := ew.tols[i]
			infos[i] = engine.OutputInfo{Name: o.Name, External: o.External, Kind: o.Kind(), Tolerances: &tol}
		}
		sink.Outputs(infos)
		onRow = ew.submit
	}
	rep, err := compare.Judge(ctx, run, outs, opts, onRow)
	if err != nil {
		return nil, err
	}
	return rep, nil
}
