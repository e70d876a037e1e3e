package live

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sampviz/sampviz/engine/session"
	"github.com/sampviz/sampviz/web/store"
	"github.com/sampviz/sampviz/web/view"
)

func queuedTask(runID, key string) *task {
	return &task{Task: Task{RunID: runID, Key: key, Job: session.Job{Label: runID}},
		topic: newTopic(runID, key, 1, 1, view.Status{State: store.Queued}), done: make(chan struct{})}
}

// popSoon pops with a short deadline: nil when no task may be handed out.
func popSoon(t *testing.T, q *queue) *task {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	got, _, err := q.pop(ctx)
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("pop: %v", err)
	}
	return got
}

// TestQueueSeveralExecutors hands tasks to executors that run at once (one
// per GPU): tasks of different runs go out together, a run's next judgement
// waits for its current one, and the places ahead count every held task.
func TestQueueSeveralExecutors(t *testing.T) {
	q := newQueue(8)
	a1, b1, a2, c1 := queuedTask("a", ""), queuedTask("b", ""), queuedTask("a", "tol"), queuedTask("c", "")
	for _, tk := range []*task{a1, b1, a2, c1} {
		q.push(tk, false)
	}
	for i, tk := range []*task{a1, b1, a2, c1} {
		if tk.topic.status.Ahead != i {
			t.Errorf("task %s/%s: %d ahead, want %d", tk.RunID, tk.Key, tk.topic.status.Ahead, i)
		}
	}
	steps := []struct {
		name  string
		letGo *task
		want  *task
	}{
		{"first executor takes the first task", nil, a1},
		{"second executor takes the next run's", nil, b1},
		{"a third skips run a's second judgement", nil, c1},
		{"nothing else while run a is held", nil, nil},
		{"run a's second judgement once its first lets go", a1, a2},
		{"the queue is empty", b1, nil},
	}
	for _, st := range steps {
		if st.letGo != nil {
			q.letGo(st.letGo)
		}
		if got := popSoon(t, q); got != st.want {
			name := func(tk *task) string {
				if tk == nil {
					return "none"
				}
				return tk.RunID + "/" + tk.Key
			}
			t.Fatalf("%s: popped %s, want %s", st.name, name(got), name(st.want))
		}
	}
	if !q.active("a") || !q.active("c") || q.active("b") {
		t.Errorf("active a %v, c %v, b %v; want true, true, false", q.active("a"), q.active("c"), q.active("b"))
	}
	if _, running := q.cancel("c"); running != c1 || !c1.cancelled {
		t.Errorf("cancel c: running %v, want c's held task cancelled", running)
	}
}
