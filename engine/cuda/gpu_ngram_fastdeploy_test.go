package cuda

import (
	"context"
	"testing"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/compare"
)

// TestGPUNgramFastDeploy runs csrc/ngram_fastdeploy.cu against engine/cpu on
// fresh random runs of both FastDeploy variants (fdRandomRun: batches of 1
// to 256 rows, encoder, inactive and MTP rows, step_idx near max_dec_len,
// thresholds that bind): draft_out and seq_lens_this_time_out must be
// equal bit for bit, and the judge must pass every row.
func TestGPUNgramFastDeploy(t *testing.T) {
	gpuBackend(t)
	rng := newRand(t)
	type fdCase struct {
		name                 string
		rows, l, m, alphabet int
		loose, absent        bool
	}
	cases := []fdCase{
		{"small", 1 + rng.IntN(8), 50, 20, 4, false, false},
		{"tight budget", 1 + rng.IntN(256), 300, 60, 6, false, false},
		{"absent state", 1 + rng.IntN(256), 300, 60, 6, false, true},
		{"loose budget", 1 + rng.IntN(256), 2000, 300, 30, true, false},
		{"long prompt", 1 + rng.IntN(64), 20000, 1024, 1000, false, false},
		{"256 rows", 256, 1000, 200, 8, false, false},
	}
	if quick() {
		cases = cases[:2]
	}
	for _, sem := range []engine.NgramSemantics{engine.NgramFastDeploy, engine.NgramFastDeployHybrid} {
		for _, c := range cases {
			t.Run(string(sem)+"/"+c.name+"/B"+itoa(c.rows), func(t *testing.T) {
				run := fdRandomRun(rng, sem, c.rows, c.l, c.m, c.alphabet, c.loose, c.absent)
				gpu, host := runBoth(t, run)
				sameBits(t, "draft_out", gpu.DraftOut, host.DraftOut)
				sameBits(t, "seq_lens_this_time_out", gpu.SeqLensThisTime, host.SeqLensThisTime)
				judge(t, run, gpu, host, nil)
			})
		}
	}
}

// TestGPUNgramFastDeployScenarios runs the FastDeploy scenarios' dumps
// through the cuda backend: the outputs equal engine/cpu's and pass the
// judge.
func TestGPUNgramFastDeployScenarios(t *testing.T) {
	gpuBackend(t)
	for _, name := range fdScenarios {
		t.Run(name, func(t *testing.T) {
			run := fdScenarioRun(t, name)
			gpu, host := runBoth(t, run)
			sameBits(t, "draft_out", gpu.DraftOut, host.DraftOut)
			sameBits(t, "seq_lens_this_time_out", gpu.SeqLensThisTime, host.SeqLensThisTime)
			rep, err := compare.Judge(context.Background(), run, []*engine.Output{gpu}, compare.Options{}, nil)
			if err != nil {
				t.Fatalf("judge: %v", err)
			}
			if len(rep.Outputs) != 1 || !rep.Outputs[0].Pass {
				t.Errorf("the cuda backend's output of %s does not pass: %+v", name, rep.Outputs)
			}
		})
	}
}
