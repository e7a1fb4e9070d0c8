//go:build !race

package daemon_test

// raceDetector says the tests run under -race, which slows the code under
// test several times over: timing bounds are then starvation guards only.
const raceDetector = false
