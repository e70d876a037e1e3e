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
// cannot be used. Each job is held to MaxMemory on its own, and both
// dumps stay mapped until the comparison is done.
func (s *Session) Diff(ctx context.Context, a, b Job) (*diff.Diff, error) {
	ra, fa, err := s.open(a)
	if err != nil {
		return nil, err
	}
	opA := ra.Op
	fa.Close()
	rb, fb, err := s.open(b)
	if err != nil {
		return nil, err
	}
	opB := rb.Op
	fb.Close()
	if opA != opB {
		return nil, refused(diff.Refuse(name(a, ra), opA, name(b, rb), opB))
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
		rep, run, f, err = s.rejudge(ctx, job, nil)
		if errors.Is(err, ErrNoOutputs) {
			job.OutputsPath, job.Backend = "", NoBackend
			rep, run, f, err = s.execute(ctx, job, nil)
		}
	} else {
		rep, run, f, err = s.execute(ctx, job, nil)
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
