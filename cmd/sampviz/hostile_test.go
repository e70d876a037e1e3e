package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sampviz/sampviz/engine"
)

// hostileBudget is the memory budget the hostile corpus runs under.
const hostileBudget = 256 << 20

// hostileEntry is one file of testdata/hostile/corpus.json (written by
// testdata/hostile/gen.go): what `sampviz check` must answer for it.
type hostileEntry struct {
	File   string   `json:"file"`
	What   string   `json:"what"`
	Args   []string `json:"args"`
	Query  string   `json:"query"`
	Exit   int      `json:"exit"`
	Status int      `json:"status"`
	Words  []string `json:"words"`
}

// hostileCorpus reads the corpus.
func hostileCorpus(t *testing.T) []hostileEntry {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "hostile", "corpus.json"))
	if err != nil {
		t.Fatal(err)
	}
	var corpus []hostileEntry
	if err := json.Unmarshal(b, &corpus); err != nil {
		t.Fatal(err)
	}
	return corpus
}

// TestHostileCorpusCheck runs `sampviz check` (a process of its own, under a
// memory budget of hostileBudget) on every file of the hostile corpus: each
// must end with its exit status and sentence, one line on stderr, within
// the budget plus 10%.
func TestHostileCorpusCheck(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector multiplies memory; make memory-test runs this without it")
	}
	for _, e := range hostileCorpus(t) {
		t.Run(e.What, func(t *testing.T) {
			args := append([]string{"--backend", "cpu", "--max-memory", "256MiB"}, e.Args...)
			code, stderr, peak := checkProcess(t, append(args, filepath.Join("testdata", "hostile", e.File)))
			if code != e.Exit {
				t.Errorf("exit %d, want %d; stderr %q", code, e.Exit, stderr)
			}
			if e.Exit == exitUnusable {
				for _, w := range e.Words {
					if !strings.Contains(stderr, w) {
						t.Errorf("stderr %q lacks %q", stderr, w)
					}
				}
				if strings.Count(stderr, "\n") > 0 {
					t.Errorf("stderr is more than one line: %q", stderr)
				}
			}
			if peak > hostileBudget+hostileBudget/10 {
				t.Errorf("peak resident memory %s, over the budget %s plus 10%%", engine.FormatBytes(peak), engine.FormatBytes(hostileBudget))
			}
			t.Logf("exit %d, peak %s: %s", code, engine.FormatBytes(peak), stderr)
		})
	}
}
