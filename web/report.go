package web

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/sampviz/sampviz/engine"
)

// handleReportJSON sends the stored report of the judgement the URL names.
func (s *Server) handleReportJSON(w http.ResponseWriter, r *http.Request) error {
	v, err := s.lookupJudged(r)
	if err != nil {
		return err
	}
	if err := s.awaitRejudgement(r.Context(), v); err != nil {
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

// handleReportCSV sends that report as CSV: one line per output and row.
func (s *Server) handleReportCSV(w http.ResponseWriter, r *http.Request) error {
	v, err := s.lookupJudged(r)
	if err != nil {
		return err
	}
	if err := s.awaitRejudgement(r.Context(), v); err != nil {
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

// csvHeader is the first line of report.csv: one line per output and row.
var csvHeader = []string{
	"output", "external", "kind", "row", "pass", "matched",
	"strict_max_abs", "strict_max_rel", "strict_mismatched", "strict_min_atol",
	"native_max_abs", "native_max_rel", "native_mismatched", "native_min_atol",
	"token", "ref_token", "p_value", "violations",
}

// writeReportCSV writes one line per output and row of rep.
func writeReportCSV(w io.Writer, rep *engine.Report) error {
	cw := csv.NewWriter(w)
	cw.Write(csvHeader)
	f := func(x engine.Float) string { return engine.FormatFloat(float64(x)) }
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
				pv = engine.FormatFloat(*row.PValue)
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
