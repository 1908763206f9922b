//go:build !cgo

package bench

// cgoEnabled says whether Pebble allocates its caches with C malloc, outside
// the Go heap.
const cgoEnabled = false
