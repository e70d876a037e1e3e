package web

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/explain"
	"github.com/sampviz/sampviz/engine/session"
	"github.com/sampviz/sampviz/web/store"
)

// chrome is what every page's frame shows: which backends this server has.
type chrome struct {
	Backends []engine.Device
}

func (s *Server) chrome() chrome { return chrome{Backends: s.runner.Backends()} }

// backendLine says in words where the kernels run.
func backendLine(d engine.Device) string {
	if d.Backend == "cpu" {
		name := d.Name
		if name == "" {
			name = "this machine's CPU"
		}
		return fmt.Sprintf("CPU backend on %s: no GPU kernels run here, and times are CPU times.", name)
	}
	line := fmt.Sprintf("%s backend on %s", strings.ToUpper(d.Backend), d.Name)
	if d.SMs > 0 {
		line += fmt.Sprintf(" (%d SMs", d.SMs)
		if d.MemoryBytes > 0 {
			line += ", " + formatBytes(d.MemoryBytes)
		}
		line += ")"
	}
	return line + "."
}

// listedRun is one line of the recent runs.
type listedRun struct {
	store.Listed
	Info session.DumpInfo
}

// homeData is what the home page shows.
type homeData struct {
	Recent    []listedRun
	Scenarios []Scenario
	// Error is the one sentence about a refused upload.
	Error     string
	MaxUpload string
	Origin    string // scheme://host, for the curl example
}

func (s *Server) homeData(r *http.Request, uploadErr string) (homeData, error) {
	list, err := s.store.Recent(30)
	if err != nil {
		return homeData{}, internal(err)
	}
	h := homeData{Scenarios: s.cfg.Scenarios, Error: uploadErr, MaxUpload: formatBytes(s.cfg.MaxUpload), Origin: "http://" + r.Host}
	for _, l := range list {
		lr := listedRun{Listed: l}
		json.Unmarshal(l.Info, &lr.Info) // a run with unreadable info still lists
		h.Recent = append(h.Recent, lr)
	}
	return h, nil
}

func (s *Server) handleHome(w http.ResponseWriter, r *http.Request) error {
	h, err := s.homeData(r, "")
	if err != nil {
		return err
	}
	s.render(w, r, http.StatusOK, homePage(s.chrome(), h))
	return nil
}

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

// runPageData is what the run page shows.
type runPageData struct {
	Run     store.Run
	Info    session.DumpInfo
	Params  engine.Overrides
	Own     store.Judgement
	J       store.Judgement
	Tol     *engine.Tolerances
	Status  Status
	Summary *Summary
	// Device is where the run's kernels ran (from the report), or the
	// backend it is queued for.
	Device   engine.Device
	Backends []engine.Device
	// Query is the URL query naming the judgement (tolerances).
	Query url.Values
	// View holds the page's view state from the URL.
	View   runView
	Script runScript
}

// runView is the row table's and charts' state, kept in the URL.
type runView struct {
	Failing bool   `json:"failing"`
	Sort    string `json:"sort"`
	Output  int    `json:"output"`
}

// runScript is the JSON the page script starts from.
type runScript struct {
	Run     string  `json:"run"`
	WS      string  `json:"ws"`
	RowBase string  `json:"row_base"`
	Query   string  `json:"query"`
	Rows    int     `json:"rows"`
	Vocab   int     `json:"vocab"`
	View    runView `json:"view"`
}

func parseView(q url.Values) runView {
	v := runView{Failing: q.Get("failing") == "1", Sort: q.Get("sort")}
	switch v.Sort {
	case "row", "worst", "violations":
	default:
		v.Sort = "row"
	}
	v.Output, _ = strconv.Atoi(q.Get("out"))
	if v.Output < 0 {
		v.Output = 0
	}
	return v
}

func (s *Server) device(v *judged) engine.Device {
	if sum := v.topic.final(); sum != nil && sum.Device != nil {
		return *sum.Device
	}
	for _, d := range s.runner.Backends() {
		if d.Backend == v.run.Backend {
			return d
		}
	}
	return engine.Device{Backend: v.run.Backend}
}

