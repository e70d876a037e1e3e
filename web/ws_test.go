package web

import (
	"encoding/json"
	"testing"

	"github.com/sampviz/sampviz/web/live"
	"github.com/sampviz/sampviz/web/view"
)

func TestEncodeUpdate(t *testing.T) {
	charts := json.RawMessage(`[{"worst":{"series":[{"data":[[1,2]]}]}}]`)
	tests := []struct {
		name string
		u    live.Update
	}{
		{"charts alone", live.Update{Charts: charts}},
		{"rows and charts", live.Update{Rows: []view.RowSummary{{Row: 3, Pass: true}}, Charts: charts}},
		{"no charts", live.Update{Final: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := encodeUpdate(&tt.u)
			if err != nil {
				t.Fatal(err)
			}
			var back live.Update
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatalf("%s: %v", b, err)
			}
			if string(back.Charts) != string(tt.u.Charts) || len(back.Rows) != len(tt.u.Rows) || back.Final != tt.u.Final {
				t.Errorf("round trip of %s changed it", b)
			}
		})
	}
}
