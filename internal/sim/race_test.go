//go:build race

package sim

// raceDetector is set when the tests run under the race detector.
const raceDetector = true
