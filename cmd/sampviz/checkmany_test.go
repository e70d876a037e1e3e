package main

import (
	"bytes"
	"encoding/xml"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sampviz/sampviz/scenarios"
)

// ciDumps writes three scenarios' dumps (one passing, two failing) and a
// file that is no dump into a folder, and returns it.
func ciDumps(t *testing.T) (dir string, pass, fail []string) {
	t.Helper()
	dir = t.TempDir()
	var list []scenarios.Scenario
	for _, sc := range scenarios.Catalogue() {
		switch sc.Name {
		case "softmax-fp32-32000":
			pass = append(pass, sc.Dump)
		case "scale-before-max", "ngram-drafting":
			fail = append(fail, sc.Dump)
		default:
			continue
		}
		list = append(list, sc)
	}
	if err := writeScenarios(new(bytes.Buffer), dir, list); err != nil {
		t.Fatal(err)
	}
	return dir, pass, fail
}

func TestCheckManyFiles(t *testing.T) {
	dir, pass, fail := ciDumps(t)
	broken := filepath.Join(dir, "sub", "broken.safetensors")
	os.MkdirAll(filepath.Dir(broken), 0o755)
	os.WriteFile(broken, []byte("not a dump at all"), 0o644)
	tests := []struct {
		name  string
		args  []string
		exit  int
		lines []string // substrings of stdout
	}{
		{"a folder, recursively", []string{dir}, exitUnusable, []string{"PASS  " + filepath.Join(dir, pass[0]), "FAIL  " + filepath.Join(dir, fail[0]), "ERROR " + broken, "4 files: 1 pass, 2 fail, 1 cannot be judged."}},
		{"a pattern", []string{filepath.Join(dir, "*.safetensors")}, exitViolated, []string{"3 files: 1 pass, 2 fail, 0 cannot be judged."}},
		{"passing files only", []string{filepath.Join(dir, pass[0]), filepath.Join(dir, pass[0])}, exitOK, []string{"2 files: 2 pass"}},
		{"github annotations", []string{"--format", "github", filepath.Join(dir, "*.safetensors")}, exitViolated, []string{"::error file=" + filepath.Join(dir, fail[0]) + ",title="}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := runCheck(append([]string{"--backend", "cpu"}, tt.args...), &stdout, &stderr)
			if code != tt.exit {
				t.Errorf("exit %d, want %d; stderr %s", code, tt.exit, stderr.String())
			}
			for _, l := range tt.lines {
				if !strings.Contains(stdout.String(), l) {
					t.Errorf("stdout lacks %q:\n%s", l, stdout.String())
				}
			}
		})
	}
}

func TestCheckJUnit(t *testing.T) {
	dir, _, fail := ciDumps(t)
	out := filepath.Join(t.TempDir(), "junit.xml")
	var stdout, stderr bytes.Buffer
	if code := runCheck([]string{"--backend", "cpu", "--junit", out, dir}, &stdout, &stderr); code != exitViolated {
		t.Fatalf("exit %d; stderr %s", code, stderr.String())
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Suites []struct {
			Tests    int `xml:"tests,attr"`
			Failures int `xml:"failures,attr"`
			Cases    []struct {
				Name     string `xml:"name,attr"`
				Failures []struct {
					Message string `xml:"message,attr"`
					Text    string `xml:",chardata"`
				} `xml:"failure"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("junit.xml does not parse: %v\n%s", err, b)
	}
	if len(doc.Suites) != 1 || doc.Suites[0].Tests != 3 || doc.Suites[0].Failures != 2 {
		t.Fatalf("suites %+v, want one of 3 tests with 2 failing", doc.Suites)
	}
	for _, c := range doc.Suites[0].Cases {
		if c.Name == filepath.Join(dir, fail[0]) {
			if len(c.Failures) == 0 || !strings.Contains(c.Failures[0].Text, "row ") {
				t.Errorf("failing case %s has failures %+v, want one per failing row with its sentence", c.Name, c.Failures)
			}
		}
	}
}

func TestCheckManyRefuses(t *testing.T) {
	empty := t.TempDir()
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"a pattern that matches nothing", []string{filepath.Join(empty, "*.safetensors")}, "no file matches"},
		{"a folder without dumps", []string{empty}, "holds no dump"},
		{"an unknown format", []string{"--format", "xml", empty}, `--format "xml"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := runCheck(append([]string{"--backend", "cpu"}, tt.args...), &stdout, &stderr); code != exitUnusable || !strings.Contains(stderr.String(), tt.want) {
				t.Errorf("exit %d, stderr %q; want 2 and %q", code, stderr.String(), tt.want)
			}
		})
	}
}

// An SGLang dumper folder is one dump, given itself or found inside a
// folder of dumps; other folders are walked for dump files.
func TestExpandDumpsKeepsSGLangFolders(t *testing.T) {
	root := t.TempDir()
	sg := filepath.Join(root, "sglang_dump_1")
	plain := filepath.Join(root, "plain")
	for _, d := range []string{sg, plain} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{
		filepath.Join(sg, "forward_pass_id=1___rank=0___name=next_token_logits___dump_index=0.pt"),
		filepath.Join(sg, "forward_pass_id=1___rank=0___name=temperatures___dump_index=1.pt"),
		filepath.Join(plain, "a.safetensors"),
		filepath.Join(plain, "b.npz"),
	} {
		if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"the dumper folder itself", []string{sg}, []string{sg}},
		{"a folder holding one", []string{root}, []string{filepath.Join(plain, "a.safetensors"), filepath.Join(plain, "b.npz"), sg}},
		{"a plain folder", []string{plain}, []string{filepath.Join(plain, "a.safetensors"), filepath.Join(plain, "b.npz")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := expandDumps(tt.args)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("expandDumps(%v) = %v, want %v", tt.args, got, tt.want)
			}
		})
	}
}
