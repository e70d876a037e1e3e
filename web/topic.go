package web

import (
	"encoding/json"
	"sort"
	"sync"
	"time"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/session"
	"github.com/sampviz/sampviz/web/store"
)

// topic is the live state of one judgement that every page watching it
// reads: status, outputs, judged rows, chart data and the final summary. The
// executor publishes into it and never waits for a reader: readers are woken
// through a one-slot channel each and read what is new when they get to it,
// so a slow reader sees coalesced updates and a fast run is never held back.
type topic struct {
	runID, key string
	// batch is the number of rows, vocab the vocabulary size.
	batch, vocab int

	mu      sync.Mutex
	status  Status
	outputs []engine.OutputInfo
	rows    []streamRow
	reports [][]*engine.RowReport // [output][row], for the row page while running
	charts  *chartData
	// chartsVersion counts changes to what the charts draw; the cached
	// chart JSON was built at builtVersion, at builtAt.
	chartsVersion int
	chartsJSON    json.RawMessage
	builtVersion  int
	builtAt       time.Time
	// building is held while chart options are built, outside mu, so that
	// readers wanting charts at once wait for one build and the executor
	// never waits for any.
	building   sync.Mutex
	tolerances *engine.Tolerances
	summary    *Summary
	subs       map[*subscriber]struct{}
}

// streamRow is one judged row as it is kept, streamed and stored. Only its
// RowSummary goes to the pages; the rest feeds the charts.
type streamRow struct {
	RowSummary
	Errors *session.RowErrors `json:"errors,omitempty"`
	Spec   *rowSpec           `json:"spec,omitempty"`
}

// subscriber is one reader of a topic.
type subscriber struct {
	wake chan struct{}
}

func newTopic(runID, key string, batch, vocab int, st Status) *topic {
	st.Total = batch
	return &topic{runID: runID, key: key, batch: batch, vocab: vocab, status: st, subs: map[*subscriber]struct{}{}}
}

// subscribe adds a reader; it is woken at once so it sends the current state.
func (t *topic) subscribe() *subscriber {
	s := &subscriber{wake: make(chan struct{}, 1)}
	s.wake <- struct{}{}
	t.mu.Lock()
	t.subs[s] = struct{}{}
	t.mu.Unlock()
	return s
}

func (t *topic) unsubscribe(s *subscriber) {
	t.mu.Lock()
	delete(t.subs, s)
	t.mu.Unlock()
}

// changedLocked wakes every reader without blocking.
func (t *topic) changedLocked() {
	for s := range t.subs {
		select {
		case s.wake <- struct{}{}:
		default: // already woken: it will read this change too
		}
	}
}

// setQueued records the place in the queue.
func (t *topic) setQueued(ahead int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.status.State != store.Queued || t.status.Ahead == ahead {
		return
	}
	t.status.Ahead = ahead
	t.changedLocked()
}

// setRunning records that the executor took the job.
func (t *topic) setRunning() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.status.State = store.Running
	t.status.Ahead = 0
	t.changedLocked()
}

// Outputs implements session.Sink.
func (t *topic) Outputs(outs []engine.OutputInfo) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.outputs = append([]engine.OutputInfo(nil), outs...)
	t.status.Total = t.batch * len(outs)
	t.charts = newChartData(t.batch, outs)
	t.reports = make([][]*engine.RowReport, len(outs))
	for i := range t.reports {
		t.reports[i] = make([]*engine.RowReport, t.batch)
	}
	t.chartsVersion++
	t.changedLocked()
}

// Row implements session.Sink.
func (t *topic) Row(u session.RowUpdate) {
	sum := summarizeRow(u)
	rep := u.Report
	t.mu.Lock()
	defer t.mu.Unlock()
	t.addLocked(streamRow{RowSummary: sum, Errors: u.Errors, Spec: newRowSpec(rep.Spec)})
	t.chartsVersion++
	if u.Output >= 0 && u.Output < len(t.reports) && rep.Row >= 0 && rep.Row < len(t.reports[u.Output]) {
		t.reports[u.Output][rep.Row] = &rep
	}
	t.changedLocked()
}

func (t *topic) addLocked(r streamRow) {
	t.rows = append(t.rows, r)
	t.status.Judged++
	if t.charts != nil {
		t.charts.add(r)
	}
}

// finish records the final summary; readers send it and close.
func (t *topic) finish(s *Summary) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.summary = s
	t.tolerances = &s.Tolerances
	t.status.State = store.Done
	t.chartsVersion++
	t.changedLocked()
}

// fail records that the judgement failed, with one sentence.
func (t *topic) fail(msg string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.status.State = store.Failed
	t.status.Message = msg
	t.changedLocked()
}

// report returns the row report of output o, row r, if it was judged.
func (t *topic) report(o, r int) *engine.RowReport {
	t.mu.Lock()
	defer t.mu.Unlock()
	if o < 0 || o >= len(t.reports) || r < 0 || r >= len(t.reports[o]) {
		return nil
	}
	return t.reports[o][r]
}

// judgedWith returns the tolerances of a finished judgement, else nil.
func (t *topic) judgedWith() *engine.Tolerances {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.tolerances
}

// final returns the summary of a finished judgement, else nil.
func (t *topic) final() *Summary {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.summary
}

