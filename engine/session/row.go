package session

import (
	"context"
	"errors"
	"fmt"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/compare"
	"github.com/sampviz/sampviz/engine/explain"
	"github.com/sampviz/sampviz/engine/lesson"
	"github.com/sampviz/sampviz/engine/tokens"
)

// Row describes row r of a job for the row page (explain.Row), with the
// outputs and the trace that Execute stored, on the top most probable
// tokens. It works before the kernels have finished: the dump's own outputs
// are shown, and a spec_verify row says why it has no trace yet. A job with
// semantics any is described under job.Preset's chain.
func (s *Session) Row(ctx context.Context, job Job, r, top int) (*explain.RowDetail, error) {
	run, f, err := s.load(job, nil, false)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if p := job.Preset.Preset(); p != nil && run.Params.Semantics == engine.SemanticsAny {
		run = presetRun(run, p) // the chain of the judgement the row page shows
	}
	if r < 0 || r >= run.Rows() {
		return nil, &InputError{Msg: fmt.Sprintf("There is no row %d: this run has rows 0 to %d.", r, run.Rows()-1)}
	}
	st, err := readOutputs(job.OutputsPath)
	if err != nil && !errors.Is(err, ErrNoOutputs) {
		return nil, err
	}
	defer st.Close()
	outs := compare.ExternalOutputs(run)
	var tr *explain.RowTrace
	var tt *explain.TreeTrace
	if st != nil {
		outs = append([]*engine.Output{st.ours}, outs...)
		tr = rowTrace(st.file, r)
		tt = treeRowTrace(st.file, r)
	}
	d := explain.Row(run, outs, tr, tt, job.Tolerances, r, top)
	noTrace := "The kernels of this run have not stored their outputs, so there is no trace to step through."
	if st != nil {
		noTrace = "This run's outputs were stored without a trace (by an older sampviz); run it again to step through its trials."
	}
	if tok, _, _, err := s.tokenizer(job, run); err == nil && tok != nil {
		d.NameTokens(show(tok))
	}
	if d.Spec != nil && tr == nil {
		d.Spec.NoTrace = noTrace
	}
	if d.Tree != nil && d.Tree.Trace == nil {
		d.Tree.NoTrace = noTrace
	}
	return d, nil
}

// Teach runs lesson l of the teaching mode on row r of a spec_verify job
// (lesson.Teach): it reads the dump only, so it works before the run has
// finished. A run that is not spec_verify, or a row, position or control out
// of range, gives a *lesson.Error.
func (s *Session) Teach(ctx context.Context, job Job, r int, l lesson.Lesson) (*lesson.State, error) {
	run, f, err := s.load(job, nil, false)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := lesson.Teach(ctx, run, r, l)
	if err == nil {
		if tok, _, _, terr := s.tokenizer(job, run); terr == nil && tok != nil {
			st.NameTokens(show(tok))
		}
	}
	return st, err
}

// show is tok's visible text of a token id, false for an id it lacks.
func show(tok *tokens.Tokenizer) explain.Namer {
	return func(id int64) (string, bool) {
		if !tok.Known(id) {
			return "", false
		}
		return tok.Show(id), true
	}
}

// TeachTree runs tree lesson l on row r of a spec_tree_verify job
// (lesson.TeachTree): it reads the dump only, so it works before the run
// has finished. A run that is not spec_tree_verify, or a row or trial out of
// range, gives a *lesson.Error.
func (s *Session) TeachTree(ctx context.Context, job Job, r int, l lesson.TreeLesson) (*lesson.TreeState, error) {
	run, f, err := s.load(job, nil, false)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := lesson.TeachTree(ctx, run, r, l)
	if err == nil {
		if tok, _, _, terr := s.tokenizer(job, run); terr == nil && tok != nil {
			st.NameTokens(show(tok))
		}
	}
	return st, err
}
