package web

import (
	"net/http"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/session"
)

// gpuStates is a Runner that drives GPUs and tells what each is doing
// (session.Session, over engine/cuda's Pool). A runner without it has no
// GPU to show.
type gpuStates interface {
	// GPUs reports one state per GPU, empty when it drives none.
	GPUs() []engine.GPUState
}

var _ gpuStates = (*session.Session)(nil)

// gpus returns the runner's GPU states, nil when it drives none.
func (s *Server) gpus() []engine.GPUState {
	if g, ok := s.runner.(gpuStates); ok {
		return g.GPUs()
	}
	return nil
}

// executors is how many runs are judged at once: one per GPU, so that each
// GPU has a run to serve, and one without a GPU.
func executors(r Runner) int {
	if g, ok := r.(gpuStates); ok {
		return max(len(g.GPUs()), 1)
	}
	return 1
}

// handleGPUsAPI is GET /api/gpus: each GPU's state, [] without a GPU.
func (s *Server) handleGPUsAPI(w http.ResponseWriter, r *http.Request) error {
	gpus := s.gpus()
	if gpus == nil {
		gpus = []engine.GPUState{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"gpus": gpus})
	return nil
}
