package web_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/session"
	"github.com/sampviz/sampviz/web"
	"github.com/sampviz/sampviz/web/webtest"
)

// TestGPUPanel shows each GPU's state on the home page and in GET
// /api/gpus, and nothing of GPUs where the runner drives none.
func TestGPUPanel(t *testing.T) {
	faultAt := time.Now().Add(-3 * time.Minute)
	gpus := []engine.GPUState{
		{Index: 0, Name: "NVIDIA H100 80GB HBM3", State: engine.GPUBusy, Run: "r0123", Runs: 2, Served: 7},
		{Index: 1, Name: "NVIDIA H100 80GB HBM3", State: engine.GPUIdle, Restarts: 1, Served: 3,
			Fault: "sample: kernel fault on the GPU: an illegal memory access was encountered (the worker was restarted)", FaultAt: faultAt},
		{Index: 3, State: engine.GPUDown, Fault: "backend unavailable: init: no CUDA device 3 (2 present)"},
	}
	tests := []struct {
		name  string
		gpus  []engine.GPUState
		ids   map[string]string // data-testid -> text it holds
		count int
	}{
		{"no GPU", nil, nil, 0},
		{"one busy, one restarted, one down", gpus, map[string]string{
			"gpu-name-0": "NVIDIA H100 80GB HBM3", "gpu-state-0": "busy with r0123", "gpu-restarts-0": "0", "gpu-fault-0": "",
			"gpu-name-1": "NVIDIA H100 80GB HBM3", "gpu-state-1": "idle", "gpu-restarts-1": "1",
			"gpu-fault-1": "sample: kernel fault on the GPU: an illegal memory access was encountered (the worker was restarted) (3 min ago)",
			"gpu-state-3": "down", "gpu-fault-3": "backend unavailable: init: no CUDA device 3 (2 present)",
		}, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, func(c *web.Config, _ *webtest.Pipeline) {
				c.Runner.(*webtest.Runner).GPUsFunc = func() []engine.GPUState { return tt.gpus }
			})
			page := e.page("/", http.StatusOK)
			if _, ok := byTestID(t, page, "gpus"); ok != (tt.count > 0) {
				t.Errorf("home page has the GPU panel: %v, want %v", ok, tt.count > 0)
			}
			for id, want := range tt.ids {
				if got, _ := byTestID(t, page, id); got != want {
					t.Errorf("%s: %q, want %q", id, got, want)
				}
			}
			if tt.count > 0 && !strings.Contains(string(page), `href="/runs/r0123"`) {
				t.Errorf("the busy GPU does not link its run")
			}
			res := e.do("GET", "/api/gpus", nil)
			got := decode[struct {
				GPUs []engine.GPUState `json:"gpus"`
			}](t, res)
			if res.StatusCode != http.StatusOK || got.GPUs == nil || len(got.GPUs) != tt.count {
				t.Fatalf("GET /api/gpus: %s, %d GPUs (nil %v), want 200 and %d", res.Status, len(got.GPUs), got.GPUs == nil, tt.count)
			}
			for i, g := range got.GPUs {
				w := tt.gpus[i]
				if g.Index != w.Index || g.State != w.State || g.Run != w.Run || g.Restarts != w.Restarts || g.Fault != w.Fault || !g.FaultAt.Equal(w.FaultAt) {
					t.Errorf("GPU %d in the API: %+v, want %+v", i, g, w)
				}
			}
		})
	}
}

// TestOneExecutorPerGPU uploads two dumps to a server whose runner has two
// GPUs: both judgements run at once (each waits until the other has begun).
func TestOneExecutorPerGPU(t *testing.T) {
	var mu sync.Mutex
	started := 0
	both := make(chan struct{})
	e := newEnv(t, func(c *web.Config, _ *webtest.Pipeline) {
		f := c.Runner.(*webtest.Runner)
		f.GPUsFunc = func() []engine.GPUState { return make([]engine.GPUState, 2) }
		execute := f.ExecuteFunc
		f.ExecuteFunc = func(ctx context.Context, job session.Job, sink session.Sink) (*engine.Report, error) {
			mu.Lock()
			if started++; started == 2 {
				close(both)
			}
			mu.Unlock()
			select {
			case <-both:
			case <-time.After(10 * time.Second):
				t.Errorf("run %s: the other run never started beside it", job.Label)
			}
			return execute(ctx, job, sink)
		}
	})
	a := e.uploadRaw(randomDump(4, 32).Bytes())
	b := e.uploadRaw(randomDump(5, 40).Bytes())
	for _, id := range []string{a.ID, b.ID} {
		if r := e.wait(id, ""); r.State != "done" {
			t.Errorf("run %s: %s (%s), want done", id, r.State, r.Message)
		}
	}
}
