//go:build failpoints

package node

import (
	"fmt"
	"os"
	"strings"
)

// failpointFromEnv reads the failpoint named by the variable name.
func failpointFromEnv(name string) failpoint {
	service, marker, ok := strings.Cut(os.Getenv(name), ":")
	if !ok || service == "" || marker == "" {
		return failpoint{}
	}
	return failpoint{name, service, marker}
}

// fires reports whether the failpoint fires now for service: it is set
// for service and its marker did not exist yet (it does now, naming
// dataDir).
func (f failpoint) fires(service, dataDir string) bool {
	if f.service == "" || service != f.service {
		return false
	}
	m, err := os.OpenFile(f.marker, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return false // fired before (or the marker cannot be made): not again
	}
	fmt.Fprintln(m, dataDir)
	_ = m.Sync()
	_ = m.Close()
	return true
}
