package web

import (
	"context"
	"fmt"
	"net/http"
	"os"

	"github.com/sampviz/sampviz/web/store"
)

// handleScenario opens a built-in scenario as a new run and goes to the
// view that shows its point.
func (s *Server) handleScenario(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	for _, sc := range s.cfg.Scenarios {
		if sc.Name == name {
			run, err := s.openScenario(r.Context(), sc)
			if err != nil {
				return err
			}
			http.Redirect(w, r, "/runs/"+run.ID+sc.View, http.StatusSeeOther)
			return nil
		}
	}
	return notFound(fmt.Sprintf("There is no scenario %q.", name))
}

// openScenario creates a run from a built-in scenario.
func (s *Server) openScenario(ctx context.Context, sc Scenario) (store.Run, error) {
	if !s.runs.Reserve() {
		return store.Run{}, errQueueFull(s.runs.Waiting())
	}
	reserved := true
	defer func() {
		if reserved {
			s.runs.Release()
		}
	}()
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
	info, err := s.runner.Inspect(ctx, up.path, up.name)
	if err != nil {
		return store.Run{}, internal(fmt.Errorf("inspect scenario %s: %w", sc.Name, err))
	}
	if _, err := s.store.AdoptDump(up.path, up.sha, up.ext); err != nil {
		return store.Run{}, internal(err)
	}
	run, err := s.createRun(store.Run{FileName: up.name, DumpSHA: up.sha, DumpExt: up.ext, DumpSize: up.size, Backend: s.defaultBackend()}, info, sc.Params)
	if err != nil {
		return store.Run{}, err
	}
	reserved = false
	return run, nil
}
