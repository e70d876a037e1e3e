package session

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/cpu"
)

// TestJobsShareMaxMemory executes two jobs at once, as the server does with
// one executor per GPU: their needs together within MaxMemory, both run at
// once; past it, the second waits for the first to end; cancelled while it
// waits, it ends with the context's error and holds nothing after.
func TestJobsShareMaxMemory(t *testing.T) {
	const inBackend = 300 * time.Millisecond // long enough to see a job wait
	tests := []struct {
		name string
		// jobs is MaxMemory beside the process, in jobs' needs (0: no bound).
		jobs     float64
		together bool
		cancel   bool
	}{
		{"no bound", 0, true, false},
		{"room for two", 2, true, false},
		{"room for one and a half", 1.5, false, false},
		{"room for one", 1, false, false},
		{"cancelled while waiting", 1.5, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := testDump(t, engine.OpSoftmax, 4, 64, nil)
			entered := make(chan struct{}, 3)
			gate := make(chan struct{})
			b := funcBackend(func(ctx context.Context, run *engine.Run) (*engine.Output, error) {
				entered <- struct{}{}
				<-gate
				return cpu.New().Run(ctx, run)
			})
			s := New(b)
			job := func(name string) Job {
				return Job{DumpPath: path, FileName: name + ".safetensors", Overrides: engine.Overrides{}}
			}
			info, err := s.Admit(context.Background(), job("a"))
			if err != nil {
				t.Fatal(err)
			}
			one := info.Memory - runtimeBytes
			if one <= 0 {
				t.Fatalf("a job needs %d bytes beside the process, want more than 0", one)
			}
			if tt.jobs > 0 {
				s.MaxMemory = runtimeBytes + int64(tt.jobs*float64(one))
			}
			type result struct {
				name string
				err  error
			}
			done := make(chan result, 3)
			start := func(ctx context.Context, name string) {
				go func() {
					_, err := s.Execute(ctx, job(name), nil)
					done <- result{name, err}
				}()
			}
			start(context.Background(), "a")
			select {
			case <-entered:
			case <-time.After(5 * time.Second):
				t.Fatal("job a never reached the backend")
			}
			ctxB, cancelB := context.WithCancel(context.Background())
			defer cancelB()
			start(ctxB, "b")
			select {
			case <-entered:
				if !tt.together {
					t.Errorf("job b reached the backend while a held it; MaxMemory %d, a job needs %d beside the process %d",
						s.MaxMemory, one, runtimeBytes)
				}
			case <-time.After(inBackend):
				if tt.together {
					t.Errorf("job b waited while a held the backend; MaxMemory %d (0: no bound), a job needs %d", s.MaxMemory, one)
				}
			}
			if tt.cancel {
				cancelB()
				r := <-done
				if r.name != "b" || !errors.Is(r.err, context.Canceled) {
					t.Errorf("cancelled job %s ended with %v, want b with context.Canceled", r.name, r.err)
				}
				// What b waited for is not held: a third job runs once a ends.
				start(context.Background(), "c")
			}
			close(gate)
			for range 2 {
				select {
				case r := <-done:
					if r.err != nil {
						t.Errorf("job %s: %v", r.name, r.err)
					}
				case <-time.After(10 * time.Second):
					t.Fatal("a job never ended")
				}
			}
			s.mem.mu.Lock()
			held, waiting := s.mem.held, len(s.mem.waiting)
			s.mem.mu.Unlock()
			if held != 0 || waiting != 0 {
				t.Errorf("after every job: %d bytes held, %d waiting; want none", held, waiting)
			}
		})
	}
}

// TestDiffSharesMaxMemory compares two dumps while a job holds part of
// MaxMemory: the comparison reserves its whole need at once, so it waits
// for the job when both do not fit, and runs beside it when they do.
func TestDiffSharesMaxMemory(t *testing.T) {
	tests := []struct {
		name     string
		room     bool // MaxMemory holds the job and the comparison together
		together bool
	}{
		{"room for both", true, true},
		{"room for the comparison alone", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := testDump(t, engine.OpSoftmax, 4, 64, nil)
			entered := make(chan struct{}, 4)
			gate := make(chan struct{})
			s := New(funcBackend(func(ctx context.Context, run *engine.Run) (*engine.Output, error) {
				entered <- struct{}{}
				<-gate
				return cpu.New().Run(ctx, run)
			}))
			a := Job{DumpPath: path, FileName: "a.safetensors"}
			b := Job{DumpPath: path, FileName: "b.safetensors"}
			info, err := s.Admit(context.Background(), a)
			if err != nil {
				t.Fatal(err)
			}
			both, err := s.admitDiff(a, b)
			if err != nil {
				t.Fatal(err)
			}
			s.MaxMemory = both.Total
			if tt.room {
				s.MaxMemory += info.Memory - runtimeBytes
			}
			done := make(chan error, 2)
			go func() {
				_, err := s.Execute(context.Background(), a, nil)
				done <- err
			}()
			<-entered
			go func() {
				_, err := s.Diff(context.Background(), a, b)
				done <- err
			}()
			select {
			case <-entered:
				if !tt.together {
					t.Errorf("the comparison ran while the job held its memory; MaxMemory %d, the comparison needs %d, the job %d", s.MaxMemory, both.Total, info.Memory)
				}
			case <-time.After(300 * time.Millisecond):
				if tt.together {
					t.Errorf("the comparison waited though MaxMemory %d holds it (%d) and the job (%d)", s.MaxMemory, both.Total, info.Memory)
				}
			}
			close(gate)
			for range 2 {
				if err := <-done; err != nil {
					t.Error(err)
				}
			}
		})
	}
}
