package cuda

import (
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/ebitengine/purego"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/samplertest"
)

// The kernel variants (csrc/sampviz.h enum sv_variant): bit, name, and
// whether an sm_90 device can take it (the sm_80 path's variants cannot).
// header_test.go checks the bits against the header.
var kernelVariants = []struct {
	bit  int
	c    string
	sm90 bool
}{
	{0, "SV_VARIANT_ARGMAX_CHUNKS", true},
	{1, "SV_VARIANT_ARGMAX_CLUSTER", true},
	{2, "SV_VARIANT_SOFTMAX_ROW", false},
	{3, "SV_VARIANT_SOFTMAX_ROW_CACHED", false},
	{4, "SV_VARIANT_SOFTMAX_SPLIT", false},
	{5, "SV_VARIANT_SOFTMAX_CLUSTER", true},
	{6, "SV_VARIANT_SOFTMAX_BULK", true},
	{7, "SV_VARIANT_RENORM_FAST", true},
	{8, "SV_VARIANT_RENORM_FAST_SERVE", true},
	{9, "SV_VARIANT_RENORM_FAST_CLUSTER", true},
	{10, "SV_VARIANT_RENORM_FLAGGED_TOKENS", true},
	{11, "SV_VARIANT_RENORM_FLAGGED_PATTERN", true},
	{12, "SV_VARIANT_RENORM_ROWS_TOKENS", true},
	{13, "SV_VARIANT_RENORM_ROWS_PATTERN", true},
	{14, "SV_VARIANT_SAMPLE_FAST", true},
	{15, "SV_VARIANT_SAMPLE_FAST_SERVE", true},
	{16, "SV_VARIANT_SAMPLE_FAST_CLUSTER", true},
	{17, "SV_VARIANT_SAMPLE_FLAGGED_TOKENS", true},
	{18, "SV_VARIANT_SAMPLE_FLAGGED_PATTERN", true},
	{19, "SV_VARIANT_SAMPLE_FILTERED_TOKENS", true},
	{20, "SV_VARIANT_SAMPLE_FILTERED_PATTERN", true},
	{21, "SV_VARIANT_SAMPLE_LEAN_TOKENS", true},
	{22, "SV_VARIANT_SAMPLE_LEAN_PATTERN", true},
	{23, "SV_VARIANT_SAMPLE_DRAWS", true},
	{24, "SV_VARIANT_SPEC_FAST", true},
	{25, "SV_VARIANT_SPEC_FAST_CLUSTER", true},
	{26, "SV_VARIANT_SPEC_PREPARE_FLAGGED", true},
	{27, "SV_VARIANT_SPEC_CHAIN_FILTERED", true},
	{28, "SV_VARIANT_SPEC_SPLIT", true},
	{29, "SV_VARIANT_SPEC_PREPARE_LEAN", true},
	{30, "SV_VARIANT_SPEC_CHAIN_LEAN", true},
	{31, "SV_VARIANT_SPEC_CHAIN_LEAN_TABLE", true},
	{32, "SV_VARIANT_NGRAM", true},
	{33, "SV_VARIANT_TREE_PREPARE_FILTERED", true},
	{34, "SV_VARIANT_TREE_PREPARE_LEAN", true},
	{35, "SV_VARIANT_TREE_NODES", true},
	{36, "SV_VARIANT_TREE_WALK", true},
	{37, "SV_VARIANT_NGRAM_FASTDEPLOY", true},
	{38, "SV_VARIANT_SAMPLE_COUNTS", true},
	{39, "SV_VARIANT_TREE_SPLIT", true},
	{40, "SV_VARIANT_SAMPLE_GUMBEL", true},
	{41, "SV_VARIANT_SAMPLE_TABLE", true},
	{42, "SV_VARIANT_SAMPLE_TOPP", true},
	{43, "SV_VARIANT_SAMPLE_TOPP_HELD", true},
}

// treeVariant says whether a variant is spec_tree_verify's, which a library
// built with SV_TREE=0 does not have.
func treeVariant(bit int) bool {
	return strings.HasPrefix(variantName(bit), "tree_")
}

