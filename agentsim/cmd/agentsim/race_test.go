//go:build race

package main

// raceEnabled builds the agentsim binary the signal tests run with the race
// detector too.
const raceEnabled = true
