// Package web is sampviz's face: the HTTP server behind `sampviz serve`. It
// takes dump uploads, queues runs for one kernel executor, streams each
// judged row to the browser over a websocket, and renders the pages (templ
// components next to their handlers) and a JSON API beside them.
//
// The work itself sits behind the Runner interface: this package never
// parses a dump, runs a kernel or judges an output. It never fetches
// anything at run time either: the page script and ECharts are embedded.
package web

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"sync"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/session"
	"github.com/sampviz/sampviz/web/store"
)

// Defaults of Config's zero fields.
const (
	// DefaultMaxUpload is the largest dump an upload may carry: 4 GiB.
	DefaultMaxUpload = 4 << 30
	// DefaultQueue is how many runs may wait for the executor.
	DefaultQueue = 16
)

// Config configures a Server.
type Config struct {
	// DataDir holds the dumps, outputs, reports and the run index.
	DataDir string
	// Runner does the work.
	Runner Runner
	// Token, when set, is required on every request and websocket.
	Token string
	// MaxUpload bounds an upload in bytes (DefaultMaxUpload when 0).
	MaxUpload int64
	// Queue bounds the runs waiting for the executor (DefaultQueue when 0).
	Queue int
	// Scenarios is the built-in catalogue shown on the home page.
	Scenarios []Scenario
	// Log receives what clients are not shown (slog.Default when nil).
	Log *slog.Logger
	// Socket overrides the websocket timings (tests shorten them).
	Socket SocketTimings
}

// Scenario is one built-in example a person can open from the home page.
type Scenario struct {
	// Name is the scenario's folder name, used in URLs.
	Name string
	// Title and Summary say what it shows.
	Title   string
	Summary string
	// FileName names the dump; Open returns its bytes.
	FileName string
	Open     func() (fs.File, error)
	// View is what follows /runs/{id} in the URL that shows the scenario's
	// point ("/rows/3?log=1", "/rows/3/teach", "?failing=1"); "" opens the
	// run page.
	View string
	// Params are the parameters the scenario's run overrides (draws or
	// trials for the statistical views); the zero value keeps the dump's.
	Params engine.Overrides
}

// Server is sampviz's web server. Create it with New, serve Handler, and
// Close it to stop the executor and close the data directory.
type Server struct {
	cfg    Config
	log    *slog.Logger
	store  *store.Store
	runner Runner
	queue  *queue
	mux    *http.ServeMux
	socket SocketTimings

	ctx    context.Context // ends when Close starts
	cancel context.CancelFunc
	wg     sync.WaitGroup // the executor and open websockets

	mu     sync.Mutex
	closed bool              // Close has begun: no new websocket may start
	topics map[string]*topic // by topicKey(run, judgement)
	// rowSlots bounds the row pages being computed at once.
	rowSlots chan struct{}
}

