package web

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"

	"github.com/sampviz/sampviz/engine/session"
	"github.com/sampviz/sampviz/web/store"
	"github.com/sampviz/sampviz/web/view"
)

// handleUploadPage takes the home page's form: it redirects to the new run,
// or shows the home page again with the one sentence that says what was
// wrong with the upload.
func (s *Server) handleUploadPage(w http.ResponseWriter, r *http.Request) error {
	run, _, err := s.acceptUpload(w, r)
	if err != nil {
		he := s.logError(r, err)
		h, herr := s.homeData(r, he.Msg)
		if herr != nil {
			return herr
		}
		if he.RetryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(he.RetryAfter))
		}
		s.render(w, r, he.Status, homePage(s.chrome(), h))
		return nil
	}
	http.Redirect(w, r, "/runs/"+run.ID, http.StatusSeeOther)
	return nil
}

// handleUploadAPI takes a dump (multipart or raw body, POST or PUT) and
// answers 201 with the new run.
func (s *Server) handleUploadAPI(w http.ResponseWriter, r *http.Request) error {
	run, _, err := s.acceptUpload(w, r)
	if err != nil {
		return err
	}
	return s.answerRun(w, r, run.ID, http.StatusCreated)
}

// acceptUpload reads an upload (a multipart form with a file, or a raw
// body), checks it with the runner and creates its run, queued. Nothing is
// stored unless the dump is valid and the queue has room.
func (s *Server) acceptUpload(w http.ResponseWriter, r *http.Request) (store.Run, *session.DumpInfo, error) {
	// The query may set the run's parameters and backend, as a rerun's form
	// does (?trials=1000): checked before anything is read.
	p, backend, err := s.parseRerun(r.URL.Query())
	if err != nil {
		return store.Run{}, nil, badRequest(view.Sentence(err.Error()))
	}
	if backend == "" {
		backend = s.defaultBackend()
	}
	// Past the limit the reader fails and the connection is closed after the
	// answer, so a huge upload is cut off rather than read to its end.
	r.Body = http.MaxBytesReader(w, r.Body, s.cfg.MaxUpload)
	up, tok, err := s.receive(w, r)
	if err != nil {
		return store.Run{}, nil, err
	}
	defer os.Remove(up.path) // a no-op once adopted
	if tok != nil {
		defer os.Remove(tok.path)
	}
	if len(up.fields) > 0 {
		// The form's fields, where the query leaves them unset.
		q := r.URL.Query()
		for name, v := range up.fields {
			if q.Get(name) == "" {
				q[name] = v
			}
		}
		if p, _, err = s.parseRerun(q); err != nil {
			return store.Run{}, nil, badRequest(view.Sentence(err.Error()))
		}
	}
	job := s.job(store.Run{FileName: up.name, Backend: backend}, p, nil)
	job.DumpPath = up.path
	var tokPath string
	if tok != nil {
		tokPath, job.TokenizerPath, job.TokenizerName = tok.path, tok.path, tok.name
	}
	info, err := s.runner.Admit(r.Context(), job)
	if err != nil {
		var bad *session.InputError
		if errors.As(err, &bad) {
			msg := bad.Error()
			status := http.StatusBadRequest
			if bad.OverBudget {
				status = http.StatusRequestEntityTooLarge
			}
			return store.Run{}, nil, &httpError{Status: status, Msg: view.Sentence(msg), Err: err}
		}
		return store.Run{}, nil, internal(fmt.Errorf("inspect %s: %w", up.name, err))
	}
	// Only a body that is in and checked takes a place in the queue: a slow
	// client holds no place while it sends.
	if !s.runs.Reserve() {
		return store.Run{}, nil, errQueueFull(s.cfg.Queue)
	}
	reserved := true
	defer func() {
		if reserved {
			s.runs.Release()
		}
	}()
	if _, err := s.store.AdoptDump(up.path, up.sha, up.ext); err != nil {
		return store.Run{}, nil, storeError(err)
	}
	run, err := s.createRun(store.Run{
		FileName: up.name, DumpSHA: up.sha, DumpExt: up.ext, DumpSize: up.size,
		Backend: backend,
	}, info, p, tokPath, false)
	if err != nil {
		return store.Run{}, nil, err
	}
	reserved = false
	return run, info, nil
}
