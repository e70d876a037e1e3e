package main

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/dump"
	"github.com/sampviz/sampviz/engine/tokens"
)

// `sampviz check` on several files, folders and globs is a CI step: one
// summary line per file and a total, the exit status the worst of the
// files', and on request a JUnit report (--junit) or GitHub Actions
// annotations (--format github).

// dumpExts are the file endings a folder's dumps have.
var dumpExts = []string{".safetensors", ".npz", ".npy", ".pt"}

// expandDumps turns the command line's arguments into dump files: a file as
// it is, a folder into the dumps it holds (recursively, sorted), a pattern
// with *, ? or [ into its matches. A pattern or folder that gives nothing is
// one sentence.
func expandDumps(args []string) ([]string, error) {
	var files []string
	for _, a := range args {
		if strings.ContainsAny(a, "*?[") {
			matches, err := filepath.Glob(a)
			if err != nil {
				return nil, fmt.Errorf("%s is not a pattern: %v", a, err)
			}
			if len(matches) == 0 {
				return nil, fmt.Errorf("no file matches %s", a)
			}
			sort.Strings(matches)
			files = append(files, matches...)
			continue
		}
		st, err := os.Stat(a)
		if err != nil || !st.IsDir() || dump.IsSGLangDir(a) {
			files = append(files, a) // a file or an SGLang dumper folder; reading it says what is wrong
			continue
		}
		var found []string
		err = filepath.WalkDir(a, func(path string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && path != a && dump.IsSGLangDir(path) {
				found = append(found, path) // one dump
				return filepath.SkipDir
			}
			for _, e := range dumpExts {
				if !d.IsDir() && strings.HasSuffix(strings.ToLower(d.Name()), e) {
					found = append(found, path)
				}
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("read folder %s: %v", a, err)
		}
		if len(found) == 0 {
			return nil, fmt.Errorf("folder %s holds no dump (%s)", a, strings.Join(dumpExts, ", "))
		}
		sort.Strings(found)
		files = append(files, found...)
	}
	return files, nil
}

// checked is the outcome of one file: its report, or why it could not be
// judged.
type checked struct {
	File   string         `json:"file"`
	Exit   int            `json:"exit"`
	Error  string         `json:"error,omitempty"`
	Report *engine.Report `json:"report,omitempty"`
	// Took is the wall time of the file's judgement.
	Took time.Duration `json:"took_ns"`
	// Tokens gives the report's token ids their text (nil: bare ids).
	Tokens *tokens.Tokenizer `json:"-"`
}

// summaryLine says one file's outcome in a line.
func (c checked) summaryLine() string {
	switch {
	case c.Error != "":
		return "ERROR " + c.File + ": " + c.Error
	case c.Report.Pass:
		return fmt.Sprintf("PASS  %s: %s, %s", c.File, c.Report.Op, plural(c.Report.Rows, "row"))
	}
	first := ""
	for _, o := range c.Report.Outputs {
		for _, r := range o.Rows {
			if !r.Pass && len(r.Violations) > 0 && first == "" {
				first = r.Violations[0]
			}
		}
		if first == "" && len(o.Violations) > 0 {
			first = o.Violations[0]
		}
	}
	return fmt.Sprintf("FAIL  %s: %s; first: %s", c.File, strings.TrimSuffix(strings.TrimPrefix(verdictLine(c.Report), "FAIL: "), "."), first)
}

// writeSummary prints one line per file and the total.
func writeSummary(w io.Writer, results []checked) {
	var pass, fail, errs int
	for _, c := range results {
		fmt.Fprintln(w, c.summaryLine())
		switch c.Exit {
		case exitOK:
			pass++
		case exitViolated:
			fail++
		default:
			errs++
		}
	}
	fmt.Fprintf(w, "\n%s: %d pass, %d fail, %d cannot be judged.\n", plural(len(results), "file"), pass, fail, errs)
}

// writeGitHub prints GitHub Actions annotations: an error per failing row
// (at most maxRows a file; 0: all) and per file that cannot be judged.
func writeGitHub(w io.Writer, results []checked, maxRows int) {
	esc := func(s string) string {
		return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A").Replace(s)
	}
	for _, c := range results {
		if c.Error != "" {
			fmt.Fprintf(w, "::error file=%s::%s\n", c.File, esc(c.Error))
			continue
		}
		n := 0
		for _, o := range c.Report.Outputs {
			for _, r := range o.Rows {
				for _, v := range r.Violations {
					if maxRows > 0 && n >= maxRows {
						continue
					}
					n++
					fmt.Fprintf(w, "::error file=%s,title=%s::%s\n", c.File, esc(outputLabel(o)), esc(v))
				}
			}
			for _, v := range o.Violations {
				fmt.Fprintf(w, "::error file=%s,title=%s::%s\n", c.File, esc(outputLabel(o)), esc("all rows: "+v))
			}
		}
	}
}

// JUnit XML: one test suite, a test case per file, a failure per failing
// row (and per violation of all rows together), an error for a file that
// cannot be judged.
type (
	junitSuites struct {
		XMLName xml.Name   `xml:"testsuites"`
		Suites  []junitSui `xml:"testsuite"`
	}
	junitSui struct {
		Name     string      `xml:"name,attr"`
		Tests    int         `xml:"tests,attr"`
		Failures int         `xml:"failures,attr"`
		Errors   int         `xml:"errors,attr"`
		Time     float64     `xml:"time,attr"`
		Cases    []junitCase `xml:"testcase"`
	}
	junitCase struct {
		Name      string         `xml:"name,attr"`
		Classname string         `xml:"classname,attr"`
		Time      float64        `xml:"time,attr"`
		Failures  []junitFailure `xml:"failure"`
		Error     *junitFailure  `xml:"error"`
	}
	junitFailure struct {
		Message string `xml:"message,attr"`
		Type    string `xml:"type,attr"`
		Text    string `xml:",chardata"`
	}
)

// writeJUnit writes the results as JUnit XML to path.
func writeJUnit(path string, results []checked) error {
	suite := junitSui{Name: "sampviz check", Tests: len(results)}
	for _, c := range results {
		tc := junitCase{Name: c.File, Classname: "sampviz.check", Time: c.Took.Seconds()}
		suite.Time += tc.Time
		switch {
		case c.Error != "":
			tc.Error = &junitFailure{Message: c.Error, Type: "unusable"}
			suite.Errors++
		case !c.Report.Pass:
			suite.Failures++
			for _, o := range c.Report.Outputs {
				for _, r := range o.Rows {
					if !r.Pass {
						tc.Failures = append(tc.Failures, junitFailure{
							Message: fmt.Sprintf("%s: row %d", outputLabel(o), r.Row), Type: "violation",
							Text: strings.Join(r.Violations, "\n")})
					}
				}
				for _, v := range o.Violations {
					tc.Failures = append(tc.Failures, junitFailure{Message: outputLabel(o) + ": all rows", Type: "violation", Text: v})
				}
			}
		}
		suite.Cases = append(suite.Cases, tc)
	}
	b, err := xml.MarshalIndent(junitSuites{Suites: []junitSui{suite}}, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append([]byte(xml.Header), append(b, '\n')...), 0o644)
}

// writeManyJSON prints every file's outcome as one JSON object.
func writeManyJSON(w io.Writer, results []checked, exit int) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(struct {
		Exit  int       `json:"exit"`
		Files []checked `json:"files"`
	}{exit, results})
}
