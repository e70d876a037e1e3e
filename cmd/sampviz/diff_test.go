package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sampviz/sampviz/engine/cpu"
	"github.com/sampviz/sampviz/engine/session"
	"github.com/sampviz/sampviz/scenarios"
	"github.com/sampviz/sampviz/web/store"
)

// diffDumps writes the before/after pair of the kernel-fix-diff scenario and
// two dumps of other ops and inputs into a temporary folder, by role.
func diffDumps(t *testing.T) map[string]string {
	t.Helper()
	dir := t.TempDir()
	paths := map[string]string{}
	write := func(role, name string, b []byte, err error) {
		if err != nil {
			t.Fatal(err)
		}
		paths[role] = filepath.Join(dir, name)
		if err := os.WriteFile(paths[role], b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	pair, ok := scenarios.Lookup("kernel-fix-diff")
	if !ok {
		t.Fatal("no kernel-fix-diff scenario")
	}
	b, err := pair.DumpBytes()
	write("before", pair.Dump, b, err)
	b, err = pair.AfterBytes()
	write("after", pair.Diff.After, b, err)
	for role, name := range map[string]string{"softmax": "softmax-fp32-32000", "padded": "padded-batch"} {
		sc, _ := scenarios.Lookup(name)
		b, err := sc.DumpBytes()
		write(role, sc.Dump, b, err)
	}
	return paths
}

func TestDiffGolden(t *testing.T) {
	dumps := diffDumps(t)
	tests := []struct {
		name   string
		args   []string
		exit   int
		golden string
	}{
		{"a fix and a regression", []string{"--backend", "cpu", dumps["before"], dumps["after"]}, exitViolated, "diff_fix.txt"},
		{"a fix and a regression, json", []string{"--backend", "cpu", "--json", dumps["before"], dumps["after"]}, exitViolated, "diff_fix.json"},
		{"the fix undone", []string{dumps["after"], dumps["before"], "--backend", "cpu", "--max-rows", "1"}, exitViolated, "diff_undone.txt"},
		{"different inputs", []string{"--backend", "cpu", dumps["softmax"], dumps["padded"]}, exitOK, "diff_inputs.txt"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := runDiff(tt.args, &stdout, &stderr); code != tt.exit {
				t.Fatalf("exit %d, want %d; stderr: %s\nstdout:\n%s", code, tt.exit, stderr.String(), stdout.String())
			}
			checkGolden(t, tt.golden, stdout.String())
		})
	}
}

func TestDiffExitCodes(t *testing.T) {
	dumps := diffDumps(t)
	tests := []struct {
		name   string
		args   []string
		exit   int
		stderr string
	}{
		{"the same dump twice", []string{"--backend", "cpu", dumps["before"], dumps["before"]}, exitOK, ""},
		{"only the dumps' outputs", []string{"--backend", "none", dumps["before"], dumps["after"]}, exitViolated, ""},
		{"two ops", []string{"--backend", "cpu", dumps["padded"], dumps["before"]}, exitUnusable,
			"sampviz diff: padded-batch.safetensors is a run of op softmax and kernel-fix-diff.safetensors one of op renorm: diff compares two runs of one op\n"},
		{"a missing dump", []string{"--backend", "cpu", dumps["before"], "no-such.safetensors"}, exitUnusable, "no-such.safetensors"},
		{"one argument", []string{dumps["before"]}, exitUnusable, "usage: sampviz diff"},
		{"a bad flag", []string{"--nope", dumps["before"], dumps["after"]}, exitUnusable, "flag provided but not defined"},
		{"not a run id", []string{"--data", t.TempDir(), "x", "y"}, exitUnusable, `"x" is not a run id`},
		{"no such run", []string{"--data", t.TempDir(), "aaaaaaaaaa", "bbbbbbbbbb"}, exitUnusable, "holds no run aaaaaaaaaa"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := runDiff(tt.args, &stdout, &stderr); code != tt.exit {
				t.Fatalf("exit %d, want %d; stderr: %s", code, tt.exit, stderr.String())
			}
			if !strings.Contains(stderr.String(), tt.stderr) {
				t.Errorf("stderr %q lacks %q", stderr.String(), tt.stderr)
			}
		})
	}
}

// TestDiffStoredRuns stores the before/after pair as sampviz serve does
// (the dump, the run, our outputs) and diffs the two run ids with --data:
// the stored outputs are judged again, no kernel runs.
func TestDiffStoredRuns(t *testing.T) {
	dumps := diffDumps(t)
	dir := t.TempDir()
	st, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	sess := session.New(cpu.New())
	var ids []string
	for _, role := range []string{"before", "after"} {
		b, err := os.ReadFile(dumps[role])
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(b)
		sha := hex.EncodeToString(sum[:])
		if err := os.WriteFile(st.DumpPath(sha, ".safetensors"), b, 0o644); err != nil {
			t.Fatal(err)
		}
		run := store.Run{ID: store.NewID(), Created: time.Now(), FileName: filepath.Base(dumps[role]), DumpSHA: sha, DumpExt: ".safetensors",
			DumpSize: int64(len(b)), Info: json.RawMessage(`{}`), Backend: "cpu", Params: json.RawMessage(`{}`)}
		if err := st.CreateRun(run); err != nil {
			t.Fatal(err)
		}
		job := session.Job{DumpPath: st.DumpPath(sha, ".safetensors"), FileName: run.FileName, OutputsPath: st.OutputsPath(run.ID)}
		if err := os.MkdirAll(st.RunDir(run.ID), 0o755); err != nil {
			t.Fatal(err)
		}
		if _, err := sess.Execute(context.Background(), job, nil); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, run.ID)
	}
	var stdout, stderr bytes.Buffer
	if code := runDiff([]string{"--data", dir, ids[0], ids[1]}, &stdout, &stderr); code != exitViolated {
		t.Fatalf("exit %d, want %d; stderr: %s", code, exitViolated, stderr.String())
	}
	for _, want := range []string{ids[0] + " (kernel-fix-diff.safetensors)", "cpu (ours)", "2 and 5  7", "WORSE: row 7 of probs went from pass to fail"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("the comparison lacks %q:\n%s", want, stdout.String())
		}
	}
}
