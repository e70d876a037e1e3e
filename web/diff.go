package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/diff"
	"github.com/sampviz/sampviz/engine/session"
	"github.com/sampviz/sampviz/web/store"
	"github.com/sampviz/sampviz/web/view"
)

// The diff page compares two stored runs of one op, A (before) and B
// (after): session.Diff judges both again from their stored outputs (no
// kernel runs) and engine/diff compares them. A comparison is kept in
// memory once made, so that reloading the page or following its links does
// not judge again.

// diffSide is one run of a comparison.
type diffSide struct {
	run    store.Run
	info   *session.DumpInfo
	params engine.Overrides
	own    store.Judgement
}

// notFinished is the 409 of a comparison whose run has not finished: the
// page offers to wait for it (its websocket), the API says it in a sentence.
type notFinished struct {
	*httpError
	runID string
}

// Unwrap is the 409 every other handler answers with.
func (e *notFinished) Unwrap() error { return e.httpError }

// diffCache keeps the last comparisons made, by runs and tolerances.
type diffCache struct {
	mu    sync.Mutex
	order []string
	m     map[string]*diff.Diff
}

// maxCachedDiffs bounds the comparisons kept in memory.
const maxCachedDiffs = 16

func (c *diffCache) get(key string) *diff.Diff {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[key]
}

func (c *diffCache) put(key string, d *diff.Diff) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]*diff.Diff{}
	}
	if _, ok := c.m[key]; ok {
		return
	}
	if len(c.order) >= maxCachedDiffs {
		delete(c.m, c.order[0])
		c.order = c.order[1:]
	}
	c.order = append(c.order, key)
	c.m[key] = d
}

// forget drops the comparisons that involve run id (deleted).
func (c *diffCache) forget(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	kept := c.order[:0]
	for _, k := range c.order {
		if len(k) >= 21 && (k[:10] == id || k[11:21] == id) {
			delete(c.m, k)
			continue
		}
		kept = append(kept, k)
	}
	c.order = kept
}

// handleDiffPage is "/runs/{a}/diff/{b}": run b against run a.
func (s *Server) handleDiffPage(w http.ResponseWriter, r *http.Request) error {
	d, err := s.diffData(r)
	var nf *notFinished
	if errors.As(err, &nf) {
		s.render(w, r, nf.Status, diffWaitPage(s.chrome(), nf.Msg, view.WithQuery("/runs/"+nf.runID+"/ws", nil)))
		return nil
	}
	if err != nil {
		return err
	}
	s.render(w, r, http.StatusOK, diffPage(s.chrome(), d))
	return nil
}

// diffJSON is a comparison as GET /api/runs/{a}/diff/{b} describes it.
type diffJSON struct {
	URL  string     `json:"url"`
	RunA diffRunRef `json:"run_a"`
	RunB diffRunRef `json:"run_b"`
	// Tolerances are those both runs were judged with (nil: their own).
	Tolerances *engine.Tolerances `json:"tolerances,omitempty"`
	Diff       *diff.Diff         `json:"diff"`
}

// diffRunRef names one run of a comparison.
type diffRunRef struct {
	ID       string    `json:"id"`
	URL      string    `json:"url"`
	FileName string    `json:"file_name"`
	Created  time.Time `json:"created"`
}

// handleDiffAPI is the comparison as JSON: engine/diff.Diff, with the runs.
func (s *Server) handleDiffAPI(w http.ResponseWriter, r *http.Request) error {
	d, err := s.diffData(r)
	if err != nil {
		return err
	}
	ref := func(x view.DiffRun) diffRunRef {
		return diffRunRef{ID: x.Run.ID, URL: view.WithQuery("/runs/"+x.Run.ID, view.ToleranceValues(d.Tol)), FileName: x.Run.FileName, Created: x.Run.Created}
	}
	writeJSON(w, http.StatusOK, diffJSON{
		URL: view.DiffURL(d.A.Run.ID, d.B.Run.ID, view.ToleranceValues(d.Tol)), RunA: ref(d.A), RunB: ref(d.B),
		Tolerances: d.Tol, Diff: d.Diff,
	})
	return nil
}

// handleCompareWith is the run page's "compare with" form without the page
// script: /runs/{id}/diff?with=OTHER goes to the diff of the two, the older
// run as A (before).
func (s *Server) handleCompareWith(w http.ResponseWriter, r *http.Request) error {
	run, _, _, err := s.lookupRun(r.PathValue("id"))
	if err != nil {
		return err
	}
	q := r.URL.Query()
	otherID := q.Get("with")
	if otherID == "" {
		return badRequest("Name the run to compare with: /runs/" + run.ID + "/diff?with=RUN_ID.")
	}
	other, _, _, err := s.lookupRun(otherID)
	if err != nil {
		return err
	}
	q.Del("with")
	a, b := beforeAfter(run, other)
	http.Redirect(w, r, view.DiffURL(a.ID, b.ID, q), http.StatusSeeOther)
	return nil
}

// beforeAfter orders two runs by when they were made: the older is A.
func beforeAfter(x, y store.Run) (store.Run, store.Run) {
	if y.Created.Before(x.Created) {
		return y, x
	}
	return x, y
}

