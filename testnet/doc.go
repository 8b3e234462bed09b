// Package testnet runs a local mesh of real `bedwe node` processes on
// loopback: it writes their configuration, starts and stops them, records a
// manifest, and drives chaos (SIGKILL and restart) and benchmarks. It drives
// the bedwe binary as a user would — processes, flags and files — and never
// reaches into node internals.
package testnet
