package web

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/web/store"
)

func TestHistBin(t *testing.T) {
	tests := []struct {
		name string
		err  float64
		want int
	}{
		{"exact", 0, 0},
		{"below the first edge", 1e-15, 1},
		{"first edge", 1e-12, 1},
		{"half a decade up", 3.2e-12, 2},
		{"1e-5", 1e-5, 15},
		{"just under 1", 0.99, HistBins - 2},
		{"1 and above", 3, HistBins - 1},
		{"NaN", math.NaN(), HistBins - 1},
		{"Inf", math.Inf(1), HistBins - 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := HistBin(tt.err); got != tt.want {
				t.Errorf("HistBin(%g) = %d, want %d", tt.err, got, tt.want)
			}
		})
	}
	// Every error lands in the bin whose edges hold it.
	for i := 0; i < 1000; i++ {
		e := math.Pow(10, -12+12*rand.Float64())
		b := HistBin(e)
		if e < HistEdge(b)*(1-1e-12) || b < HistBins-1 && e >= HistEdge(b+1)*(1+1e-12) {
			t.Fatalf("HistBin(%g) = %d with edges [%g, %g)", e, b, HistEdge(b), HistEdge(b+1))
		}
	}
}

func TestParseTolerances(t *testing.T) {
	tests := []struct {
		name    string
		query   string
		want    *engine.Tolerances
		wantErr string
	}{
		{"none", "", nil, ""},
		{"all", "satol=1e-5&srtol=0.016&natol=2e-5&nrtol=0.001&pvalue=0.01",
			&engine.Tolerances{Strict: engine.Tolerance{Atol: 1e-5, Rtol: 0.016}, Native: engine.Tolerance{Atol: 2e-5, Rtol: 0.001}, PValue: 0.01}, ""},
		{"some", "satol=1e-5", nil, "needs all of"},
		{"negative", "satol=-1&srtol=0&natol=0&nrtol=0&pvalue=0.1", nil, "satol must be a finite number"},
		{"NaN", "satol=NaN&srtol=0&natol=0&nrtol=0&pvalue=0.1", nil, "satol must be a finite number"},
		{"p-value out of range", "satol=0&srtol=0&natol=0&nrtol=0&pvalue=1", nil, "pvalue must be between 0 and 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q, _ := url.ParseQuery(tt.query)
			got, err := parseTolerances(q)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (got == nil) != (tt.want == nil) || got != nil && *got != *tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
	// The key does not depend on the order the URL writes them in.
	a, _ := url.ParseQuery("satol=1e-5&srtol=0.016&natol=2e-5&nrtol=0.001&pvalue=0.01")
	b, _ := url.ParseQuery("pvalue=0.01&nrtol=0.001&natol=0.00002&srtol=0.016&satol=0.00001")
	ta, _ := parseTolerances(a)
	tb, _ := parseTolerances(b)
	if toleranceKey(*ta) != toleranceKey(*tb) {
		t.Error("the same tolerances written differently got different keys")
	}
}

func TestUploadNames(t *testing.T) {
	tests := []struct {
		name, in string
		head     string
		wantName string
		wantExt  string
	}{
		{"safetensors by name", "dump.safetensors", "\x10\x00\x00\x00", "dump.safetensors", ".safetensors"},
		{"npz by name, any case", "Dump.NPZ", "PK\x03\x04", "Dump.NPZ", ".npz"},
		{"npy by content", "logits", "\x93NUMPY\x01\x00", "logits", ".npy"},
		{"zip by content", "upload", "PK\x03\x04", "upload", ".npz"},
		{"pt by name", "capture.pt", "PK\x03\x04", "capture.pt", ".pt"},
		{"anything else is tried as safetensors", "notes.txt", "hello", "notes.txt", ".safetensors"},
		{"a path keeps its base", "../../etc/passwd", "x", "passwd", ".safetensors"},
		{"windows path", `C:\Users\me\dump.npy`, "\x93NUMPY", "dump.npy", ".npy"},
		{"control characters", "du\x00mp\n.npy", "\x93NUMPY", "dump.npy", ".npy"},
		{"empty", "", "x", "upload", ".safetensors"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := cleanName(tt.in)
			if n != tt.wantName {
				t.Errorf("cleanName(%q) = %q, want %q", tt.in, n, tt.wantName)
			}
			if ext := dumpExt(n, []byte(tt.head)); ext != tt.wantExt {
				t.Errorf("dumpExt(%q) = %q, want %q", n, ext, tt.wantExt)
			}
		})
	}
}

func TestSentence(t *testing.T) {
	tests := []struct{ in, want string }{
		{"dump.npz: tensor \"logits\": shape [2] needs 2 dims", "dump.npz: tensor \"logits\": shape [2] needs 2 dims."},
		{"top-p must be in (0, 1]", "Top-p must be in (0, 1]."},
		{"Already one.", "Already one."},
		{"", "The dump cannot be used."},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			if got := sentence(tt.in); got != tt.want {
				t.Errorf("sentence(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

// randomUpdate is a judged row with fresh random errors, some of them
// non-finite.
func randomUpdate(out, row, vocab int) RowUpdate {
	worst := math.Pow(10, -9+8*rand.Float64())
	switch rand.IntN(20) {
	case 0:
		worst = math.NaN()
	case 1:
		worst = math.Inf(1)
	}
	allowed := 1e-5 + 1e-3*rand.Float64()
	rep := engine.RowReport{Row: row, Pass: worst <= allowed, Violations: []string{}}
	if !rep.Pass {
		rep.AddFinding(engine.Finding{Rule: engine.RuleTolerance, Severity: engine.Violation, Message: "row: off", Token: 3})
	}
	rep.Strict = &engine.Drift{Reference: "strict", Abs: engine.ErrorStats{Max: engine.Float(worst)}}
	e := &RowErrors{Token: rand.IntN(vocab), Worst: engine.Float(worst), Allowed: engine.Float(allowed), Buckets: make([]engine.Float, HeatBuckets)}
	for b := range e.Buckets {
		e.Buckets[b] = engine.Float(rand.Float64() * 2)
	}
	e.Buckets[rand.IntN(HeatBuckets)] = engine.Float(worst / allowed)
	e.Hist[HistBin(worst)]++
	e.Hist[0] += vocab - 1
	return RowUpdate{Output: out, Report: rep, Errors: e}
}

func TestChartsAreValidJSON(t *testing.T) {
	rows, vocab := 40+rand.IntN(200), 1000+rand.IntN(50000)
	outs := []OutputInfo{{Name: "cpu", Kind: "probs"}, {Name: "probs", External: true, Kind: "probs"}, {Name: "tokens", External: true, Kind: "tokens"}}
	tp := newTopic("r", "", rows, vocab, Status{State: store.Running})
	tp.Outputs(outs)
	for r := 0; r < rows; r++ {
		tp.Row(randomUpdate(0, r, vocab))
		tp.Row(randomUpdate(1, r, vocab))
		tp.Row(RowUpdate{Output: 2, Report: engine.RowReport{Row: r, Pass: rand.IntN(3) > 0}})
	}
	tol := &engine.Tolerances{Strict: engine.Tolerance{Atol: 1e-5, Rtol: 1.6e-2}}
	b, err := json.Marshal(runCharts(tp.charts, outs, tol, vocab, nil))
	if err != nil {
		t.Fatal(err)
	}
	var got []map[string]json.RawMessage
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		out   int
		kinds []string
	}{
		{"ours", 0, []string{"worst", "hist", "heat"}},
		{"external probs", 1, []string{"worst", "hist", "heat"}},
		{"tokens", 2, []string{"worst"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if len(got[tt.out]) != len(tt.kinds) {
				t.Errorf("charts %v, want %v", keys(got[tt.out]), tt.kinds)
			}
			for _, k := range tt.kinds {
				var opt struct {
					Series []struct {
						Name string `json:"name"`
						Data []any  `json:"data"`
					} `json:"series"`
				}
				if err := json.Unmarshal(got[tt.out][k], &opt); err != nil {
					t.Fatalf("%s: %v", k, err)
				}
				n := 0
				for _, s := range opt.Series {
					n += len(s.Data)
				}
				if n == 0 {
					t.Errorf("%s has no data", k)
				}
			}
		})
	}
	// Every judged row of ours is a point of the worst chart.
	var worst struct {
		Series []struct {
			Name string      `json:"name"`
			Data [][]float64 `json:"data"`
		} `json:"series"`
	}
	json.Unmarshal(got[0]["worst"], &worst)
	points := 0
	for _, s := range worst.Series {
		if s.Name != "allowed: atol + rtol·|reference|" {
			points += len(s.Data)
		}
	}
	if points != rows {
		t.Errorf("worst chart has %d points, want %d", points, rows)
	}
}

func keys(m map[string]json.RawMessage) []string {
	var k []string
	for s := range m {
		k = append(k, s)
	}
	return k
}

func TestEncodeUpdate(t *testing.T) {
	charts := json.RawMessage(`[{"worst":{"series":[{"data":[[1,2]]}]}}]`)
	tests := []struct {
		name string
		u    update
	}{
		{"charts alone", update{Charts: charts}},
		{"rows and charts", update{Rows: []RowSummary{{Row: 3, Pass: true}}, Charts: charts}},
		{"no charts", update{Final: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := encodeUpdate(&tt.u)
			if err != nil {
				t.Fatal(err)
			}
			var back update
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatalf("%s: %v", b, err)
			}
			if string(back.Charts) != string(tt.u.Charts) || len(back.Rows) != len(tt.u.Rows) || back.Final != tt.u.Final {
				t.Errorf("round trip of %s changed it", b)
			}
		})
	}
}

func TestSlowReaderGetsCoalescedUpdates(t *testing.T) {
	rows := 300 + rand.IntN(300)
	tp := newTopic("r", "", rows, 100, Status{State: store.Queued})
	sub := tp.subscribe()
	outs := []OutputInfo{{Name: "cpu", Kind: "probs"}}
	tp.Outputs(outs)
	tp.setRunning()
	// The publisher never blocks, however many changes the reader misses.
	for r := 0; r < rows; r++ {
		tp.Row(randomUpdate(0, r, 100))
	}
	tp.finish(&Summary{Pass: false, Rows: rows})
	if n := len(sub.wake); n != 1 {
		t.Fatalf("reader has %d wake-ups pending, want 1", n)
	}
	var c cursor
	u, _ := tp.next(&c, false)
	if u == nil || len(u.Rows) != rows || u.Summary == nil || !u.Final || u.Charts == nil || len(u.Outputs) != 1 {
		t.Fatalf("the one update after the run: %d rows, final %v, charts %v", len(u.Rows), u.Final, u.Charts != nil)
	}
	if u, _ := tp.next(&c, true); u == nil || !u.Final || len(u.Rows) != 0 || u.Charts != nil {
		t.Errorf("after everything was sent, next = %+v, want only the final marker", u)
	}
}

func TestChartsBuiltOncePerInterval(t *testing.T) {
	tp := newTopic("r", "", 50, 100, Status{State: store.Running})
	tp.Outputs([]OutputInfo{{Name: "cpu", Kind: "probs"}})
	var readers [20]cursor
	for r := 0; r < 50; r++ {
		tp.Row(randomUpdate(0, r, 100))
		for i := range readers {
			tp.next(&readers[i], true)
		}
	}
	tp.mu.Lock()
	built := tp.builtVersion
	tp.mu.Unlock()
	// 50 rows arrive within one chart interval: every reader got the first
	// build and waits for the next, instead of each building its own.
	if built > 2 {
		t.Errorf("charts were built at version %d after 50 quick rows; want one build per interval", built)
	}
	for i := range readers {
		if readers[i].charts != built {
			t.Errorf("reader %d has charts of version %d, want %d", i, readers[i].charts, built)
		}
	}
}

func TestVerdictSentence(t *testing.T) {
	rep := &engine.Report{Rows: 4, Pass: false, Outputs: []engine.OutputReport{
		{Name: "cpu", Kind: "probs", Pass: true, Rows: []engine.RowReport{{Row: 0, Pass: true}, {Row: 1, Pass: true}, {Row: 2, Pass: true}, {Row: 3, Pass: true}}},
		{Name: "probs", External: true, Kind: "probs", FailedRows: 2, Rows: []engine.RowReport{
			{Row: 0, Pass: true}, {Row: 1, Findings: []engine.Finding{{Rule: engine.RuleSupport, Severity: engine.Violation}}},
			{Row: 2, Findings: []engine.Finding{{Rule: engine.RuleTolerance, Severity: engine.Violation}, {Rule: engine.RuleSupport, Severity: engine.Violation}}},
			{Row: 3, Pass: true},
		}},
	}}
	got := summarize(rep)
	want := "FAIL: probs (from the dump) fails 2 of 4 rows. Rules broken: tokens kept by one side and dropped by the other (2), values outside tolerance (1)."
	if got.Sentence != want {
		t.Errorf("sentence\n got %q\nwant %q", got.Sentence, want)
	}
	if got.FailedRows != 2 || got.Verdict.Pass {
		t.Errorf("verdict %+v", got.Verdict)
	}
}

func TestHeaderLines(t *testing.T) {
	h100 := engine.Device{Backend: "cuda", Name: "NVIDIA H100 80GB HBM3", SMs: 132, MemoryBytes: 80 << 30, CopyBandwidth: 3.0e12}
	cpu := engine.Device{Backend: "cpu", Name: "AMD EPYC"}
	kernel := time.Duration(200+rand.IntN(800)) * time.Microsecond
	bytes := int64(1+rand.IntN(4)) << 30
	tests := []struct {
		name string
		got  string
		want []string
	}{
		{"cuda backend", backendLine(h100), []string{"CUDA backend on NVIDIA H100 80GB HBM3 (132 SMs, 80 GiB)"}},
		{"cpu backend says so", backendLine(cpu), []string{"CPU backend on AMD EPYC", "no GPU kernels run here"}},
		{"gpu timing has bandwidth", timingLine(&Summary{Timing: &engine.Timing{Kernel: kernel, Bytes: bytes, Wall: 3 * kernel}}, h100),
			[]string{"kernel " + duration(kernel), bandwidth(float64(bytes) / kernel.Seconds()), "% of the 3.00 TB/s copy bandwidth"}},
		{"cpu timing is wall time", timingLine(&Summary{Timing: &engine.Timing{Wall: kernel}}, cpu), []string{"on the CPU (wall time", "no kernel time"}},
		{"before the end", timingLine(nil, h100), []string{"Measured when the run finishes."}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, w := range tt.want {
				if !strings.Contains(tt.got, w) {
					t.Errorf("%q does not say %q", tt.got, w)
				}
			}
		})
	}
}
