//go:build race

package main

// raceEnabled builds the server binary the tests run with the race detector too.
const raceEnabled = true
