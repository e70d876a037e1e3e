package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/session"
	"github.com/sampviz/sampviz/web/live"
	"github.com/sampviz/sampviz/web/store"
	"github.com/sampviz/sampviz/web/view"
)

// judged is a run with the judgement a URL asks for.
type judged struct {
	run    store.Run
	info   session.DumpInfo
	params engine.Overrides
	// own is the run's own judgement; j is the one asked for (own when the
	// URL names no tolerances, or the run's own tolerances).
	own store.Judgement
	j   store.Judgement
	// tol is the asked-for tolerances of a re-judgement, nil for own.
	tol   *engine.Tolerances
	topic *live.Topic
}

// query returns the URL query that names this judgement ("" for own).
func (v *judged) query() url.Values { return view.ToleranceValues(v.tol) }

// lookupRun reads run id and decodes its metadata.
func (s *Server) lookupRun(id string) (store.Run, *session.DumpInfo, engine.Overrides, error) {
	if !store.ValidID(id) {
		return store.Run{}, nil, engine.Overrides{}, notFound(fmt.Sprintf("There is no run %q: run ids are 10 letters and digits.", id))
	}
	run, err := s.store.Run(id)
	if errors.Is(err, store.ErrNotFound) {
		return store.Run{}, nil, engine.Overrides{}, notFound(fmt.Sprintf("There is no run %s on this server.", id))
	}
	if err != nil {
		return store.Run{}, nil, engine.Overrides{}, internal(err)
	}
	var info session.DumpInfo
	var p engine.Overrides
	if err := json.Unmarshal(run.Info, &info); err != nil {
		return store.Run{}, nil, engine.Overrides{}, internal(fmt.Errorf("decode info of run %s: %w", id, err))
	}
	if err := json.Unmarshal(run.Params, &p); err != nil {
		return store.Run{}, nil, engine.Overrides{}, internal(fmt.Errorf("decode params of run %s: %w", id, err))
	}
	return run, &info, p, nil
}

// lookupJudged finds the run and judgement r's URL names. It never
// creates one: a GET is safe; judging with other tolerances is a POST
// (manage.go).
func (s *Server) lookupJudged(r *http.Request) (*judged, error) {
	run, info, p, err := s.lookupRun(r.PathValue("id"))
	if err != nil {
		return nil, err
	}
	tol, err := parseTolerances(r.URL.Query())
	if err != nil {
		return nil, badRequest(view.Sentence(err.Error()))
	}
	own, err := s.store.Judgement(run.ID, "")
	if err != nil {
		return nil, internal(err)
	}
	v := &judged{run: run, info: *info, params: p, own: own, j: own}
	ownTopic := s.runs.Topic(run, own, info)
	if ot := ownTopic.JudgedWith(); tol != nil && ot != nil && *ot == *tol {
		tol = nil // the run's own tolerances: its own judgement
	}
	if tol == nil {
		v.topic = ownTopic
		return v, nil
	}
	v.tol = tol
	j, err := s.store.Judgement(run.ID, toleranceKey(*tol))
	if errors.Is(err, store.ErrNotFound) {
		return nil, &notJudged{runID: run.ID, tol: *tol, httpError: notFound(fmt.Sprintf("Run %s has not been judged with these tolerances: judge it with them from the run page's form (POST /runs/%s/judgements, or POST /api/runs/%s/judgements).", run.ID, run.ID, run.ID))}
	}
	if err != nil {
		return nil, internal(err)
	}
	v.j = j
	v.topic = s.runs.Topic(run, j, info)
	return v, nil
}

// notJudged is the 404 of a URL naming tolerances its run has not been
// judged with; the run page turns it into a prompt to judge (a POST).
type notJudged struct {
	*httpError
	runID string
	tol   engine.Tolerances
}

// Unwrap is the 404 every other handler answers with.
func (e *notJudged) Unwrap() error { return e.httpError }

