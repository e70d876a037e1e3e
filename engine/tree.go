package engine

import "fmt"

// MaxTreeNodes is the most nodes a draft tree of spec_tree_verify may have
// (N of its [B, N, V] target logits): the kernels walk a row's tree in
// shared memory, and the per-node Philox blocks (2n and 2n+1) stay far
// below what an offset step separates.
const MaxTreeNodes = 1024

// Tree is the shape of one row's draft tree, read from SGLang's linked
// lists (sgl-kernel's tree_speculative_sampling_target_only):
// retrive_next_token[n] is node n's first child and retrive_next_sibling[n]
// its next sibling, -1 for none. Node 0 is the root: the position after the
// last accepted token. ParseTree checks the layout; a Tree is read-only.
type Tree struct {
	// Parent[n] is node n's parent: -1 for the root and for nodes the root
	// does not reach (padding, never visited).
	Parent []int
	// Children[n] lists node n's children in sibling order: the order the
	// verifier tries them in.
	Children [][]int
	// Rank[n] is n's place among its parent's children (0 for the first
	// child), -1 for the root and unreachable nodes.
	Rank []int
	// Depth[n] is the number of edges from the root to n, -1 for nodes the
	// root does not reach.
	Depth []int
	// MaxDepth is the greatest depth: the most tokens one path accepts.
	MaxDepth int
}

// Nodes returns N, the number of nodes of the row (reachable or not).
func (t *Tree) Nodes() int { return len(t.Parent) }

// Reached reports whether node n is in the tree: the root, or a node the
// root's lists reach.
func (t *Tree) Reached(n int) bool { return n >= 0 && n < len(t.Depth) && t.Depth[n] >= 0 }

// TreeError is a draft tree that breaks the layout rules: Tensor names the
// tensor whose value breaks it, Row and Node where that value is (Row -1
// when the tree was parsed alone), and Rule says what is wrong, after
// "node N ".
type TreeError struct {
	Tensor string
	Row    int
	Node   int
	Rule   string
}

// Error writes e as "retrive_next_sibling: row 2, node 5 links to ...".
func (e *TreeError) Error() string {
	if e.Row < 0 {
		return fmt.Sprintf("%s: node %d %s", e.Tensor, e.Node, e.Rule)
	}
	return fmt.Sprintf("%s: %s", e.Tensor, e.Where())
}

// Where writes the row, the node and the rule without the tensor: "row 2,
// node 5 links to ...".
func (e *TreeError) Where() string {
	return fmt.Sprintf("row %d, node %d %s", e.Row, e.Node, e.Rule)
}

