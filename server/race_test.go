//go:build race

package server

// raceEnabled: the race detector makes some values escape that do not
// otherwise, so allocation bounds do not hold under it.
const raceEnabled = true