// New opens cfg.DataDir and starts the executor.
func New(cfg Config) (*Server, error) {
	if cfg.Runner == nil {
		return nil, errors.New("web: no runner")
	}
	if cfg.MaxUpload <= 0 {
		cfg.MaxUpload = DefaultMaxUpload
	}
	if cfg.Queue <= 0 {
		cfg.Queue = DefaultQueue
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	st, err := store.Open(cfg.DataDir)
	if err != nil {
		return nil, fmt.Errorf("open data directory %s: %w", cfg.DataDir, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		cfg: cfg, log: cfg.Log, store: st, runner: cfg.Runner,
		queue: newQueue(cfg.Queue), socket: cfg.Socket.withDefaults(),
		ctx: ctx, cancel: cancel,
		topics:   map[string]*topic{},
		rowSlots: make(chan struct{}, 2),
	}
	s.routes()
	s.wg.Add(1)
	go s.executor()
	return s, nil
}

// routes is the route table: every URL the server answers, in one place.
func (s *Server) routes() {
	m := http.NewServeMux()
	m.Handle("GET /{$}", s.page(s.handleHome))
	m.Handle("POST /runs", s.page(s.handleUploadPage))
	m.Handle("GET /runs/{id}", s.page(s.handleRunPage))
	m.Handle("GET /runs/{id}/ws", http.HandlerFunc(s.handleRunSocket))
	m.Handle("GET /runs/{id}/rows", s.page(s.handleJumpToRow))
	m.Handle("GET /runs/{id}/rows/{row}", s.page(s.handleRowPage))
	m.Handle("GET /runs/{id}/rows/{row}/teach", s.page(s.handleTeachPage))
	m.Handle("POST /runs/{id}/rerun", s.page(s.handleRerunPage))
	m.Handle("POST /scenarios/{name}", s.page(s.handleScenario))
	m.Handle("GET /static/", staticHandler())

	m.Handle("POST /api/runs", s.api(s.handleUploadAPI))
	m.Handle("PUT /api/runs", s.api(s.handleUploadAPI))
	m.Handle("PUT /api/runs/{name}", s.api(s.handleUploadAPI))
	m.Handle("GET /api/runs", s.api(s.handleListAPI))
	m.Handle("GET /api/runs/{id}", s.api(s.handleRunAPI))
	m.Handle("GET /api/runs/{id}/rows/{row}", s.api(s.handleRowAPI))
	m.Handle("GET /api/runs/{id}/rows/{row}/teach", s.api(s.handleTeachAPI))
	m.Handle("GET /api/runs/{id}/report.json", s.api(s.handleReportJSON))
	m.Handle("GET /api/runs/{id}/report.csv", s.api(s.handleReportCSV))
	m.Handle("POST /api/runs/{id}/rerun", s.api(s.handleRerunAPI))

	m.Handle("/", s.page(func(w http.ResponseWriter, r *http.Request) error {
		return &httpError{Status: http.StatusNotFound, Msg: "There is no page at " + r.URL.Path + "."}
	}))
	s.mux = m
}

// Handler returns the server's handler, with the token check when a token
// is configured.
func (s *Server) Handler() http.Handler {
	var h http.Handler = s.mux
	if s.cfg.Token != "" {
		h = s.requireToken(h)
	}
	return securityHeaders(h)
}

// Close stops taking work, cancels the running job, closes every websocket
// and the data directory, and waits for all of it.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
	return s.store.Close()
}

// hold counts a websocket into the work Close waits for, unless Close has
// begun; release undoes it.
func (s *Server) hold() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.wg.Add(1)
	return true
}

func (s *Server) release() { s.wg.Done() }

// securityHeaders sets the headers every answer carries.
func securityHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("Referrer-Policy", "same-origin")
		hd.Set("X-Frame-Options", "DENY")
		// Everything the pages load is ours; nothing comes from elsewhere.
		hd.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; connect-src 'self'; frame-ancestors 'none'")
		h.ServeHTTP(w, r)
	})
}

// topicKey names a judgement's topic.
func topicKey(runID, key string) string { return runID + "/" + key }

// maxCachedTopics bounds the finished topics kept in memory.
const maxCachedTopics = 64

// liveTopic returns the topic of a judgement, loading a finished one from
// its stream file. It returns nil when the judgement has no stream (it
// failed before judging, or the file is gone).
func (s *Server) liveTopic(run store.Run, j store.Judgement, info *session.DumpInfo) *topic {
	k := topicKey(run.ID, j.Key)
	s.mu.Lock()
	t := s.topics[k]
	s.mu.Unlock()
	if t != nil {
		return t
	}
	var st stored
	if err := readJSON(s.store.JudgementPath(run.ID, j.Key, "stream.json"), &st); err != nil {
		// No stream: a failed or interrupted judgement. Its topic says so.
		t = newTopic(run.ID, j.Key, info.Rows, info.Vocab, Status{State: j.State, Message: j.Message})
		if j.State == store.Done {
			t.status = Status{State: store.Failed, Message: "The stored results of this run cannot be read; rerun it."}
			s.log.Error("read stream", "run", run.ID, "judgement", j.Key, "err", err)
		}
	} else {
		t = topicFromStored(run.ID, j.Key, st)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if old := s.topics[k]; old != nil {
		return old
	}
	s.evictLocked()
	s.topics[k] = t
	return t
}

// evictLocked forgets finished topics nobody watches when there are too many.
func (s *Server) evictLocked() {
	if len(s.topics) < maxCachedTopics {
		return
	}
	for k, t := range s.topics {
		t.mu.Lock()
		idle := t.status.State.Finished() && len(t.subs) == 0
		t.mu.Unlock()
		if idle {
			delete(s.topics, k)
		}
	}
}

// addTopic registers the topic of a queued judgement.
func (s *Server) addTopic(t *topic) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.evictLocked()
	s.topics[topicKey(t.runID, t.key)] = t
}

// retryAfter is what a 429 tells a client to wait, in seconds.
const retryAfter = 30
