package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/sampviz/sampviz/scenarios"
)

// TestCheckAndServeAgree runs every built-in scenario through `sampviz
// check --json` and through `sampviz serve` (this binary as a user starts
// it, the scenario opened as the home page opens it, the report read from
// GET /api/runs/{id}/report.json) and compares the two reports field by
// field, timings aside. Both faces judge through one session
// (engine/session), so they must give one report.
func TestCheckAndServeAgree(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every scenario twice; -short skips it")
	}
	s := startServe(t, "cpu")
	dir := t.TempDir()
	cat := scenarios.Catalogue()
	if err := writeScenarios(new(bytes.Buffer), dir, cat); err != nil {
		t.Fatal(err)
	}
	for _, sc := range cat {
		t.Run(sc.Name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			args := append([]string{"--json", "--backend", "cpu"}, sc.Overrides.Flags()...)
			code := runCheck(append(args, filepath.Join(dir, sc.Dump)), &stdout, &stderr)
			if code != exitOK && code != exitViolated {
				t.Fatalf("sampviz check exit %d: %s", code, stderr.String())
			}
			var fromCheck any
			if err := json.Unmarshal(stdout.Bytes(), &fromCheck); err != nil {
				t.Fatalf("check --json: %v", err)
			}

			id := s.openScenario(t, sc)
			s.waitDone(t, id)
			var fromServe any
			if err := s.getJSON("/api/runs/"+id+"/report.json", &fromServe); err != nil {
				t.Fatal(err)
			}
			if diffs := jsonDiff("", withoutTimings(fromCheck), withoutTimings(fromServe)); len(diffs) > 0 {
				if len(diffs) > 10 {
					diffs = append(diffs[:10], fmt.Sprintf("... and %d more", len(diffs)-10))
				}
				t.Errorf("check --json and the server's report.json differ (-check +serve):\n%s", strings.Join(diffs, "\n"))
			}
		})
	}
}

// waitDone polls run id until it is done, failing the test when it fails
// or takes over 3 minutes.
func (s *served) waitDone(t *testing.T, id string) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		var run struct {
			State   string `json:"state"`
			Message string `json:"message"`
		}
		if err := s.getJSON("/api/runs/"+id, &run); err != nil {
			t.Fatal(err)
		}
		switch run.State {
		case "done":
			return
		case "failed":
			t.Fatalf("run %s failed: %s", id, run.Message)
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s is still %s after 3 minutes", id, run.State)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// withoutTimings drops every "timing" field (kernel and wall times differ
// from run to run) from a decoded JSON value.
func withoutTimings(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			if k != "timing" {
				out[k] = withoutTimings(e)
			}
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = withoutTimings(e)
		}
		return out
	}
	return v
}

// jsonDiff lists the paths where two decoded JSON values differ.
func jsonDiff(path string, a, b any) []string {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok {
			break
		}
		keys := map[string]bool{}
		for k := range x {
			keys[k] = true
		}
		for k := range y {
			keys[k] = true
		}
		var sorted []string
		for k := range keys {
			sorted = append(sorted, k)
		}
		sort.Strings(sorted)
		var diffs []string
		for _, k := range sorted {
			diffs = append(diffs, jsonDiff(path+"."+k, x[k], y[k])...)
		}
		return diffs
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			break
		}
		var diffs []string
		for i := range x {
			diffs = append(diffs, jsonDiff(fmt.Sprintf("%s[%d]", path, i), x[i], y[i])...)
		}
		return diffs
	}
	if reflect.DeepEqual(a, b) {
		return nil
	}
	short := func(v any) string {
		b, _ := json.Marshal(v)
		if len(b) > 120 {
			return string(b[:120]) + "..."
		}
		return string(b)
	}
	return []string{fmt.Sprintf("%s: -%s +%s", path, short(a), short(b))}
}
