//go:build race

package server

// raceEnabled: the race detector slows SQLite tenfold; long tests do less.
const raceEnabled = true
