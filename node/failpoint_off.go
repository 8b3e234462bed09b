//go:build !failpoints

package node

// failpointFromEnv returns an unset failpoint: a build without the
// failpoints tag, as every released binary is, has none, whatever the
// environment says.
func failpointFromEnv(string) failpoint { return failpoint{} }

// fires is false: without the failpoints tag nothing fires.
func (failpoint) fires(string, string) bool { return false }