// variantName is a variant's name without the prefix, in lower case.
func variantName(bit int) string {
	for _, v := range kernelVariants {
		if v.bit == bit {
			return strings.ToLower(strings.TrimPrefix(v.c, "SV_VARIANT_"))
		}
	}
	return fmt.Sprintf("variant %d", bit)
}

// dryRunner asks the kernel library, loaded into this test process (the
// workers run the kernels), which variants a run's launch chooses: the
// worker's own launch (gpuExec.launch) on the run's plan, in a dry run
// (sv_dry_run), with stand-in device handles.
type dryRunner struct {
	lib   *library
	dry   func(on int32, variants *uint64) int32
	major int32
}

var (
	dryOnce sync.Once
	dryLib  *dryRunner
	dryErr  error
	// taken maps each variant bit to the tests whose launches took it.
	taken   = map[int][]string{}
	takenMu sync.Mutex
)

func openDryRunner() (*dryRunner, error) {
	path := kernelsForTest()
	l, err := loadLibrary(path)
	if err != nil {
		return nil, err
	}
	h, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		return nil, err
	}
	sym, err := purego.Dlsym(h, "sv_dry_run")
	if err != nil {
		return nil, fmt.Errorf("%s has no sv_dry_run (rebuild with make kernels): %w", path, err)
	}
	d := &dryRunner{lib: l}
	purego.RegisterFunc(&d.dry, sym)
	if err := l.check(l.init(0), "init"); err != nil {
		return nil, err
	}
	var (
		name       [256]byte
		sms, minor int32
		mem, l2    uint64
	)
	if err := l.check(l.deviceInfo(&name[0], int32(len(name)), &sms, &mem, &l2, &d.major, &minor), "device info"); err != nil {
		return nil, err
	}
	return d, nil
}

// variants returns the bits of the variants run's launch takes.
func (d *dryRunner) variants(run *engine.Run) (uint64, error) {
	p, err := buildPlan(run)
	if err != nil {
		return 0, err
	}
	in, out := map[string]uint64{}, map[string]uint64{}
	handle := uint64(0)
	stand := func(names map[string]slot, m map[string]uint64) {
		for _, n := range slices.Sorted(maps.Keys(names)) {
			handle += 1 << 20
			m[n] = handle
		}
	}
	stand(p.req.In, in)
	stand(p.req.Out, out)
	if err := d.lib.check(d.dry(1, nil), "dry run"); err != nil {
		return 0, err
	}
	launchErr := newGPUExec(d.lib).launch(&p.req, in, out)
	var bits uint64
	if err := d.lib.check(d.dry(0, &bits), "dry run"); err != nil {
		return 0, err
	}
	return bits, launchErr
}

// recordVariants notes which variants run's launch takes, under the
// running test's name, and returns them.
func recordVariants(t *testing.T, run *engine.Run) uint64 {
	t.Helper()
	dryOnce.Do(func() { dryLib, dryErr = openDryRunner() })
	if dryErr != nil {
		t.Fatalf("variant dry run: %v", dryErr)
	}
	takenMu.Lock()
	defer takenMu.Unlock()
	bits, err := dryLib.variants(run)
	if err != nil {
		t.Fatalf("variant dry run: %v", err)
	}
	for _, v := range kernelVariants {
		if bits&(1<<v.bit) != 0 {
			taken[v.bit] = append(taken[v.bit], t.Name())
		}
	}
	return bits
}

// forcedParams are rows' parameters, the same on every row: temperature,
// top-k, top-p and min-p (off: 0, 1, 0), fresh seeds, top-k first.
func forcedParams(rng *rand.Rand, rows int, temp float64, k int, topP, minP float64) engine.Params {
	p := params(rng, rows, 2, false)
	for r := range rows {
		p.Temperature[r], p.TopK[r], p.TopP[r], p.MinP[r] = temp, k, topP, minP
	}
	p.FilterOrder, p.TopKTies = engine.TopKFirst, engine.TiesKeep
	return p
}

