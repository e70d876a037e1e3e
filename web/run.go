package web

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/session"
	"github.com/sampviz/sampviz/web/store"
	"github.com/sampviz/sampviz/web/view"
)

// handleRunPage is "/runs/{id}": the run with the judgement its URL names.
func (s *Server) handleRunPage(w http.ResponseWriter, r *http.Request) error {
	v, err := s.lookupJudged(r)
	var nj *notJudged
	if errors.As(err, &nj) {
		s.render(w, r, http.StatusOK, judgePrompt(s.chrome(), nj.runID, view.ToleranceValues(&nj.tol)))
		return nil
	}
	if err != nil {
		return err
	}
	v.topic.Seen() // retention spares a run a page has open
	if r.URL.Query().Get("compare") == "after" {
		return s.compareAfter(w, r, v.run)
	}
	_, st := v.topic.Snapshot()
	q := v.query()
	d := view.RunPage{
		Run: v.run, Info: v.info, Params: v.params, Own: v.own, J: v.j, Tol: v.tol,
		Status: st, Summary: v.topic.Final(), Device: s.device(v), Backends: s.runner.Backends(),
		Query: q, View: parseView(r.URL.Query()),
	}
	if v.own.State == store.Done {
		d.Candidates = s.compareCandidates(v.run, v.info.Op, q)
	}
	d.Script = view.RunScript{
		Run: v.run.ID, WS: view.WithQuery("/runs/"+v.run.ID+"/ws", q), RowBase: "/runs/" + v.run.ID + "/rows/",
		Query: q.Encode(), Rows: v.info.Rows, Vocab: v.info.Vocab, View: d.View, Finished: d.Summary != nil,
	}
	s.render(w, r, http.StatusOK, runPage(s.chrome(), d))
	return nil
}

// parseView reads the row table's and charts' state from a URL query.
func parseView(q url.Values) view.RunView {
	v := view.RunView{Failing: q.Get("failing") == "1", Sort: q.Get("sort")}
	switch v.Sort {
	case "row", "worst", "violations":
	default:
		v.Sort = "row"
	}
	v.Output, _ = strconv.Atoi(q.Get("out"))
	if v.Output < 0 {
		v.Output = 0
	}
	// The comparison views a scenario opens on (scenario.json "view").
	for _, f := range []string{"modes", "agree", "padding"} {
		if q.Get(f) == "1" {
			v.Focus = f
			break
		}
	}
	return v
}

// device is where v's kernels ran (from the report), or the backend it is
// queued for.
func (s *Server) device(v *judged) engine.Device {
	if sum := v.topic.Final(); sum != nil && sum.Device != nil {
		return *sum.Device
	}
	for _, d := range s.runner.Backends() {
		if d.Backend == v.run.Backend {
			return d
		}
	}
	return engine.Device{Backend: v.run.Backend}
}

// handleRunAPI describes a run and the judgement its URL names.
func (s *Server) handleRunAPI(w http.ResponseWriter, r *http.Request) error {
	v, err := s.lookupJudged(r)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.runJSON(r, v))
	return nil
}

// runJSON is a run as GET /api/runs/{id} describes it.
type runJSON struct {
	ID  string `json:"id"`
	URL string `json:"url"`
	// Link is URL with the scheme and host the request came to, so a
	// terminal that prints the answer shows a link to open.
	Link       string             `json:"link"`
	API        string             `json:"api"`
	WS         string             `json:"ws"`
	FileName   string             `json:"file_name"`
	DumpSHA256 string             `json:"dump_sha256"`
	DumpSize   int64              `json:"dump_size"`
	Created    time.Time          `json:"created"`
	Info       session.DumpInfo   `json:"info"`
	Backend    string             `json:"backend"`
	Params     engine.Overrides   `json:"params"`
	Parent     string             `json:"parent,omitempty"`
	State      store.State        `json:"state"`
	Message    string             `json:"message,omitempty"`
	Progress   view.Status        `json:"progress"`
	Verdict    *store.Verdict     `json:"verdict,omitempty"`
	Summary    *view.Summary      `json:"summary,omitempty"`
	Tolerances *engine.Tolerances `json:"tolerances,omitempty"`
	ReportJSON string             `json:"report_json"`
	ReportCSV  string             `json:"report_csv"`
}

// runJSON describes v for the API, with the URLs of its page, API,
// websocket and reports.
func (s *Server) runJSON(r *http.Request, v *judged) runJSON {
	q := v.query()
	_, st := v.topic.Snapshot()
	sum := v.topic.Final()
	tol := v.tol
	if tol == nil && sum != nil {
		tol = &sum.Tolerances
	}
	state, msg := runState(v.j, st)
	verdict := v.j.Verdict
	if verdict == nil && state == store.Done && sum != nil {
		// The topic ends before the store: its summary holds the verdict
		// the store is about to record.
		verdict = &sum.Verdict
	}
	return runJSON{
		ID: v.run.ID, URL: view.WithQuery("/runs/"+v.run.ID, q), Link: absoluteURL(r, view.WithQuery("/runs/"+v.run.ID, q)), API: view.WithQuery("/api/runs/"+v.run.ID, q),
		WS: view.WithQuery("/runs/"+v.run.ID+"/ws", q), FileName: v.run.FileName, DumpSHA256: v.run.DumpSHA,
		DumpSize: v.run.DumpSize, Created: v.run.Created, Info: v.info, Backend: v.run.Backend,
		Params: v.params, Parent: v.run.Parent, State: state, Message: msg, Progress: st,
		Verdict: verdict, Summary: sum, Tolerances: tol,
		ReportJSON: view.WithQuery("/api/runs/"+v.run.ID+"/report.json", q),
		ReportCSV:  view.WithQuery("/api/runs/"+v.run.ID+"/report.csv", q),
	}
}

// runState is a judgement's state and message from j, read from the store,
// and st, read from its topic after it: the executor ends a judgement in
// the topic before the store, so a topic that has ended is the newer word
// (a run that failed as it was described is not "running" beside a
// "failed" progress).
func runState(j store.Judgement, st view.Status) (store.State, string) {
	if st.State.Finished() && !j.State.Finished() {
		return st.State, st.Message
	}
	return j.State, j.Message
}

// answerRun writes run id as JSON with status, and its page as Location.
func (s *Server) answerRun(w http.ResponseWriter, r *http.Request, id string, status int) error {
	r2 := r.Clone(r.Context())
	r2.SetPathValue("id", id)
	r2.URL = &url.URL{Path: "/api/runs/" + id}
	v, err := s.lookupJudged(r2)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/runs/"+id)
	writeJSON(w, status, s.runJSON(r, v))
	return nil
}

// absoluteURL is path on the scheme and host that r came to.
func absoluteURL(r *http.Request, path string) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host + path
}
