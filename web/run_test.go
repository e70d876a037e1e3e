package web

import (
	"testing"

	"github.com/sampviz/sampviz/web/store"
	"github.com/sampviz/sampviz/web/view"
)

// TestRunState: the run JSON's state is the newer of the store's (read
// first) and the topic's (ended first by the executor), so a run that
// failed while it was described never says "running" beside a "failed"
// progress.
func TestRunState(t *testing.T) {
	const why = "npz_crc_deflated.npz: tensor \"logits\": zip member fails its CRC-32 check"
	tests := []struct {
		name      string
		j         store.Judgement
		st        view.Status
		wantState store.State
		wantMsg   string
	}{
		{"failed in the topic, running in the store", store.Judgement{State: store.Running}, view.Status{State: store.Failed, Message: why}, store.Failed, why},
		{"failed in the topic, queued in the store", store.Judgement{State: store.Queued}, view.Status{State: store.Failed, Message: why}, store.Failed, why},
		{"done in the topic, running in the store", store.Judgement{State: store.Running}, view.Status{State: store.Done}, store.Done, ""},
		{"both failed", store.Judgement{State: store.Failed, Message: why}, view.Status{State: store.Failed, Message: why}, store.Failed, why},
		{"running in both", store.Judgement{State: store.Running}, view.Status{State: store.Running}, store.Running, ""},
		{"running in the store, queued in the topic", store.Judgement{State: store.Running}, view.Status{State: store.Queued}, store.Running, ""},
		{"done in the store", store.Judgement{State: store.Done}, view.Status{State: store.Running}, store.Done, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			state, msg := runState(tt.j, tt.st)
			if state != tt.wantState || msg != tt.wantMsg {
				t.Errorf("runState = %s, %q; want %s, %q", state, msg, tt.wantState, tt.wantMsg)
			}
		})
	}
}
