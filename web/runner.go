package web

import (
	"context"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/diff"
	"github.com/sampviz/sampviz/engine/explain"
	"github.com/sampviz/sampviz/engine/lesson"
	"github.com/sampviz/sampviz/engine/session"
	"github.com/sampviz/sampviz/web/live"
)

// Runner is the judging session behind the server (engine/session
// implements it; tests use a fake, web/webtest). The executors (one per GPU,
// executors) call Execute and Rejudge; handlers call the rest.
type Runner interface {
	// Backends lists the backends a run may use, the default first.
	Backends() []engine.Device
	// Inspect reads the dump at path, which its uploader named name, and
	// describes it. A dump that cannot be used gives a *session.InputError,
	// whose message is shown to the person who uploaded it.
	Inspect(ctx context.Context, path, name string) (*session.DumpInfo, error)
	// Admit describes a job's dump as Inspect does and checks that the job
	// fits the session's memory budget; one that does not is a
	// *session.InputError with OverBudget set (session.Session.Admit).
	Admit(ctx context.Context, job session.Job) (*session.DumpInfo, error)
	// Judge's Execute and Rejudge judge a job, telling sink every row as it
	// is judged; the executor (web/live) calls them.
	live.Judge
	// Row describes row r of a job for the row page (session.Session.Row).
	Row(ctx context.Context, job session.Job, r, top int) (*explain.RowDetail, error)
	// Teach runs lesson l on row r of a spec_verify job
	// (session.Session.Teach); a lesson it cannot give is a *lesson.Error.
	Teach(ctx context.Context, job session.Job, r int, l lesson.Lesson) (*lesson.State, error)
	// TeachTree runs tree lesson l on row r of a spec_tree_verify job
	// (session.Session.TeachTree); a lesson it cannot give is a
	// *lesson.Error.
	TeachTree(ctx context.Context, job session.Job, r int, l lesson.TreeLesson) (*lesson.TreeState, error)
	// TeachSample steps through one draw of row r of a sample job
	// (session.Session.TeachSample); a lesson it cannot give is a
	// *lesson.Error.
	TeachSample(ctx context.Context, job session.Job, r int, l lesson.SampleLesson) (*lesson.SampleState, error)

	// Diff judges jobs a (before) and b (after) again from their stored
	// outputs and compares them (session.Session.Diff). Runs of two ops, a
	// dump that cannot be used and a comparison over the memory budget are
	// a *session.InputError.
	Diff(ctx context.Context, a, b session.Job) (*diff.Diff, error)
	// GPUs reports one state per GPU the runner drives (session.Session
	// over engine/cuda's Pool), empty when it drives none.
	GPUs() []engine.GPUState
}

var _ Runner = (*session.Session)(nil)

// executors is how many runs are judged at once: one per GPU, so that each
// GPU has a run to serve, and one without a GPU.
func executors(r Runner) int { return max(len(r.GPUs()), 1) }
