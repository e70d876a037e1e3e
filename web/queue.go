package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/session"
	"github.com/sampviz/sampviz/web/store"
)

// task is one judgement waiting for, or held by, the executor.
type task struct {
	job     session.Job
	runID   string
	key     string // judgement key, "" for the run's own
	rejudge bool   // judge stored outputs without running kernels
	topic   *topic
}

// queue holds the tasks waiting for the one executor. Room is reserved
// before an upload is read, so that a full queue answers 429 at once and a
// refused upload stores nothing.
type queue struct {
	mu       sync.Mutex
	limit    int
	reserved int
	waiting  []*task
	busy     bool
	wake     chan struct{}
}

func newQueue(limit int) *queue {
	return &queue{limit: limit, wake: make(chan struct{}, 1)}
}

// reserve takes a place in the queue, or reports that it is full.
func (q *queue) reserve() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.waiting)+q.reserved >= q.limit {
		return false
	}
	q.reserved++
	return true
}

// release gives back a reservation that push will not use.
func (q *queue) release() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.reserved--
}

// push queues t in a reserved place.
func (q *queue) push(t *task) {
	q.mu.Lock()
	q.reserved--
	q.waiting = append(q.waiting, t)
	q.updatePlacesLocked()
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// pop waits for the next task, or for ctx to end.
func (q *queue) pop(ctx context.Context) (*task, error) {
	for {
		q.mu.Lock()
		if len(q.waiting) > 0 {
			t := q.waiting[0]
			q.waiting = q.waiting[1:]
			q.busy = true
			q.updatePlacesLocked()
			q.mu.Unlock()
			return t, nil
		}
		q.busy = false
		q.mu.Unlock()
		select {
		case <-q.wake:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// drain returns every waiting task (at shutdown).
func (q *queue) drain() []*task {
	q.mu.Lock()
	defer q.mu.Unlock()
	ts := q.waiting
	q.waiting = nil
	return ts
}

// length returns the number of waiting tasks.
func (q *queue) length() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.waiting)
}

func (q *queue) updatePlacesLocked() {
	ahead := 0
	if q.busy {
		ahead = 1
	}
	for i, t := range q.waiting {
		t.topic.setQueued(ahead + i)
	}
}

// errQueueFull is the 429 of a full queue.
func errQueueFull(n int) *httpError {
	return &httpError{
		Status:     http.StatusTooManyRequests,
		Msg:        fmt.Sprintf("sampviz is busy: %d runs are already waiting. Try again in %d seconds.", n, retryAfter),
		RetryAfter: retryAfter,
	}
}

// executor runs queued tasks one at a time until the server closes.
func (s *Server) executor() {
	defer s.wg.Done()
	for {
		t, err := s.queue.pop(s.ctx)
		if err != nil {
			for _, t := range s.queue.drain() {
				s.failTask(t, errors.New("server stopped"), store.Interrupted)
			}
			return
		}
		s.execute(t)
	}
}

// execute runs one task: kernels (unless re-judging), then the judgement,
// streaming rows into the task's topic. Whatever happens, the judgement
// ends Done or Failed and the server goes on.
func (s *Server) execute(t *task) {
	defer func() {
		if p := recover(); p != nil {
			s.failTask(t, fmt.Errorf("panic: %v", p), "sampviz hit an internal error on this run; the server log has the details.")
		}
	}()
	if err := s.store.SetRunning(t.runID, t.key); err != nil {
		s.failTask(t, err, "sampviz could not record this run; the server log has the details.")
		return
	}
	t.topic.setRunning()
	var rep *engine.Report
	var err error
	if t.rejudge {
		rep, err = s.runner.Rejudge(s.ctx, t.job, t.topic)
	} else {
		rep, err = s.runner.Execute(s.ctx, t.job, t.topic)
	}
	if err != nil {
		msg := err.Error()
		if s.ctx.Err() != nil {
			msg = store.Interrupted
		}
		s.failTask(t, err, msg)
		return
	}
	sum := summarize(rep)
	// The topic holds the rows; the stored stream must agree with the
	// report even if the runner skipped the sink.
	t.topic.mu.Lock()
	t.topic.summary = sum
	t.topic.tolerances = &sum.Tolerances
	t.topic.mu.Unlock()
	if err := s.saveJudgement(t, rep); err != nil {
		s.failTask(t, err, "sampviz could not store the results of this run; the server log has the details.")
		return
	}
	// The topic first, then the index: whoever sees the run finished in the
	// index finds its final state in the topic too.
	t.topic.finish(sum)
	if err := s.store.Finish(t.runID, t.key, sum.Verdict); err != nil {
		s.failTask(t, err, "sampviz could not record the results of this run; the server log has the details.")
		return
	}
	s.log.Info("run finished", "run", t.runID, "judgement", t.key, "pass", sum.Pass, "failed_rows", sum.FailedRows, "rows", sum.Rows)
}

// saveJudgement writes report.json and stream.json of a finished task.
func (s *Server) saveJudgement(t *task, rep *engine.Report) error {
	if err := store.WriteFile(s.store.JudgementPath(t.runID, t.key, "report.json"), func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetIndent("", " ")
		return enc.Encode(rep)
	}); err != nil {
		return fmt.Errorf("save report: %w", err)
	}
	st := t.topic.toStored()
	st.Status.State = store.Done
	return store.WriteFile(s.store.JudgementPath(t.runID, t.key, "stream.json"), func(w io.Writer) error {
		return json.NewEncoder(w).Encode(st)
	})
}

// failTask records a failed task: msg for the page, err for the log.
func (s *Server) failTask(t *task, err error, msg string) {
	s.log.Error("run failed", "run", t.runID, "judgement", t.key, "err", err)
	t.topic.fail(msg)
	if ferr := s.store.Fail(t.runID, t.key, msg); ferr != nil {
		s.log.Error("record failed run", "run", t.runID, "err", ferr)
	}
}

// enqueue registers t's topic and queues it in a place reserve took.
func (s *Server) enqueue(t *task) {
	s.addTopic(t.topic)
	s.queue.push(t)
}
