// Package live holds the live state of the runs that sampviz serve judges:
// the queue of judgements waiting for the one executor, the executor that
// hands them to the judging session, and the topic of each judgement that
// the pages watching it read (its status, rows, chart data and summary,
// kept in stream.json once it is finished).
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
	// Log receives what went wrong with a run.
	Log *slog.Logger
}

// Runs is the live state of every run: the queue, its executor and the
// topics. Create it with Start.
type Runs struct {
	store  *store.Store
	log    *slog.Logger
	queue  *queue
	topics *topics
	done   sync.WaitGroup // the executor
}

// Start starts the executor, which runs queued tasks until ctx ends; Wait
// then waits for it.
func Start(ctx context.Context, cfg Config) *Runs {
	r := &Runs{store: cfg.Store, log: cfg.Log, queue: newQueue(cfg.Queue), topics: newTopics()}
	e := &executor{queue: r.queue, judge: cfg.Judge, store: cfg.Store, log: cfg.Log}
	r.done.Add(1)
	go func() {
		defer r.done.Done()
		e.run(ctx)
	}()
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

// Waiting returns the number of tasks waiting for the executor.
func (r *Runs) Waiting() int { return r.queue.length() }

// Enqueue registers the topic of t and queues t in a place Reserve took.
func (r *Runs) Enqueue(t Task) {
	tp := newTopic(t.RunID, t.Key, t.Rows, t.Vocab, view.Status{State: store.Queued})
	r.topics.add(tp)
	r.queue.push(&task{Task: t, topic: tp})
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
