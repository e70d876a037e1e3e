package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sampviz/sampviz/scenarios"
)

func TestScenariosCommand(t *testing.T) {
	cat := scenarios.Catalogue()
	first, last := cat[0], cat[len(cat)-1]
	dir := t.TempDir()
	tests := []struct {
		name   string
		args   []string
		code   int
		stdout []string // substrings stdout must hold
		stderr string   // substring stderr must hold
		files  []string // scenarios whose dumps must be in dir
	}{
		{name: "list", code: exitOK, stdout: []string{first.Name + "  ", first.Title, last.Name, last.Title}},
		{name: "one", args: []string{last.Name}, code: exitOK,
			stdout: []string{strings.TrimSpace(last.README), "sampviz serve", last.Title, "sampviz check " + strings.Join(append(last.Overrides.Flags(), filepath.Join("DIR", last.FileName())), " ")}},
		{name: "write one, flag after the name", args: []string{first.Name, "--write", filepath.Join(dir, "one")}, code: exitOK,
			stdout: []string{"sampviz check "}, files: []string{first.Name}},
		{name: "write all", args: []string{"--write", filepath.Join(dir, "all")}, code: exitOK, files: names(cat)},
		{name: "unknown", args: []string{"no-such-scenario"}, code: exitUnusable, stderr: `no scenario "no-such-scenario"`},
		{name: "two names", args: []string{first.Name, last.Name}, code: exitUnusable, stderr: "one scenario at a time"},
		{name: "bad flag", args: []string{"--nope"}, code: exitUnusable, stderr: "flag provided but not defined"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := runScenarios(tt.args, &stdout, &stderr); code != tt.code {
				t.Fatalf("exit code %d, want %d; stderr: %s", code, tt.code, stderr.String())
			}
			for _, s := range tt.stdout {
				if !strings.Contains(stdout.String(), s) {
					t.Errorf("stdout lacks %q:\n%s", s, stdout.String())
				}
			}
			if !strings.Contains(stderr.String(), tt.stderr) {
				t.Errorf("stderr %q lacks %q", stderr.String(), tt.stderr)
			}
			for _, name := range tt.files {
				sc, _ := scenarios.Lookup(name)
				want, err := sc.DumpBytes()
				if err != nil {
					t.Fatal(err)
				}
				sub := "all"
				if len(tt.files) == 1 {
					sub = "one"
				}
				got, err := os.ReadFile(filepath.Join(dir, sub, sc.FileName()))
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) {
					t.Errorf("%s: the written dump differs from the embedded one", name)
				}
			}
		})
	}
}

func TestWebScenarios(t *testing.T) {
	cat := scenarios.Catalogue()
	ws := webScenarios()
	if len(ws) != len(cat) {
		t.Fatalf("%d web scenarios for %d in the catalogue", len(ws), len(cat))
	}
	for i, w := range ws {
		sc := cat[i]
		t.Run(sc.Name, func(t *testing.T) {
			if w.Name != sc.Name || w.Title != sc.Title || w.Summary != sc.Summary || w.View != sc.View || w.FileName != sc.FileName() {
				t.Errorf("web scenario %+v does not carry %s's config", w, sc.Name)
			}
			f, err := w.Open()
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			got, err := io.ReadAll(f)
			if err != nil {
				t.Fatal(err)
			}
			want, _ := sc.DumpBytes()
			if !bytes.Equal(got, want) {
				t.Error("Open reads other bytes than the embedded dump")
			}
			if (w.OpenAfter != nil) != (sc.Diff != nil) {
				t.Fatalf("OpenAfter set %v for a scenario whose diff is %v", w.OpenAfter != nil, sc.Diff)
			}
			if w.OpenAfter == nil {
				return
			}
			fa, err := w.OpenAfter()
			if err != nil {
				t.Fatal(err)
			}
			defer fa.Close()
			after, err := io.ReadAll(fa)
			if err != nil {
				t.Fatal(err)
			}
			if want, _ := sc.AfterBytes(); !bytes.Equal(after, want) || w.AfterFileName != sc.Diff.After {
				t.Errorf("OpenAfter reads other bytes than the embedded after dump %s (named %q)", sc.Diff.After, w.AfterFileName)
			}
		})
	}
}

func names(cat []scenarios.Scenario) []string {
	var out []string
	for _, s := range cat {
		out = append(out, s.Name)
	}
	return out
}
