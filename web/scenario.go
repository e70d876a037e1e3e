package web

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"

	"github.com/sampviz/sampviz/web/store"
	"github.com/sampviz/sampviz/web/view"
)

// handleScenario opens a built-in scenario as a new run and goes to the
// view that shows its point.
func (s *Server) handleScenario(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	rerun := r.URL.Query().Get("rerun") == "1" || r.FormValue("rerun") == "1"
	for _, sc := range s.cfg.Scenarios {
		if sc.Name == name {
			run, err := s.openScenario(r.Context(), sc, sc.Open, sc.FileName, rerun)
			if err != nil {
				return err
			}
			if sc.OpenAfter != nil {
				// A before/after pair opens on the diff of its two runs.
				after, err := s.openScenario(r.Context(), sc, sc.OpenAfter, sc.AfterFileName, rerun)
				if err != nil {
					return err
				}
				http.Redirect(w, r, view.DiffURL(run.ID, after.ID, nil), http.StatusSeeOther)
				return nil
			}
			http.Redirect(w, r, "/runs/"+run.ID+sc.View, http.StatusSeeOther)
			return nil
		}
	}
	return notFound(fmt.Sprintf("There is no scenario %q.", name))
}

// compareAfter is "/runs/{id}?compare=after": the diff page of a
// before/after scenario's pair, run being the before run. It opens the
// after dump's last finished run (or queues one) and goes to the diff.
func (s *Server) compareAfter(w http.ResponseWriter, r *http.Request, run store.Run) error {
	for _, sc := range s.cfg.Scenarios {
		if sc.OpenAfter == nil {
			continue
		}
		sha, err := s.scenarioSHA(sc)
		if err != nil {
			return err
		}
		if sha != run.DumpSHA {
			continue
		}
		// A GET starts no work: without a finished run of the after dump,
		// the page offers to open the scenario (a POST).
		after, err := s.scenarioRun(r.Context(), sc, sc.OpenAfter, sc.AfterFileName, false, false)
		if errors.Is(err, store.ErrNotFound) {
			s.render(w, r, http.StatusOK, scenarioPairPage(s.chrome(), sc.Name, sc.Title, run.ID))
			return nil
		}
		if err != nil {
			return err
		}
		q := r.URL.Query()
		q.Del("compare")
		http.Redirect(w, r, view.DiffURL(run.ID, after.ID, q), http.StatusSeeOther)
		return nil
	}
	return badRequest(fmt.Sprintf("compare=after opens the diff page of a before/after scenario, and run %s is not the before run of one; compare it with another run from its page's \"Compare with\" list.", run.ID))
}

// scenarioSHA returns the SHA-256 of a scenario's (before) dump, computed
// once.
func (s *Server) scenarioSHA(sc Scenario) (string, error) {
	s.mu.Lock()
	sha, ok := s.scenarioSHAs[sc.Name]
	s.mu.Unlock()
	if ok {
		return sha, nil
	}
	f, err := sc.Open()
	if err != nil {
		return "", internal(fmt.Errorf("open scenario %s: %w", sc.Name, err))
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", internal(fmt.Errorf("read scenario %s: %w", sc.Name, err))
	}
	sha = hex.EncodeToString(h.Sum(nil))
	s.mu.Lock()
	if s.scenarioSHAs == nil {
		s.scenarioSHAs = map[string]string{}
	}
	s.scenarioSHAs[sc.Name] = sha
	s.mu.Unlock()
	return sha, nil
}

// openScenario opens a built-in scenario's dump (open, named fileName):
// its last finished run with the same parameters on the default backend,
// or (none, or rerun) a new run.
func (s *Server) openScenario(ctx context.Context, sc Scenario, open func() (fs.File, error), fileName string, rerun bool) (store.Run, error) {
	return s.scenarioRun(ctx, sc, open, fileName, rerun, true)
}

// scenarioRun is openScenario; without create it only finds the finished
// run, and answers store.ErrNotFound when there is none.
func (s *Server) scenarioRun(ctx context.Context, sc Scenario, open func() (fs.File, error), fileName string, rerun, create bool) (store.Run, error) {
	f, err := open()
	if err != nil {
		return store.Run{}, internal(fmt.Errorf("open scenario %s: %w", sc.Name, err))
	}
	defer f.Close()
	up, err := s.receiveBody(f, cleanName(fileName))
	if err != nil {
		return store.Run{}, err
	}
	defer os.Remove(up.path)
	if !rerun {
		params, err := json.Marshal(sc.Params)
		if err != nil {
			return store.Run{}, internal(err)
		}
		if run, err := s.store.Finished(up.sha, up.ext, params, s.defaultBackend()); err == nil {
			return run, nil
		} else if !errors.Is(err, store.ErrNotFound) {
			return store.Run{}, internal(err)
		}
	}
	if !create {
		return store.Run{}, store.ErrNotFound
	}
	if !s.runs.Reserve() {
		return store.Run{}, errQueueFull(s.cfg.Queue)
	}
	reserved := true
	defer func() {
		if reserved {
			s.runs.Release()
		}
	}()
	job := s.job(store.Run{FileName: up.name, Backend: s.defaultBackend()}, sc.Params, nil)
	job.DumpPath = up.path
	info, err := s.runner.Admit(ctx, job)
	if err != nil {
		return store.Run{}, internal(fmt.Errorf("inspect scenario %s: %w", sc.Name, err))
	}
	if _, err := s.store.AdoptDump(up.path, up.sha, up.ext); err != nil {
		return store.Run{}, storeError(err)
	}
	run, err := s.createRun(store.Run{FileName: up.name, DumpSHA: up.sha, DumpExt: up.ext, DumpSize: up.size, Backend: s.defaultBackend()}, info, sc.Params, "", false)
	if err != nil {
		return store.Run{}, err
	}
	reserved = false
	return run, nil
}
