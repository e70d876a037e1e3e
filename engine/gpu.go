package engine

import "time"

// GPUState is what one GPU's worker is doing, for the home page and
// GET /api/gpus: a backend that runs kernels on GPUs (engine/cuda's Pool)
// reports one per GPU it drives. It describes; it never controls a worker.
type GPUState struct {
	// Index is the GPU's CUDA device number, as the server's environment
	// numbers them (CUDA_VISIBLE_DEVICES applies).
	Index int `json:"index"`
	// Name is the GPU's name ("NVIDIA H100 80GB HBM3"); "" until its
	// worker has started once.
	Name string `json:"name"`
	// State is "idle", "busy" (running Run's kernels) or "down" (its worker
	// could not start; Fault says why, and the next run tries again).
	State string `json:"state"`
	// Run names the run whose kernels it runs now (the server's run id),
	// "" when idle.
	Run string `json:"run,omitempty"`
	// Runs is how many runs are placed on it now, running or waiting for
	// it; Served is how many ops it has run since the server started (a
	// sample run counts its two seed reruns too).
	Runs   int   `json:"runs"`
	Served int64 `json:"served"`
	// Restarts counts the times its worker was killed (a kernel fault, a
	// crash, a hang or a cancelled run) to be started afresh.
	Restarts int `json:"restarts"`
	// Fault is the last fault's sentence, and FaultAt when it happened;
	// "" when it never faulted.
	Fault   string    `json:"fault,omitempty"`
	FaultAt time.Time `json:"fault_at,omitzero"`
}

// GPU states.
const (
	GPUIdle = "idle"
	GPUBusy = "busy"
	GPUDown = "down"
)
