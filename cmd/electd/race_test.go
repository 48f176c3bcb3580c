//go:build race

package main

// raceEnabled: the race detector slows electd's start and exit several
// times; bounds on how soon it exits are loosened under it (see slack).
const raceEnabled = true
