package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/cuda"
)

// The peers of `sampviz bench --peers` are python/peers.py's torch, compiled
// and Triton versions of each op, timed by that script in a process of its
// own (its serve mode) on the inputs our worker wrote for the case
// (cuda.BenchCase.Inputs). This file speaks that protocol; it never times
// anything itself.

// peerLabels are the peer columns, in the table's order.
var peerLabels = []string{"torch", "torch.compile", "triton"}

const (
	// peerHelloWait bounds the script's start: importing torch and Triton
	// and waking the GPU.
	peerHelloWait = 2 * time.Minute
	// peerReplyWait bounds one case's peers; the script stops a compile
	// after its own --compile-timeout, far below it.
	peerReplyWait = 10 * time.Minute
	// peerExitWait is how long Close lets the script exit on its own once
	// its input closes, before it kills the script's process group.
	peerExitWait = 5 * time.Second
	// peerPipeWait bounds each wait for the script's stdout and stderr to
	// close after it exited (cmd.WaitDelay, and Close's waits after the
	// kill): our stderr is a Go writer, so without a bound Wait blocks as
	// long as any process the script left behind holds it.
	peerPipeWait = 2 * time.Second
)

// peerHello is the script's first line: what it runs with, or why it
// cannot run.
type peerHello struct {
	Ready      bool   `json:"ready"`
	Why        string `json:"why,omitempty"`
	Torch      string `json:"torch,omitempty"`
	Triton     string `json:"triton,omitempty"`
	TritonWhy  string `json:"triton_why,omitempty"`
	Device     string `json:"device,omitempty"`
	Compile    bool   `json:"compile"`
	CompileWhy string `json:"compile_why,omitempty"`
}

// peerRequest asks the script to time a case's peers on the inputs file
// our worker wrote.
type peerRequest struct {
	Name   string         `json:"name"`
	Shape  string         `json:"shape"`
	Case   cuda.BenchCase `json:"case"`
	Inputs string         `json:"inputs"`
	Iters  int            `json:"iters"`
	Warmup int            `json:"warmup"`
}

// peerReply is the script's answer for one case.
type peerReply struct {
	Name  string     `json:"name"`
	Shape string     `json:"shape"`
	Peers []peerTime `json:"peers"`
	Error string     `json:"error,omitempty"`
}

// peerTime is one peer's measurement of a case, or why there is none.
type peerTime struct {
	Peer string `json:"peer"`
	What string `json:"what,omitempty"`
	// MedianUS and B2BUS are the bench's two times (microseconds).
	MedianUS float64 `json:"median_us,omitempty"`
	B2BUS    float64 `json:"b2b_us,omitempty"`
	// CompileS is torch.compile's compile time (seconds), never in MedianUS.
	CompileS float64 `json:"compile_s,omitempty"`
	// Error is a failure of this peer (a compile that failed or ran out of
	// time); Skipped says why the case has no such peer.
	Error   string `json:"error,omitempty"`
	Skipped string `json:"skipped,omitempty"`
	// Speedup is the peer's median over ours: above 1, ours is faster.
	Speedup float64 `json:"speedup,omitempty"`
}

// peerSession is one serve-mode process of python/peers.py.
type peerSession struct {
	Hello  peerHello
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    io.Closer
	stderr io.Writer
	lines  chan string
	done   chan error
	// exitWait is Close's peerExitWait (tests shorten it).
	exitWait time.Duration
	// closing serialises Close and Kill: an interrupted bench kills the
	// session from its signal's goroutine.
	closing sync.Mutex
}

// errPeersOff wraps every reason the peers cannot run; its message is the
// one line the bench prints before timing ours alone.
var errPeersOff = errors.New("peers off")

// peerCase reports whether python/peers.py has a peer for c, so that the
// bench writes c's inputs: every row op, spec_verify and an unfiltered
// spec_tree_verify; not min-p, not ngram_match, and not a sample case of
// many draws counted on the device (the peers draw one token a row: their
// time is no comparison for 10^7 counted draws).
func peerCase(c cuda.BenchCase) bool {
	if c.MinP > 0 || c.Draws > 0 {
		return false
	}
	switch c.Op {
	case engine.OpArgmax, engine.OpSoftmax, engine.OpRenorm, engine.OpSample, engine.OpSpecVerify:
		return true
	case engine.OpSpecTreeVerify:
		return c.TopK == 0 && (c.TopP == 0 || c.TopP >= 1)
	}
	return false
}

