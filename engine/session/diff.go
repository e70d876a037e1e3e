package session

import (
	"context"
	"errors"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/diff"
	"github.com/sampviz/sampviz/engine/dump"
)

// Diff judges two jobs, a (before) and b (after), and compares them
// (engine/diff). A job with an OutputsPath is a stored run: its stored
// outputs are judged again (Rejudge; the dump's own outputs alone when it
// stored none); a job without one is run (Execute). Two dumps of different
// ops are refused before anything runs: an *InputError, as is a dump that
// cannot be used, and a comparison over MaxMemory: a's dump and report stay
// held while b is judged.
func (s *Session) Diff(ctx context.Context, a, b Job) (*diff.Diff, error) {
	both, err := s.admitDiff(a, b)
	if err != nil {
		return nil, err
	}
	// The comparison's whole need, taken at once from the budget the jobs
	// judged at once share (the sides reserve nothing more).
	var r reservation
	defer r.free()
	if err := s.reserve(ctx, &r, both); err != nil {
		return nil, err
	}
	sa, closeA, err := s.side(ctx, a)
	if err != nil {
		return nil, err
	}
	defer closeA()
	sb, closeB, err := s.side(ctx, b)
	if err != nil {
		return nil, err
	}
	defer closeB()
	d, err := diff.Compare(sa, sb)
	if err != nil {
		return nil, refused(err)
	}
	return d, nil
}

// admitDiff reads the headers of both jobs' dumps, refuses two ops, and
// checks what comparing them holds at its peak against MaxMemory: a's
// judgement, or b's while a's dump and report are held (need). It returns
// that peak.
func (s *Session) admitDiff(a, b Job) (Need, error) {
	ra, fa, err := s.open(a)
	if err != nil {
		return Need{}, err
	}
	defer fa.Close()
	rb, fb, err := s.open(b)
	if err != nil {
		return Need{}, err
	}
	defer fb.Close()
	if ra.Op != rb.Op {
		return Need{}, refused(diff.Refuse(name(a, ra), ra.Op, name(b, rb), rb.Op))
	}
	needs := [2]Need{}
	for i, side := range []struct {
		job Job
		run *engine.Run
		f   *dump.File
	}{{a, ra, fa}, {b, rb, fb}} {
		var be engine.Backend
		if side.job.OutputsPath == "" {
			if be, err = s.backend(side.job.Backend); err != nil {
				return Need{}, err
			}
			if be, err = fitBackend(side.job, side.run, be); err != nil {
				return Need{}, err
			}
		}
		needs[i] = need(side.run, side.f, be, s.workers(), side.job.OutputsPath != "")
	}
	held := heldPart(needs[0])
	both := Need{Parts: append([]NeedPart{held}, needs[1].Parts...), Total: max(needs[0].Total, held.Bytes+needs[1].Total)}
	return both, overBudget("comparing "+name(a, ra)+" with "+name(b, rb), both, s.MaxMemory)
}

// heldPart is what a judged run keeps while another is judged: its dump's
// tensors and its report.
func heldPart(n Need) NeedPart {
	var bytes int64
	for _, p := range n.Parts {
		if p.What == partDump || p.What == partReport {
			bytes += p.Bytes
		}
	}
	return NeedPart{What: "the first run's dump and report", Bytes: bytes}
}

// side judges one job of a Diff and returns it with the function that
// releases its dump.
func (s *Session) side(ctx context.Context, job Job) (diff.Side, func(), error) {
	var (
		rep *engine.Report
		run *engine.Run
		f   *dump.File
		err error
	)
	if job.OutputsPath != "" {
		rep, run, f, err = s.rejudge(ctx, job, nil, nil)
		if errors.Is(err, ErrNoOutputs) {
			job.OutputsPath, job.Backend = "", NoBackend
			rep, run, f, err = s.execute(ctx, job, nil, nil)
		}
	} else {
		rep, run, f, err = s.execute(ctx, job, nil, nil)
	}
	if err != nil {
		return diff.Side{}, nil, err
	}
	return diff.Side{Name: name(job, run), Run: run, Report: rep}, func() { f.Close() }, nil
}

// name is what a diff calls a job's run: what its uploader called it, or
// its source.
func name(job Job, run *engine.Run) string {
	if job.FileName != "" {
		return job.FileName
	}
	return run.Source
}

// refused makes a *diff.Refusal an *InputError; other errors pass.
func refused(err error) error {
	var r *diff.Refusal
	if errors.As(err, &r) {
		return &InputError{Msg: r.Msg, Err: r}
	}
	return err
}
