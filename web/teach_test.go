package web

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"net/url"
	"strings"
	"testing"

	"github.com/sampviz/sampviz/engine/lesson"
)

func TestParseLesson(t *testing.T) {
	k := 2 + rand.IntN(6)
	tests := []struct {
		name  string
		query string
		want  lesson.Lesson
		err   string
	}{
		{"defaults", "", lesson.Lesson{Distance: 1}, ""},
		{"everything", "pos=1&temperature=0.5&top_k=40&top_p=0.9&distance=0.25&seed=7&step=100",
			lesson.Lesson{Position: 1, Temperature: ptr(0.5), TopK: ptr(40), TopP: ptr(0.9), Distance: 0.25, Seed: ptr(uint64(7)), Steps: 100}, ""},
		{"greedy target", "temperature=0", lesson.Lesson{Temperature: ptr(0.0), Distance: 1}, ""},
		{"last position", "pos=" + itoa(k-1), lesson.Lesson{Position: k - 1, Distance: 1}, ""},
		{"position past K", "pos=" + itoa(k), lesson.Lesson{}, "not a draft position"},
		{"negative temperature", "temperature=-1", lesson.Lesson{}, "temperature must be >= 0"},
		{"NaN temperature", "temperature=NaN", lesson.Lesson{}, "temperature must be a number"},
		{"top_p 0", "top_p=0", lesson.Lesson{}, "top-p must be in (0, 1]"},
		{"negative top_k", "top_k=-3", lesson.Lesson{}, "top-k must be >= 0"},
		{"distance past 1", "distance=1.01", lesson.Lesson{}, "distance must be in [0, 1]"},
		{"negative seed", "seed=-1", lesson.Lesson{}, "seed must be a whole number"},
		{"too many steps", "step=" + itoa(lesson.MaxSteps+1), lesson.Lesson{}, "step must be in"},
		{"steps not a number", "step=ten", lesson.Lesson{}, "step must be a whole number"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q, _ := url.ParseQuery(tt.query)
			got, err := parseLesson(q, k)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !lessonsEqual(got, tt.want) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func lessonsEqual(a, b lesson.Lesson) bool {
	eq := func(x, y any) bool {
		bx, _ := json.Marshal(x)
		by, _ := json.Marshal(y)
		return string(bx) == string(by)
	}
	return a.Position == b.Position && a.Distance == b.Distance && a.Steps == b.Steps &&
		eq(a.Temperature, b.Temperature) && eq(a.TopK, b.TopK) && eq(a.TopP, b.TopP) && eq(a.Seed, b.Seed)
}

// A lesson's own URL names the same lesson.
func TestLessonQueryRoundTrip(t *testing.T) {
	for range 20 {
		st := &lesson.State{
			Position: rand.IntN(4), Temperature: math.Round(rand.Float64()*200) / 100, TopK: rand.IntN(100),
			TopP: 0.01 + math.Round(rand.Float64()*99)/100, Distance: math.Round(rand.Float64()*20) / 20, Seed: rand.Uint64(),
		}
		steps := rand.IntN(lesson.MaxSteps)
		l, err := parseLesson(lessonQuery(st, steps), 4)
		if err != nil {
			t.Fatal(err)
		}
		if l.Position != st.Position || *l.Temperature != st.Temperature || *l.TopK != st.TopK || *l.TopP != st.TopP ||
			l.Distance != st.Distance || *l.Seed != st.Seed || l.Steps != steps {
			t.Errorf("%+v came back as %+v", st, l)
		}
	}
}
