package web

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
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

// runJSON is a run as GET /api/runs/{id} describes it.
type runJSON struct {
	ID         string             `json:"id"`
	URL        string             `json:"url"`
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
	Progress   Status             `json:"progress"`
	Verdict    *store.Verdict     `json:"verdict,omitempty"`
	Summary    *Summary           `json:"summary,omitempty"`
	Tolerances *engine.Tolerances `json:"tolerances,omitempty"`
	ReportJSON string             `json:"report_json"`
	ReportCSV  string             `json:"report_csv"`
}

func (s *Server) runJSON(v *judged) runJSON {
	q := v.query()
	_, st := v.topic.snapshot()
	sum := v.topic.final()
	tol := v.tol
	if tol == nil && sum != nil {
		tol = &sum.Tolerances
	}
	return runJSON{
		ID: v.run.ID, URL: withQuery("/runs/"+v.run.ID, q), API: withQuery("/api/runs/"+v.run.ID, q),
		WS: withQuery("/runs/"+v.run.ID+"/ws", q), FileName: v.run.FileName, DumpSHA256: v.run.DumpSHA,
		DumpSize: v.run.DumpSize, Created: v.run.Created, Info: v.info, Backend: v.run.Backend,
		Params: v.params, Parent: v.run.Parent, State: v.j.State, Message: v.j.Message, Progress: st,
		Verdict: v.j.Verdict, Summary: sum, Tolerances: tol,
		ReportJSON: withQuery("/api/runs/"+v.run.ID+"/report.json", q),
		ReportCSV:  withQuery("/api/runs/"+v.run.ID+"/report.csv", q),
	}
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

// answerRun writes run id as JSON with status, and its page as Location.
func (s *Server) answerRun(w http.ResponseWriter, r *http.Request, id string, status int) error {
	r2 := r.Clone(r.Context())
	r2.SetPathValue("id", id)
	r2.URL = &url.URL{Path: "/api/runs/" + id}
	v, err := s.lookupJudged(r2, false)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/runs/"+id)
	writeJSON(w, status, s.runJSON(v))
	return nil
}

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

func (s *Server) handleRunAPI(w http.ResponseWriter, r *http.Request) error {
	v, err := s.lookupJudged(r, true)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.runJSON(v))
	return nil
}

// rowJSON is one row as GET /api/runs/{id}/rows/{r} describes it.
type rowJSON struct {
	Run     string             `json:"run"`
	Row     int                `json:"row"`
	URL     string             `json:"url"`
	Outputs []rowOutput        `json:"outputs"`
	Detail  *explain.RowDetail `json:"detail,omitempty"`
	Why     string             `json:"why_no_detail,omitempty"`
}

type rowOutput struct {
	engine.OutputInfo
	// Report is nil while the output has not reached the row.
	Report *engine.RowReport `json:"report"`
}

func (s *Server) handleRowAPI(w http.ResponseWriter, r *http.Request) error {
	d, err := s.rowData(r)
	if err != nil {
		return err
	}
	out := rowJSON{Run: d.Run.ID, Row: d.Row, URL: withQuery(fmt.Sprintf("/runs/%s/rows/%d", d.Run.ID, d.Row), d.Query), Detail: d.Detail, Why: d.Why}
	for i, o := range d.Outputs {
		out.Outputs = append(out.Outputs, rowOutput{OutputInfo: o, Report: d.Reports[i]})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) handleReportJSON(w http.ResponseWriter, r *http.Request) error {
	v, err := s.lookupJudged(r, true)
	if err != nil {
		return err
	}
	rep, err := s.report(v)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="sampviz-%s.json"`, v.run.ID))
	writeJSON(w, http.StatusOK, rep)
	return nil
}

// csvHeader is the first line of report.csv: one line per output and row.
var csvHeader = []string{
	"output", "external", "kind", "row", "pass", "matched",
	"strict_max_abs", "strict_max_rel", "strict_mismatched", "strict_min_atol",
	"native_max_abs", "native_max_rel", "native_mismatched", "native_min_atol",
	"token", "ref_token", "p_value", "violations",
}

func (s *Server) handleReportCSV(w http.ResponseWriter, r *http.Request) error {
	v, err := s.lookupJudged(r, true)
	if err != nil {
		return err
	}
	rep, err := s.report(v)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := writeReportCSV(&buf, rep); err != nil {
		return internal(err)
	}
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="sampviz-%s.csv"`, v.run.ID))
	w.Write(buf.Bytes())
	return nil
}

// writeReportCSV writes one line per output and row of rep.
func writeReportCSV(w io.Writer, rep *engine.Report) error {
	cw := csv.NewWriter(w)
	cw.Write(csvHeader)
	f := func(x engine.Float) string { return strconv.FormatFloat(float64(x), 'g', -1, 64) }
	drift := func(d *engine.Drift) []string {
		if d == nil {
			return []string{"", "", "", ""}
		}
		return []string{f(d.Abs.Max), f(d.Rel.Max), strconv.Itoa(d.Mismatched), f(d.MinAtol)}
	}
	opt := func(p *int64) string {
		if p == nil {
			return ""
		}
		return strconv.FormatInt(*p, 10)
	}
	for _, o := range rep.Outputs {
		for _, row := range o.Rows {
			pv := ""
			if row.PValue != nil {
				pv = strconv.FormatFloat(*row.PValue, 'g', -1, 64)
			}
			line := []string{o.Name, strconv.FormatBool(o.External), o.Kind, strconv.Itoa(row.Row), strconv.FormatBool(row.Pass), row.Matched}
			line = append(line, drift(row.Strict)...)
			line = append(line, drift(row.Native)...)
			line = append(line, opt(row.Token), opt(row.RefToken), pv, strings.Join(row.Violations, " | "))
			cw.Write(line)
		}
	}
	cw.Flush()
	return cw.Error()
}

// rerunRequest is the JSON body of POST /api/runs/{id}/rerun.
type rerunRequest struct {
	engine.Overrides
	Backend string `json:"backend,omitempty"`
}

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
	run, err := s.rerun(r.PathValue("id"), form)
	if err != nil {
		return err
	}
	return s.answerRun(w, r, run.ID, http.StatusCreated)
}
