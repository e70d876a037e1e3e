package live

import (
	"context"
	"slices"
	"sync"

	"github.com/sampviz/sampviz/engine/session"
)

// Task is one judgement to queue.
type Task struct {
	Job   session.Job
	RunID string
	// Key names the judgement: "" for the run's own, else its tolerances'
	// key.
	Key string
	// Rejudge judges stored outputs again without running kernels.
	Rejudge bool
	// Rows and Vocab are the dump's batch and vocabulary sizes.
	Rows, Vocab int
}

// task is one judgement waiting for, or held by, the executor, with the
// topic it publishes into.
type task struct {
	Task
	topic *Topic
	// cancel ends the task's judgement once the executor holds it;
	// cancelled says a person asked (set under the queue's lock); done is
	// closed when the executor lets go of it.
	cancel    context.CancelFunc
	cancelled bool
	done      chan struct{}
}

// queue holds the tasks waiting for the executors (one, or one per GPU).
// Room is reserved before an upload is read, so that a full queue refuses
// at once and a refused upload stores nothing. The judgements of one run
// are handed out one at a time, in the order they were queued.
type queue struct {
	mu       sync.Mutex
	limit    int
	reserved int
	waiting  []*task
	// current holds the tasks the executors hold.
	current []*task
	wake    chan struct{}
}

// newQueue returns a queue that holds at most limit tasks, reserved places
// included.
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

// push queues t in a reserved place (reserved false: a task the last
// server left, queued again whatever the limit).
func (q *queue) push(t *task, reserved bool) {
	q.mu.Lock()
	if reserved {
		q.reserved--
	}
	q.waiting = append(q.waiting, t)
	q.updatePlacesLocked()
	q.mu.Unlock()
	q.signal()
}

// pop waits for the next task whose run has no task held, or for ctx to
// end, and holds it as a current task with a context of its own, derived
// from ctx.
func (q *queue) pop(ctx context.Context) (*task, context.Context, error) {
	for {
		q.mu.Lock()
		if i := q.nextLocked(); i >= 0 {
			t := q.waiting[i]
			q.waiting = slices.Delete(q.waiting, i, i+1)
			tctx, cancel := context.WithCancel(ctx)
			t.cancel = cancel
			q.current = append(q.current, t)
			q.updatePlacesLocked()
			more := len(q.waiting) > 0
			q.mu.Unlock()
			if more {
				// Another executor may take the next one.
				q.signal()
			}
			return t, tctx, nil
		}
		q.mu.Unlock()
		select {
		case <-q.wake:
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
	}
}

// nextLocked returns the index of the first waiting task whose run has no
// task held, or -1.
func (q *queue) nextLocked() int {
	for i, t := range q.waiting {
		if !q.heldLocked(t.RunID) {
			return i
		}
	}
	return -1
}

// heldLocked reports whether an executor holds a task of run runID.
func (q *queue) heldLocked(runID string) bool {
	for _, c := range q.current {
		if c.RunID == runID {
			return true
		}
	}
	return false
}

// signal wakes one waiting executor, if none is awake already.
func (q *queue) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// letGo ends the executor's hold on t, and wakes an executor for a task of
// t's run that waited for it.
func (q *queue) letGo(t *task) {
	q.mu.Lock()
	q.current = slices.DeleteFunc(q.current, func(c *task) bool { return c == t })
	more := len(q.waiting) > 0
	q.updatePlacesLocked()
	q.mu.Unlock()
	t.cancel()
	close(t.done)
	if more {
		q.signal()
	}
}

// cancel cancels every task of run runID: it takes the waiting ones out of
// the queue (returned, for the caller to record) and cancels the context of
// the one an executor holds (returned as running, with its done channel to
// wait on).
func (q *queue) cancel(runID string) (waiting []*task, running *task) {
	q.mu.Lock()
	defer q.mu.Unlock()
	kept := q.waiting[:0]
	for _, t := range q.waiting {
		if t.RunID == runID {
			t.cancelled = true
			waiting = append(waiting, t)
		} else {
			kept = append(kept, t)
		}
	}
	q.waiting = kept
	for _, c := range q.current {
		if c.RunID == runID {
			c.cancelled = true
			c.cancel()
			running = c
		}
	}
	q.updatePlacesLocked()
	return waiting, running
}

// isCancelled reports whether a person cancelled t.
func (q *queue) isCancelled(t *task) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return t.cancelled
}

// active reports whether run runID has a task waiting or running.
func (q *queue) active(runID string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.heldLocked(runID) {
		return true
	}
	for _, t := range q.waiting {
		if t.RunID == runID {
			return true
		}
	}
	return false
}

// drain returns every waiting task (at shutdown).
func (q *queue) drain() []*task {
	q.mu.Lock()
	defer q.mu.Unlock()
	ts := q.waiting
	q.waiting = nil
	return ts
}

// updatePlacesLocked tells every waiting task's topic how many tasks are
// ahead of it (those held count as ahead).
func (q *queue) updatePlacesLocked() {
	ahead := len(q.current)
	for i, t := range q.waiting {
		t.topic.setQueued(ahead + i)
	}
}
