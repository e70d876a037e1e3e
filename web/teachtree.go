package web

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/lesson"
	"github.com/sampviz/sampviz/engine/session"
	"github.com/sampviz/sampviz/web/store"
	"github.com/sampviz/sampviz/web/view"
)

// The tree teaching mode: /runs/{id}/rows/{r}/teach on a spec_tree_verify
// row steps through one verification of the row's draft tree (one trial,
// as the kernels draw it), node by node and sibling by sibling, with the
// residual before and after each rejection. The URL names it all (trial,
// seed, step); the page script steps through the walk's steps without
// asking again, and asks /api/runs/{id}/rows/{r}/teach for another trial
// or seed. teach.go's teachFor hands tree rows to this file.

// treeLessonFor reads the row and walk a tree teaching URL of run names and
// asks the runner for it.
func (s *Server) treeLessonFor(r *http.Request, run store.Run, info *session.DumpInfo, p engine.Overrides) (*view.TreeTeachView, error) {
	row, err := parseRow(r, info.Rows)
	if err != nil {
		return nil, err
	}
	l, step, err := parseTreeLesson(r.URL.Query())
	if err != nil {
		return nil, badRequest(view.Sentence(err.Error()))
	}
	var st *lesson.TreeState
	if err := s.askLesson(r, run, row, "teach tree", func(ctx context.Context) (err error) {
		st, err = s.runner.TeachTree(ctx, s.job(run, p, nil), row, l)
		return err
	}); err != nil {
		return nil, err
	}
	base := fmt.Sprintf("/runs/%s/rows/%d", run.ID, row)
	page := func(trial, step int) string {
		return view.WithQuery(base+"/teach", treeLessonQuery(trial, st.Seed, step))
	}
	v := view.NewTreeTeachView(st, step-1, func(i int) string { return page(st.Trial, i+1) })
	v.Run, v.Info, v.Row = run, *info, row
	v.RowURL = view.WithQuery(base, url.Values{"trial": {strconv.Itoa(st.Trial)}})
	v.URL = page(st.Trial, v.Index+1)
	v.API = "/api" + v.URL
	if st.Trial > 0 {
		v.PrevTrial = page(st.Trial-1, 1)
	}
	if st.Trial < engine.MaxTrials {
		v.NextTrial = page(st.Trial+1, 1)
	}
	return v, nil
}

// parseTreeLesson reads a tree lesson from a URL query: trial, seed and
// step (the step shown, from 1), each optional. The lesson asks for every
// step of the walk. It returns one sentence for the first value that is
// not usable.
func parseTreeLesson(q url.Values) (lesson.TreeLesson, int, error) {
	var l lesson.TreeLesson
	if v := strings.TrimSpace(q.Get("trial")); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > engine.MaxTrials {
			return l, 0, fmt.Errorf("trial must be a whole number from 0 to %d, not %q", engine.MaxTrials, v)
		}
		l.Trial = n
	}
	seed, err := parseLessonSeed(q)
	if err != nil {
		return l, 0, err
	}
	l.Seed = seed
	step, err := parseLessonStep(q, "the walk's first step")
	return l, step, err
}

// treeLessonQuery writes the URL query of a tree lesson's step, the seed
// explicit, so the link means the same even if the row's seed were to
// change.
func treeLessonQuery(trial int, seed uint64, step int) url.Values {
	return url.Values{
		"trial": {strconv.Itoa(trial)},
		"seed":  {strconv.FormatUint(seed, 10)},
		"step":  {strconv.Itoa(step)},
	}
}
