//go:build !simbugs

package core

// bug is false: the protocol's mechanisms cannot be switched off in a
// build without the simbugs tag.
func bug(Bug) bool { return false }

// SetBug is unavailable without the simbugs tag; it reports false.
func SetBug(Bug) bool { return false }
