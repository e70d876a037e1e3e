// Package scenarios is sampviz's built-in catalogue: small dumps that
// reproduce what the reference kernels do and how real kernels fail
// (batched greedy decode, temperature regimes, scaling before the max,
// filter order, speculative-sampling corners, n-gram drafting, seeded
// determinism, rows without a distribution, odd vocabularies). Each
// scenario is a folder holding its dump, its scenario.json (op, overrides,
// the verdict it must produce, the view that shows its point) and a
// hand-written README.md; the folders are embedded in the binary, so
// `sampviz serve` on a machine without a GPU opens with something real to
// explore, and `sampviz scenarios` lists them.
//
// The dumps and configs are written by `go run ./scenarios/gen` (`make
// scenarios`) from fixed seeds; the package's tests check that the
// committed files are what the generator writes now, and that every
// scenario, run on the CPU backend and judged by engine/compare, gives
// exactly the verdict its config declares.
//
// The package only reads what it embeds: it never runs kernels, never
// judges and never writes files.
package scenarios
