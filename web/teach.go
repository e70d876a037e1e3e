package web

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/a-h/templ"
	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/lesson"
	"github.com/sampviz/sampviz/engine/session"
	"github.com/sampviz/sampviz/web/store"
	"github.com/sampviz/sampviz/web/view"
)

// The teaching mode: /runs/{id}/rows/{r}/teach steps through accept/reject
// on one real spec_verify row, with controls for the target (temperature,
// top-k, top-p) and for how far the draft is from it. Its whole state is in
// the URL (lessonQuery), so a teacher can paste a link; the page script
// asks /api/runs/{id}/rows/{r}/teach for the next state and redraws without
// reloading. The runner computes (Runner.Teach) and web/view says what the
// numbers mean; this file reads the lesson from the URL and answers.

// handleTeachPage is "/runs/{id}/rows/{r}/teach": the lesson its URL names.
func (s *Server) handleTeachPage(w http.ResponseWriter, r *http.Request) error {
	_, page, err := s.teachFor(r)
	if err != nil {
		return err
	}
	s.render(w, r, http.StatusOK, page)
	return nil
}

// handleTeachAPI returns the lesson its URL names as JSON, for the page
// script to swap in.
func (s *Server) handleTeachAPI(w http.ResponseWriter, r *http.Request) error {
	v, _, err := s.teachFor(r)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}

// teachFor computes the lesson a teaching URL names, by the op of its run:
// a sample row's is the sampler's (teachsample.go), a spec_tree_verify
// row's the tree's (teachtree.go), any other spec_verify's (lessonFor). It
// returns the lesson's view, for JSON, and its page.
func (s *Server) teachFor(r *http.Request) (any, templ.Component, error) {
	run, info, p, err := s.lookupRun(r.PathValue("id"))
	if err != nil {
		return nil, nil, err
	}
	switch info.Op {
	case engine.OpSample:
		v, err := s.sampleLessonFor(r, run, info, p)
		if err != nil {
			return nil, nil, err
		}
		return v, sampleTeachPage(s.chrome(), v), nil
	case engine.OpSpecTreeVerify:
		v, err := s.treeLessonFor(r, run, info, p)
		if err != nil {
			return nil, nil, err
		}
		return v, treeTeachPage(s.chrome(), v), nil
	}
	v, err := s.lessonFor(r, run, info, p)
	if err != nil {
		return nil, nil, err
	}
	return v, teachPage(s.chrome(), v), nil
}

// lessonFor reads the row and lesson a teaching URL of run (with its dump's
// info and parameters p) names and asks the runner for it.
func (s *Server) lessonFor(r *http.Request, run store.Run, info *session.DumpInfo, p engine.Overrides) (*view.TeachView, error) {
	row, err := parseRow(r, info.Rows)
	if err != nil {
		return nil, err
	}
	k := view.DraftPositions(info)
	if k == 0 {
		return nil, notFound(fmt.Sprintf("The teaching mode steps through speculative sampling and the samplers; run %s is a %s run, not spec_verify, spec_tree_verify or sample.", run.ID, info.Op))
	}
	l, err := parseLesson(r.URL.Query(), k)
	if err != nil {
		return nil, badRequest(view.Sentence(err.Error()))
	}
	var st *lesson.State
	if err := s.askLesson(r, run, row, "teach", func(ctx context.Context) (err error) {
		st, err = s.runner.Teach(ctx, s.job(run, p, nil), row, l)
		return err
	}); err != nil {
		return nil, err
	}
	v := view.NewTeachView(st, k)
	v.Run, v.Info, v.Row = run, *info, row
	base := fmt.Sprintf("/runs/%s/rows/%d", run.ID, row)
	v.RowURL = base
	v.URL = view.WithQuery(base+"/teach", lessonQuery(st, st.Steps))
	v.API = view.WithQuery("/api"+base+"/teach", lessonQuery(st, st.Steps))
	v.Step = view.WithQuery(base+"/teach", lessonQuery(st, min(st.Steps+1, lesson.MaxSteps)))
	v.RunN = view.WithQuery(base+"/teach", lessonQuery(st, min(st.Steps+teachStepsPerRun, lesson.MaxSteps)))
	v.Reset = view.WithQuery(base+"/teach", lessonQuery(st, 0))
	return v, nil
}

// teachStepsPerRun is how many steps the "run" button takes at once.
const teachStepsPerRun = 100