func (s *Server) handleRunPage(w http.ResponseWriter, r *http.Request) error {
	v, err := s.lookupJudged(r, true)
	if err != nil {
		return err
	}
	_, st := v.topic.snapshot()
	q := v.query()
	d := runPageData{
		Run: v.run, Info: v.info, Params: v.params, Own: v.own, J: v.j, Tol: v.tol,
		Status: st, Summary: v.topic.final(), Device: s.device(v), Backends: s.runner.Backends(),
		Query: q, View: parseView(r.URL.Query()),
	}
	d.Script = runScript{
		Run: v.run.ID, WS: withQuery("/runs/"+v.run.ID+"/ws", q), RowBase: "/runs/" + v.run.ID + "/rows/",
		Query: q.Encode(), Rows: v.info.Rows, Vocab: v.info.Vocab, View: d.View,
	}
	s.render(w, r, http.StatusOK, runPage(s.chrome(), d))
	return nil
}

// rowPageData is what the row page shows.
type rowPageData struct {
	Run     store.Run
	Info    session.DumpInfo
	J       store.Judgement
	Tol     *engine.Tolerances
	Query   url.Values
	Row     int
	Outputs []engine.OutputInfo
	Reports []*engine.RowReport
	Detail  *explain.RowDetail
	// Why says why there is no detail ("" when there is).
	Why     string
	Log     bool
	Top     int
	Charts  map[string]any
	Failing []int // failing rows, for the previous and next links
	// Trace is the speculative trace step by step (spec_verify rows with a
	// stored trace), Teach the row's teaching page (spec_verify rows).
	Trace *traceView
	Teach string
	// Spec is the statistics of the row's speculative trials (from the
	// first output judged on many trials), for its own acceptance charts.
	Spec *engine.SpecStats
}

// defaultTop is how many tokens the row page shows unless ?top= says.
const defaultTop = 20

func (s *Server) handleRowPage(w http.ResponseWriter, r *http.Request) error {
	d, err := s.rowData(r)
	if err != nil {
		return err
	}
	s.render(w, r, http.StatusOK, rowPage(s.chrome(), d))
	return nil
}

// rowData gathers the row page (and the row API) of one row.
func (s *Server) rowData(r *http.Request) (*rowPageData, error) {
	v, err := s.lookupJudged(r, true)
	if err != nil {
		return nil, err
	}
	row, err := parseRow(r, v.info.Rows)
	if err != nil {
		return nil, err
	}
	q := r.URL.Query()
	top, _ := strconv.Atoi(q.Get("top"))
	if top <= 0 {
		top = defaultTop
	}
	top = minInt(top, 200)
	d := &rowPageData{Run: v.run, Info: v.info, J: v.j, Tol: v.tol, Query: v.query(), Row: row, Log: q.Get("log") == "1", Top: top}
	d.Outputs, d.Reports, err = s.rowReports(v, row)
	if err != nil {
		return nil, err
	}
	d.Failing = v.topic.failingRows()
	switch {
	case v.own.State == store.Failed:
		d.Why = "This run failed before its outputs were stored: " + v.own.Message
	case v.own.State != store.Done && !s.outputsStored(v):
		d.Why = "The kernels of this run have not finished yet; reload this page when the run page says they have."
	default:
		select {
		case s.rowSlots <- struct{}{}:
		case <-r.Context().Done():
			return nil, r.Context().Err()
		}
		d.Detail, err = s.runner.Row(r.Context(), s.job(v), row, top)
		<-s.rowSlots
		if err != nil {
			he := asHTTPError(err)
			if he.Status >= 500 {
				s.log.Error("row detail", "run", v.run.ID, "row", row, "err", err)
			}
			d.Why = "sampviz could not compute this row's distributions; the server log has the details."
			d.Detail = nil
		}
	}
	for _, rep := range d.Reports {
		if rep != nil && rep.Spec != nil && rep.Spec.Trials > 0 && len(rep.Spec.Positions) > 0 {
			d.Spec = rep.Spec
			break
		}
	}
	d.Charts = rowCharts(d.Detail, d.Spec, d.Log)
	if draftPositions(&v.info) > 0 {
		d.Teach = fmt.Sprintf("/runs/%s/rows/%d/teach", v.run.ID, row)
	}
	if d.Detail != nil && d.Detail.Spec != nil && d.Detail.Spec.Trace != nil {
		trial, _ := strconv.Atoi(q.Get("trial"))
		step, _ := strconv.Atoi(q.Get("step"))
		d.Trace = newTraceView(d.Detail.Spec, trial, step, fmt.Sprintf("/runs/%s/rows/%d", v.run.ID, row), rowQuery(d, d.Log), d.Log)
	}
	return d, nil
}

