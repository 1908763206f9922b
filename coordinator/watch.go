package coordinator

import (
	"encoding/json"
	"sync"

	"github.com/offsetd/offsetd/log"
)

// watch is the channel the watchers of one group or static topic wait on,
// and how many of them there are.
type watch struct {
	ch      chan struct{}
	waiting int
}

// watchers wakes the long polls of one partition when what each watches
// changes: a group, or a static topic's mappings. A poll on one group
// sleeps through the batches of every other group of its partition. Names
// are held only while someone watches them, so names polled once (or
// never written) cost nothing afterwards.
type watchers struct {
	mu sync.Mutex
	// groups and topics map a name to its watch; two maps, since a group
	// and a topic may have the same name. Both guarded by mu.
	groups, topics map[string]*watch
}

// watchGroup returns a channel closed at the next change of group, and
// stop, which the caller must call once it no longer waits.
func (ws *watchers) watchGroup(group string) (changed <-chan struct{}, stop func()) {
	return ws.watch(&ws.groups, group)
}

// watchTopic is watchGroup for a static topic's mappings.
func (ws *watchers) watchTopic(topic string) (changed <-chan struct{}, stop func()) {
	return ws.watch(&ws.topics, topic)
}

func (ws *watchers) watch(m *map[string]*watch, name string) (<-chan struct{}, func()) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if *m == nil {
		*m = make(map[string]*watch)
	}
	w := (*m)[name]
	if w == nil {
		w = &watch{ch: make(chan struct{})}
		(*m)[name] = w
	}
	w.waiting++
	var once sync.Once
	return w.ch, func() {
		once.Do(func() {
			ws.mu.Lock()
			defer ws.mu.Unlock()
			// A fired watch has left the map; a later one may hold the name.
			if w.waiting--; w.waiting == 0 && (*m)[name] == w {
				delete(*m, name)
			}
		})
	}
}

// fire wakes every watcher of name in m. Callers hold mu. The lookup of
// string(name) does not allocate.
func fire(m map[string]*watch, name []byte) {
	if w, ok := m[string(name)]; ok {
		close(w.ch)
		delete(m, string(name))
	}
}

// wake wakes the watchers of every group and static topic that entries,
// just applied to the tables, changed. The partition's writer calls it
// after the tables show the batch, and a watcher registers before it reads
// them, so a poll either reads the change or is woken by it.
func (ws *watchers) wake(entries []log.Entry) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if len(ws.groups) == 0 && len(ws.topics) == 0 {
		return
	}
	for _, e := range entries {
		d := decoder{b: e.Payload}
		switch e.Type {
		case recCommit, recDeleteOffsets, recDeleteGroup, recTxnEnd:
			fire(ws.groups, d.bytes())
		case recExpireGroups:
			for n := d.int(); n > 0 && !d.bad; n-- {
				fire(ws.groups, d.bytes())
			}
		case recMapping:
			if len(ws.topics) == 0 {
				continue
			}
			var m struct {
				Topic string `json:"topic"`
			}
			if json.Unmarshal(e.Payload, &m) == nil {
				fire(ws.topics, []byte(m.Topic))
			}
		}
	}
}

// wakeAll wakes every watcher: the tables were replaced whole (a
// replicated partition that received a leader's snapshot).
func (ws *watchers) wakeAll() {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for name, w := range ws.groups {
		close(w.ch)
		delete(ws.groups, name)
	}
	for name, w := range ws.topics {
		close(w.ch)
		delete(ws.topics, name)
	}
}
