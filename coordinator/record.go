package coordinator

import (
	"encoding/binary"
	"encoding/json"

	"errors"
	"fmt"
	"github.com/offsetd/offsetd/cache"
	"math"
)

// Record types, the type byte of each log frame. They are part of the on-disk
// format: never renumber them.
const (
	recCommit        byte = 1  // a group's offsets, one Commit call
	recDeleteOffsets byte = 2  // tombstones for some offsets of a group
	recDeleteGroup   byte = 3  // tombstone for a whole group
	recMapping       byte = 4  // a static topic's mapping in one scope (JSON)
	recGlobalRead    byte = 5  // a scope's global-read switch
	recSnapGroup     byte = 6  // snapshots only: part of a group's state
	recExpireGroups  byte = 7  // tombstones for groups idle past the retention
	recSnapGroups    byte = 8  // snapshots only: part of a group's state, compact (snaprecord.go)
	recSnapSizes     byte = 9  // snapshots only: how many groups, topics and keys follow
	recTxnCommit     byte = 10 // a group's offsets pending in a producer's transaction (txn.go)
	recTxnEnd        byte = 11 // a transaction's end in a group: its pending offsets committed or dropped
	recSnapTxn       byte = 12 // snapshots only: a producer's pending offsets in a group
	// Types 32 and up are the journal records of a cluster node (package
	// cluster); a replicated partition's records travel inside them.
)

// Record payloads (all integers varint, strings uvarint-length-prefixed):
//
//	commit:         group, generation, commitTimeMillis, count, count × (topic, partition, offset, leaderEpoch, metadata)
//	delete offsets: group, count, count × (topic, partition)
//	delete group:   group
//	mapping:        the statictopic.Mapping as JSON
//	global read:    scope, enabled (0 or 1)
//	snapshot group: group, capturedAt, version, lastCommitMillis, generation, count,
//	                count × (topic, partition, offset, leaderEpoch, metadata, commitTimeMillis)
//	                (written by the releases before the compact format; still read)
//	expire groups:  count, count × group
//	snapshot groups, snapshot sizes: see snaprecord.go
//	txn commit:     group, producerID, producerEpoch, generation, commitTimeMillis, count,
//	                count × (topic, partition, offset, leaderEpoch, metadata)
//	txn end:        group, producerID, producerEpoch, committed (0 or 1), count,
//	                count × (topic, partition, offset, leaderEpoch, metadata, commitTimeMillis)
//	                (the offsets the commit made visible; none for an abort)
//	snapshot txn:   group, producerID, producerEpoch, count,
//	                count × (topic, partition, offset, leaderEpoch, metadata, commitTimeMillis,
//	                txnCommitIndex, superseded (0 or 1: a commit of the partition came after it))

var errShortRecord = errors.New("truncated record")

// encoder appends record fields to a byte slice.
type encoder struct{ b []byte }

func (e *encoder) string(s string) {
	e.b = binary.AppendUvarint(e.b, uint64(len(s)))
	e.b = append(e.b, s...)
}

func (e *encoder) int(v int64) { e.b = binary.AppendVarint(e.b, v) }

// decoder reads record fields; the first failure sticks and is reported by
// err, so callers check once at the end.
type decoder struct {
	b   []byte
	bad bool
}

func (d *decoder) bytes() []byte {
	n, k := binary.Uvarint(d.b)
	if k <= 0 || n > uint64(len(d.b)-k) {
		d.bad = true
		d.b = nil
		return nil
	}
	s := d.b[k : k+int(n)]
	d.b = d.b[k+int(n):]
	return s
}

func (d *decoder) int() int64 {
	v, k := binary.Varint(d.b)
	if k <= 0 {
		d.bad = true
		d.b = nil
		return 0
	}
	d.b = d.b[k:]
	return v
}

func (d *decoder) int32() int32 {
	v := d.int()
	if v < math.MinInt32 || v > math.MaxInt32 {
		d.bad = true
	}
	return int32(v)
}

