//go:build !faults

package tier

const faults = false
