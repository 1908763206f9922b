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
	got := appendFrame(nil, 7, []byte("abc"))
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
	valid := appendFrame(nil, 3, []byte("payload"))
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
		{"empty payload", appendFrame(nil, 255, nil), 255, []byte{}, nil},
		{"nil", nil, 0, nil, errFrameShort},
		{"five bytes", valid[:5], 0, nil, errFrameShort},
		{"zeros", make([]byte, 16), 0, nil, errFrameCRC},
		{"truncated", valid[:len(valid)-1], 0, nil, errFrameCRC},
		{"extended", append(bytes.Clone(valid), 0), 0, nil, errFrameCRC},
		{"flipped version", flip(0), 0, nil, errFrameCRC},
		{"flipped type", flip(1), 0, nil, errFrameCRC},
		{"flipped payload", flip(4), 0, nil, errFrameCRC},
		{"flipped crc", flip(len(valid) - 1), 0, nil, errFrameCRC},
		{"version 2", withCRC([]byte{2, 3, 'x'}), 0, nil, errFrameVersion},
		{"version 0", withCRC([]byte{0, 3, 'x'}), 0, nil, errFrameVersion},
		{"type 0", withCRC([]byte{1, 0, 'x'}), 0, nil, errFrameType},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			typ, payload, err := decodeFrame(tt.frame)
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
		frame := appendFrame(bytes.Clone(prefix), typ, payload)
		if !bytes.Equal(frame[:len(prefix)], prefix) {
			t.Fatalf("appendFrame changed the bytes before it")
		}
		frame = frame[len(prefix):]
		if len(frame) != frameSize(len(payload)) {
			t.Fatalf("frame is %d bytes, frameSize says %d", len(frame), frameSize(len(payload)))
		}
		gotType, gotPayload, err := decodeFrame(frame)
		if err != nil || gotType != typ || !bytes.Equal(gotPayload, payload) {
			t.Fatalf("decodeFrame = %d, %q, %v; want %d, %q", gotType, gotPayload, err, typ, payload)
		}
		// CRC-32C detects every burst of up to 32 bits, so any flip of
		// one to eight bits within one byte is caught.
		i := rapid.IntRange(0, len(frame)-1).Draw(t, "byte")
		mask := rapid.ByteRange(1, 255).Draw(t, "mask")
		frame[i] ^= mask
		if _, _, err := decodeFrame(frame); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("flipping byte %d with %#x: err = %v, want ErrCorrupt", i, mask, err)
		}
	})
}

// FuzzDecodeFrame feeds arbitrary bytes: decodeFrame never panics, and
// what it accepts is exactly what appendFrame writes for its result.
func FuzzDecodeFrame(f *testing.F) {
	f.Add(appendFrame(nil, 1, nil))
	f.Add(appendFrame(nil, 9, []byte("group/topic/0 offset 42")))
	f.Add([]byte{})
	f.Add(make([]byte, 6))
	f.Add([]byte{1, 1, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		typ, payload, err := decodeFrame(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v is not ErrCorrupt", err)
			}
			return
		}
		if re := appendFrame(nil, typ, payload); !bytes.Equal(re, b) {
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
		orig := appendFrame(nil, typ, payload)
		frame := bytes.Clone(orig)
		frame[int(at)%len(frame)] ^= mask
		frame = frame[:len(frame)-int(cut)%len(frame)]
		frame = append(frame, tail...)
		gotType, gotPayload, err := decodeFrame(frame)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v is not ErrCorrupt", err)
			}
			return
		}
		if !bytes.Equal(frame, orig) || gotType != typ || !bytes.Equal(gotPayload, payload) {
			t.Fatalf("damaged frame % x accepted as type %d payload %q (original % x)", frame, gotType, gotPayload, orig)
		}
	})
}
