package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/scenarios"
)

// mainEnv makes this test binary, started again, run sampviz's own main:
// as `sampviz serve` for the end-to-end tests below, and as the `sampviz
// worker` that the server's cuda backend starts beside it.
const mainEnv = "SAMPVIZ_TEST_MAIN"

// peakEnv names a file where this binary, run as sampviz's main, writes its
// peak resident memory (VmHWM) when it ends: rusage cannot tell it, since a
// child started by fork and exec counts its parent's pages before the exec.
const peakEnv = "SAMPVIZ_TEST_PEAK"

func TestMain(m *testing.M) {
	if os.Getenv(mainEnv) == "1" {
		code := dispatch(os.Args[1:])
		if path := os.Getenv(peakEnv); path != "" {
			if status, err := os.ReadFile("/proc/self/status"); err == nil {
				for _, line := range strings.Split(string(status), "\n") {
					if kb, ok := strings.CutPrefix(line, "VmHWM:"); ok {
						os.WriteFile(path, []byte(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(kb), "kB"))), 0o644)
					}
				}
			}
		}
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// TestServeScenarios is the server as a user meets it: `sampviz serve` in a
// process of its own on a free loopback port, built-in scenarios opened as
// the home page's buttons open them (POST /scenarios/{name}), and each run
// followed over the JSON API until it ends. Each run must end on the
// server's backend, on the device the server named at start, with the
// verdict its scenario expects for every output (scenario.json; `make
// gpu-test` also checks that `sampviz check` exits the same on both
// backends).
//
// On the cpu backend it opens two scenarios, to keep this harness honest
// on every machine. On the cuda backend (the kernel library from
// $SAMPVIZ_KERNELS, next to the binary or in ./build) it opens every
// scenario, each run's kernel time must be measured, and it skips where
// no GPU answers, saying so, unless SAMPVIZ_REQUIRE_GPU=1 makes that a
// failure.
func TestServeScenarios(t *testing.T) {
	cat := scenarios.Catalogue()
	t.Run("cpu", func(t *testing.T) {
		s := startServe(t, "cpu")
		for _, sc := range cat[:2] {
			t.Run(sc.Name, func(t *testing.T) { s.checkScenario(t, sc) })
		}
	})
	t.Run("cuda", func(t *testing.T) {
		s := startServe(t, "cuda")
		if !strings.HasPrefix(s.device, "cuda backend on ") {
			t.Fatalf("the server says %q, want the CUDA backend on a GPU", s.device)
		}
		for _, sc := range cat {
			t.Run(sc.Name, func(t *testing.T) { s.checkScenario(t, sc) })
		}
	})
}

// served is a `sampviz serve` process started by startServe.
type served struct {
	backend string
	base    string // "http://127.0.0.1:port"
	device  string // what the server printed of its kernels: "cuda backend on NVIDIA H100 ..."
	client  *http.Client
	// stop interrupts the server, as Ctrl-C does, and waits for it to end
	// (once; the test's cleanup calls it too).
	stop func()
	// exited is closed when the process has ended.
	exited <-chan struct{}
	// peakFile is where the process writes its peak resident memory as it
	// ends (peakEnv).
	peakFile string
}

var (
	openLine = regexp.MustCompile(`^sampviz: open (http://127\.0\.0\.1:\d+)/$`)
	runPage  = regexp.MustCompile(`^/runs/([a-z2-7]{10})`)
)