func (s *Server) outputsStored(v *judged) bool {
	_, st := v.topic.snapshot()
	return st.Judged > 0
}

// handleJumpToRow takes the row table's "open row" form without the page
// script: /runs/{id}/rows?row=N goes to /runs/{id}/rows/N.
func (s *Server) handleJumpToRow(w http.ResponseWriter, r *http.Request) error {
	_, info, _, err := s.lookupRun(r.PathValue("id"))
	if err != nil {
		return err
	}
	q := r.URL.Query()
	n, err := strconv.Atoi(q.Get("row"))
	if err != nil || n < 0 || n >= info.Rows {
		return notFound(fmt.Sprintf("There is no row %q: this run has rows 0 to %d.", q.Get("row"), info.Rows-1))
	}
	q.Del("row")
	http.Redirect(w, r, withQuery(fmt.Sprintf("/runs/%s/rows/%d", r.PathValue("id"), n), q), http.StatusSeeOther)
	return nil
}

func (s *Server) handleRerunPage(w http.ResponseWriter, r *http.Request) error {
	if err := r.ParseForm(); err != nil {
		return badRequest("The rerun form could not be read; send it again.")
	}
	run, err := s.rerun(r.PathValue("id"), r.PostForm)
	if err != nil {
		return err
	}
	http.Redirect(w, r, "/runs/"+run.ID, http.StatusSeeOther)
	return nil
}

// rerun queues a new run of run id's dump with the parameters and backend
// of a form (empty fields keep the dump's values).
func (s *Server) rerun(id string, form url.Values) (store.Run, error) {
	parent, info, _, err := s.lookupRun(id)
	if err != nil {
		return store.Run{}, err
	}
	p, backend, err := s.parseRerun(form)
	if err != nil {
		return store.Run{}, badRequest(sentence(err.Error()))
	}
	if backend == "" {
		backend = parent.Backend
	}
	if !s.queue.reserve() {
		return store.Run{}, errQueueFull(s.queue.length())
	}
	run, err := s.createRun(store.Run{
		FileName: parent.FileName, DumpSHA: parent.DumpSHA, DumpExt: parent.DumpExt, DumpSize: parent.DumpSize,
		Backend: backend, Parent: parent.ID,
	}, info, p, s.store.DumpPath(parent.DumpSHA, parent.DumpExt))
	if err != nil {
		s.queue.release()
		return store.Run{}, err
	}
	return run, nil
}

// parseRerun reads the rerun form: a field for each parameter of the
// parameter table (engine.Param, by name; empty fields keep the dump's
// values) and the backend. Values are checked against the table, in its
// words.
func (s *Server) parseRerun(form url.Values) (engine.Overrides, string, error) {
	var p engine.Overrides
	for _, param := range engine.ParamTable() {
		v := strings.TrimSpace(form.Get(param.Name))
		if v == "" {
			continue
		}
		if err := p.Set(param.Name, v); err != nil {
			return p, "", err
		}
	}
	backend := strings.TrimSpace(form.Get("backend"))
	if backend != "" {
		known := false
		var names []string
		for _, d := range s.runner.Backends() {
			names = append(names, d.Backend)
			known = known || d.Backend == backend
		}
		if !known {
			return p, "", fmt.Errorf("this server has no %q backend; it has %s", backend, strings.Join(names, " and "))
		}
	}
	return p, backend, nil
}

// ago says how long ago t was, for the list of recent runs.
func ago(t time.Time) string {
	d := time.Now().Sub(t)
	switch {
	case d < time.Minute:
		return "just now"
	case d < time.Hour:
		return fmt.Sprintf("%d min ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%d h ago", int(d.Hours()))
	}
	return t.Format("2 Jan 2006")
}
