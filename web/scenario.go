package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"

	"github.com/sampviz/sampviz/web/store"
)

// handleScenario opens a built-in scenario as a new run and goes to the
// view that shows its point.
func (s *Server) handleScenario(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	rerun := r.URL.Query().Get("rerun") == "1" || r.FormValue("rerun") == "1"
	for _, sc := range s.cfg.Scenarios {
		if sc.Name == name {
			run, err := s.openScenario(r.Context(), sc, rerun)
			if err != nil {
				return err
			}
			http.Redirect(w, r, "/runs/"+run.ID+sc.View, http.StatusSeeOther)
			return nil
		}
	}
	return notFound(fmt.Sprintf("There is no scenario %q.", name))
}

// openScenario opens a built-in scenario: its last finished run with the
// same parameters on the default backend, or (none, or rerun) a new run.
func (s *Server) openScenario(ctx context.Context, sc Scenario, rerun bool) (store.Run, error) {
	f, err := sc.Open()
	if err != nil {
		return store.Run{}, internal(fmt.Errorf("open scenario %s: %w", sc.Name, err))
	}
	defer f.Close()
	up, err := s.receiveBody(f, cleanName(sc.FileName))
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
