package log

import (
	"encoding/binary"
	"hash/crc32"
)

// The frame format; see the package documentation. These constants are
// part of the on-disk format: they never change.
const (
	frameVersion = 1                          // the only version written or read
	frameHeader  = 2                          // version byte, type byte
	frameTrailer = 4                          // crc32c, little endian
	minFrameSize = frameHeader + frameTrailer // a frame with an empty payload
)

// castagnoli is the CRC32C table; crc32 recognises it and uses the CPU's
// CRC32 instruction where there is one.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// appendFrame appends the frame of one entry to dst.
func appendFrame(dst []byte, typ byte, payload []byte) []byte {
	start := len(dst)
	dst = append(dst, frameVersion, typ)
	dst = append(dst, payload...)
	return binary.LittleEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
}

// frameSize is the length of the frame of a payload of n bytes.
func frameSize(n int) int { return n + minFrameSize }

// decodeFrame checks one frame and returns its type and payload, which
// alias b. The checksum is checked first, so that a frame from a future
// format version with an intact checksum is reported as such.
func decodeFrame(b []byte) (typ byte, payload []byte, err error) {
	if len(b) < minFrameSize {
		return 0, nil, errFrameShort
	}
	body := b[:len(b)-frameTrailer]
	if crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(b[len(body):]) {
		return 0, nil, errFrameCRC
	}
	if body[0] != frameVersion {
		return 0, nil, errFrameVersion
	}
	if body[1] == 0 {
		return 0, nil, errFrameType
	}
	return body[1], body[frameHeader:], nil
}