// startServe starts this binary as `sampviz serve --backend backend` (and
// the extra flags) on a free port with a fresh data directory, waits until
// it prints its address, and stops it (interrupt, as Ctrl-C does) when the
// test ends.
// Where the cuda backend does not open, it skips the test, or fails it
// under SAMPVIZ_REQUIRE_GPU=1.
func startServe(t *testing.T, backend string, extra ...string) *served {
	t.Helper()
	dir := t.TempDir()
	args := append([]string{"serve", "--backend", backend, "--listen", "127.0.0.1:0", "--data", filepath.Join(dir, "data")}, extra...)
	cmd := exec.Command(os.Args[0], args...)
	peakFile := filepath.Join(dir, "peak")
	cmd.Env = append(os.Environ(), mainEnv+"=1", peakEnv+"="+peakFile)
	logPath := filepath.Join(dir, "serve.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close() // the process holds its own copy
	cmd.Stderr = logFile
	log := func() string {
		b, _ := os.ReadFile(logPath)
		return strings.TrimSpace(string(b))
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start sampviz serve: %v", err)
	}
	// lines carries its output until it closes it; then exited closes,
	// with waitErr set.
	lines := make(chan string, 16)
	exited := make(chan struct{})
	var waitErr error
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		waitErr = cmd.Wait()
		close(exited)
	}()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cmd.Process.Signal(os.Interrupt)
			select {
			case <-exited:
			case <-time.After(30 * time.Second):
				cmd.Process.Kill()
				t.Errorf("sampviz serve did not stop within 30 s of an interrupt")
			}
			if t.Failed() {
				t.Logf("sampviz serve's log:\n%s", log())
			}
		})
	}
	t.Cleanup(stop)
	s := &served{backend: backend, stop: stop, exited: exited, peakFile: peakFile, client: &http.Client{
		Timeout:       time.Minute,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
	deadline := time.After(3 * time.Minute) // the cuda backend measures the copy bandwidth at start
	for s.device == "" {
		select {
		case line, ok := <-lines:
			if !ok {
				<-exited
				msg := fmt.Sprintf("sampviz serve --backend %s exited before serving (%v): %s", backend, waitErr, log())
				if backend == "cuda" && os.Getenv("SAMPVIZ_REQUIRE_GPU") != "1" {
					t.Skipf("no GPU here (set SAMPVIZ_REQUIRE_GPU=1 to make this a failure): %s", msg)
				}
				t.Fatal(msg)
			}
			if m := openLine.FindStringSubmatch(line); m != nil {
				s.base = m[1]
			} else if d, ok := strings.CutPrefix(strings.TrimSpace(line), "kernels: "); ok {
				s.device = d
			}
		case <-deadline:
			t.Fatalf("sampviz serve --backend %s printed no address within 3 minutes: %s", backend, log())
		}
	}
	if s.base == "" {
		t.Fatalf("sampviz serve printed its kernels (%q) before any address", s.device)
	}
	go func() { // the rest of its output: keep the pipe drained
		for range lines {
		}
	}()
	return s
}

// openScenario opens sc on the server as the home page's button does and
// returns the new run's id.
func (s *served) openScenario(t *testing.T, sc scenarios.Scenario) string {
	t.Helper()
	req, err := http.NewRequest("POST", s.base+"/scenarios/"+sc.Name, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", s.base) // as the server's own page sends it
	res, err := s.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	loc := res.Header.Get("Location")
	m := runPage.FindStringSubmatch(loc)
	if res.StatusCode != http.StatusSeeOther || m == nil {
		t.Fatalf("POST /scenarios/%s: %s, Location %q; want 303 to the new run", sc.Name, res.Status, loc)
	}
	return m[1]
}

// checkScenario opens sc on the server, waits for its run to end, and
// checks where it ran and what it concluded.
func (s *served) checkScenario(t *testing.T, sc scenarios.Scenario) {
	t.Helper()
	id := s.openScenario(t, sc)

	var run struct {
		Backend string `json:"backend"`
		State   string `json:"state"`
		Message string `json:"message"`
		Info    struct {
			Op engine.Op `json:"op"`
		} `json:"info"`
		Summary *struct {
			Pass    bool           `json:"pass"`
			Notices []string       `json:"notices"`
			Device  *engine.Device `json:"device"`
			Timing  *engine.Timing `json:"timing"`
			Outputs []struct {
				Name string `json:"name"`
				Pass bool   `json:"pass"`
			} `json:"outputs"`
		} `json:"summary"`
	}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		if err := s.getJSON("/api/runs/"+id, &run); err != nil {
			t.Fatal(err)
		}
		if run.State == "done" || run.State == "failed" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s is still %s after 3 minutes", id, run.State)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if run.State != "done" || run.Summary == nil {
		t.Fatalf("run %s %s: %s", id, run.State, run.Message)
	}
	sum := run.Summary
	// An op with nothing for a backend to run (logits_gate) is judged
	// without a device or a kernel time, on either backend.
	spec := run.Info.Op.Spec()
	kernel := spec == nil || !spec.NoKernel
	// A mode the GPU's kernels do not serve (filter_order min_p_first)
	// runs on the cpu backend, and the run says so.
	fellBack := slices.ContainsFunc(sum.Notices, func(n string) bool {
		return strings.HasSuffix(n, "our output is the cpu backend's")
	})
	if fellBack {
		if s.backend != "cuda" || sum.Device == nil || sum.Device.Backend != "cpu" {
			t.Errorf("run %s fell back on %q (device %+v): only a cuda server falls back, to the cpu backend", id, s.backend, sum.Device)
		}
		kernel = false
	} else if !kernel {
		if run.Backend != s.backend {
			t.Errorf("run %s ran on %q, want the %s backend", id, run.Backend, s.backend)
		}
	} else if run.Backend != s.backend || sum.Device == nil || sum.Device.Backend != s.backend {
		t.Errorf("run %s ran on %q (device %+v), want the %s backend", id, run.Backend, sum.Device, s.backend)
	} else if gpu, _, _ := strings.Cut(sum.Device.Name, ", GPU "); !strings.Contains(s.device, gpu) {
		// On several GPUs a run names its own ("..., GPU 1"), the server all of them.
		t.Errorf("run %s ran on %q, but the server said its kernels are the %s", id, sum.Device.Name, s.device)
	}
	if kernel && s.backend == "cuda" && (sum.Timing == nil || sum.Timing.Kernel <= 0) {
		t.Errorf("run %s on the GPU has no kernel time: %+v", id, sum.Timing)
	}
	if sum.Pass != sc.Expect.Pass {
		t.Errorf("run %s passes: %v, want %v", id, sum.Pass, sc.Expect.Pass)
	}
	if len(sum.Outputs) != len(sc.Expect.Outputs) {
		t.Fatalf("run %s judged %d outputs, want %d", id, len(sum.Outputs), len(sc.Expect.Outputs))
	}
	for i, want := range sc.Expect.Outputs {
		got := sum.Outputs[i]
		name := want.Name
		if name == "cpu" && !fellBack { // scenario.json names our backend's output by the CPU's
			name = s.backend
		}
		if got.Name != name || got.Pass != want.Pass {
			t.Errorf("run %s output %d: %s passes %v, want %s passes %v", id, i, got.Name, got.Pass, name, want.Pass)
		}
	}
}

// getJSON decodes the JSON answer of GET path.
func (s *served) getJSON(path string, v any) error {
	res, err := s.client.Get(s.base + path)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		return fmt.Errorf("GET %s: %w", path, err)
	}
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", path, res.Status, bytes.TrimSpace(body))
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("GET %s: %w", path, err)
	}
	return nil
}