// findPeerScript returns script when set, else python/peers.py under the
// working directory, next to the executable's folder (gpu-bundle/sampviz
// finds ../python/peers.py) or beside it.
func findPeerScript(script string) (string, error) {
	if script != "" {
		if _, err := os.Stat(script); err != nil {
			return "", fmt.Errorf("the peer script %s was not found", script)
		}
		return script, nil
	}
	paths := []string{filepath.Join("python", "peers.py")}
	if exe, err := os.Executable(); err == nil {
		dir := filepath.Dir(exe)
		paths = append(paths, filepath.Join(dir, "..", "python", "peers.py"), filepath.Join(dir, "python", "peers.py"))
	}
	for _, p := range paths {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("python/peers.py was not found at %s (--peers-script names it)", strings.Join(paths, ", "))
}

// startPeers starts `python script serve args...` and reads its hello. It
// returns an error wrapping errPeersOff, whose message says in one sentence
// why the peers cannot run (no python, torch does not import, no CUDA
// device for torch), and never leaves a process behind.
func startPeers(python, script string, args []string, stderr io.Writer) (*peerSession, error) {
	stderr = &lockedWriter{w: stderr} // the script's stderr and its stray stdout lines share it
	cmd := exec.Command(python, append([]string{script, "serve"}, args...)...)
	cmd.Stderr = stderr
	cmd.WaitDelay = peerPipeWait
	inOwnGroup(cmd) // so that Close reaches python's children (compile workers) too
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", errPeersOff, python, err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", errPeersOff, python, err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%w: %s could not start: %v", errPeersOff, python, err)
	}
	s := &peerSession{cmd: cmd, in: in, out: out, stderr: stderr, lines: make(chan string), done: make(chan error, 1), exitWait: peerExitWait}
	go func() {
		r := bufio.NewReaderSize(out, 1<<16)
		for {
			line, err := r.ReadString('\n')
			if len(strings.TrimSpace(line)) > 0 {
				s.lines <- line
			}
			if err != nil {
				close(s.lines)
				s.done <- cmd.Wait()
				return
			}
		}
	}()
	line, err := s.next(peerHelloWait)
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("%w: %s %s gave no hello: %v", errPeersOff, python, script, err)
	}
	if err := json.Unmarshal([]byte(line), &s.Hello); err != nil {
		s.Close()
		return nil, fmt.Errorf("%w: %s %s: hello %q is not JSON: %v", errPeersOff, python, script, strings.TrimSpace(line), err)
	}
	if !s.Hello.Ready {
		s.Close()
		why := s.Hello.Why
		if why == "" {
			why = "the script is not ready and says no more"
		}
		return nil, fmt.Errorf("%w: %s", errPeersOff, why)
	}
	return s, nil
}

// next returns the script's next protocol line (one that starts with
// "{"; any other goes to stderr), or an error when it ended or sent none
// within wait.
func (s *peerSession) next(wait time.Duration) (string, error) {
	deadline := time.After(wait)
	for {
		select {
		case line, ok := <-s.lines:
			if !ok {
				err := <-s.done
				s.done <- err
				if err == nil {
					return "", errors.New("it exited")
				}
				return "", fmt.Errorf("it exited: %v", err)
			}
			if !strings.HasPrefix(strings.TrimSpace(line), "{") {
				fmt.Fprint(s.stderr, line)
				continue
			}
			return line, nil
		case <-deadline:
			return "", fmt.Errorf("no answer in %s", wait)
		}
	}
}

// Time asks for one case's peers and waits for the reply. A case the
// script could not time comes back with the reply's Error set (the
// session goes on); the error is for a session that no longer answers.
func (s *peerSession) Time(req peerRequest) (*peerReply, error) {
	data, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("peer request: %w", err)
	}
	if _, err := s.in.Write(append(data, '\n')); err != nil {
		return nil, fmt.Errorf("peer request: %w", err)
	}
	line, err := s.next(peerReplyWait)
	if err != nil {
		return nil, fmt.Errorf("peer reply: %w", err)
	}
	var rep peerReply
	if err := json.Unmarshal([]byte(line), &rep); err != nil {
		return nil, fmt.Errorf("peer reply %q: %w", strings.TrimSpace(line), err)
	}
	return &rep, nil
}

// Close ends the script: its input closes, and its process group (python
// and the children it started) is killed if it has not exited within
// peerExitWait. It returns once the script's Wait has, and never later
// than peerExitWait + 3 x peerPipeWait, even when a process that left the
// group still holds the script's stdout or stderr. Closing twice is a
// no-op.
func (s *peerSession) Close() {
	if s != nil {
		s.close(s.exitWait)
	}
}

// Kill ends the script at once, as Close does after its wait: for a bench
// that was interrupted.
func (s *peerSession) Kill() {
	if s != nil {
		s.close(0)
	}
}

