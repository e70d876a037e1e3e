package cuda

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/sampviz/sampviz/engine"
)

// TestHeaderConstants parses csrc/sampviz.h and checks every constant that
// this package mirrors by hand (library.go, plan.go, the variant table of
// gpu_variants_test.go) against it, and that every constant of the header
// has its mirror here, so that neither side drifts silently.
func TestHeaderConstants(t *testing.T) {
	src := readSource(t, "csrc/sampviz.h")
	header := headerConstants(t, string(src))
	mirrors := map[string]int{
		"SV_ABI_VERSION":        abiVersion,
		"SV_OK":                 svOK,
		"SV_ERR_INVALID":        svInvalid,
		"SV_ERR_CUDA":           svCUDA,
		"SV_ERR_STICKY":         svSticky,
		"SV_ERR_NO_DEVICE":      svNoDevice,
		"SV_ERR_UNSUPPORTED":    svUnsupported,
		"SV_F32":                svF32,
		"SV_F16":                svF16,
		"SV_BF16":               svBF16,
		"SV_ORDER_JOINT":        flagJoint,
		"SV_TIES_LOWEST_INDEX":  flagLowestIndex,
		"SV_METHOD_SHIFT":       methodShift,
		"SV_METHOD_AUTO":        methodAuto,
		"SV_METHOD_INVERSE_CDF": methodInverseCDF,
		"SV_METHOD_GUMBEL":      methodGumbel,
		"SV_METHOD_REJECTION":   methodRejection,
		"SV_ARGMAX_INF_INVALID": flagInfInvalid,
		"SV_HAS_FILTERS":        flagHasFilters,
		"SV_ALL_FAST":           flagAllFast,
		"SV_TOP_P_ONLY":         flagTopPOnly,
		"SV_PARAM_BYTES":        paramBytesPerRow,
		"SV_SPEC_TARGET_SHIFT":  specTargetShift,
		"SV_SPEC_DRAFT_SHIFT":   specDraftShift,
		"SV_MAX_TREE_NODES":     engine.MaxTreeNodes,
	}
	for _, v := range kernelVariants {
		mirrors[v.c] = v.bit
	}
	for name, want := range mirrors {
		got, ok := header[name]
		switch {
		case !ok:
			t.Errorf("%s: mirrored here, missing from csrc/sampviz.h", name)
		case got != want:
			t.Errorf("%s: csrc/sampviz.h says %d, engine/cuda says %d", name, got, want)
		}
	}
	for name := range header {
		if _, ok := mirrors[name]; !ok {
			t.Errorf("%s: in csrc/sampviz.h, not mirrored in engine/cuda (add it, or to this test's table)", name)
		}
	}

	// plan.go's fastMaxK mirrors the kernels' kFastMaxK.
	layout := readSource(t, "csrc/fast_layout.cuh")
	m := regexp.MustCompile(`constexpr int kFastMaxK = (\d+);`).FindSubmatch(layout)
	if m == nil {
		t.Fatal("csrc/fast_layout.cuh: no kFastMaxK")
	}
	if k, _ := strconv.Atoi(string(m[1])); k != fastMaxK {
		t.Errorf("kFastMaxK: csrc/fast_layout.cuh says %d, plan.go's fastMaxK %d", k, fastMaxK)
	}
}

// readSource reads a file of the repository: from this package's folder
// (go test), or from the repository's root (the GPU machine runs the test
// binary there); it skips where neither has it (a binary run elsewhere).
func readSource(t *testing.T, path string) []byte {
	t.Helper()
	for _, p := range []string{filepath.Join("..", "..", path), path} {
		if b, err := os.ReadFile(p); err == nil {
			return b
		}
	}
	wd, _ := os.Getwd()
	t.Skipf("%s not found from %s", path, wd)
	return nil
}

// headerConstants returns the integer constants of a C header: #define
// NAME value and enumerators NAME = value (every enumerator of the header
// has an explicit value). Comments are removed first.
func headerConstants(t *testing.T, src string) map[string]int {
	t.Helper()
	src = regexp.MustCompile(`(?s)/\*.*?\*/`).ReplaceAllString(src, "")
	src = regexp.MustCompile(`//[^\n]*`).ReplaceAllString(src, "")
	out := map[string]int{}
	add := func(name, value string) {
		v, err := strconv.ParseInt(value, 0, 64)
		if err != nil {
			t.Fatalf("csrc/sampviz.h: %s = %q: %v", name, value, err)
		}
		if _, dup := out[name]; dup {
			t.Fatalf("csrc/sampviz.h: %s defined twice", name)
		}
		out[name] = int(v)
	}
	for _, m := range regexp.MustCompile(`(?m)^#define\s+(SV_\w+)\s+(\S+)\s*$`).FindAllStringSubmatch(src, -1) {
		add(m[1], m[2])
	}
	for _, body := range regexp.MustCompile(`(?s)enum\s+\w+\s*\{(.*?)\}`).FindAllStringSubmatch(src, -1) {
		for _, item := range strings.Split(body[1], ",") {
			if item = strings.TrimSpace(item); item == "" {
				continue
			}
			m := regexp.MustCompile(`^(SV_\w+)\s*=\s*(\S+)$`).FindStringSubmatch(item)
			if m == nil {
				t.Fatalf("csrc/sampviz.h: enumerator %q has no explicit value", item)
			}
			add(m[1], m[2])
		}
	}
	return out
}
