package wire

import (
	"strconv"
	"unicode/utf8"
)

const hex = "0123456789abcdef"

// AppendString appends s as a JSON string, escaped as encoding/json
// escapes it: quotes, backslashes and control characters; <, > and & (for
// HTML); U+2028 and U+2029; and each byte of invalid UTF-8 as U+FFFD.
func AppendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' && b != '<' && b != '>' && b != '&' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case c == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case c == '\u2028' || c == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[c&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// Offset is a committed offset as the API shows it: the body of a point
// fetch, and one element of a group's offsets. CommitTime is in Unix
// milliseconds. Its tags give encoding/json the same shape.
type Offset struct {
	Topic       string `json:"topic"`
	Partition   int32  `json:"partition"`
	Offset      int64  `json:"offset"`
	LeaderEpoch int32  `json:"leaderEpoch"`
	Metadata    string `json:"metadata"`
	CommitTime  int64  `json:"commitTime"`
}

// AppendOffset appends o as the JSON object
// {"topic":…,"partition":…,"offset":…,"leaderEpoch":…,"metadata":…,"commitTime":…}.
func AppendOffset(dst []byte, o Offset) []byte {
	dst = append(dst, `{"topic":`...)
	dst = AppendString(dst, o.Topic)
	dst = append(dst, `,"partition":`...)
	dst = strconv.AppendInt(dst, int64(o.Partition), 10)
	dst = append(dst, `,"offset":`...)
	dst = strconv.AppendInt(dst, o.Offset, 10)
	dst = append(dst, `,"leaderEpoch":`...)
	dst = strconv.AppendInt(dst, int64(o.LeaderEpoch), 10)
	dst = append(dst, `,"metadata":`...)
	dst = AppendString(dst, o.Metadata)
	dst = append(dst, `,"commitTime":`...)
	dst = strconv.AppendInt(dst, o.CommitTime, 10)
	return append(dst, '}')
}

// AppendVersion appends the answer to a commit, {"version":v}.
func AppendVersion(dst []byte, v uint64) []byte {
	dst = append(dst, `{"version":`...)
	dst = strconv.AppendUint(dst, v, 10)
	return append(dst, '}')
}

// ETag is the entity tag of a group's version: the number, quoted, as the
// server sends it and a poller names it in If-None-Match. One allocation.
func ETag(v uint64) string {
	var b [24]byte
	return string(append(strconv.AppendUint(append(b[:0], '"'), v, 10), '"'))
}

// AppendCommitStart appends the start of a commit's body, up to the first
// offset: {"generation":g,"offsets":[. AppendCommitOffset appends each
// offset (first says whether it is the first), AppendCommitEnd closes it.
func AppendCommitStart(dst []byte, generation int32) []byte {
	dst = append(dst, `{"generation":`...)
	dst = strconv.AppendInt(dst, int64(generation), 10)
	return append(dst, `,"offsets":[`...)
}

// AppendGroupCommitStart appends the start of one commit in the body of a
// batch of commits, up to its first offset:
// {"group":"g","generation":g,"offsets":[. Its offsets and its end are
// those of a commit's body.
func AppendGroupCommitStart(dst []byte, group string, generation int32) []byte {
	dst = append(dst, `{"group":`...)
	dst = AppendString(dst, group)
	dst = append(dst, `,"generation":`...)
	dst = strconv.AppendInt(dst, int64(generation), 10)
	return append(dst, `,"offsets":[`...)
}

// AppendCommitOffset appends one offset of a commit's body; an empty
// metadata is left out.
func AppendCommitOffset(dst []byte, first bool, topic string, partition int32, offset int64, leaderEpoch int32, metadata string) []byte {
	if !first {
		dst = append(dst, ',')
	}
	dst = append(dst, `{"topic":`...)
	dst = AppendString(dst, topic)
	dst = append(dst, `,"partition":`...)
	dst = strconv.AppendInt(dst, int64(partition), 10)
	dst = append(dst, `,"offset":`...)
	dst = strconv.AppendInt(dst, offset, 10)
	dst = append(dst, `,"leaderEpoch":`...)
	dst = strconv.AppendInt(dst, int64(leaderEpoch), 10)
	if metadata != "" {
		dst = append(dst, `,"metadata":`...)
		dst = AppendString(dst, metadata)
	}
	return append(dst, '}')
}

// AppendCommitEnd closes a commit's body.
func AppendCommitEnd(dst []byte) []byte { return append(dst, "]}"...) }