// count reads a count of items. Every item takes at least two bytes, so a
// count beyond that is damage: no allocation follows a count the payload
// cannot hold.
func (d *decoder) count() int {
	n := d.int()
	if n < 0 || n > int64(len(d.b)/2) {
		d.bad = true
		return 0
	}
	return int(n)
}

func (d *decoder) err(typ byte) error {
	if d.bad {
		return fmt.Errorf("%w: record type %d: %v", ErrCorrupt, typ, errShortRecord)
	}
	if len(d.b) != 0 {
		return fmt.Errorf("%w: record type %d: %d trailing bytes", ErrCorrupt, typ, len(d.b))
	}
	return nil
}

func encodeCommit(dst []byte, group string, generation int32, commitTime int64, offsets []OffsetCommit) []byte {
	e := encoder{dst}
	e.string(group)
	e.int(int64(generation))
	e.int(commitTime)
	e.commitOffsets(offsets)
	return e.b
}

// commitOffsets writes the offsets of a commit or txn commit record.
func (e *encoder) commitOffsets(offsets []OffsetCommit) {
	e.int(int64(len(offsets)))
	for _, o := range offsets {
		e.string(o.Topic)
		e.int(int64(o.Partition))
		e.int(o.Offset)
		e.int(int64(o.LeaderEpoch))
		e.string(o.Metadata)
	}
}

func encodeTxnCommit(dst []byte, group string, producerID int64, producerEpoch int16, generation int32, commitTime int64, offsets []OffsetCommit) []byte {
	e := encoder{dst}
	e.string(group)
	e.int(producerID)
	e.int(int64(producerEpoch))
	e.int(int64(generation))
	e.int(commitTime)
	e.commitOffsets(offsets)
	return e.b
}

// encodeTxnOffsets writes what the txn end and snapshot txn records share:
// group, producer, then the offsets with their commit times (sorted, for
// records that read the same each time); a snapshot's (committed < 0) also
// with the index of the txn commit that wrote each and whether a commit
// came after it.
func encodeTxnOffsets(dst []byte, group string, producerID int64, producerEpoch int16, committed int64, offsets []txnOffset) []byte {
	e := encoder{dst}
	e.string(group)
	e.int(producerID)
	e.int(int64(producerEpoch))
	if committed >= 0 {
		e.int(committed)
	}
	e.int(int64(len(offsets)))
	for _, o := range offsets {
		e.string(o.Topic)
		e.int(int64(o.Partition))
		e.int(o.Offset.Offset)
		e.int(int64(o.Offset.LeaderEpoch))
		e.string(o.Offset.Metadata)
		e.int(o.Offset.CommitTime)
		if committed < 0 {
			e.int(int64(o.at))
			superseded := int64(0)
			if o.superseded {
				superseded = 1
			}
			e.int(superseded)
		}
	}
	return e.b
}

func encodeTxnEnd(dst []byte, group string, producerID int64, producerEpoch int16, commit bool, offsets []txnOffset) []byte {
	committed := int64(0)
	if commit {
		committed = 1
	}
	return encodeTxnOffsets(dst, group, producerID, producerEpoch, committed, offsets)
}

func encodeSnapTxn(dst []byte, group string, producerID int64, producerEpoch int16, offsets []txnOffset) []byte {
	return encodeTxnOffsets(dst, group, producerID, producerEpoch, -1, offsets)
}

func encodeDeleteOffsets(dst []byte, group string, keys []topicPartition) []byte {
	e := encoder{dst}
	e.string(group)
	e.int(int64(len(keys)))
	for _, k := range keys {
		e.string(k.Topic)
		e.int(int64(k.Partition))
	}
	return e.b
}

func encodeDeleteGroup(dst []byte, group string) []byte {
	e := encoder{dst}
	e.string(group)
	return e.b
}

func encodeGlobalRead(dst []byte, scope string, enabled bool) []byte {
	e := encoder{dst}
	e.string(scope)
	v := int64(0)
	if enabled {
		v = 1
	}
	e.int(v)
	return e.b
}

