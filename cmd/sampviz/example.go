package main

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/cpu"
	"github.com/sampviz/sampviz/engine/dump"
)

// exampleRun builds the built-in example that `sampviz check --example`
// judges: a renorm dump of 8 rows x 32000 bf16 logits with per-row
// temperature, top-k, top-p and min-p, whose external `probs` come from a
// correct implementation with three planted faults: row 2 drops a token the
// filters keep, row 3 keeps a token top-p removes, and row 6's logits hold a
// NaN. It goes through the same writer and parser as a user's file.
func exampleRun(o engine.Overrides) (*engine.Run, error) {
	const rows, vocab = 8, 32000
	rng := rand.New(rand.NewPCG(2026, 11))
	logits := make([]float32, rows*vocab)
	for i := range logits {
		logits[i] = float32(rng.NormFloat64() * 3)
	}
	logits[6*vocab+17] = float32(math.NaN())

	tensors := []*engine.Tensor{
		engine.FromFloat32s("logits", engine.BF16, []int{rows, vocab}, logits),
		engine.FromFloat64s("temperature", engine.F32, []int{rows}, []float64{1, 0.7, 1, 0.01, 1.3, 1, 0.5, 1}),
		engine.FromInts("top_k", engine.I64, []int{rows}, []int64{50, 0, 40, 0, 100, 20, 0, 1000}),
		engine.FromFloat64s("top_p", engine.F32, []int{rows}, []float64{0.9, 0.95, 1, 0.8, 0.9, 1, 0.7, 0.99}),
		engine.FromFloat64s("min_p", engine.F32, []int{rows}, []float64{0, 0.05, 0, 0, 0, 0.1, 0, 0}),
	}
	meta := map[string]string{"op": "renorm", "source": "sampviz built-in example"}

	run, err := parseExample(tensors, meta, engine.Overrides{})
	if err != nil {
		return nil, err
	}
	out, err := cpu.New().Run(context.Background(), run)
	if err != nil {
		return nil, fmt.Errorf("example: compute probs: %w", err)
	}
	probs := out.Probs
	probs.Name = "probs"
	plantDroppedToken(probs, 2, vocab)
	plantKeptToken(probs, 3, vocab)

	return parseExample(append(tensors, probs), meta, o)
}

// parseExample writes tensors to an in-memory safetensors file and parses it
// back, so the example exercises the same path as an uploaded dump.
func parseExample(tensors []*engine.Tensor, meta map[string]string, o engine.Overrides) (*engine.Run, error) {
	var buf bytes.Buffer
	if err := dump.WriteSafetensors(&buf, tensors, meta); err != nil {
		return nil, fmt.Errorf("example: write: %w", err)
	}
	f, err := dump.Parse("example.safetensors", buf.Bytes())
	if err != nil {
		return nil, fmt.Errorf("example: parse: %w", err)
	}
	return dump.BuildRun(f, o)
}

// plantDroppedToken zeroes the least probable kept token of row r.
func plantDroppedToken(probs *engine.Tensor, r, vocab int) {
	least, at := math.Inf(1), -1
	for i := r * vocab; i < (r+1)*vocab; i++ {
		if p := probs.Float(i); p > 0 && p < least {
			least, at = p, i
		}
	}
	if at >= 0 {
		probs.SetFloat(at, 0)
	}
}

// plantKeptToken gives the first filtered token of row r some mass.
func plantKeptToken(probs *engine.Tensor, r, vocab int) {
	for i := r * vocab; i < (r+1)*vocab; i++ {
		if probs.Float(i) == 0 {
			probs.SetFloat(i, 1e-3)
			return
		}
	}
}