// parseLesson reads a lesson from a URL query for a row with k draft
// positions: pos, temperature, top_k, top_p, distance, seed and step, each
// optional. It returns one sentence for the first value that is not usable.
func parseLesson(q url.Values, k int) (lesson.Lesson, error) {
	l := lesson.Lesson{Distance: 1}
	num := func(name string, dst *float64) (bool, error) {
		v := strings.TrimSpace(q.Get(name))
		if v == "" {
			return false, nil
		}
		x, err := strconv.ParseFloat(v, 64)
		if err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
			return false, fmt.Errorf("%s must be a number, not %q", strings.ReplaceAll(name, "_", "-"), v)
		}
		*dst = x
		return true, nil
	}
	whole := func(name string, dst *int) (bool, error) {
		v := strings.TrimSpace(q.Get(name))
		if v == "" {
			return false, nil
		}
		x, err := strconv.Atoi(v)
		if err != nil {
			return false, fmt.Errorf("%s must be a whole number, not %q", strings.ReplaceAll(name, "_", "-"), v)
		}
		*dst = x
		return true, nil
	}
	if _, err := whole("pos", &l.Position); err != nil {
		return l, err
	}
	if l.Position < 0 || l.Position >= k {
		return l, fmt.Errorf("pos %d is not a draft position of this row: it has positions 0 to %d", l.Position, k-1)
	}
	var t, p float64
	var topK int
	if ok, err := num("temperature", &t); err != nil {
		return l, err
	} else if ok {
		if t < 0 || t > math.MaxFloat32 {
			return l, fmt.Errorf("temperature must be >= 0 (0 means greedy) and finite in float32, not %v", t)
		}
		l.Temperature = &t
	}
	if ok, err := whole("top_k", &topK); err != nil {
		return l, err
	} else if ok {
		if topK < 0 {
			return l, fmt.Errorf("top-k must be >= 0 (0 means off), not %d", topK)
		}
		l.TopK = &topK
	}
	if ok, err := num("top_p", &p); err != nil {
		return l, err
	} else if ok {
		if !(p > 0 && p <= 1) {
			return l, fmt.Errorf("top-p must be in (0, 1] (1 means off), not %v", p)
		}
		l.TopP = &p
	}
	if _, err := num("distance", &l.Distance); err != nil {
		return l, err
	}
	if !(l.Distance >= 0 && l.Distance <= 1) {
		return l, fmt.Errorf("distance must be in [0, 1] (0: the draft is the target, 1: the row's own draft), not %v", l.Distance)
	}
	seed, err := parseLessonSeed(q)
	if err != nil {
		return l, err
	}
	l.Seed = seed
	if _, err := whole("step", &l.Steps); err != nil {
		return l, err
	}
	if l.Steps < 0 || l.Steps > lesson.MaxSteps {
		return l, fmt.Errorf("step must be in [0, %d], not %d", lesson.MaxSteps, l.Steps)
	}
	return l, nil
}

// lessonQuery writes the state of st as the URL query that names it, with
// steps steps: every control explicit, so the link means the same even if
// the row's defaults were to change.
func lessonQuery(st *lesson.State, steps int) url.Values {
	return url.Values{
		"pos":         {strconv.Itoa(st.Position)},
		"temperature": {engine.FormatParam(st.Temperature)},
		"top_k":       {strconv.Itoa(st.TopK)},
		"top_p":       {engine.FormatParam(st.TopP)},
		"distance":    {engine.FormatFloat(st.Distance)},
		"seed":        {strconv.FormatUint(st.Seed, 10)},
		"step":        {strconv.Itoa(steps)},
	}
}

// askLesson asks the runner for a lesson (ask) in one of the row slots that
// bound the row pages computed at once; a *lesson.Error is the person's
// 400, any other error an internal one naming the lesson (what), the run
// and the row.
func (s *Server) askLesson(r *http.Request, run store.Run, row int, what string, ask func(ctx context.Context) error) error {
	select {
	case s.rowSlots <- struct{}{}:
	case <-r.Context().Done():
		return r.Context().Err()
	}
	err := ask(r.Context())
	<-s.rowSlots
	if err == nil {
		return nil
	}
	var le *lesson.Error
	if errors.As(err, &le) {
		return &httpError{Status: http.StatusBadRequest, Msg: le.Msg, Err: err}
	}
	return internal(fmt.Errorf("%s run %s row %d: %w", what, run.ID, row, err))
}

// parseLessonSeed reads a lesson's optional seed from its URL query (nil:
// the row's own).
func parseLessonSeed(q url.Values) (*uint64, error) {
	v := strings.TrimSpace(q.Get("seed"))
	if v == "" {
		return nil, nil
	}
	seed, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("seed must be a whole number >= 0, not %q", v)
	}
	return &seed, nil
}

// parseLessonStep reads the step shown of a sampler or tree lesson from its
// URL query: from 1 (first says what step 1 is), 1 when absent.
func parseLessonStep(q url.Values, first string) (int, error) {
	v := strings.TrimSpace(q.Get("step"))
	if v == "" {
		return 1, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("step must be a whole number from 1 (%s), not %q", first, v)
	}
	return n, nil
}
