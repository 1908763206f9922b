package log

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"

	"pgregory.net/rapid"
)

func TestFrameLayout(t *testing.T) {
	// Pin the format: these bytes must decode the same forever. The
	// checksum was computed independently (bitwise CRC-32C, poly 0x82F63B78).
	got := appendFrame(nil, frameRecord, 7, []byte("abc"))
	want := []byte{1, 7, 'a', 'b', 'c'}
	want = binary.LittleEndian.AppendUint32(want, crc32.Checksum(want, crc32.MakeTable(crc32.Castagnoli)))
	if !bytes.Equal(got, want) {
		t.Fatalf("appendFrame = % x, want % x", got, want)
	}
	if want := []byte{0x01, 0x07, 0x61, 0x62, 0x63, 0x9e, 0x3d, 0x4c, 0x32}; !bytes.Equal(got, want) {
		t.Fatalf("appendFrame = % x, want the pinned % x", got, want)
	}
}

func TestDecodeFrame(t *testing.T) {
	valid := appendFrame(nil, frameRecord, 3, []byte("payload"))
	withCRC := func(b []byte) []byte { // a frame whose checksum is right for its bytes
		return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
	}
	flip := func(i int) []byte {
		b := bytes.Clone(valid)
		b[i] ^= 0x10
		return b
	}
	tests := []struct {
		name    string
		frame   []byte
		typ     byte
		payload []byte
		err     error
	}{
		{"valid", valid, 3, []byte("payload"), nil},
		{"empty payload", appendFrame(nil, frameRecord, 255, nil), 255, []byte{}, nil},
		{"batch", appendFrame(nil, frameBatch, batchType, []byte("b")), batchType, []byte("b"), nil},
		{"nil", nil, 0, nil, errFrameShort},
		{"five bytes", valid[:5], 0, nil, errFrameShort},
		{"zeros", make([]byte, 16), 0, nil, errFrameCRC},
		{"truncated", valid[:len(valid)-1], 0, nil, errFrameCRC},
		{"extended", append(bytes.Clone(valid), 0), 0, nil, errFrameCRC},
		{"flipped version", flip(0), 0, nil, errFrameCRC},
		{"flipped type", flip(1), 0, nil, errFrameCRC},
		{"flipped payload", flip(4), 0, nil, errFrameCRC},
		{"flipped crc", flip(len(valid) - 1), 0, nil, errFrameCRC},
		{"version 3", withCRC([]byte{3, 3, 'x'}), 0, nil, errFrameVersion},
		{"batch of type 3", withCRC([]byte{2, 3, 'x'}), 0, nil, errFrameType},
		{"version 0", withCRC([]byte{0, 3, 'x'}), 0, nil, errFrameVersion},
		{"type 0", withCRC([]byte{1, 0, 'x'}), 0, nil, errFrameType},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := decodeFrame(tt.frame)
			typ, payload := f.typ, f.payload
			if err != tt.err {
				t.Fatalf("err = %v, want %v", err, tt.err)
			}
			if err != nil {
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("%v is not ErrCorrupt", err)
				}
				return
			}
			if typ != tt.typ || !bytes.Equal(payload, tt.payload) {
				t.Fatalf("got type %d payload %q, want %d %q", typ, payload, tt.typ, tt.payload)
			}
		})
	}
}

func TestFrameRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		typ := rapid.Byte().Filter(func(b byte) bool { return b != 0 }).Draw(t, "type")
		payload := rapid.SliceOfN(rapid.Byte(), 0, 300).Draw(t, "payload")
		prefix := rapid.SliceOfN(rapid.Byte(), 0, 8).Draw(t, "prefix")
		frame := appendFrame(bytes.Clone(prefix), frameRecord, typ, payload)
		if !bytes.Equal(frame[:len(prefix)], prefix) {
			t.Fatalf("appendFrame changed the bytes before it")
		}
		frame = frame[len(prefix):]
		if len(frame) != frameSize(len(payload)) {
			t.Fatalf("frame is %d bytes, frameSize says %d", len(frame), frameSize(len(payload)))
		}
		got, err := decodeFrame(frame)
		if err != nil || got.typ != typ || !bytes.Equal(got.payload, payload) {
			t.Fatalf("decodeFrame = %d, %q, %v; want %d, %q", got.typ, got.payload, err, typ, payload)
		}
		// CRC-32C detects every burst of up to 32 bits, so any flip of
		// one to eight bits within one byte is caught.
		i := rapid.IntRange(0, len(frame)-1).Draw(t, "byte")
		mask := rapid.ByteRange(1, 255).Draw(t, "mask")
		frame[i] ^= mask
		if _, err := decodeFrame(frame); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("flipping byte %d with %#x: err = %v, want ErrCorrupt", i, mask, err)
		}
	})
}

// FuzzDecodeFrame feeds arbitrary bytes: decodeFrame never panics, and
// what it accepts is exactly what appendFrame writes for its result.
func FuzzDecodeFrame(f *testing.F) {
	f.Add(appendFrame(nil, frameRecord, 1, nil))
	f.Add(appendFrame(nil, frameRecord, 9, []byte("group/topic/0 offset 42")))
	f.Add(appendBatchFrame(nil, 0, 5, []Entry{{Partition: 3, Type: 1, Payload: []byte("x")}}))
	f.Add(appendBatchFrame(nil, 77, 5, []Entry{{Partition: 3, Type: 1, Payload: []byte("x")}}))
	f.Add([]byte{})
	f.Add(make([]byte, 6))
	f.Add([]byte{1, 1, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := decodeFrame(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v is not ErrCorrupt", err)
			}
			return
		}
		if re := appendFrame(nil, got.version, got.typ, got.payload); !bytes.Equal(re, b) {
			t.Fatalf("accepted % x, which re-encodes as % x", b, re)
		}
	})
}

// FuzzDecodeFrameMutation damages a valid frame (flips bits, cuts it,
// extends it): the result is rejected, or decodes to exactly the original
// when the damage was no change at all.
func FuzzDecodeFrameMutation(f *testing.F) {
	f.Add(byte(1), []byte("payload"), uint16(0), byte(1), uint16(0), []byte(nil))
	f.Add(byte(200), []byte{}, uint16(5), byte(0x80), uint16(1), []byte{0})
	f.Add(byte(7), []byte("x"), uint16(2), byte(0), uint16(0), []byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, typ byte, payload []byte, at uint16, mask byte, cut uint16, tail []byte) {
		if typ == 0 {
			typ = 1
		}
		orig := appendFrame(nil, frameRecord, typ, payload)
		frame := bytes.Clone(orig)
		frame[int(at)%len(frame)] ^= mask
		frame = frame[:len(frame)-int(cut)%len(frame)]
		frame = append(frame, tail...)
		got, err := decodeFrame(frame)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v is not ErrCorrupt", err)
			}
			return
		}
		if !bytes.Equal(frame, orig) || got.typ != typ || !bytes.Equal(got.payload, payload) {
			t.Fatalf("damaged frame % x accepted as type %d payload %q (original % x)", frame, got.typ, got.payload, orig)
		}
	})
}