// diffData gathers the diff page (and its API) of the runs r's URL names.
func (s *Server) diffData(r *http.Request) (*view.DiffPage, error) {
	var sides [2]diffSide
	for i, key := range []string{"a", "b"} {
		run, info, p, err := s.lookupRun(r.PathValue(key))
		if err != nil {
			return nil, err
		}
		sides[i] = diffSide{run: run, info: info, params: p}
	}
	a, b := &sides[0], &sides[1]
	if a.run.ID == b.run.ID {
		return nil, badRequest(fmt.Sprintf("A comparison needs two runs; both sides name run %s.", a.run.ID))
	}
	if a.info.Op != b.info.Op {
		msg := diff.Refuse(diffName(a.run), a.info.Op, diffName(b.run), b.info.Op).Msg
		return nil, badRequest(view.Sentence(msg))
	}
	q := r.URL.Query()
	tol, err := parseTolerances(q)
	if err != nil {
		return nil, badRequest(view.Sentence(err.Error()))
	}
	for _, sd := range []*diffSide{a, b} {
		own, err := s.store.Judgement(sd.run.ID, "")
		if err != nil {
			return nil, internal(err)
		}
		// The executor records a finished judgement in its topic before
		// the index: a page reloaded by the final message finds it done.
		if !own.State.Finished() && s.runs.Topic(sd.run, own, sd.info).Final() != nil {
			own.State = store.Done
		}
		sd.own = own
		switch own.State {
		case store.Done:
		case store.Failed, store.Cancelled:
			return nil, &httpError{Status: http.StatusConflict, Msg: fmt.Sprintf("Run %s %s, so it has nothing to compare: %s", sd.run.ID, own.State, own.Message)}
		default:
			return nil, &notFinished{runID: sd.run.ID, httpError: &httpError{Status: http.StatusConflict,
				Msg: fmt.Sprintf("Run %s has not finished (it is %s); the comparison is ready once both runs have.", sd.run.ID, own.State)}}
		}
	}
	d, err := s.compare(r.Context(), a, b, tol)
	if err != nil {
		return nil, err
	}
	page := &view.DiffPage{
		A: view.DiffRun{Run: a.run, Info: *a.info, J: a.own}, B: view.DiffRun{Run: b.run, Info: *b.info, J: b.own},
		Diff: d, Tol: tol, Query: view.ToleranceValues(tol), AllRows: q.Get("rows") == "all",
	}
	page.Output = view.PickOutput(d, q.Get("out"))
	page.Charts = view.DiffCharts(page.Shown())
	return page, nil
}

// diffName is what a comparison calls a stored run.
func diffName(run store.Run) string { return "run " + run.ID + " (" + run.FileName + ")" }

// compare returns the comparison of a and b judged with tol, from the cache
// or from the session; one comparison is made at a time.
func (s *Server) compare(ctx context.Context, a, b *diffSide, tol *engine.Tolerances) (*diff.Diff, error) {
	key := a.run.ID + "/" + b.run.ID + "/"
	if tol != nil {
		key += toleranceKey(*tol)
	}
	if d := s.diffs.get(key); d != nil {
		return d, nil
	}
	select {
	case s.diffSlots <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-s.diffSlots }()
	if d := s.diffs.get(key); d != nil {
		return d, nil // made while this request waited
	}
	jobs := [2]session.Job{}
	for i, sd := range []*diffSide{a, b} {
		jobs[i] = s.job(sd.run, sd.params, tol)
		jobs[i].FileName = diffName(sd.run)
	}
	d, err := s.runner.Diff(ctx, jobs[0], jobs[1])
	if err != nil {
		var bad *session.InputError
		if errors.As(err, &bad) {
			status := http.StatusBadRequest
			if bad.OverBudget {
				status = http.StatusRequestEntityTooLarge
			}
			return nil, &httpError{Status: status, Msg: view.Sentence(s.scrub(bad.Error())), Err: err}
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, internal(fmt.Errorf("compare runs %s and %s: %w", a.run.ID, b.run.ID, err))
	}
	s.diffs.put(key, d)
	return d, nil
}

// compareCandidates lists the recent finished runs of op other than run id
// that its page offers to compare with, each with the URL of the diff.
func (s *Server) compareCandidates(run store.Run, op engine.Op, q url.Values) []view.CompareCandidate {
	list, err := s.store.Recent(100)
	if err != nil {
		s.log.Error("list runs to compare with", "err", err)
		return nil
	}
	var out []view.CompareCandidate
	for _, l := range list {
		if l.ID == run.ID || l.Judgement.State != store.Done {
			continue
		}
		var info session.DumpInfo
		if json.Unmarshal(l.Info, &info) != nil || info.Op != op {
			continue
		}
		a, b := beforeAfter(run, l.Run)
		c := view.CompareCandidate{ID: l.ID, FileName: l.FileName, When: view.Ago(l.Created), URL: view.DiffURL(a.ID, b.ID, q)}
		if v := l.Judgement.Verdict; v != nil {
			c.Verdict = view.SideVerdict(v.Pass, v.FailedRows)
		}
		out = append(out, c)
		if len(out) == maxCompareCandidates {
			break
		}
	}
	return out
}

// maxCompareCandidates bounds the runs the run page offers to compare with.
const maxCompareCandidates = 8

// scrub removes the data directory from a session's sentence: no sentence
// names a path on the server.
func (s *Server) scrub(msg string) string {
	if dir := s.store.Dir(); dir != "" {
		msg = strings.ReplaceAll(msg, strings.TrimSuffix(dir, "/")+"/", "")
	}
	return msg
}
