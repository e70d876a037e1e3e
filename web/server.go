// Package web is sampviz's face: the HTTP server behind `sampviz serve`. It
// takes dump uploads, queues their runs, streams each judged row to the
// browser over a websocket, and renders the pages (templ components next to
// their handlers) and a JSON API beside them.
//
// It is HTTP only: the live state of the runs (the queue, the executor, the
// topic each page watches) is web/live's, the view models (charts, words,
// page data) are web/view's, and the work itself sits behind the Runner
// interface. This package never parses a dump, runs a kernel or judges an
// output, and never imports the backends, the reference, the judge or the
// dump readers. It never fetches anything at run time either: the page
// script and ECharts are embedded.
package web

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/web/live"
	"github.com/sampviz/sampviz/web/store"
)

// Defaults of Config's zero fields.
const (
	// DefaultMaxUpload is the largest dump an upload may carry: 4 GiB.
	DefaultMaxUpload = 4 << 30
	// DefaultQueue is how many runs may wait for the executor.
	DefaultQueue = 16
	// DefaultMinUploadRate and DefaultUploadWindow: an upload slower than
	// 64 KB/s over 30 s is cut.
	DefaultMinUploadRate = 64 << 10
	DefaultUploadWindow  = 30 * time.Second
)

// Config configures a Server.
type Config struct {
	// DataDir holds the dumps, outputs, reports and the run index.
	DataDir string
	// Runner does the work.
	Runner Runner
	// Token, when set, is required on every request and websocket.
	Token string
	// Listen is the address the server listens on; its host is one of the
	// names a request's Host may give (guard.go).
	Listen string
	// AllowHosts are other names the server answers to (--allow-host).
	AllowHosts []string
	// KeepRuns and MaxData bound the data directory (0: no bound): past
	// either, the oldest finished runs nobody watches are removed.
	KeepRuns int
	MaxData  int64
	// MinUploadRate is the slowest an upload may arrive, in bytes a second
	// over UploadWindow (DefaultMinUploadRate and DefaultUploadWindow when
	// 0); a slower one is cut with 408.
	MinUploadRate int64
	UploadWindow  time.Duration
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
	// OpenAfter, when set, makes the scenario a before/after pair: its
	// dump is the before, OpenAfter's (AfterFileName) the after, and the
	// scenario opens on the diff page of their runs (View "?compare=after").
	AfterFileName string
	OpenAfter     func() (fs.File, error)
}

// Server is sampviz's web server. Create it with New, serve Handler, and
// Close it to stop the executor (web/live) and close the data directory.
type Server struct {
	cfg    Config
	log    *slog.Logger
	store  *store.Store
	runner Runner
	runs   *live.Runs
	socket SocketTimings

	ctx    context.Context // ends when Close starts: stops the executor
	cancel context.CancelFunc
	wg     sync.WaitGroup // open websockets

	mu     sync.Mutex
	closed bool // Close has begun: no new websocket may start
	// scenarioSHAs holds the SHA-256 of the before/after scenarios' before
	// dumps, by name, once computed (scenario.go).
	scenarioSHAs map[string]string
	// rowSlots bounds the row pages being computed at once, diffSlots the
	// comparisons; diffs keeps the comparisons made (diff.go).
	rowSlots  chan struct{}
	diffSlots chan struct{}
	diffs     diffCache
	// tempFile creates an upload's temporary file (store.TempFile; tests
	// make it fail as a full disk does).
	tempFile func(pattern string) (*os.File, error)
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
	if cfg.MinUploadRate <= 0 {
		cfg.MinUploadRate = DefaultMinUploadRate
	}
	if cfg.UploadWindow <= 0 {
		cfg.UploadWindow = DefaultUploadWindow
	}
	st, err := store.Open(cfg.DataDir)
	if err != nil {
		return nil, fmt.Errorf("open data directory %s: %w", cfg.DataDir, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		cfg: cfg, log: cfg.Log, store: st, runner: cfg.Runner,
		runs: live.Start(ctx, live.Config{Store: st, Judge: cfg.Runner, Queue: cfg.Queue, Log: cfg.Log,
			KeepRuns: cfg.KeepRuns, MaxData: cfg.MaxData, Executors: executors(cfg.Runner)}),
		socket: cfg.Socket.withDefaults(),
		ctx:    ctx, cancel: cancel,
		rowSlots: make(chan struct{}, 2), diffSlots: make(chan struct{}, 1),
		tempFile: st.TempFile,
	}
	s.requeue()
	s.runs.Retain()
	return s, nil
}

// Close stops taking work, cancels the running job, closes every websocket
// and the data directory, and waits for all of it.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	s.runs.Wait()
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

// release ends what hold began.
func (s *Server) release() { s.wg.Done() }
