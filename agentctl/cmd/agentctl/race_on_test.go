//go:build race

package main

// raceEnabled says the tests run under -race: agentctl processes are the
// test binary, so they run with the race detector too, which multiplies
// their memory.
const raceEnabled = true
