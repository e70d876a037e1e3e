package web

import (
	"net/http"

	"github.com/sampviz/sampviz/engine"
)

// gpus returns the runner's GPU states, nil when it drives none.
func (s *Server) gpus() []engine.GPUState {
	if g, ok := s.runner.(gpuStates); ok {
		return g.GPUs()
	}
	return nil
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
