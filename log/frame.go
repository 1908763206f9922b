package log

import (
	"encoding/binary"
	"hash/crc32"
)

// The frame format; see the package documentation. These constants are
// part of the on-disk format: they never change.
const (
	frameRecord  = 1                          // version of a frame holding one record (format 1, read only)
	frameBatch   = 2                          // version of a frame holding one batch of records
	frameHeader  = 2                          // version byte, type byte
	frameTrailer = 4                          // crc32c, little endian
	minFrameSize = frameHeader + frameTrailer // a frame with an empty payload

	// batchType is the type byte of a batch frame that carries no journal
	// tag (written without Options.JournalID, and before it existed);
	// taggedBatchType that of one whose payload starts with the tag.
	batchType       = 1
	taggedBatchType = 2
	batchTagSize    = 8
)

// castagnoli is the CRC32C table; crc32 recognises it and uses the CPU's
// CRC32 instruction where there is one.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// appendFrame appends a frame of the given version and type to dst.
func appendFrame(dst []byte, version, typ byte, payload []byte) []byte {
	start := len(dst)
	dst = append(dst, version, typ)
	dst = append(dst, payload...)
	return binary.LittleEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
}

// sealFrame appends the checksum to a frame whose version, type and payload
// were appended to dst from start on.
func sealFrame(dst []byte, start int) []byte {
	return binary.LittleEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
}

// frameSize is the length of the frame of a payload of n bytes.
func frameSize(n int) int { return n + minFrameSize }

// frame is one decoded frame; payload aliases the bytes it was read from.
type frame struct {
	version byte
	typ     byte
	payload []byte
}

// decodeFrame checks one frame and returns it. The checksum is checked
// first, so that a frame of a future version with an intact checksum is
// reported as such.
func decodeFrame(b []byte) (frame, error) {
	if len(b) < minFrameSize {
		return frame{}, errFrameShort
	}
	body := b[:len(b)-frameTrailer]
	if crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(b[len(body):]) {
		return frame{}, errFrameCRC
	}
	switch {
	case body[0] != frameRecord && body[0] != frameBatch:
		return frame{}, errFrameVersion
	case body[1] == 0, body[0] == frameBatch && body[1] != batchType && body[1] != taggedBatchType:
		return frame{}, errFrameType
	}
	return frame{version: body[0], typ: body[1], payload: body[frameHeader:]}, nil
}

// uvarintLen is the length of x as a uvarint.
func uvarintLen(x uint64) int {
	n := 1
	for ; x >= 0x80; x >>= 7 {
		n++
	}
	return n
}
