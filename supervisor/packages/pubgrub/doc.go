// Package pubgrub chooses package versions with PubGrub, the
// conflict-driven version solver of Dart's pub (and, in Rust, of uv and
// Cargo's experiments), as Natalie Weizenbaum describes it in
// https://github.com/dart-lang/pub/blob/master/doc/solver.md. The comments
// here name that document's sections ("Unit Propagation", "Conflict
// Resolution", "Decision Making", "Error Reporting").
//
// [Solve] searches all combinations of versions, not just the first that
// fits: a conflict is traced back to its root cause, which is learned as a
// new incompatibility, and the search backjumps to the decision that
// caused it. So when "a" and "b" are required and b needs a<2, it picks an
// older a rather than failing because a 2.0 came first. When nothing fits,
// [NoSolution] explains why in a few lines, like pub and uv do:
//
//	Because every version of b depends on a <2 and you require a >=2, every version of b is forbidden.
//	So, because you require b, version solving failed.
//
// A [Provider] answers lazily: a package's versions when something chosen
// first requires it, a version's dependencies when that version is first
// tried. Each is asked once per Solve.
//
// # Versions and sets
//
// The solver neither parses nor orders versions: the provider lists each
// package's versions, newest (preferred) first, and a [Set] (for example a
// PEP 440 specifier's Allows) says which of them a requirement allows.
// Inside, a set is a bitset over the listed versions. PubGrub needs sets
// closed under intersection, union and complement; relative to a finite
// list all three are exact, whatever the specifier (==, !=, ~=, ===,
// wildcards, pre-releases), which interval arithmetic over PEP 440 versions
// would have to get right clause by clause. Versions that were not listed
// cannot be chosen anyway. Explanations print a set as the requirement
// wrote it, or, for a set the solver computed, as ranges between listed
// versions ("foo >=1.5, <2.0").
//
// Extras and environment markers are the caller's business: an extra can
// be a virtual package "pkg[extra]" whose version v depends on pkg
// [Exactly](v) and on the extra's requirements.
//
// # Why not github.com/contriboss/pubgrub-go
//
// The kept Go implementation, github.com/contriboss/pubgrub-go (Apache 2.0,
// derived from tinyrange's experimental/pubgrub, last commit 2025-11-01,
// tags up to v0.3.3), was evaluated first and not used:
//
//   - The Go module proxy refuses it here ("403 Forbidden: This module
//     version is not available"), so it cannot be a dependency of this
//     module at all.
//   - It is not sound. The random-graph check of property_test.go, run
//     against its source (commit 8dafd3d) on 2000 graphs of 3–8 packages,
//     one requirement per package and no self-dependencies, found 26
//     graphs with a solution that it declared unsolvable when sets are
//     ranges (43 when they may be any subset), and 5–10 on which it did
//     not finish within 5 seconds. On one of five packages
//     (the "pubgrub-go counterexample" of solver_test.go) it answers "no
//     solution" though p0 3, p1 3, p2 5, p3 3 meets every requirement.
//   - Its Source interface takes no context.Context, so network look-ups
//     cannot be cancelled; its Solver keeps learned incompatibilities in a
//     mutable field across calls; and its sets are intervals over a Version
//     with Sort, which PEP 440's "!=1.3.*" and pre-release rules would have
//     to be translated into.
//
// This package is small enough to own: the algorithm follows solver.md
// step by step, and property_test.go checks it against exhaustive search.
package pubgrub
