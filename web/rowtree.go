package web

import (
	"fmt"
	"net/url"
	"strconv"

	"github.com/sampviz/sampviz/web/view"
)

// treeSection fills the row page's draft tree (d.Tree) for a
// spec_tree_verify row, from the row's detail and the URL q: the trace's
// trial and step, and the tree's colouring (?color=reach). Its charts join
// the row page's others.
func treeSection(d *view.RowPage, q url.Values) {
	if d.Detail == nil || d.Detail.Tree == nil {
		return
	}
	trial, _ := strconv.Atoi(q.Get("trial"))
	step, _ := strconv.Atoi(q.Get("step"))
	base := fmt.Sprintf("/runs/%s/rows/%d", d.Run.ID, d.Row)
	d.Tree = view.NewTreeView(d.Detail.Tree, d.Outputs, d.Reports, view.Tokens(d.Detail.Text), view.TreeOptions{
		Trial: trial, Step: step, Color: q.Get("color"), Path: base, Query: view.RowQuery(d, d.Log), Teach: base + "/teach",
	})
	if d.Charts == nil {
		d.Charts = map[string]any{}
	}
	for k, c := range d.Tree.Charts {
		d.Charts[k] = c
	}
}
