package web

import "net/http"

// Handler returns the server's handler: the route table, behind the token
// check when a token is configured and the guard against other sites'
// pages (guard.go), with the headers every answer carries.
func (s *Server) Handler() http.Handler {
	var h http.Handler = s.routes()
	if s.cfg.Token != "" {
		h = s.requireToken(h)
	}
	return securityHeaders(s.guard(h))
}

// routes is the route table: every URL the server answers, in one place.
func (s *Server) routes() *http.ServeMux {
	m := http.NewServeMux()
	m.Handle("GET /{$}", s.page(s.handleHome))
	m.Handle("POST /runs", s.page(s.handleUploadPage))
	m.Handle("GET /runs/{id}", s.page(s.handleRunPage))
	m.Handle("GET /runs/{id}/ws", http.HandlerFunc(s.handleRunSocket))
	m.Handle("GET /runs/{id}/rows", s.page(s.handleJumpToRow))
	m.Handle("GET /runs/{id}/rows/{row}", s.page(s.handleRowPage))
	m.Handle("GET /runs/{id}/rows/{row}/teach", s.page(s.handleTeachPage))
	m.Handle("GET /runs/{id}/diff", s.page(s.handleCompareWith))
	m.Handle("GET /runs/{a}/diff/{b}", s.page(s.handleDiffPage))
	m.Handle("POST /runs/{id}/rerun", s.page(s.handleRerunPage))
	m.Handle("POST /runs/{id}/judgements", s.page(s.handleJudgePage))
	m.Handle("POST /runs/{id}/cancel", s.page(s.handleCancelPage))
	m.Handle("POST /runs/{id}/delete", s.page(s.handleDeletePage))
	m.Handle("POST /scenarios/{name}", s.page(s.handleScenario))
	m.Handle("GET /static/", staticHandler())
	m.Handle("GET /favicon.ico", faviconHandler())

	m.Handle("POST /api/runs", s.api(s.handleUploadAPI))
	m.Handle("PUT /api/runs", s.api(s.handleUploadAPI))
	m.Handle("PUT /api/runs/{name}", s.api(s.handleUploadAPI))
	m.Handle("GET /api/runs", s.api(s.handleListAPI))
	m.Handle("GET /api/runs/{id}", s.api(s.handleRunAPI))
	m.Handle("GET /api/runs/{id}/rows/{row}", s.api(s.handleRowAPI))
	m.Handle("GET /api/runs/{id}/rows/{row}/teach", s.api(s.handleTeachAPI))
	m.Handle("GET /api/runs/{a}/diff/{b}", s.api(s.handleDiffAPI))
	m.Handle("GET /api/runs/{id}/report.json", s.api(s.handleReportJSON))
	m.Handle("GET /api/runs/{id}/report.csv", s.api(s.handleReportCSV))
	m.Handle("POST /api/runs/{id}/rerun", s.api(s.handleRerunAPI))
	m.Handle("POST /api/runs/{id}/judgements", s.api(s.handleJudgeAPI))
	m.Handle("POST /api/runs/{id}/cancel", s.api(s.handleCancelAPI))
	m.Handle("DELETE /api/runs/{id}", s.api(s.handleDeleteAPI))
	m.Handle("GET /api/gpus", s.api(s.handleGPUsAPI))

	m.Handle("/", s.page(func(w http.ResponseWriter, r *http.Request) error {
		return notFound("There is no page at " + r.URL.Path + ".")
	}))
	return m
}
