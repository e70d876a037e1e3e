package live

import (
	"encoding/json"
	"time"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/web/view"
)

// ChartInterval is the least time between two chart updates to one reader,
// and between two builds of a topic's chart options while rows stream in:
// chart options are large, and only the latest one counts.
const ChartInterval = 400 * time.Millisecond

// Update is one websocket message: the parts that changed since the reader's
// last one. Fields that did not change are left out.
type Update struct {
	Status  *view.Status        `json:"status,omitempty"`
	Outputs []engine.OutputInfo `json:"outputs,omitempty"`
	Rows    []view.RowSummary   `json:"rows,omitempty"`
	Charts  json.RawMessage     `json:"charts,omitempty"`
	Summary *view.Summary       `json:"summary,omitempty"`
	// Final is true on the last message; the server closes after it.
	Final bool `json:"final,omitempty"`
}

// Cursor is what one reader has already sent.
type Cursor struct {
	rows    int
	outputs bool
	charts  int
	status  view.Status
}

// Next returns what c has not sent yet and advances c, or nil when nothing
// changed. withCharts false holds the chart options back (they are large and
// only the latest counts); chartsPending then says that newer ones wait. The
// final update carries everything, charts included.
func (t *Topic) Next(c *Cursor, withCharts bool) (u *Update, chartsPending bool) {
	t.mu.Lock()
	final := t.status.State.Finished()
	u = &Update{}
	changed := false
	if !c.outputs && t.outputs != nil {
		u.Outputs = t.outputs
		c.outputs = true
		changed = true
	}
	if c.rows < len(t.rows) {
		u.Rows = make([]view.RowSummary, len(t.rows)-c.rows)
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
// Builds happen at most once per ChartInterval while rows stream in (every
// reader gets the cached options meanwhile, and latest is false); exact
// tells it to build the current version whatever the time.
func (t *Topic) chartsJSONFor(exact bool) (b json.RawMessage, ver int, latest bool) {
	t.building.Lock()
	defer t.building.Unlock()
	t.mu.Lock()
	cur := t.chartsVersion
	if t.chartsJSON != nil && (t.builtVersion == cur || !exact && time.Since(t.builtAt) < ChartInterval) {
		b, ver = t.chartsJSON, t.builtVersion
		t.mu.Unlock()
		return b, ver, ver == cur
	}
	snap := t.charts.Clone()
	outs := t.outputs
	tol := t.tolerances
	var pooled []*engine.SpecStats
	if t.summary != nil {
		for _, o := range t.summary.Outputs {
			pooled = append(pooled, o.Spec)
		}
	}
	t.mu.Unlock()

	built, err := json.Marshal(view.RunCharts(snap, outs, tol, t.vocab, pooled))
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
