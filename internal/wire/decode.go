package wire

import (
	"math"
	"unicode/utf8"
)

// Decoder reads one JSON value of a shape its caller knows, from the plain
// subset of JSON the package comment describes. Its first failure sticks:
// every later read returns a zero value, Next returns false, and End
// reports false. It allocates nothing: strings are returned as slices of
// the body.
type Decoder struct {
	b   []byte
	i   int
	bad bool
}

// NewDecoder returns a Decoder of body.
func NewDecoder(body []byte) Decoder { return Decoder{b: body} }

// Fail makes the decoding fail: the caller met a key or value it does not
// take.
func (d *Decoder) Fail() { d.bad = true }

// OK reports whether nothing has failed yet.
func (d *Decoder) OK() bool { return !d.bad }

// End reports whether the value was read whole, without a failure, and
// only whitespace follows it.
func (d *Decoder) End() bool {
	d.space()
	return !d.bad && d.i == len(d.b)
}

func (d *Decoder) space() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// peek returns the next byte after whitespace, or 0 at the end.
func (d *Decoder) peek() byte {
	d.space()
	if d.bad || d.i == len(d.b) {
		return 0
	}
	return d.b[d.i]
}

// Open reads the opening '{' or '[' of an object or array.
func (d *Decoder) Open(c byte) {
	if d.peek() != c {
		d.bad = true
		return
	}
	d.i++
}

// Next moves to the element after the n-th of the object or array that
// close ends ('}' or ']'), reading the comma between them. It returns
// false at the end of the object or array (whose close it reads) or on a
// failure.
func (d *Decoder) Next(close byte, n int) bool {
	c := d.peek()
	switch {
	case d.bad:
		return false
	case c == close:
		d.i++
		return false
	case n == 0:
		return true
	case c == ',':
		d.i++
		return true
	}
	d.bad = true
	return false
}

// Key reads an object's key and the colon after it.
func (d *Decoder) Key() []byte {
	k := d.String()
	if d.peek() != ':' {
		d.bad = true
		return nil
	}
	d.i++
	return k
}

// String reads a string without escapes, in valid UTF-8, and returns its
// bytes, which alias the body.
func (d *Decoder) String() []byte {
	if d.peek() != '"' {
		d.bad = true
		return nil
	}
	start := d.i + 1
	ascii := true
	for i := start; i < len(d.b); i++ {
		switch c := d.b[i]; {
		case c == '"':
			s := d.b[start:i]
			if !ascii && !utf8.Valid(s) {
				d.bad = true
				return nil
			}
			d.i = i + 1
			return s
		case c == '\\' || c < 0x20:
			d.bad = true
			return nil
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	d.bad = true
	return nil
}

// Int reads an integer in [lo, hi]: no fraction, no exponent.
func (d *Decoder) Int(lo, hi int64) int64 {
	neg := d.peek() == '-'
	if neg {
		d.i++
	}
	u, ok := d.digits()
	limit := uint64(hi)
	if neg {
		limit = uint64(-(lo + 1)) + 1
	}
	if !ok || u > limit {
		d.bad = true
		return 0
	}
	if neg {
		return -int64(u) // -2^63 too: the conversion and the negation wrap
	}
	return int64(u)
}

// Uint reads a non-negative integer.
func (d *Decoder) Uint() uint64 {
	d.space()
	u, ok := d.digits()
	if !ok {
		d.bad = true
		return 0
	}
	return u
}

// Int32 reads an integer that fits an int32.
func (d *Decoder) Int32() int32 { return int32(d.Int(math.MinInt32, math.MaxInt32)) }

// Int64 reads an integer that fits an int64.
func (d *Decoder) Int64() int64 { return d.Int(math.MinInt64, math.MaxInt64) }

// digits reads the digits of a JSON integer: no leading zero, and no
// fraction or exponent after them.
func (d *Decoder) digits() (uint64, bool) {
	if d.bad {
		return 0, false
	}
	start := d.i
	var u uint64
	for d.i < len(d.b) && d.b[d.i] >= '0' && d.b[d.i] <= '9' {
		c := uint64(d.b[d.i] - '0')
		if u > (math.MaxUint64-c)/10 {
			return 0, false
		}
		u = u*10 + c
		d.i++
	}
	switch n := d.i - start; {
	case n == 0, n > 1 && d.b[start] == '0':
		return 0, false
	}
	if d.i < len(d.b) {
		switch d.b[d.i] {
		case '.', 'e', 'E':
			return 0, false
		}
	}
	return u, true
}

// Offset reads an Offset. The offsets of one answer mostly share their
// topic and metadata: prev's strings (the offset read before, or zero) are
// reused when they are equal, so only new names are allocated.
func (d *Decoder) Offset(prev Offset) Offset {
	var o Offset
	d.Open('{')
	for n := 0; d.Next('}', n); n++ {
		switch string(d.Key()) {
		case "topic":
			o.Topic = Intern(d.String(), prev.Topic)
		case "partition":
			o.Partition = d.Int32()
		case "offset":
			o.Offset = d.Int64()
		case "leaderEpoch":
			o.LeaderEpoch = d.Int32()
		case "metadata":
			o.Metadata = Intern(d.String(), prev.Metadata)
		case "commitTime":
			o.CommitTime = d.Int64()
		default:
			d.Fail()
		}
	}
	return o
}

// Names makes the strings of the names in one body: a name read again (the
// topic that many commits of a batch share, their metadata) is the string
// made the first time it was read, not a new copy. It keeps up to
// namesKept names, each in the slot a quick hash of its length and a few
// of its bytes picks: a name costs one compare, and a name whose slot
// another took is only made anew. The zero value is ready to use.
type Names struct {
	kept [namesKept]string
}

// namesKept is how many names a Names holds at most (a power of two).
const namesKept = 64

// String returns b as a string, the one made before if b is the name its
// slot holds.
func (n *Names) String(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	h := uint32(len(b)) ^ uint32(b[0])<<8 ^ uint32(b[len(b)/2])<<16 ^ uint32(b[len(b)-1])<<24
	slot := &n.kept[(h*0x9e3779b1)>>(32-6)&(namesKept-1)]
	if string(b) == *slot {
		return *slot
	}
	*slot = string(b)
	return *slot
}

// Intern returns b as a string: prev if they are equal, without
// allocating.
func Intern(b []byte, prev string) string {
	if string(b) == prev {
		return prev
	}
	return string(b)
}
