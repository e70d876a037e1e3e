package live

import (
	"math/rand/v2"
	"testing"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/web/store"
	"github.com/sampviz/sampviz/web/view"
	"github.com/sampviz/sampviz/web/webtest"
)

func TestSlowReaderGetsCoalescedUpdates(t *testing.T) {
	rows := 300 + rand.IntN(300)
	tp := newTopic("r", "", rows, 100, view.Status{State: store.Queued})
	sub := tp.Subscribe()
	outs := []engine.OutputInfo{{Name: "cpu", Kind: "probs"}}
	tp.Outputs(outs)
	tp.setRunning()
	// The publisher never blocks, however many changes the reader misses.
	for r := 0; r < rows; r++ {
		tp.Row(webtest.RandomUpdate(0, r, 100))
	}
	tp.finish(&view.Summary{Pass: false, Rows: rows})
	if n := len(sub.wake); n != 1 {
		t.Fatalf("reader has %d wake-ups pending, want 1", n)
	}
	var c Cursor
	u, _ := tp.Next(&c, false)
	if u == nil || len(u.Rows) != rows || u.Summary == nil || !u.Final || u.Charts == nil || len(u.Outputs) != 1 {
		t.Fatalf("the one update after the run: %d rows, final %v, charts %v", len(u.Rows), u.Final, u.Charts != nil)
	}
	if u, _ := tp.Next(&c, true); u == nil || !u.Final || len(u.Rows) != 0 || u.Charts != nil {
		t.Errorf("after everything was sent, next = %+v, want only the final marker", u)
	}
}

func TestChartsBuiltOncePerInterval(t *testing.T) {
	tp := newTopic("r", "", 50, 100, view.Status{State: store.Running})
	tp.Outputs([]engine.OutputInfo{{Name: "cpu", Kind: "probs"}})
	var readers [20]Cursor
	for r := 0; r < 50; r++ {
		tp.Row(webtest.RandomUpdate(0, r, 100))
		for i := range readers {
			tp.Next(&readers[i], true)
		}
	}
	tp.mu.Lock()
	built := tp.builtVersion
	tp.mu.Unlock()
	// 50 rows arrive within one chart interval: every reader got the first
	// build and waits for the next, instead of each building its own.
	if built > 2 {
		t.Errorf("charts were built at version %d after 50 quick rows; want one build per interval", built)
	}
	for i := range readers {
		if readers[i].charts != built {
			t.Errorf("reader %d has charts of version %d, want %d", i, readers[i].charts, built)
		}
	}
}
