package web

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/session"
	"github.com/sampviz/sampviz/web/store"
	"github.com/sampviz/sampviz/web/view"
)

// handleHome is "/": the drop zone, the scenarios and the recent runs.
func (s *Server) handleHome(w http.ResponseWriter, r *http.Request) error {
	h, err := s.homeData(r, "")
	if err != nil {
		return err
	}
	s.render(w, r, http.StatusOK, homePage(s.chrome(), h))
	return nil
}

// homeData gathers the home page, with the one sentence about a refused
// upload ("" for none).
func (s *Server) homeData(r *http.Request, uploadErr string) (view.Home, error) {
	list, err := s.store.Recent(30)
	if err != nil {
		return view.Home{}, internal(err)
	}
	h := view.Home{Error: uploadErr, MaxUpload: engine.FormatBytes(s.cfg.MaxUpload), Origin: "http://" + r.Host, GPUs: s.gpus()}
	for _, sc := range s.cfg.Scenarios {
		h.Scenarios = append(h.Scenarios, view.Scenario{Name: sc.Name, Title: sc.Title, Summary: sc.Summary})
	}
	for _, l := range list {
		lr := view.ListedRun{Listed: l}
		json.Unmarshal(l.Info, &lr.Info) // a run with unreadable info still lists
		h.Recent = append(h.Recent, lr)
	}
	return h, nil
}

// handleListAPI lists the recent runs (?limit=, 50 unless 1 to 500).
func (s *Server) handleListAPI(w http.ResponseWriter, r *http.Request) error {
	limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
	if limit <= 0 || limit > 500 {
		limit = 50
	}
	list, err := s.store.Recent(limit)
	if err != nil {
		return internal(err)
	}
	type item struct {
		ID       string           `json:"id"`
		URL      string           `json:"url"`
		FileName string           `json:"file_name"`
		Created  time.Time        `json:"created"`
		Info     session.DumpInfo `json:"info"`
		Backend  string           `json:"backend"`
		State    store.State      `json:"state"`
		Message  string           `json:"message,omitempty"`
		Verdict  *store.Verdict   `json:"verdict,omitempty"`
	}
	out := []item{}
	for _, l := range list {
		it := item{ID: l.ID, URL: "/runs/" + l.ID, FileName: l.FileName, Created: l.Created, Backend: l.Backend,
			State: l.Judgement.State, Message: l.Judgement.Message, Verdict: l.Judgement.Verdict}
		json.Unmarshal(l.Info, &it.Info)
		out = append(out, it)
	}
	writeJSON(w, http.StatusOK, map[string]any{"runs": out})
	return nil
}