// TestGPUVariants runs a launch built to take each kernel variant that the
// dispatch can choose on an sm_90 device (csrc/sampviz.h enum sv_variant),
// in the quick mode too, so that compute-sanitizer checks every variant;
// every output must equal engine/cpu's. On an sm_90 device each case must
// also take the variants it is built for.
func TestGPUVariants(t *testing.T) {
	gpuBackend(t)
	rng := newRand(t)
	const (
		filtered = iota // every row filtered, none by the fast path (top-k off)
		unfiltered
		allFast  // every row by the fast path's parameters (the SV_ALL_FAST hint)
		toppOnly // every row with top-p alone (the SV_TOP_P_ONLY hint)
	)
	modeParams := func(rows, mode int) engine.Params {
		switch mode {
		case filtered:
			return forcedParams(rng, rows, 0.8, 0, 0.9, 0.02)
		case allFast:
			return forcedParams(rng, rows, 0.7, 50, 0.9, 0)
		case toppOnly:
			return forcedParams(rng, rows, 0.8, 0, 0.9, 0)
		}
		return forcedParams(rng, rows, 1.3, 0, 1, 0)
	}
	logitsCase := func(op engine.Op, d engine.DType, rows, vocab, mode int, method engine.SampleMethod, draws int) func() (*engine.Run, map[int]bool) {
		return func() (*engine.Run, map[int]bool) {
			x, invalid := logits(rng, d, rows, vocab, false)
			p := modeParams(rows, mode)
			if mode == unfiltered {
				p.Temperature[0] = 0 // a greedy row: the indexed argmax
			}
			p.Method, p.Draws = method, draws
			return &engine.Run{Op: op, Logits: x, Params: p}, invalid
		}
	}
	// keepDraws asks the case's run for every draw (draws_kernel), not
	// the counts.
	keepDraws := func(make func() (*engine.Run, map[int]bool)) func() (*engine.Run, map[int]bool) {
		return func() (*engine.Run, map[int]bool) {
			run, invalid := make()
			run.Params.KeepDraws = true
			return run, invalid
		}
	}
	treeCase := func(d engine.DType, rows, vocab, mode int) func() (*engine.Run, map[int]bool) {
		return func() (*engine.Run, map[int]bool) {
			next, sibling := samplertest.KaryTree(2, 2)
			run, invalid := treeRun(rng, d, rows, vocab, next, sibling, 4, engine.DTypeInvalid, false)
			run.Params = modeParams(rows, mode)
			run.Params.Trials = 4
			return run, invalid
		}
	}
	specCase := func(d engine.DType, rows, k, vocab, mode int) func() (*engine.Run, map[int]bool) {
		return func() (*engine.Run, map[int]bool) {
			run, invalid := specRun(rng, d, rows, k, vocab, 4, engine.DTypeInvalid)
			run.Params = modeParams(rows, mode)
			run.Params.Trials = 4
			return run, invalid
		}
	}
	cases := []struct {
		name string
		make func() (*engine.Run, map[int]bool)
		want []string
	}{
		{"argmax/few rows", logitsCase(engine.OpArgmax, engine.F32, 3, 4099, unfiltered, "", 0), []string{"argmax_chunks"}},
		{"argmax/many rows", logitsCase(engine.OpArgmax, engine.BF16, 20, 4099, unfiltered, "", 0), []string{"argmax_cluster"}},
		{"softmax/f32", logitsCase(engine.OpSoftmax, engine.F32, 3, 4099, unfiltered, "", 0), []string{"softmax_cluster"}},
		{"softmax/bf16 wave", logitsCase(engine.OpSoftmax, engine.BF16, 72, 32003, unfiltered, "", 0), []string{"softmax_bulk"}},
		{"renorm/filtered f32", logitsCase(engine.OpRenorm, engine.F32, 5, 4099, filtered, "", 0), []string{"renorm_fast", "renorm_flagged_tokens"}},
		{"renorm/filtered bf16", logitsCase(engine.OpRenorm, engine.BF16, 5, 4099, filtered, "", 0), []string{"renorm_fast", "renorm_flagged_pattern"}},
		{"renorm/unfiltered f32", logitsCase(engine.OpRenorm, engine.F32, 3, 4099, unfiltered, "", 0), []string{"renorm_rows_tokens"}},
		{"renorm/unfiltered f16", logitsCase(engine.OpRenorm, engine.F16, 3, 4099, unfiltered, "", 0), []string{"renorm_rows_pattern"}},
		{"renorm/all fast cluster", logitsCase(engine.OpRenorm, engine.BF16, 1, 128256, allFast, "", 0), []string{"renorm_fast_cluster"}},
		{"renorm/all fast 19 chunks", logitsCase(engine.OpRenorm, engine.BF16, 1, 151936, allFast, "", 0), []string{"renorm_fast_serve"}},
		{"sample/filtered f32", logitsCase(engine.OpSample, engine.F32, 5, 4099, filtered, "", 0), []string{"sample_fast", "sample_flagged_tokens"}},
		{"sample/filtered bf16", logitsCase(engine.OpSample, engine.BF16, 5, 4099, filtered, "", 0), []string{"sample_fast", "sample_flagged_pattern"}},
		{"sample/rejection f32", logitsCase(engine.OpSample, engine.F32, 3, 4099, filtered, engine.SampleRejection, 0), []string{"sample_filtered_tokens"}},
		{"sample/rejection bf16", logitsCase(engine.OpSample, engine.BF16, 3, 4099, filtered, engine.SampleRejection, 0), []string{"sample_filtered_pattern"}},
		{"sample/unfiltered f32", logitsCase(engine.OpSample, engine.F32, 3, 4099, unfiltered, "", 0), []string{"argmax_chunks", "sample_lean_tokens"}},
		{"sample/top-p alone bf16", logitsCase(engine.OpSample, engine.BF16, 5, 4099, toppOnly, "", 0), []string{"sample_topp"}},
		{"sample/top-p alone bf16 held", logitsCase(engine.OpSample, engine.BF16, 5, 32000, toppOnly, "", 0), []string{"sample_topp_held"}},
		{"sample/unfiltered bf16", logitsCase(engine.OpSample, engine.BF16, 3, 4099, unfiltered, "", 0), []string{"sample_table"}},
		{"sample/unfiltered f16", logitsCase(engine.OpSample, engine.F16, 3, 4099, unfiltered, "", 0), []string{"sample_lean_pattern"}},
		{"sample/gumbel bf16", logitsCase(engine.OpSample, engine.BF16, 3, 4099, unfiltered, engine.SampleGumbel, 0), []string{"sample_gumbel"}},
		{"sample/gumbel draws", keepDraws(logitsCase(engine.OpSample, engine.F16, 3, 111, unfiltered, engine.SampleGumbel, 500)), []string{"sample_lean_tokens", "sample_draws"}},
		{"sample/draws", keepDraws(logitsCase(engine.OpSample, engine.F32, 3, 111, filtered, "", 500)), []string{"sample_filtered_tokens", "sample_draws"}},
		{"sample/counts", logitsCase(engine.OpSample, engine.BF16, 3, 4099, unfiltered, "", 70001), []string{"sample_lean_pattern", "sample_counts"}},
		{"sample/all fast cluster", logitsCase(engine.OpSample, engine.BF16, 1, 128256, allFast, "", 0), []string{"sample_fast_cluster"}},
		{"sample/all fast 19 chunks", logitsCase(engine.OpSample, engine.BF16, 1, 151936, allFast, "", 0), []string{"sample_fast_serve"}},
		{"spec_verify/filtered", specCase(engine.BF16, 2, 2, 4099, filtered), []string{"spec_fast", "spec_prepare_flagged", "spec_chain_filtered"}},
		{"spec_verify/fast cluster", specCase(engine.BF16, 1, 2, 128256, allFast), []string{"spec_fast_cluster"}},
		{"spec_verify/few positions", specCase(engine.BF16, 2, 3, 32003, unfiltered), []string{"spec_split", "spec_chain_lean"}},
		{"spec_verify/lean bf16", specCase(engine.BF16, 40, 3, 4100, unfiltered), []string{"spec_prepare_lean", "spec_chain_lean_table"}},
		{"spec_verify/lean f16", specCase(engine.F16, 40, 3, 4100, unfiltered), []string{"spec_prepare_lean", "spec_chain_lean"}},
		{"spec_tree_verify/filtered", treeCase(engine.BF16, 3, 4099, filtered), []string{"tree_prepare_filtered", "tree_nodes", "tree_walk"}},
		{"spec_tree_verify/lean", treeCase(engine.F16, 3, 4100, unfiltered), []string{"tree_prepare_lean", "tree_nodes", "tree_walk"}},
		{"spec_tree_verify/split", treeCase(engine.BF16, 3, 32003, unfiltered), []string{"tree_split", "tree_nodes", "tree_walk"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			run, invalid := c.make()
			if run.Op == engine.OpSpecTreeVerify {
				sameTree(t, run, invalid)
			} else if run.Op == engine.OpSpecVerify {
				sameSpec(t, run, invalid)
			} else {
				gpu, host := runBoth(t, run)
				switch run.Op {
				case engine.OpRenorm:
					sameBits(t, "probs", gpu.Probs, host.Probs)
				case engine.OpArgmax, engine.OpSample:
					sameBits(t, "tokens", gpu.Tokens, host.Tokens)
					sameDraws(t, run, gpu, host)
				}
				judge(t, run, gpu, host, invalid)
			}
			if dryLib.major < 9 {
				return
			}
			takenMu.Lock()
			bits, err := dryLib.variants(run)
			takenMu.Unlock()
			if err != nil {
				t.Fatalf("variant dry run: %v", err)
			}
			var got []string
			for _, v := range kernelVariants {
				if bits&(1<<v.bit) != 0 {
					got = append(got, variantName(v.bit))
				}
			}
			for _, w := range c.want {
				if !slices.Contains(got, w) {
					t.Errorf("launch took %v, want %s among them", got, w)
				}
			}
		})
	}
}