func (s *peerSession) close(exitWait time.Duration) {
	s.closing.Lock()
	defer s.closing.Unlock()
	if s.cmd == nil {
		return
	}
	s.in.Close()
	go func() {
		for range s.lines { // drain, so the reader reaches Wait
		}
	}()
	if !s.waited(exitWait) {
		killGroup(s.cmd)
		if !s.waited(peerPipeWait) {
			// A process outside the group holds stdout: stop reading it, so
			// that the reader reaches Wait, which WaitDelay bounds.
			s.out.Close()
			s.waited(2 * peerPipeWait)
		}
	}
	s.cmd = nil
}

// waited reports whether the script's Wait returned within d.
func (s *peerSession) waited(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case err := <-s.done:
		s.done <- err
		return true
	case <-t.C:
		return false
	}
}

// withSpeedups returns the peers with each timed peer's speedup over ours
// (peer median / our median).
func withSpeedups(peers []peerTime, ours time.Duration) []peerTime {
	out := make([]peerTime, len(peers))
	for i, p := range peers {
		if p.MedianUS > 0 && ours > 0 {
			p.Speedup = p.MedianUS * 1e3 / float64(ours.Nanoseconds())
		}
		out[i] = p
	}
	return out
}

// peersLine is the line printed before the table when the peers run.
func peersLine(h *peerHello) string {
	s := fmt.Sprintf("peers: python/peers.py on %s, torch %s", h.Device, h.Torch)
	if h.Compile {
		s += " with torch.compile"
	} else {
		s += fmt.Sprintf(" (no torch.compile: %s)", h.CompileWhy)
	}
	if h.Triton != "" {
		s += ", triton " + h.Triton
	} else {
		s += fmt.Sprintf(" (no Triton peers: %s)", h.TritonWhy)
	}
	return s
}

// printPeers writes the peers' table: per case with peers our median, then
// each peer's median and its speedup (peer / ours: above 1, ours is
// faster), "-" where the case has no such peer and "failed" where the peer
// failed; below it, the reasons, each once with the cases it covers.
func printPeers(w io.Writer, rep *benchReport) {
	if rep.Peers == nil {
		if rep.PeersOff != "" {
			fmt.Fprintf(w, "\npeers: %s; timed ours alone\n", rep.PeersOff)
		}
		return
	}
	var rows []benchRow
	for _, r := range rep.Rows {
		if len(r.Peers) > 0 {
			rows = append(rows, r)
		}
	}
	fmt.Fprintf(w, "\n%s\nspeedup = peer median / ours (above 1, ours is faster)\n", peersLine(rep.Peers))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "op\tshape\tours us\t")
	for _, l := range peerLabels {
		fmt.Fprintf(tw, "%s us\tspeedup\t", l)
	}
	fmt.Fprintln(tw)
	reasons := map[string][]string{}
	var order []string
	note := func(reason, label string) {
		if _, ok := reasons[reason]; !ok {
			order = append(order, reason)
		}
		reasons[reason] = append(reasons[reason], label)
	}
	for _, r := range rows {
		label := r.Name + " " + shape(r.Result.Case)
		fmt.Fprintf(tw, "%s\t%s\t%.1f\t", r.Name, shape(r.Result.Case), float64(r.Result.Median.Nanoseconds())/1e3)
		for _, l := range peerLabels {
			p := findPeer(r.Peers, l)
			switch {
			case p == nil:
				fmt.Fprint(tw, "-\t-\t")
			case p.MedianUS > 0:
				fmt.Fprintf(tw, "%.1f\t%.2fx\t", p.MedianUS, p.Speedup)
			case p.Error != "":
				fmt.Fprint(tw, "failed\t-\t")
				note(l+": "+p.Error, label)
			default:
				fmt.Fprint(tw, "-\t-\t")
				if p.Skipped != "" {
					note(l+": "+p.Skipped, label)
				}
			}
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
	for _, reason := range order {
		fmt.Fprintf(w, "  %s: %s\n", reason, strings.Join(reasons[reason], "; "))
	}
	if rep.PeersOff != "" {
		fmt.Fprintf(w, "peers stopped: %s\n", rep.PeersOff)
	}
}

// findPeer returns the peer labelled label, or nil.
func findPeer(peers []peerTime, label string) *peerTime {
	for i := range peers {
		if peers[i].Peer == label {
			return &peers[i]
		}
	}
	return nil
}

// matchCase reports whether a case's label (its name and shape) contains
// match, or one of match's alternatives separated by "|".
func matchCase(label, match string) bool {
	for _, alt := range strings.Split(match, "|") {
		if strings.Contains(label, alt) {
			return true
		}
	}
	return false
}

// envOr returns the environment variable name, or def when it is unset or
// empty.
func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// lockedWriter serialises the writes of several goroutines to w.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
