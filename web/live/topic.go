package live

import (
	"encoding/json"
	"sort"
	"sync"
	"time"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/session"
	"github.com/sampviz/sampviz/web/store"
	"github.com/sampviz/sampviz/web/view"
)

// Topic is the live state of one judgement that every page watching it
// reads: status, outputs, judged rows, chart data and the final summary. The
// executor publishes into it and never waits for a reader: readers are woken
// through a one-slot channel each and read what is new when they get to it,
// so a slow reader sees coalesced updates and a fast run is never held back.
type Topic struct {
	runID, key string
	// batch is the number of rows, vocab the vocabulary size.
	batch, vocab int

	mu      sync.Mutex
	status  view.Status
	outputs []engine.OutputInfo
	rows    []streamRow
	reports [][]*engine.RowReport // [output][row], for the row page while running
	charts  *view.ChartData
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
	summary    *view.Summary
	subs       map[*Subscriber]struct{}
	// seen is when a page last opened or left the topic: a finished run's
	// socket closes after its last message, but its page is still open.
	seen time.Time
}

// watchGrace is how long after a page last opened or left a run the run
// still counts as watched (retention spares it).
const watchGrace = 30 * time.Minute

// Seen records that a page opened the topic now.
func (t *Topic) Seen() {
	t.mu.Lock()
	t.seen = time.Now()
	t.mu.Unlock()
}

// streamRow is one judged row as it is kept, streamed and stored. Only its
// RowSummary goes to the pages; the rest feeds the charts.
type streamRow struct {
	view.RowSummary
	Errors *session.RowErrors `json:"errors,omitempty"`
	Spec   *view.RowSpec      `json:"spec,omitempty"`
}

// Subscriber is one reader of a topic.
type Subscriber struct {
	wake chan struct{}
}

// Wake is ready when the topic changed since the reader last read it;
// several changes wake it once.
func (s *Subscriber) Wake() <-chan struct{} { return s.wake }

// newTopic returns the topic of judgement key of run runID, with batch
// rows of vocab tokens, in state st.
func newTopic(runID, key string, batch, vocab int, st view.Status) *Topic {
	st.Total = batch
	return &Topic{runID: runID, key: key, batch: batch, vocab: vocab, status: st, subs: map[*Subscriber]struct{}{}}
}

// Subscribe adds a reader; it is woken at once so it sends the current state.
func (t *Topic) Subscribe() *Subscriber {
	s := &Subscriber{wake: make(chan struct{}, 1)}
	s.wake <- struct{}{}
	t.mu.Lock()
	t.subs[s] = struct{}{}
	t.seen = time.Now()
	t.mu.Unlock()
	return s
}

// Unsubscribe removes a reader.
func (t *Topic) Unsubscribe(s *Subscriber) {
	t.mu.Lock()
	delete(t.subs, s)
	t.seen = time.Now()
	t.mu.Unlock()
}

// changedLocked wakes every reader without blocking.
func (t *Topic) changedLocked() {
	for s := range t.subs {
		select {
		case s.wake <- struct{}{}:
		default: // already woken: it will read this change too
		}
	}
}

// setQueued records the place in the queue.
func (t *Topic) setQueued(ahead int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.status.State != store.Queued || t.status.Ahead == ahead {
		return
	}
	t.status.Ahead = ahead
	t.changedLocked()
}

// setRunning records that the executor took the job.
func (t *Topic) setRunning() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.status.State = store.Running
	t.status.Ahead = 0
	t.changedLocked()
}

// Outputs implements session.Sink.
func (t *Topic) Outputs(outs []engine.OutputInfo) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.outputs = append([]engine.OutputInfo(nil), outs...)
	t.status.Total = t.batch * len(outs)
	t.charts = view.NewChartData(t.batch, outs)
	t.reports = make([][]*engine.RowReport, len(outs))
	for i := range t.reports {
		t.reports[i] = make([]*engine.RowReport, t.batch)
	}
	t.chartsVersion++
	t.changedLocked()
}

// Row implements session.Sink.
func (t *Topic) Row(u session.RowUpdate) {
	sum := view.SummarizeRow(u)
	rep := u.Report
	t.mu.Lock()
	defer t.mu.Unlock()
	t.addLocked(streamRow{RowSummary: sum, Errors: u.Errors, Spec: view.NewRowSpec(rep.Spec)})
	t.chartsVersion++
	if u.Output >= 0 && u.Output < len(t.reports) && rep.Row >= 0 && rep.Row < len(t.reports[u.Output]) {
		t.reports[u.Output][rep.Row] = &rep
	}
	t.changedLocked()
}

