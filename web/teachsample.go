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

// The sampler teaching mode: /runs/{id}/rows/{r}/teach on a sample row
// steps through one draw of the row (its own logits, temperature, filters
// and seed) by one method: sort-free rejection sampling round by round,
// the Gumbel-max race, or the inverse CDF. The URL names it all (method,
// draw, seed, step); the page script steps through the draw's steps
// without asking again, and asks /api/runs/{id}/rows/{r}/teach for another
// method, draw or seed. teach.go's teachFor hands sample rows to this
// file.

// sampleLessonFor reads the row and draw a sampler teaching URL of run names
// and asks the runner for it.
func (s *Server) sampleLessonFor(r *http.Request, run store.Run, info *session.DumpInfo, p engine.Overrides) (*view.SampleTeachView, error) {
	row, err := parseRow(r, info.Rows)
	if err != nil {
		return nil, err
	}
	l, step, err := parseSampleLesson(r.URL.Query())
	if err != nil {
		return nil, badRequest(view.Sentence(err.Error()))
	}
	var st *lesson.SampleState
	if err := s.askLesson(r, run, row, "teach sampler", func(ctx context.Context) (err error) {
		st, err = s.runner.TeachSample(ctx, s.job(run, p, nil), row, l)
		return err
	}); err != nil {
		return nil, err
	}
	base := fmt.Sprintf("/runs/%s/rows/%d", run.ID, row)
	page := func(method engine.SampleMethod, draw int, seed uint64, step int) string {
		return view.WithQuery(base+"/teach", sampleLessonQuery(method, draw, seed, step))
	}
	v := view.NewSampleTeachView(st, step-1, func(i int) string { return page(st.Method, st.Draw, st.Seed, i+1) })
	v.Run, v.Info, v.Row = run, *info, row
	v.RowURL = base
	v.URL = page(st.Method, st.Draw, st.Seed, v.Index+1)
	v.API = "/api" + v.URL
	if st.Draw > 0 {
		v.PrevDraw = page(st.Method, st.Draw-1, st.Seed, 1)
	}
	if st.Draw+1 < lesson.MaxDraw {
		v.NextDraw = page(st.Method, st.Draw+1, st.Seed, 1)
	}
	for _, m := range view.SampleMethods {
		v.Methods = append(v.Methods, view.MethodLink{Method: string(m), Name: view.MethodName(m), URL: page(m, st.Draw, st.Seed, 1), Active: m == st.Method})
	}
	return v, nil
}

// parseSampleLesson reads a sampler lesson from a URL query: method, draw,
// seed and step (the step shown, from 1), each optional. It returns one
// sentence for the first value that is not usable.
func parseSampleLesson(q url.Values) (lesson.SampleLesson, int, error) {
	var l lesson.SampleLesson
	switch m := engine.SampleMethod(strings.TrimSpace(q.Get("method"))); m {
	case engine.SampleAuto, engine.SampleInverseCDF, engine.SampleRejection, engine.SampleGumbel:
		l.Method = m
	case "auto":
	default:
		return l, 0, fmt.Errorf("method must be rejection, gumbel or inverse_cdf, not %q", string(m))
	}
	if v := strings.TrimSpace(q.Get("draw")); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n >= lesson.MaxDraw {
			return l, 0, fmt.Errorf("draw must be a whole number from 0 to %d, not %q", lesson.MaxDraw-1, v)
		}
		l.Draw = n
	}
	seed, err := parseLessonSeed(q)
	if err != nil {
		return l, 0, err
	}
	l.Seed = seed
	step, err := parseLessonStep(q, "the draw's first step")
	return l, step, err
}

// sampleLessonQuery writes the URL query of a sampler lesson's step, the
// method and seed explicit, so the link means the same even if the run's
// method or the row's seed were to change.
func sampleLessonQuery(method engine.SampleMethod, draw int, seed uint64, step int) url.Values {
	return url.Values{
		"method": {string(method)},
		"draw":   {strconv.Itoa(draw)},
		"seed":   {strconv.FormatUint(seed, 10)},
		"step":   {strconv.Itoa(step)},
	}
}