// queueRejudge records and queues a re-judgement of run with tol, unless
// another request queued it first.
func (s *Server) queueRejudge(run store.Run, info *session.DumpInfo, p engine.Overrides, own store.Judgement, key string, tol *engine.Tolerances) error {
	if own.State != store.Done {
		return &httpError{Status: http.StatusConflict, Msg: fmt.Sprintf("Run %s has not finished; it can be re-judged with other tolerances once it has.", run.ID)}
	}
	if !s.runs.Reserve() {
		return errQueueFull(s.cfg.Queue)
	}
	tj, err := json.Marshal(tol)
	if err != nil {
		s.runs.Release()
		return internal(err)
	}
	created, err := s.store.CreateJudgement(run.ID, key, tj)
	if err != nil || !created {
		s.runs.Release() // an error, or another request queued it first
		if err != nil {
			return internal(err)
		}
		return nil
	}
	s.runs.Enqueue(live.Task{Job: s.job(run, p, tol), RunID: run.ID, Key: key, Rejudge: true, Rows: info.Rows, Vocab: info.Vocab})
	s.log.Info("re-judgement queued", "run", run.ID, "judgement", key)
	return nil
}

// parseRow reads the {row} path value of a run with rows rows.
func parseRow(r *http.Request, rows int) (int, error) {
	s := r.PathValue("row")
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n >= rows {
		return 0, notFound(fmt.Sprintf("There is no row %s: this run has rows 0 to %d.", s, rows-1))
	}
	return n, nil
}

// report reads the stored report of a finished judgement.
// awaitRejudgement waits, for a minute at most, while the re-judgement v
// names is under way on a finished run, and then reads it again: a report
// of it is a moment away, not a conflict.
func (s *Server) awaitRejudgement(ctx context.Context, v *judged) error {
	if v.tol == nil || v.own.State != store.Done || v.j.State.Finished() {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil // answered as it stands
		case <-tick.C:
		}
		j, err := s.store.Judgement(v.run.ID, v.j.Key)
		if err != nil {
			return internal(err)
		}
		if j.State.Finished() {
			v.j = j
			return nil
		}
	}
}

func (s *Server) report(v *judged) (*engine.Report, error) {
	if v.j.State != store.Done {
		if v.j.State == store.Failed {
			return nil, &httpError{Status: http.StatusConflict, Msg: fmt.Sprintf("Run %s failed, so it has no report: %s", v.run.ID, v.j.Message)}
		}
		return nil, &httpError{Status: http.StatusConflict, Msg: fmt.Sprintf("Run %s has not finished; its report is ready when it has.", v.run.ID)}
	}
	rep, err := s.runs.Report(v.run.ID, v.j.Key)
	if err != nil {
		return nil, internal(err)
	}
	return rep, nil
}

// rowReports returns row r of every output: from the report when the
// judgement is done (the report too), else from what has streamed in so
// far (nil entries for outputs that have not reached the row; a nil
// report).
func (s *Server) rowReports(v *judged, r int) ([]engine.OutputInfo, []*engine.RowReport, *engine.Report, error) {
	if v.j.State == store.Done {
		rep, err := s.report(v)
		if err != nil {
			return nil, nil, nil, err
		}
		outs := make([]engine.OutputInfo, len(rep.Outputs))
		rows := make([]*engine.RowReport, len(rep.Outputs))
		for i, o := range rep.Outputs {
			outs[i] = engine.OutputInfo{Name: o.Name, External: o.External, Kind: o.Kind}
			for k := range o.Rows {
				if o.Rows[k].Row == r {
					rows[i] = &o.Rows[k]
					break
				}
			}
		}
		return outs, rows, rep, nil
	}
	outs, _ := v.topic.Snapshot()
	rows := make([]*engine.RowReport, len(outs))
	for i := range outs {
		rows[i] = v.topic.RowReport(i, r)
	}
	return outs, rows, nil, nil
}
