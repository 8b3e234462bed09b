//go:build race

package testnet_test

// raceEnabled: the tests run under the race detector, so the bedwe binary
// they start is built with it too, and a data race in any node fails the
// test that started it.
const raceEnabled = true
