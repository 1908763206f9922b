package coordinator

import (
	"encoding/json"
	"sync"

	"github.com/offsetd/offsetd/log"
)

// watchKind tells a group's watch from a static topic's: a group and a
// topic may have the same name.
type watchKind byte

const (
	watchGroup watchKind = 'g'
	watchTopic watchKind = 't' // the topic's mappings, hence its routes
)

type watchKey struct {
	kind watchKind
	name string
}

// watch is the channel the watchers of one key wait on, and how many of
// them there are.
type watch struct {
	ch      chan struct{}
	waiting int
}

// watchers wakes the long polls of one partition when what each watches
// changes: a group, or a static topic's mappings. A poll on one group
// sleeps through the batches of every other group of its partition. Keys
// are held only while someone watches them, so names polled once (or
// never written) cost nothing afterwards.
type watchers struct {
	mu   sync.Mutex
	keys map[watchKey]*watch // guarded by mu
}

// watch returns a channel closed at the next change of key, and stop,
// which the caller must call once it no longer waits.
func (ws *watchers) watch(key watchKey) (changed <-chan struct{}, stop func()) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.keys == nil {
		ws.keys = make(map[watchKey]*watch)
	}
	w := ws.keys[key]
	if w == nil {
		w = &watch{ch: make(chan struct{})}
		ws.keys[key] = w
	}
	w.waiting++
	var once sync.Once
	return w.ch, func() {
		once.Do(func() {
			ws.mu.Lock()
			defer ws.mu.Unlock()
			// A fired watch has left the map; a later one may hold the key.
			if w.waiting--; w.waiting == 0 && ws.keys[key] == w {
				delete(ws.keys, key)
			}
		})
	}
}

// fire wakes every watcher of key. Callers hold mu.
func (ws *watchers) fire(key watchKey) {
	if w, ok := ws.keys[key]; ok {
		close(w.ch)
		delete(ws.keys, key)
	}
}

// wake wakes the watchers of every group and static topic that entries,
// just applied to the tables, changed. It runs on the writer goroutine
// after the tables show the batch, and a watcher registers before it reads
// them, so a poll either reads the change or is woken by it.
func (ws *watchers) wake(entries []log.Entry) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if len(ws.keys) == 0 {
		return
	}
	for _, e := range entries {
		d := decoder{b: e.Payload}
		switch e.Type {
		case recCommit, recDeleteOffsets, recDeleteGroup:
			ws.fire(watchKey{watchGroup, string(d.bytes())})
		case recExpireGroups:
			for n := d.int(); n > 0 && !d.bad; n-- {
				ws.fire(watchKey{watchGroup, string(d.bytes())})
			}
		case recMapping:
			var m struct {
				Topic string `json:"topic"`
			}
			if json.Unmarshal(e.Payload, &m) == nil {
				ws.fire(watchKey{watchTopic, m.Topic})
			}
		}
	}
}
