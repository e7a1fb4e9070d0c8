//go:build !race

package main

// raceEnabled says the tests run under -race.
const raceEnabled = false
