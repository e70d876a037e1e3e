package web

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"testing"

	"github.com/sampviz/sampviz/engine"
)

// The page's script writes numbers as the server does: static/numfmt.js
// mirrors engine.FormatSig, FormatPercent and FormatStoredP. Every value,
// fixed and fresh random ones (ties, whole parts, every decade from 1e-12 to
// 1e12), goes through both; any difference fails.
func TestNumfmtMirrorsGo(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		// make test installs Debian's nodejs beside chromium (browser-deps);
		// CI requires it.
		if os.Getenv("SAMPVIZ_REQUIRE_BROWSER") == "1" {
			t.Fatal("no node on this machine, and SAMPVIZ_REQUIRE_BROWSER=1: static/numfmt.js must be run against engine's formatter")
		}
		t.Skip("no node on this machine: static/numfmt.js is not run against engine's formatter")
	}
	src, err := staticFiles.ReadFile("static/numfmt.js")
	if err != nil {
		t.Fatal(err)
	}
	type jsCase struct {
		Func   string `json:"f"`
		V      string `json:"v"`
		Digits int    `json:"d"`
		want   string
	}
	text := func(v float64) string {
		switch {
		case math.IsInf(v, 1):
			return "Infinity"
		case math.IsInf(v, -1):
			return "-Infinity"
		}
		return strconv.FormatFloat(v, 'g', -1, 64)
	}
	values := []float64{0, math.Copysign(0, -1), math.NaN(), math.Inf(1), math.Inf(-1), 1, -1.5, 0.125, 12.375, 12.25,
		2.5, 1234.5, 999999.5, 9.96, 99.7, 99999.6, 999.7, 99960, 0.000099996, 1e-4, 1e-5, 3e6, 1e-300, 1e-310, 4.9e-324, 0.9996, 0.999, 1 - 1e-12, 5.55e-17,
		float64(float32(1e-4)), 0.0123, 3.1e-12, 1.7976931348623157e308}
	rng := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	for range 400 {
		e := rng.IntN(25) - 12
		v := (1 + 9*rng.Float64()) * math.Pow(10, float64(e))
		if rng.IntN(4) == 0 {
			v = float64(rng.IntN(4000)) / 8 // exact binary ties
		}
		if rng.IntN(2) == 0 {
			v = -v
		}
		values = append(values, v, rng.Float64())
	}
	var cases []jsCase
	for _, v := range values {
		for d := 1; d <= 6; d++ {
			cases = append(cases, jsCase{"sig", text(v), d, engine.FormatSig(v, d)})
		}
		cases = append(cases, jsCase{"percent", text(v), 0, engine.FormatPercent(v)})
		if v >= 0 || math.IsNaN(v) {
			cases = append(cases, jsCase{"storedP", text(v), 0, engine.FormatStoredP(v)}, jsCase{"pText", text(v), 0, engine.StoredPText(v)})
		}
	}
	in, err := json.Marshal(cases)
	if err != nil {
		t.Fatal(err)
	}
	script := string(src) + `
const cases = JSON.parse(require('fs').readFileSync(0, 'utf8'));
const n = globalThis.sampvizNumbers;
process.stdout.write(JSON.stringify(cases.map(c => c.f === 'sig' ? n.sig(Number(c.v), c.d) : n[c.f](Number(c.v)))));
`
	cmd := exec.Command(node, "-e", script)
	cmd.Stdin = bytes.NewReader(in)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node: %v", err)
	}
	var got []string
	if err := json.Unmarshal(out, &got); err != nil || len(got) != len(cases) {
		t.Fatalf("node answered %d results for %d cases (%v): %.200s", len(got), len(cases), err, out)
	}
	bad := 0
	for i, c := range cases {
		if got[i] != c.want && bad < 20 {
			bad++
			t.Errorf("%s(%s, %d): numfmt.js %q, engine %q", c.Func, c.V, c.Digits, got[i], c.want)
		}
	}
}
