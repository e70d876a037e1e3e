// Package live holds the live state of the runs that sampviz serve judges:
// the queue of judgements waiting for the executors (one, or one per GPU),
// the executors that hand them to the judging session, and the topic of
// each judgement that the pages watching it read (its status, rows, chart
// data and summary, kept in stream.json once it is finished).
//
// It never speaks HTTP and never renders a page: web reads its topics and
// answers requests. It never judges anything itself either: the session
// behind Judge does, and the view models (web/view) put the results into
// the terms the pages use.
package live

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/session"
	"github.com/sampviz/sampviz/web/store"
	"github.com/sampviz/sampviz/web/view"
)

// Config configures Runs.
type Config struct {
	// Store holds the runs, their judgements and the judgements' files.
	Store *store.Store
	// Judge judges each queued task.
	Judge Judge
	// Queue bounds the tasks waiting for the executor, reserved places
	// included.
	Queue int
	// Executors is how many tasks run at once (0: one): one per GPU of
	// the session's backend, so that each GPU has a run to serve.
	Executors int
	// Log receives what went wrong with a run.
	Log *slog.Logger
	// KeepRuns and MaxData bound what the data directory keeps (0: no
	// bound): past either, the oldest finished runs nobody watches are
	// removed (Retain).
	KeepRuns int
	MaxData  int64
}

// Runs is the live state of every run: the queue, its executor and the
// topics. Create it with Start.
type Runs struct {
	store  *store.Store
	log    *slog.Logger
	queue  *queue
	topics *topics
	done   sync.WaitGroup // the executor

	keep    int
	maxData int64
	// retain serialises the retention passes.
	retain sync.Mutex
}

// Start starts the executor, which runs queued tasks until ctx ends; Wait
// then waits for it.
func Start(ctx context.Context, cfg Config) *Runs {
	r := &Runs{store: cfg.Store, log: cfg.Log, queue: newQueue(cfg.Queue), topics: newTopics(), keep: cfg.KeepRuns, maxData: cfg.MaxData}
	e := &executor{queue: r.queue, judge: cfg.Judge, store: cfg.Store, log: cfg.Log, after: r.Retain}
	for range max(cfg.Executors, 1) {
		r.done.Add(1)
		go func() {
			defer r.done.Done()
			e.run(ctx)
		}()
	}
	return r
}

// Wait waits for the executor to stop (after Start's context ended): by
// then every task has ended, interrupted if it had not run.
func (r *Runs) Wait() { r.done.Wait() }

// Reserve takes a place in the queue, or reports that it is full. Room is
// reserved before an upload is read, so that a full queue answers at once
// and a refused upload stores nothing; Enqueue uses the place, Release
// gives it back.
func (r *Runs) Reserve() bool { return r.queue.reserve() }

// Release gives back a place Reserve took that Enqueue will not use.
func (r *Runs) Release() { r.queue.release() }

// Enqueue registers the topic of t and queues t in a place Reserve took.
func (r *Runs) Enqueue(t Task) { r.enqueue(t, true) }

// Requeue queues again a task the last server left unfinished, whatever the
// queue's limit.
func (r *Runs) Requeue(t Task) {
	if err := r.store.Requeue(t.RunID, t.Key); err != nil {
		r.log.Error("queue again", "run", t.RunID, "err", err)
	}
	r.enqueue(t, false)
}

func (r *Runs) enqueue(t Task, reserved bool) {
	tp := newTopic(t.RunID, t.Key, t.Rows, t.Vocab, view.Status{State: store.Queued})
	r.topics.add(tp)
	r.queue.push(&task{Task: t, topic: tp, done: make(chan struct{})}, reserved)
}

// cancelWait bounds how long Cancel waits for the running judgement to stop.
const cancelWait = 5 * time.Second

// Cancel cancels every unfinished judgement of run runID: the waiting ones
// at once, the running one by its context (the session stops within about
// a second), and waits for that one to let go. It reports whether there was
// anything to cancel.
func (r *Runs) Cancel(runID string) bool {
	waiting, running := r.queue.cancel(runID)
	e := &executor{store: r.store, log: r.log}
	for _, t := range waiting {
		e.cancelled(t)
		close(t.done)
	}
	if running != nil {
		select {
		case <-running.done:
		case <-time.After(cancelWait):
			r.log.Error("cancelled run did not stop", "run", runID, "waited", cancelWait)
		}
	}
	return len(waiting) > 0 || running != nil
}

// Remove cancels run runID's unfinished judgements, then deletes the run
// with its files (store.Remove) and forgets its topics.
func (r *Runs) Remove(runID string) error {
	r.Cancel(runID)
	if err := r.store.Remove(runID); err != nil {
		return err
	}
	r.topics.forget(runID)
	return nil
}

// Watched reports whether a page watches a judgement of run runID.
func (r *Runs) Watched(runID string) bool { return r.topics.watched(runID) }

// Retain removes the oldest finished runs that no page watches while the
// data directory holds more than KeepRuns runs or more than MaxData bytes.
// The executor calls it after every task; the server at start.
func (r *Runs) Retain() {
	if r.keep <= 0 && r.maxData <= 0 {
		return
	}
	r.retain.Lock()
	defer r.retain.Unlock()
	old, err := r.store.Oldest()
	if err != nil {
		r.log.Error("retention", "err", err)
		return
	}
	count, err := r.store.Count()
	if err != nil {
		r.log.Error("retention", "err", err)
		return
	}
	for _, run := range old {
		over := r.keep > 0 && count > r.keep
		if !over && r.maxData > 0 {
			used, err := r.store.Usage()
			if err != nil {
				r.log.Error("retention", "err", err)
				return
			}
			over = used > r.maxData
		}
		if !over {
			return
		}
		if r.Watched(run.ID) || r.queue.active(run.ID) {
			continue
		}
		if err := r.Remove(run.ID); err != nil {
			r.log.Error("retention: remove run", "run", run.ID, "err", err)
			continue
		}
		count--
		r.log.Info("retention removed run", "run", run.ID, "file", run.FileName)
	}
}

// Topic returns the topic of judgement j of run, loading a finished one
// from its stream.json. A judgement without a readable stream (it failed
// before judging, or the file is gone) gets a topic that says so.
func (r *Runs) Topic(run store.Run, j store.Judgement, info *session.DumpInfo) *Topic {
	return r.topics.load(r.store, r.log, run.ID, j, info.Rows, info.Vocab)
}

// Report reads the stored report of finished judgement key of run runID.
func (r *Runs) Report(runID, key string) (*engine.Report, error) {
	var rep engine.Report
	if err := readJSON(r.store.JudgementPath(runID, key, "report.json"), &rep); err != nil {
		return nil, fmt.Errorf("read report of run %s: %w", runID, err)
	}
	return &rep, nil
}

// ForgetJudgement drops the topic of a removed re-judgement.
func (r *Runs) ForgetJudgement(runID, key string) { r.topics.forgetOne(runID, key) }
