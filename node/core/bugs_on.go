//go:build simbugs

package core

// activeBug is the mechanism switched off in this test run.
var activeBug Bug

func bug(b Bug) bool { return activeBug == b }

// SetBug switches one mechanism off (NoBug: none) and reports true. It is
// not safe for concurrent use with running simulations.
func SetBug(b Bug) bool { activeBug = b; return true }
