//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package journal

import "os"

// unlockFile is a no-op where bbolt does not use flock.
func unlockFile(*os.File) {}

// lockedElsewhere cannot tell here; it assumes not.
func lockedElsewhere(string) bool { return false }