// snapHeader writes what both kinds of snapshot records start with.
func (e *encoder) snapHeader(group string, info cache.GroupInfo, capturedAt uint64) {
	e.string(group)
	e.int(int64(capturedAt))
	e.int(int64(info.Version))
	e.int(info.LastCommit)
	e.int(int64(info.Generation))
}

// snapHeader reads what encoder.snapHeader wrote.
func (r *recordView) snapHeader(d *decoder) {
	r.group = d.bytes()
	r.capturedAt = uint64(d.int())
	r.version = uint64(d.int())
	r.lastCommit = d.int()
	r.generation = d.int32()
}

func encodeSnapGroup(dst []byte, group string, info cache.GroupInfo, capturedAt uint64, entries []cache.Entry) []byte {
	e := encoder{dst}
	e.snapHeader(group, info, capturedAt)
	e.int(int64(len(entries)))
	for _, x := range entries {
		e.string(x.Topic)
		e.int(int64(x.Partition))
		e.int(x.Offset.Offset)
		e.int(int64(x.LeaderEpoch))
		e.string(x.Metadata)
		e.int(x.CommitTime)
	}
	return e.b
}

func encodeExpireGroups(dst []byte, groups []string) []byte {
	e := encoder{dst}
	e.int(int64(len(groups)))
	for _, g := range groups {
		e.string(g)
	}
	return e.b
}

// recordView is one record decoded in place: its byte slices alias the
// payload and its slices are reused from record to record, so decoding
// allocates nothing once warm. Replay, the live path and DecodeRecord all
// read records through it: there is one decoder for the format, and a
// record is checked whole before anything is applied.
type recordView struct {
	typ        byte
	group      []byte
	generation int32        // commit, snapshot group
	capturedAt uint64       // snapshot group: the log index the group was read at
	version    uint64       // snapshot group
	lastCommit int64        // snapshot group
	offsets    []offsetView // commit, snapshot group; delete offsets (topic and partition)
	groups     [][]byte     // expire groups
	scope      []byte       // global read
	enabled    bool         // global read
	mapping    []byte       // mapping, as JSON
	mds        [][]byte     // snapshot groups: the metadata table
	topics     []topicView  // snapshot groups: the topics, each a run of snap
	snap       []snapOffset // snapshot groups: the offsets
	sizes      [3]int       // snapshot sizes: groups, topics, keys
	producerID int64        // txn commit, txn end, snapshot txn
	producerEp int16        // txn commit, txn end, snapshot txn
	committed  bool         // txn end
}

type offsetView struct {
	topic       []byte
	partition   int32
	offset      int64
	leaderEpoch int32
	metadata    []byte
	commitTime  int64
	at          uint64 // snapshot txn: the index of the txn commit that wrote it
	superseded  bool   // snapshot txn: a commit of the partition came after it
}

