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
	if err := storedDraw(job, run, st); err != nil {
		return nil, err
	}
	if tok, _, _, terr := s.tokenizer(job, run); terr == nil && tok != nil {
		st.NameTokens(show(tok))
	}
	return st, nil
}

// storedDraw sets st.Kernel to our kernels' stored draw of the lesson's
// (row, draw, method) when the job's outputs hold it, and st.RunDraws to
// the draws per row they hold.
func storedDraw(job Job, run *engine.Run, st *lesson.SampleState) error {
	out, err := readOutputs(job.OutputsPath)
	if errors.Is(err, ErrNoOutputs) {
		return nil
	}
	if err != nil {
		return err
	}
	defer out.Close()
	o := out.ours
	if o.Samples != nil && len(o.Samples.Shape) == 2 {
		st.RunDraws = o.Samples.Shape[1]
	} else if o.SampleCounts != nil {
		st.RunCounted = true
	}
	if st.Invalid == "" && st.Seed == st.RowSeed {
		st.Kernel = kernelDraw(o, run.Rows(), st)
	}
	return nil
}

// kernelDraw returns o's draw of the lesson's (row, draw, method), nil when
// o does not hold it.
func kernelDraw(o *engine.Output, rows int, st *lesson.SampleState) *lesson.KernelDraw {
	switch {
	case st.Draw == 0 && st.Method == st.RunMethod && o.Tokens != nil && len(o.Tokens.Shape) == 1 && o.Tokens.Shape[0] == rows:
		return &lesson.KernelDraw{Token: int(o.Tokens.Int(st.Row)), Output: "tokens", Backend: o.Name}
	case st.Method == engine.SampleInverseCDF && o.Samples != nil && len(o.Samples.Shape) == 2 &&
		o.Samples.Shape[0] == rows && st.Draw < o.Samples.Shape[1]:
		n := o.Samples.Shape[1]
		return &lesson.KernelDraw{Token: int(o.Samples.Int(st.Row*n + st.Draw)), Output: "samples", Backend: o.Name}
	}
	return nil
}
