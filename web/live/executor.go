package live

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/session"
	"github.com/sampviz/sampviz/web/store"
	"github.com/sampviz/sampviz/web/view"
)

// Judge is the part of the judging session the executors call
// (engine/session implements it), from as many goroutines at a time as
// Config.Executors says.
type Judge interface {
	// Execute and Rejudge judge a job, telling sink every row as it is
	// judged (session.Session.Execute, Rejudge).
	Execute(ctx context.Context, job session.Job, sink session.Sink) (*engine.Report, error)
	Rejudge(ctx context.Context, job session.Job, sink session.Sink) (*engine.Report, error)
}

// executor runs the queued tasks through the judging session, one at a
// time in each of Config.Executors goroutines, and records how each ended
// in the store.
type executor struct {
	queue *queue
	judge Judge
	store *store.Store
	log   *slog.Logger
	// after runs after every task (retention).
	after func()
}

// run runs queued tasks until ctx ends, then fails the tasks still waiting
// as interrupted.
func (e *executor) run(ctx context.Context) {
	for {
		t, tctx, err := e.queue.pop(ctx)
		if err != nil {
			// The tasks still waiting stay queued in the store: the next
			// server queues them again (Runs.Requeue).
			for _, t := range e.queue.drain() {
				t.topic.fail(store.Interrupted)
			}
			return
		}
		e.execute(tctx, t)
		e.queue.letGo(t)
		if e.after != nil {
			e.after()
		}
	}
}

// execute runs one task: kernels (unless re-judging), then the judgement,
// streaming rows into the task's topic. Whatever happens, the judgement
// ends Done or Failed and the executor goes on.
func (e *executor) execute(ctx context.Context, t *task) {
	defer func() {
		if p := recover(); p != nil {
			e.fail(t, fmt.Errorf("panic: %v", p), "sampviz hit an internal error on this run; the server log has the details.")
		}
	}()
	if err := e.store.SetRunning(t.RunID, t.Key); err != nil {
		e.fail(t, err, "sampviz could not record this run; the server log has the details.")
		return
	}
	t.topic.setRunning()
	var rep *engine.Report
	var err error
	if t.Rejudge {
		rep, err = e.judge.Rejudge(ctx, t.Job, t.topic)
	} else {
		rep, err = e.judge.Execute(ctx, t.Job, t.topic)
	}
	if err != nil {
		switch {
		case e.queue.isCancelled(t):
			e.cancelled(t)
		case ctx.Err() != nil:
			// The server is stopping: the judgement stays queued in the
			// store for the next one.
			t.topic.fail(store.Interrupted)
			if rerr := e.store.Requeue(t.RunID, t.Key); rerr != nil {
				e.log.Error("queue again", "run", t.RunID, "err", rerr)
			}
		default:
			e.fail(t, err, clientMessage(err, e.store.Dir()))
		}
		return
	}
	t.topic.settle(rep)
	sum := view.Summarize(rep)
	// The topic holds the rows; the stored stream must agree with the
	// report even if the session skipped the sink.
	t.topic.setSummary(sum)
	if err := saveJudgement(e.store, t, rep); err != nil {
		msg := "sampviz could not store the results of this run; the server log has the details."
		if errors.Is(err, syscall.ENOSPC) {
			msg = DiskFull
		}
		e.fail(t, err, msg)
		return
	}
	// The topic first, then the index: whoever sees the run finished in the
	// index finds its final state in the topic too.
	t.topic.finish(sum)
	if err := e.store.Finish(t.RunID, t.Key, sum.Verdict); err != nil {
		e.fail(t, err, "sampviz could not record the results of this run; the server log has the details.")
		return
	}
	e.log.Info("run finished", "run", t.RunID, "judgement", t.Key, "pass", sum.Pass, "failed_rows", sum.FailedRows, "rows", sum.Rows)
}

// fail records a failed task: msg for the page, err for the log.
func (e *executor) fail(t *task, err error, msg string) {
	e.log.Error("run failed", "run", t.RunID, "judgement", t.Key, "err", err)
	t.topic.fail(msg)
	if ferr := e.store.Fail(t.RunID, t.Key, msg); ferr != nil {
		e.log.Error("record failed run", "run", t.RunID, "err", ferr)
	}
}

// Cancelled is what a cancelled judgement says.
const Cancelled = "This run was cancelled before it finished; rerun it to get a result."

// cancelled records that a person cancelled t.
func (e *executor) cancelled(t *task) {
	e.log.Info("run cancelled", "run", t.RunID, "judgement", t.Key)
	t.topic.cancelled(Cancelled)
	if err := e.store.Cancel(t.RunID, t.Key, Cancelled); err != nil {
		e.log.Error("record cancelled run", "run", t.RunID, "err", err)
	}
}

// DiskFull is what a judgement that could not store its results for want of
// space says, and what an upload that could not be stored is told.
const DiskFull = "The server's disk is full: this could not be stored. Free some space (or start sampviz serve with --max-data) and try again."

// clientMessage is what the page says of a failed judgement: the session's
// sentence, a full disk in words, and never a path of the server's.
func clientMessage(err error, dataDir string) string {
	if errors.Is(err, syscall.ENOSPC) {
		return DiskFull
	}
	msg := err.Error()
	if dir := strings.TrimSuffix(dataDir, "/"); dir != "" {
		msg = strings.ReplaceAll(msg, dir+"/", "")
		// The folder itself; a relative one names no place on the server
		// (and may be too short a word to replace).
		if filepath.IsAbs(dir) {
			msg = strings.ReplaceAll(msg, dir, "the data directory")
		}
	}
	return msg
}