// ParseTree reads one row's tree from its first-child links next and its
// next-sibling links sibling (N entries each, -1 for none) and checks
// SGLang's layout: every link is -1 or a node of the row; the root has no
// sibling; a child comes after its parent (a higher index), which rules out
// a cycle through first-child links; and no node is reached twice, which
// rules out a cycle through sibling links and a second parent. It walks the
// tree breadth first, marking each node as it is reached, so a cycle is
// found at its first repeat and never walked. Its error is a *TreeError.
func ParseTree(next, sibling []int64) (*Tree, error) {
	n := len(next)
	if len(sibling) != n {
		return nil, &TreeError{Row: -1, Tensor: "retrive_next_sibling", Node: 0, Rule: fmt.Sprintf("starts a list of %d nodes where retrive_next_token has %d", len(sibling), n)}
	}
	if n == 0 {
		return nil, &TreeError{Row: -1, Tensor: "retrive_next_token", Node: 0, Rule: "is missing: a tree has at least its root"}
	}
	for _, links := range []struct {
		name string
		v    []int64
	}{{"retrive_next_token", next}, {"retrive_next_sibling", sibling}} {
		for i, v := range links.v {
			if v < -1 || v >= int64(n) {
				return nil, &TreeError{Row: -1, Tensor: links.name, Node: i, Rule: fmt.Sprintf("links to %d, outside the row's nodes [0, %d) (-1 for none)", v, n)}
			}
		}
	}
	if sibling[0] != -1 {
		return nil, &TreeError{Row: -1, Tensor: "retrive_next_sibling", Node: 0, Rule: fmt.Sprintf("(the root) has the sibling %d; the root has none", sibling[0])}
	}
	t := &Tree{Parent: make([]int, n), Children: make([][]int, n), Rank: make([]int, n), Depth: make([]int, n)}
	for i := range n {
		t.Parent[i], t.Rank[i], t.Depth[i] = -1, -1, -1
	}
	t.Depth[0] = 0
	queue := make([]int, 1, n)
	for head := 0; head < len(queue); head++ {
		u := queue[head]
		from, tensor := u, "retrive_next_token"
		for c := int(next[u]); c != -1; c = int(sibling[c]) {
			switch {
			case c <= u:
				what := "has the first child"
				if tensor != "retrive_next_token" {
					what = fmt.Sprintf("(a child of node %d) links to the sibling", u)
				}
				return nil, &TreeError{Row: -1, Tensor: tensor, Node: from, Rule: fmt.Sprintf("%s %d, which does not come after node %d: a child must come after its parent", what, c, u)}
			case t.Depth[c] >= 0:
				return nil, &TreeError{Row: -1, Tensor: tensor, Node: from, Rule: fmt.Sprintf("links to node %d, which the tree has already reached: a cycle, or a second parent", c)}
			}
			t.Parent[c], t.Rank[c], t.Depth[c] = u, len(t.Children[u]), t.Depth[u]+1
			t.MaxDepth = max(t.MaxDepth, t.Depth[c])
			t.Children[u] = append(t.Children[u], c)
			queue = append(queue, c)
			from, tensor = c, "retrive_next_sibling"
		}
	}
	return t, nil
}

// Trees parses the draft tree of every row of a spec_tree_verify run
// (Tree).
func (r *Run) Trees() ([]*Tree, error) {
	if err := r.checkLinks(); err != nil {
		return nil, err
	}
	trees := make([]*Tree, r.NextToken.Dim(0))
	for row := range trees {
		t, err := r.Tree(row)
		if err != nil {
			return nil, err
		}
		trees[row] = t
	}
	return trees, nil
}

// Tree parses the draft tree of one row of a spec_tree_verify run
// (ParseTree). A tree that breaks the layout gives a *TreeError naming the
// tensor, the row and the node: "retrive_next_sibling: row 2, node 5 links
// to node 3, ...". Link tensors of the wrong shape wrap ErrUnsupported.
func (r *Run) Tree(row int) (*Tree, error) {
	if err := r.checkLinks(); err != nil {
		return nil, err
	}
	rows, n := r.NextToken.Dim(0), r.NextToken.Dim(1)
	if row < 0 || row >= rows {
		return nil, fmt.Errorf("retrive_next_token: no row %d in %d rows", row, rows)
	}
	a, b := make([]int64, n), make([]int64, n)
	for i := range n {
		a[i], b[i] = r.NextToken.Int(row*n+i), r.NextSibling.Int(row*n+i)
	}
	t, err := ParseTree(a, b)
	if err != nil {
		te := *err.(*TreeError)
		te.Row = row
		return nil, &te
	}
	return t, nil
}

// checkLinks checks the shapes of a run's tree links: two [B, N] integer
// tensors, N at most MaxTreeNodes.
func (r *Run) checkLinks() error {
	next, sib := r.NextToken, r.NextSibling
	if err := CheckTensor(next, "retrive_next_token", 2, false); err != nil {
		return err
	}
	if err := CheckTensor(sib, "retrive_next_sibling", 2, false); err != nil {
		return err
	}
	if sib.Dim(0) != next.Dim(0) || sib.Dim(1) != next.Dim(1) {
		return fmt.Errorf("retrive_next_sibling: shape %s, want %s as retrive_next_token: %w", sib.ShapeString(), next.ShapeString(), ErrUnsupported)
	}
	if n := next.Dim(1); n > MaxTreeNodes {
		return fmt.Errorf("retrive_next_token: %d nodes a row, over the %d a tree may have: %w", n, MaxTreeNodes, ErrUnsupported)
	}
	return nil
}