func (t *Topic) addLocked(r streamRow) {
	t.rows = append(t.rows, r)
	t.status.Judged++
	if t.charts != nil {
		t.charts.Add(r.RowSummary, r.Errors, r.Spec)
	}
}

// settle makes the rows the topic streamed agree with the final report:
// some rules are applied once every row is judged (real rows shifted by the
// padding), after their rows were streamed, and a session may skip the
// sink. Every row whose verdict, violations or padding differ from what was
// streamed is streamed again (the page keeps the latest line of a row); a
// row never streamed is added. Charts keep what they drew.
func (t *Topic) settle(rep *engine.Report) {
	t.mu.Lock()
	defer t.mu.Unlock()
	index := map[string]int{}
	for i, o := range t.outputs {
		index[o.Name] = i
	}
	last := map[[2]int]int{}
	for i, r := range t.rows {
		last[[2]int{r.Output, r.Row}] = i
	}
	changed := false
	for _, o := range rep.Outputs {
		oi, ok := index[o.Name]
		if !ok {
			continue
		}
		for _, rr := range o.Rows {
			u := session.RowUpdate{Output: oi, Report: rr}
			i, seen := last[[2]int{oi, rr.Row}]
			if !seen {
				t.addLocked(streamRow{RowSummary: view.SummarizeRow(u)})
				changed = true
				continue
			}
			old := t.rows[i].RowSummary
			want := view.SummarizeRow(u)
			if old.Pass == want.Pass && old.Violations == want.Violations && old.Padding == want.Padding {
				continue
			}
			fixed := old
			fixed.Pass, fixed.Violations, fixed.Padding, fixed.Say = want.Pass, want.Violations, want.Padding, want.Say
			t.rows = append(t.rows, streamRow{RowSummary: fixed})
			if t.charts != nil {
				t.charts.Add(fixed, nil, nil)
			}
			changed = true
		}
		if oi < len(t.reports) {
			for k := range o.Rows {
				if r := o.Rows[k].Row; r >= 0 && r < len(t.reports[oi]) {
					t.reports[oi][r] = &o.Rows[k]
				}
			}
		}
	}
	if changed {
		t.chartsVersion++
		t.changedLocked()
	}
}

// setSummary records the final summary before the judgement's files are
// written, so that stream.json holds it, without waking readers yet.
func (t *Topic) setSummary(s *view.Summary) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.summary = s
	t.tolerances = &s.Tolerances
}

// finish records the final summary; readers send it and close.
func (t *Topic) finish(s *view.Summary) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.summary = s
	t.tolerances = &s.Tolerances
	t.status.State = store.Done
	t.chartsVersion++
	t.changedLocked()
}

// cancelled records that a person cancelled the judgement.
func (t *Topic) cancelled(msg string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.status.State = store.Cancelled
	t.status.Message = msg
	t.changedLocked()
}

// watched reports whether a page is watching the topic: one has its
// websocket open, or opened or left it within watchGrace.
func (t *Topic) watched() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.subs) > 0 || !t.seen.IsZero() && time.Since(t.seen) < watchGrace
}

// fail records that the judgement failed, with one sentence.
func (t *Topic) fail(msg string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.status.State = store.Failed
	t.status.Message = msg
	t.changedLocked()
}

// RowReport returns the row report of output o, row r, if it was judged.
func (t *Topic) RowReport(o, r int) *engine.RowReport {
	t.mu.Lock()
	defer t.mu.Unlock()
	if o < 0 || o >= len(t.reports) || r < 0 || r >= len(t.reports[o]) {
		return nil
	}
	return t.reports[o][r]
}

// JudgedWith returns the tolerances of a finished judgement, else nil.
func (t *Topic) JudgedWith() *engine.Tolerances {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.tolerances
}

// Final returns the summary of a finished judgement, else nil.
func (t *Topic) Final() *view.Summary {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.summary
}

// FailingRows returns the rows where some output fails, in order.
func (t *Topic) FailingRows() []int {
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

// Snapshot returns the outputs and the status.
func (t *Topic) Snapshot() ([]engine.OutputInfo, view.Status) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.outputs, t.status
}
