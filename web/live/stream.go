package live

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/web/store"
	"github.com/sampviz/sampviz/web/view"
)

// A finished judgement leaves two files beside each other in the store:
// report.json, the session's report as it is, and stream.json, what its
// topic held, from which a later server rebuilds the topic without judging
// again.

// stored is a finished judgement's stream as written to stream.json.
type stored struct {
	Status  view.Status         `json:"status"`
	Outputs []engine.OutputInfo `json:"outputs"`
	Rows    []streamRow         `json:"rows"`
	Summary *view.Summary       `json:"summary,omitempty"`
	Vocab   int                 `json:"vocab"`
	Batch   int                 `json:"batch"`
}

// toStored returns the topic's state for stream.json.
func (t *Topic) toStored() stored {
	t.mu.Lock()
	defer t.mu.Unlock()
	return stored{Status: t.status, Outputs: t.outputs, Rows: t.rows, Summary: t.summary, Vocab: t.vocab, Batch: t.batch}
}

// topicFromStored rebuilds a finished topic.
func topicFromStored(runID, key string, s stored) *Topic {
	t := newTopic(runID, key, s.Batch, s.Vocab, s.Status)
	if s.Outputs != nil {
		t.charts = view.NewChartData(s.Batch, s.Outputs)
		t.outputs = s.Outputs
	}
	for _, r := range s.Rows {
		t.rows = append(t.rows, r)
		if t.charts != nil {
			t.charts.Add(r.RowSummary, r.Errors, r.Spec)
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

// saveJudgement writes report.json and stream.json of a finished task.
func saveJudgement(st *store.Store, t *task, rep *engine.Report) error {
	if err := store.WriteFile(st.JudgementPath(t.RunID, t.Key, "report.json"), func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetIndent("", " ")
		return enc.Encode(rep)
	}); err != nil {
		return fmt.Errorf("save report: %w", err)
	}
	s := t.topic.toStored()
	s.Status.State = store.Done
	return store.WriteFile(st.JudgementPath(t.RunID, t.Key, "stream.json"), func(w io.Writer) error {
		return json.NewEncoder(w).Encode(s)
	})
}

// readJSON decodes the file at path into v.
func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("decode %s: %w", path, err)
	}
	return nil
}
