package live

import (
	"context"
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
}

// queue holds the tasks waiting for the one executor. Room is reserved
// before an upload is read, so that a full queue refuses at once and a
// refused upload stores nothing.
type queue struct {
	mu       sync.Mutex
	limit    int
	reserved int
	waiting  []*task
	busy     bool
	wake     chan struct{}
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

// updatePlacesLocked tells every waiting task's topic how many tasks are
// ahead of it.
func (q *queue) updatePlacesLocked() {
	ahead := 0
	if q.busy {
		ahead = 1
	}
	for i, t := range q.waiting {
		t.topic.setQueued(ahead + i)
	}
}
