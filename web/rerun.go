package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/session"
	"github.com/sampviz/sampviz/web/store"
	"github.com/sampviz/sampviz/web/view"
)

// handleRerunPage takes the run page's rerun form and goes to the new run.
func (s *Server) handleRerunPage(w http.ResponseWriter, r *http.Request) error {
	if err := r.ParseForm(); err != nil {
		return badRequest("The rerun form could not be read; send it again.")
	}
	run, err := s.rerun(r.Context(), r.PathValue("id"), r.PostForm)
	if err != nil {
		return err
	}
	http.Redirect(w, r, "/runs/"+run.ID, http.StatusSeeOther)
	return nil
}

// handleRerunAPI takes a rerun as JSON (rerunRequest) or as the form, and
// answers 201 with the new run.
func (s *Server) handleRerunAPI(w http.ResponseWriter, r *http.Request) error {
	form := url.Values{}
	ct := r.Header.Get("Content-Type")
	if strings.HasPrefix(ct, "application/json") {
		var req rerunRequest
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			return badRequest("The rerun request is not the JSON this API takes: " + err.Error() + ".")
		}
		req.Overrides.Each(func(p *engine.Param, text string) { form.Set(p.Name, text) })
		form.Set("backend", req.Backend)
	} else {
		if err := r.ParseForm(); err != nil {
			return badRequest("The rerun form could not be read; send it again.")
		}
		form = r.PostForm
	}
	run, err := s.rerun(r.Context(), r.PathValue("id"), form)
	if err != nil {
		return err
	}
	return s.answerRun(w, r, run.ID, http.StatusCreated)
}

// rerunRequest is the JSON body of POST /api/runs/{id}/rerun.
type rerunRequest struct {
	engine.Overrides
	Backend string `json:"backend,omitempty"`
}

// rerun queues a new run of run id's dump with the parameters and backend
// of a form (empty fields keep the dump's values).
func (s *Server) rerun(ctx context.Context, id string, form url.Values) (store.Run, error) {
	parent, _, _, err := s.lookupRun(id)
	if err != nil {
		return store.Run{}, err
	}
	p, backend, err := s.parseRerun(form)
	if err != nil {
		return store.Run{}, badRequest(view.Sentence(err.Error()))
	}
	if backend == "" {
		backend = parent.Backend
	}
	// The new parameters may ask for more (draws, trials): the budget is
	// checked again, as for an upload.
	job := s.job(parent, p, nil)
	job.Backend = backend
	info, err := s.runner.Admit(ctx, job)
	if err != nil {
		var bad *session.InputError
		if errors.As(err, &bad) {
			status := http.StatusBadRequest
			if bad.OverBudget {
				status = http.StatusRequestEntityTooLarge
			}
			return store.Run{}, &httpError{Status: status, Msg: view.Sentence(bad.Error()), Err: err}
		}
		return store.Run{}, internal(fmt.Errorf("inspect the dump of run %s: %w", parent.ID, err))
	}
	if !s.runs.Reserve() {
		return store.Run{}, errQueueFull(s.cfg.Queue)
	}
	run, err := s.createRun(store.Run{
		FileName: parent.FileName, DumpSHA: parent.DumpSHA, DumpExt: parent.DumpExt, DumpSize: parent.DumpSize,
		Backend: backend, Parent: parent.ID,
	}, info, p, job.TokenizerPath, true)
	if err != nil {
		s.runs.Release()
		return store.Run{}, err
	}
	return run, nil
}
