package main

import (
	"encoding/json"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

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

// TestHostileCorpusServe uploads every file of the hostile corpus, with its
// query, to a `sampviz serve --max-memory 256MiB` of its own, as curl does:
// each must answer its status with its sentence (one, naming the file), a
// file that is accepted must finish, the server must answer after every
// file, and its peak resident memory, read when it stops, must stay within
// the budget plus 10%.
func TestHostileCorpusServe(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector multiplies memory; make memory-test runs this without it")
	}
	s := startServe(t, "cpu", "--max-memory", "256MiB")
	for _, e := range hostileCorpus(t) {
		t.Run(e.What, func(t *testing.T) {
			body, err := os.Open(filepath.Join("testdata", "hostile", e.File))
			if err != nil {
				t.Fatal(err)
			}
			defer body.Close()
			q := url.Values{"name": {e.File}}
			if e.Query != "" {
				more, err := url.ParseQuery(e.Query)
				if err != nil {
					t.Fatal(err)
				}
				maps.Copy(q, more)
			}
			res, err := s.client.Post(s.base+"/api/runs?"+q.Encode(), "application/octet-stream", body)
			if err != nil {
				t.Fatalf("upload: %v", err)
			}
			var answer struct {
				ID    string `json:"id"`
				Error string `json:"error"`
			}
			err = json.NewDecoder(res.Body).Decode(&answer)
			res.Body.Close()
			if err != nil {
				t.Fatalf("%s: the answer is not JSON: %v", res.Status, err)
			}
			if res.StatusCode != e.Status {
				t.Errorf("status %d, want %d: %q", res.StatusCode, e.Status, answer.Error)
			}
			if e.Status >= 400 {
				for _, w := range e.Words {
					if !strings.Contains(answer.Error, w) {
						t.Errorf("the answer %q lacks %q", answer.Error, w)
					}
				}
				if strings.Contains(answer.Error, "\n") || strings.Count(strings.TrimSuffix(answer.Error, "."), ". ") > 1 {
					t.Errorf("the answer is more than a sentence or two: %q", answer.Error)
				}
			} else if answer.ID != "" {
				var run struct {
					State   string `json:"state"`
					Message string `json:"message"`
				}
				for deadline := time.Now().Add(2 * time.Minute); run.State != "done" && run.State != "failed"; time.Sleep(50 * time.Millisecond) {
					if err := s.getJSON("/api/runs/"+answer.ID, &run); err != nil {
						t.Fatal(err)
					}
					if time.Now().After(deadline) {
						t.Fatalf("run %s still %s after 2 minutes", answer.ID, run.State)
					}
				}
				if run.State != "done" {
					t.Errorf("accepted run %s ended %s: %s", answer.ID, run.State, run.Message)
				}
			}
			var list struct {
				Runs []json.RawMessage `json:"runs"`
			}
			if err := s.getJSON("/api/runs", &list); err != nil {
				t.Fatalf("the server no longer answers after %s: %v", e.File, err)
			}
			t.Logf("%d %s", res.StatusCode, answer.Error)
		})
	}
	s.stop()
	b, err := os.ReadFile(s.peakFile)
	if err != nil {
		t.Skipf("no peak resident memory on this system (/proc/self/status): %v", err)
	}
	kb, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		t.Fatalf("peak %q: %v", b, err)
	}
	if peak := kb << 10; peak > hostileBudget+hostileBudget/10 {
		t.Errorf("the server's peak resident memory was %s, over the budget %s plus 10%%", engine.FormatBytes(peak), engine.FormatBytes(hostileBudget))
	} else {
		t.Logf("the server's peak resident memory: %s", engine.FormatBytes(peak))
	}
}
