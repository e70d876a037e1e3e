package web

import (
	"net/http"

	"github.com/sampviz/sampviz/engine"
)

// gpus returns the runner's GPU states, empty when it drives none.
func (s *Server) gpus() []engine.GPUState { return s.runner.GPUs() }

// handleGPUsAPI is GET /api/gpus: each GPU's state, [] without a GPU.
func (s *Server) handleGPUsAPI(w http.ResponseWriter, r *http.Request) error {
	gpus := s.gpus()
	if len(gpus) == 0 {
		gpus = []engine.GPUState{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"gpus": gpus})
	return nil
}
