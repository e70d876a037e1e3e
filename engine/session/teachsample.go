package session

import (
	"context"
	"errors"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/lesson"
)

// TeachSample steps through one draw of row r of a sample job
// (lesson.TeachSample). It reads the dump, and the stored outputs once the
// kernels have run: when they hold the same draw (draw 0 of the run's own
// method in tokens, or draw d of the inverse CDF in samples, with the row's
// own seed), it puts our kernels' token beside the lesson's. A run that is
// not sample, or a row, draw or method out of range, gives a
// *lesson.Error.
func (s *Session) TeachSample(ctx context.Context, job Job, r int, l lesson.SampleLesson) (*lesson.SampleState, error) {
	run, f, err := s.load(job, nil, false)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := lesson.TeachSample(ctx, run, r, l)
	if err != nil {
		return nil, err
	}
	k, err := kernelDraw(job, run, st)
	if err != nil {
		return nil, err
	}
	st.Kernel = k
	if tok, _, _, terr := s.tokenizer(job, run); terr == nil && tok != nil {
		st.NameTokens(show(tok))
	}
	return st, nil
}

// kernelDraw returns our kernels' stored draw of the lesson's (row, draw,
// method), nil when the job's outputs do not hold it.
func kernelDraw(job Job, run *engine.Run, st *lesson.SampleState) (*lesson.KernelDraw, error) {
	if st.Invalid != "" || st.Row >= len(run.Params.Seed) || st.Seed != run.Params.Seed[st.Row] {
		return nil, nil
	}
	out, err := readOutputs(job.OutputsPath)
	if errors.Is(err, ErrNoOutputs) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer out.Close()
	o := out.ours
	switch {
	case st.Draw == 0 && st.Method == st.RunMethod && o.Tokens != nil && len(o.Tokens.Shape) == 1 && o.Tokens.Shape[0] == run.Rows():
		return &lesson.KernelDraw{Token: int(o.Tokens.Int(st.Row)), Output: "tokens", Backend: o.Name}, nil
	case st.Method == engine.SampleInverseCDF && o.Samples != nil && len(o.Samples.Shape) == 2 &&
		o.Samples.Shape[0] == run.Rows() && st.Draw < o.Samples.Shape[1]:
		n := o.Samples.Shape[1]
		return &lesson.KernelDraw{Token: int(o.Samples.Int(st.Row*n + st.Draw)), Output: "samples", Backend: o.Name}, nil
	}
	return nil, nil
}