// failingRows returns the rows where some output fails, in order.
func (t *topic) failingRows() []int {
	t.mu.Lock()
	defer t.mu.Unlock()
	seen := map[int]bool{}
	var rows []int
	for _, r := range t.rows {
		if !r.Pass && !seen[r.Row] {
			seen[r.Row] = true
			rows = append(rows, r.Row)
		}
	}
	sort.Ints(rows)
	return rows
}

// snapshot returns the outputs and the status.
func (t *topic) snapshot() ([]engine.OutputInfo, Status) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.outputs, t.status
}

// update is one websocket message: the parts that changed since the reader's
// last one. Fields that did not change are left out.
type update struct {
	Status  *Status             `json:"status,omitempty"`
	Outputs []engine.OutputInfo `json:"outputs,omitempty"`
	Rows    []RowSummary        `json:"rows,omitempty"`
	Charts  json.RawMessage     `json:"charts,omitempty"`
	Summary *Summary            `json:"summary,omitempty"`
	// Final is true on the last message; the server closes after it.
	Final bool `json:"final,omitempty"`
}

// cursor is what one reader has already sent.
type cursor struct {
	rows    int
	outputs bool
	charts  int
	status  Status
}

// next returns what c has not sent yet and advances c, or nil when nothing
// changed. withCharts false holds the chart options back (they are large and
// only the latest counts); chartsPending then says that newer ones wait. The
// final update carries everything, charts included.
func (t *topic) next(c *cursor, withCharts bool) (u *update, chartsPending bool) {
	t.mu.Lock()
	final := t.status.State.Finished()
	u = &update{}
	changed := false
	if !c.outputs && t.outputs != nil {
		u.Outputs = t.outputs
		c.outputs = true
		changed = true
	}
	if c.rows < len(t.rows) {
		u.Rows = make([]RowSummary, len(t.rows)-c.rows)
		for i, r := range t.rows[c.rows:] {
			u.Rows[i] = r.RowSummary
		}
		c.rows = len(t.rows)
		changed = true
	}
	stale := t.charts != nil && c.charts != t.chartsVersion
	if c.status != t.status {
		st := t.status
		u.Status = &st
		c.status = st
		changed = true
	}
	if final {
		u.Summary = t.summary
		u.Final = true
		changed = true
	}
	t.mu.Unlock()

	if stale && (withCharts || final) {
		b, ver, latest := t.chartsJSONFor(final)
		if b != nil && ver != c.charts {
			u.Charts = b
			c.charts = ver
			changed = true
		}
		chartsPending = !latest
	} else if stale {
		chartsPending = true
	}
	if !changed {
		return nil, chartsPending
	}
	return u, chartsPending
}

// chartsJSONFor returns chart options and the version they were built at.
// Builds happen at most once per chartInterval while rows stream in (every
// reader gets the cached options meanwhile, and latest is false); exact
// tells it to build the current version whatever the time.
func (t *topic) chartsJSONFor(exact bool) (b json.RawMessage, ver int, latest bool) {
	t.building.Lock()
	defer t.building.Unlock()
	t.mu.Lock()
	cur := t.chartsVersion
	if t.chartsJSON != nil && (t.builtVersion == cur || !exact && time.Since(t.builtAt) < chartInterval) {
		b, ver = t.chartsJSON, t.builtVersion
		t.mu.Unlock()
		return b, ver, ver == cur
	}
	snap := t.charts.clone()
	outs := t.outputs
	tol := t.tolerances
	var pooled []*engine.SpecStats
	if t.summary != nil {
		for _, o := range t.summary.Outputs {
			pooled = append(pooled, o.Spec)
		}
	}
	t.mu.Unlock()

	built, err := json.Marshal(runCharts(snap, outs, tol, t.vocab, pooled))
	t.mu.Lock()
	defer t.mu.Unlock()
	if err != nil {
		// Chart options are built from sanitised numbers; an error here is a
		// bug, and the page keeps its last charts.
		return t.chartsJSON, t.builtVersion, true
	}
	t.chartsJSON, t.builtVersion, t.builtAt = built, cur, time.Now()
	return built, cur, cur == t.chartsVersion
}

// stored is a finished judgement's stream as written to stream.json.
type stored struct {
	Status  Status              `json:"status"`
	Outputs []engine.OutputInfo `json:"outputs"`
	Rows    []streamRow         `json:"rows"`
	Summary *Summary            `json:"summary,omitempty"`
	Vocab   int                 `json:"vocab"`
	Batch   int                 `json:"batch"`
}

// toStored returns the topic's state for stream.json.
func (t *topic) toStored() stored {
	t.mu.Lock()
	defer t.mu.Unlock()
	return stored{Status: t.status, Outputs: t.outputs, Rows: t.rows, Summary: t.summary, Vocab: t.vocab, Batch: t.batch}
}

// topicFromStored rebuilds a finished topic.
func topicFromStored(runID, key string, s stored) *topic {
	t := newTopic(runID, key, s.Batch, s.Vocab, s.Status)
	if s.Outputs != nil {
		t.charts = newChartData(s.Batch, s.Outputs)
		t.outputs = s.Outputs
	}
	for _, r := range s.Rows {
		t.rows = append(t.rows, r)
		if t.charts != nil {
			t.charts.add(r)
		}
	}
	t.status = s.Status
	t.summary = s.Summary
	if s.Summary != nil {
		t.tolerances = &s.Summary.Tolerances
	}
	t.chartsVersion = 1
	return t
}
