package web

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/web/store"
	"github.com/sampviz/sampviz/web/view"
)

// A person stops and removes work: cancel a queued or running run, delete
// a run with its files, judge a finished run again with other tolerances.
// Each is a POST (or DELETE), never a GET: a link cannot do it.

// handleCancelPage is the run page's Cancel button.
func (s *Server) handleCancelPage(w http.ResponseWriter, r *http.Request) error {
	run, _, _, err := s.lookupRun(r.PathValue("id"))
	if err != nil {
		return err
	}
	s.runs.Cancel(run.ID)
	http.Redirect(w, r, "/runs/"+run.ID, http.StatusSeeOther)
	return nil
}

// handleCancelAPI is POST /api/runs/{id}/cancel: 200 with the run, which
// says cancelled (or how it had already ended).
func (s *Server) handleCancelAPI(w http.ResponseWriter, r *http.Request) error {
	run, _, _, err := s.lookupRun(r.PathValue("id"))
	if err != nil {
		return err
	}
	s.runs.Cancel(run.ID)
	return s.answerRun(w, r, run.ID, http.StatusOK)
}

// handleDeletePage is the run page's Delete button: the run goes, with its
// files, and the home page opens.
func (s *Server) handleDeletePage(w http.ResponseWriter, r *http.Request) error {
	if err := s.deleteRun(r.PathValue("id")); err != nil {
		return err
	}
	http.Redirect(w, r, "/", http.StatusSeeOther)
	return nil
}

// handleDeleteAPI is DELETE /api/runs/{id}: 204 once the run and its files
// are gone.
func (s *Server) handleDeleteAPI(w http.ResponseWriter, r *http.Request) error {
	if err := s.deleteRun(r.PathValue("id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// deleteRun cancels run id's work and removes it with its files.
func (s *Server) deleteRun(id string) error {
	run, _, _, err := s.lookupRun(id)
	if err != nil {
		return err
	}
	if err := s.runs.Remove(run.ID); err != nil {
		return storeError(err)
	}
	s.diffs.forget(run.ID)
	s.log.Info("run deleted", "run", run.ID, "file", run.FileName)
	return nil
}

// maxJudgements bounds the re-judgements a run keeps: past it, the oldest
// finished one nobody watches goes.
const maxJudgements = 8

// handleJudgePage is the run page's "Judge again" form: it queues the
// re-judgement (or finds it) and opens the run page with its tolerances.
func (s *Server) handleJudgePage(w http.ResponseWriter, r *http.Request) error {
	if err := r.ParseForm(); err != nil {
		return badRequest("The form could not be read; send it again.")
	}
	tol, err := s.judgeAgain(r.PathValue("id"), r.PostForm)
	if err != nil {
		return err
	}
	http.Redirect(w, r, view.WithQuery("/runs/"+r.PathValue("id"), view.ToleranceValues(tol)), http.StatusSeeOther)
	return nil
}

// handleJudgeAPI is POST /api/runs/{id}/judgements with the tolerances as
// JSON ({"strict": {"atol", "rtol"}, "native": {...}, "p_value"}) or as the
// form's fields (satol, srtol, natol, nrtol, pvalue): 202 with the run
// under those tolerances, judged or being judged.
func (s *Server) handleJudgeAPI(w http.ResponseWriter, r *http.Request) error {
	form := r.URL.Query()
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		var tol engine.Tolerances
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<12))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&tol); err != nil {
			return badRequest("The judgement request is not the JSON this API takes: " + err.Error() + ".")
		}
		form = view.ToleranceValues(&tol)
	} else if err := r.ParseForm(); err == nil && len(r.PostForm) > 0 {
		form = r.PostForm
	}
	tol, err := s.judgeAgain(r.PathValue("id"), url.Values(form))
	if err != nil {
		return err
	}
	r2 := r.Clone(r.Context())
	r2.URL.RawQuery = view.ToleranceValues(tol).Encode()
	v, err := s.lookupJudged(r2)
	if err != nil {
		return err
	}
	w.Header().Set("Location", view.WithQuery("/runs/"+v.run.ID, v.query()))
	writeJSON(w, http.StatusAccepted, s.runJSON(r, v))
	return nil
}

// judgeAgain queues a re-judgement of run id with the tolerances of form,
// unless it exists (or they are the run's own), keeping at most
// maxJudgements re-judgements a run.
func (s *Server) judgeAgain(id string, form url.Values) (*engine.Tolerances, error) {
	run, info, p, err := s.lookupRun(id)
	if err != nil {
		return nil, err
	}
	tol, err := parseTolerances(form)
	if err != nil {
		return nil, badRequest(view.Sentence(err.Error()))
	}
	if tol == nil {
		return nil, badRequest("Judging again needs all of satol, srtol, natol, nrtol and pvalue.")
	}
	own, err := s.store.Judgement(run.ID, "")
	if err != nil {
		return nil, internal(err)
	}
	if ot := s.runs.Topic(run, own, info).JudgedWith(); ot != nil && *ot == *tol {
		return tol, nil // the run's own tolerances: its own judgement
	}
	key := toleranceKey(*tol)
	if _, err := s.store.Judgement(run.ID, key); err == nil {
		return tol, nil
	}
	if err := s.makeRoomForJudgement(run); err != nil {
		return nil, err
	}
	return tol, s.queueRejudge(run, info, p, own, key, tol)
}

// makeRoomForJudgement removes run's oldest finished re-judgement when it
// holds maxJudgements already.
func (s *Server) makeRoomForJudgement(run store.Run) error {
	js, err := s.store.Judgements(run.ID)
	if err != nil {
		return internal(err)
	}
	var others []store.Judgement
	for _, j := range js {
		if j.Key != "" {
			others = append(others, j)
		}
	}
	if len(others) < maxJudgements {
		return nil
	}
	for _, j := range others {
		if j.State.Finished() {
			if err := s.store.ForgetJudgement(run.ID, j.Key); err != nil {
				return internal(err)
			}
			s.runs.ForgetJudgement(run.ID, j.Key)
			return nil
		}
	}
	return &httpError{Status: http.StatusTooManyRequests, RetryAfter: retryAfter,
		Msg: fmt.Sprintf("Run %s has %d re-judgements under way; wait for one to finish.", run.ID, len(others))}
}
