//go:build !race

package testnet_test

const raceEnabled = false