func (r *recordView) decode(typ byte, payload []byte) error {
	d := decoder{b: payload}
	r.typ = typ
	r.offsets = r.offsets[:0]
	r.groups = r.groups[:0]
	r.topics = r.topics[:0]
	count := d.count
	switch typ {
	case recCommit:
		r.group = d.bytes()
		r.generation = d.int32()
		commitTime := d.int()
		r.readOffsets(&d, offsetsCommit, commitTime)
	case recSnapGroup:
		r.snapHeader(&d)
		r.readOffsets(&d, offsetsTimed, 0)
	case recSnapGroups:
		r.snapHeader(&d)
		r.decodeSnapGroups(&d)
	case recTxnCommit:
		r.group = d.bytes()
		r.producer(&d)
		r.generation = d.int32()
		commitTime := d.int()
		r.readOffsets(&d, offsetsCommit, commitTime)
	case recTxnEnd, recSnapTxn:
		r.group = d.bytes()
		r.producer(&d)
		r.committed = false
		if typ == recTxnEnd {
			on := d.int()
			if on != 0 && on != 1 {
				d.bad = true
			}
			r.committed = on == 1
		}
		layout := offsetsTimed
		if typ == recSnapTxn {
			layout = offsetsSnapTxn
		}
		r.readOffsets(&d, layout, 0)
		if typ == recTxnEnd && !r.committed && len(r.offsets) > 0 {
			d.bad = true // an abort makes nothing visible
		}
	case recSnapSizes:
		for i := range r.sizes {
			r.sizes[i] = int(d.int())
			if r.sizes[i] < 0 {
				d.bad = true
			}
		}
	case recDeleteOffsets:
		r.group = d.bytes()
		for range count() {
			o := offsetView{topic: d.bytes(), partition: d.int32()}
			if d.bad {
				break
			}
			r.offsets = append(r.offsets, o)
		}
	case recDeleteGroup:
		r.group = d.bytes()
	case recExpireGroups:
		for range count() {
			g := d.bytes()
			if d.bad {
				break
			}
			r.groups = append(r.groups, g)
		}
	case recGlobalRead:
		r.scope = d.bytes()
		on := d.int()
		if on != 0 && on != 1 {
			d.bad = true
		}
		r.enabled = on == 1
	case recMapping:
		if !json.Valid(payload) {
			return fmt.Errorf("%w: mapping record is not JSON", ErrCorrupt)
		}
		r.mapping = payload
		return nil
	default:
		return fmt.Errorf("%w: unknown record type %d", ErrCorrupt, typ)
	}
	return d.err(typ)
}

// offsetLayout is what each offset of a record holds beyond topic,
// partition, offset, leader epoch and metadata.
type offsetLayout int

const (
	offsetsCommit  offsetLayout = iota // nothing: the record's commit time is theirs
	offsetsTimed                       // its commit time
	offsetsSnapTxn                     // its commit time, txn commit index and superseded flag
)

// readOffsets reads a count of offsets of the given layout into r.offsets;
// those of offsetsCommit get commitTime.
func (r *recordView) readOffsets(d *decoder, layout offsetLayout, commitTime int64) {
	for range d.count() {
		o := offsetView{topic: d.bytes(), partition: d.int32(), offset: d.int(), leaderEpoch: d.int32(), metadata: d.bytes(), commitTime: commitTime}
		if layout >= offsetsTimed {
			o.commitTime = d.int()
		}
		if layout == offsetsSnapTxn {
			at, superseded := d.int(), d.int()
			if at < 0 || superseded < 0 || superseded > 1 {
				d.bad = true
			}
			o.at, o.superseded = uint64(at), superseded == 1
		}
		if d.bad {
			break
		}
		r.offsets = append(r.offsets, o)
	}
}

// producer reads a transactional record's producer id and epoch.
func (r *recordView) producer(d *decoder) {
	r.producerID = d.int()
	epoch := d.int()
	if epoch < 0 || epoch > math.MaxInt16 || r.producerID < 0 {
		d.bad = true
	}
	r.producerEp = int16(epoch)
}

// recordTypeNames name the record types for people.
var recordTypeNames = map[byte]string{
	recCommit:        "commit",
	recDeleteOffsets: "delete_offsets",
	recDeleteGroup:   "delete_group",
	recMapping:       "mapping",
	recGlobalRead:    "global_read",
	recSnapGroup:     "snapshot_group",
	recExpireGroups:  "expire_groups",
	recSnapGroups:    "snapshot_groups",
	recSnapSizes:     "snapshot_sizes",
	recTxnCommit:     "txn_commit",
	recTxnEnd:        "txn_end",
	recSnapTxn:       "snapshot_txn",
}

// RecordTypeName names a record type ("commit", "mapping", ...), or returns
// "" for a type offsetd does not write.
func RecordTypeName(typ byte) string { return recordTypeNames[typ] }

