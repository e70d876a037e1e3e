// Package engine holds sampviz's domain: what a run is (an Op on a batch of rows
// with its Params), what an implementation produced for it (Output), the Backend
// interface that kernels sit behind, and the Report that judges outputs against
// the float64 reference.
//
// The subpackages do the work: dump reads and writes dump files, ref computes
// the float64 truth, cpu and cuda are backends, compare and stats judge. This
// package never does I/O, never runs kernels and never speaks HTTP.
package engine
