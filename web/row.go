package web

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/explain"
	"github.com/sampviz/sampviz/web/store"
	"github.com/sampviz/sampviz/web/view"
)

// handleRowPage is "/runs/{id}/rows/{r}": one row in full.
func (s *Server) handleRowPage(w http.ResponseWriter, r *http.Request) error {
	d, err := s.rowData(r)
	if err != nil {
		return err
	}
	s.render(w, r, http.StatusOK, rowPage(s.chrome(), d))
	return nil
}

// handleRowAPI describes one row: every output's report and its detail.
func (s *Server) handleRowAPI(w http.ResponseWriter, r *http.Request) error {
	d, err := s.rowData(r)
	if err != nil {
		return err
	}
	out := rowJSON{Run: d.Run.ID, Row: d.Row, URL: view.WithQuery(fmt.Sprintf("/runs/%s/rows/%d", d.Run.ID, d.Row), d.Query), Detail: d.Detail, Why: d.Why}
	for i, o := range d.Outputs {
		out.Outputs = append(out.Outputs, rowOutput{OutputInfo: o, Report: d.Reports[i]})
	}
	writeJSON(w, http.StatusOK, out)
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

// rowOutput is one output's report of the row.
type rowOutput struct {
	engine.OutputInfo
	// Report is nil while the output has not reached the row.
	Report *engine.RowReport `json:"report"`
}

// rowData gathers the row page (and the row API) of one row.
func (s *Server) rowData(r *http.Request) (*view.RowPage, error) {
	v, err := s.lookupJudged(r)
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
		top = view.DefaultTop
	}
	top = min(top, 200)
	d := &view.RowPage{Run: v.run, Info: v.info, J: v.j, Tol: v.tol, Query: v.query(), Row: row, Log: q.Get("log") == "1", Top: top,
		AllOutputs: q.Get("outputs") == "all"}
	var rep *engine.Report
	d.Outputs, d.Reports, rep, err = s.rowReports(v, row)
	if err != nil {
		return nil, err
	}
	job := s.job(v.run, v.params, v.tol)
	if rep != nil {
		d.Notes = map[string][]string{}
		for _, o := range rep.Outputs {
			d.Notes[o.Name] = o.Notes
		}
		// Under semantics any the row is shown under the chain of the
		// judgement the page shows.
		job.Preset, d.Preset = rep.Semantics, rep.Semantics
	}
	d.Failing = v.topic.FailingRows()
	switch {
	case v.own.State == store.Failed:
		d.Why = "This run failed before its outputs were stored: " + v.own.Message
	case v.own.State == store.Cancelled && !s.outputsStored(v):
		d.Why = "This run was cancelled before its outputs were stored; rerun it to see this row."
	case v.own.State != store.Done && !s.outputsStored(v):
		d.Why = "The kernels of this run have not finished yet; this page reloads itself when they have."
	default:
		select {
		case s.rowSlots <- struct{}{}:
		case <-r.Context().Done():
			return nil, r.Context().Err()
		}
		d.Detail, err = s.runner.Row(r.Context(), job, row, top)
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
	if view.RowsClass(d.Reports) == "running" && v.j.State != store.Done && v.own.State != store.Failed && v.own.State != store.Cancelled {
		// The page listens to the run's websocket and reloads itself once
		// every output has judged the row, or the run ends.
		d.Wait = view.WithQuery("/runs/"+v.run.ID+"/ws", v.query())
	}
	for _, rep := range d.Reports {
		if rep != nil && rep.Spec != nil && rep.Spec.Trials > 0 && len(rep.Spec.Positions) > 0 {
			d.Spec = rep.Spec
			break
		}
	}
	d.Shown = view.ShownProbs(d.Detail, d.Outputs, d.Reports, d.AllOutputs)
	d.Charts = view.RowCharts(d.Detail, d.Spec, d.Log, d.Shown)
	if view.DraftPositions(&v.info) > 0 || v.info.Op == engine.OpSample {
		d.Teach = fmt.Sprintf("/runs/%s/rows/%d/teach", v.run.ID, row)
	}
	if d.Detail != nil && d.Detail.Spec != nil && d.Detail.Spec.Trace != nil {
		trial, _ := strconv.Atoi(q.Get("trial"))
		step, _ := strconv.Atoi(q.Get("step"))
		d.Trace = view.NewTrace(d.Detail.Spec, view.Tokens(d.Detail.Text), trial, step, fmt.Sprintf("/runs/%s/rows/%d", v.run.ID, row), view.RowQuery(d, d.Log), d.Log)
	}
	treeSection(d, q)
	return d, nil
}

// outputsStored reports whether v's outputs have reached the store: rows
// are judged only once they have.
func (s *Server) outputsStored(v *judged) bool {
	_, st := v.topic.Snapshot()
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
	http.Redirect(w, r, view.WithQuery(fmt.Sprintf("/runs/%s/rows/%d", r.PathValue("id"), n), q), http.StatusSeeOther)
	return nil
}
