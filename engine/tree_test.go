package engine

import (
	"errors"
	"fmt"
	"testing"
)

func TestParseTree(t *testing.T) {
	// 0 ─ 1 ─ 4
	//   ├ 3     (3 is tried before 2: siblings need not be in index order)
	//   └ 2 ─ 5 ─ 6
	// 7 is padding the root never reaches.
	next := []int64{1, 4, 5, -1, -1, 6, -1, -1}
	sibling := []int64{-1, 3, -1, 2, -1, -1, -1, 1}
	tr, err := ParseTree(next, sibling)
	if err != nil {
		t.Fatal(err)
	}
	want := struct {
		parent, rank, depth []int
		children            string
		maxDepth            int
	}{
		[]int{-1, 0, 0, 0, 1, 2, 5, -1},
		[]int{-1, 0, 2, 1, 0, 0, 0, -1},
		[]int{0, 1, 1, 1, 2, 2, 3, -1},
		"[[1 3 2] [4] [5] [] [] [6] [] []]",
		3,
	}
	if fmt.Sprint(tr.Parent) != fmt.Sprint(want.parent) || fmt.Sprint(tr.Rank) != fmt.Sprint(want.rank) ||
		fmt.Sprint(tr.Depth) != fmt.Sprint(want.depth) || fmt.Sprint(tr.Children) != want.children || tr.MaxDepth != want.maxDepth {
		t.Errorf("parents %v ranks %v depths %v children %v max depth %d", tr.Parent, tr.Rank, tr.Depth, tr.Children, tr.MaxDepth)
	}
	if tr.Reached(7) || !tr.Reached(6) {
		t.Error("node 7 is padding, node 6 is in the tree")
	}
	// A cycle through siblings that returns to a node already reached is
	// found at once, whatever its length.
	long := make([]int64, MaxTreeNodes)
	loop := make([]int64, MaxTreeNodes)
	long[0] = 1
	for i := range loop {
		loop[i] = int64(i + 1)
	}
	loop[0], loop[MaxTreeNodes-1] = -1, 1
	for i := 1; i < MaxTreeNodes; i++ {
		long[i] = -1
	}
	_, err = ParseTree(long, loop)
	var te *TreeError
	if !errors.As(err, &te) || te.Tensor != "retrive_next_sibling" || te.Node != MaxTreeNodes-1 {
		t.Errorf("a sibling cycle through every node: %v", err)
	}
}
