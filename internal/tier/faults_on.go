//go:build faults

package tier

const faults = true