// Record is one log or snapshot record, decoded for tools that show a data
// directory (offsetd dump). Fields a type does not have are left empty.
type Record struct {
	Type       string          `json:"type"`
	Group      string          `json:"group,omitempty"`
	Groups     []string        `json:"groups,omitempty"`
	Generation *int32          `json:"generation,omitempty"`
	CapturedAt uint64          `json:"capturedAt,omitempty"`
	Version    uint64          `json:"version,omitempty"`
	LastCommit int64           `json:"lastCommit,omitempty"`
	Offsets    []RecordOffset  `json:"offsets,omitempty"`
	Scope      string          `json:"scope,omitempty"`
	Enabled    *bool           `json:"enabled,omitempty"`
	Mapping    json.RawMessage `json:"mapping,omitempty"`
	// Sizes are a snapshot's counts of groups, topics and keys.
	Sizes []int `json:"sizes,omitempty"`
	// ProducerID and ProducerEpoch name the transaction of a txn_commit,
	// txn_end or snapshot_txn record; Committed says whether a txn_end
	// committed its offsets (else it dropped them).
	ProducerID    *int64 `json:"producerId,omitempty"`
	ProducerEpoch *int16 `json:"producerEpoch,omitempty"`
	Committed     *bool  `json:"committed,omitempty"`
}

// RecordOffset is one offset of a Record; a delete names only the topic
// and partition.
type RecordOffset struct {
	Topic       string `json:"topic"`
	Partition   int32  `json:"partition"`
	Offset      *int64 `json:"offset,omitempty"`
	LeaderEpoch *int32 `json:"leaderEpoch,omitempty"`
	Metadata    string `json:"metadata,omitempty"`
	CommitTime  int64  `json:"commitTime,omitempty"`
	// TxnCommit and Superseded are a snapshot_txn offset's: the index of
	// the txn_commit that wrote it, and whether a commit of its partition
	// came after it (its marker then leaves the partition as it is).
	TxnCommit  uint64 `json:"txnCommit,omitempty"`
	Superseded bool   `json:"superseded,omitempty"`
}

// DecodeRecord decodes a record of a log or snapshot file, as read by
// log.Inspect or log.ReadSnapshotFile. Damage is an ErrCorrupt error.
func DecodeRecord(typ byte, payload []byte) (Record, error) {
	var v recordView
	if err := v.decode(typ, payload); err != nil {
		return Record{}, err
	}
	r := Record{Type: RecordTypeName(typ), Group: string(v.group), Scope: string(v.scope), CapturedAt: v.capturedAt, Version: v.version, LastCommit: v.lastCommit}
	switch typ {
	case recCommit, recSnapGroup, recSnapGroups:
		gen := v.generation
		r.Generation = &gen
	case recTxnCommit, recTxnEnd, recSnapTxn:
		id, epoch := v.producerID, v.producerEp
		r.ProducerID, r.ProducerEpoch = &id, &epoch
		if typ == recTxnCommit {
			gen := v.generation
			r.Generation = &gen
		}
		if typ == recTxnEnd {
			on := v.committed
			r.Committed = &on
		}
	case recSnapSizes:
		r.Sizes = v.sizes[:]
	case recGlobalRead:
		on := v.enabled
		r.Enabled = &on
	case recMapping:
		r.Mapping = json.RawMessage(v.mapping)
	}
	for _, g := range v.groups {
		r.Groups = append(r.Groups, string(g))
	}
	for _, tv := range v.topics {
		for _, o := range v.snap[tv.start:tv.end] {
			off, epoch := o.offset, o.epoch
			ro := RecordOffset{Topic: string(tv.name), Partition: o.partition, Offset: &off, LeaderEpoch: &epoch, CommitTime: o.commitTime}
			if o.md > 0 {
				ro.Metadata = string(v.mds[o.md-1])
			}
			r.Offsets = append(r.Offsets, ro)
		}
	}
	for _, o := range v.offsets {
		ro := RecordOffset{Topic: string(o.topic), Partition: o.partition}
		if typ != recDeleteOffsets {
			off, epoch := o.offset, o.leaderEpoch
			ro.Offset, ro.LeaderEpoch = &off, &epoch
			ro.Metadata, ro.CommitTime = string(o.metadata), o.commitTime
			ro.TxnCommit, ro.Superseded = o.at, o.superseded
		}
		r.Offsets = append(r.Offsets, ro)
	}
	return r, nil
}