// TestGPUVariantCoverage prints which tests took each kernel variant (every
// GPU test records its launches' variants in runBoth) and, when the whole
// GPU suite ran before it on an sm_90 device, fails for a variant that the
// dispatch can choose and no launch took. It must stay the last GPU test:
// go test runs a package's tests in the order of their files.
func TestGPUVariantCoverage(t *testing.T) {
	gpuBackend(t)
	if dryLib == nil {
		t.Skip("no GPU test recorded its variants")
	}
	takenMu.Lock()
	defer takenMu.Unlock()
	mode := "full"
	if quick() {
		mode = "quick"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "variant coverage (%s mode, sm_%d0): variant, launches, first tests\n", mode, dryLib.major)
	var missing []string
	noTree := dryLib.lib.specTreeVerify == nil
	for _, v := range kernelVariants {
		names := taken[v.bit]
		if len(names) == 0 && v.sm90 && !(noTree && treeVariant(v.bit)) {
			missing = append(missing, variantName(v.bit))
		}
		first := names[:min(len(names), 3)]
		note := ""
		if dryLib.major >= 9 && !v.sm90 {
			note = " (the sm_80 path: not chosen on sm_90)"
		}
		if noTree && treeVariant(v.bit) {
			note = " (the library was built with SV_TREE=0)"
		}
		fmt.Fprintf(&b, "variant %-24s %4d  %s%s\n", variantName(v.bit), len(names), strings.Join(first, ", "), note)
	}
	fmt.Print(b.String()) // the table goes to stdout, with or without -test.v
	run, shuffle := flag.Lookup("test.run").Value.String(), flag.Lookup("test.shuffle").Value.String()
	whole := (run == "" || run == "TestGPU") && shuffle == "off"
	if len(missing) > 0 && whole && dryLib.major >= 9 {
		t.Errorf("no launch took %d variants the dispatch can choose: %s", len(missing), strings.Join(missing, ", "))
	}
}
