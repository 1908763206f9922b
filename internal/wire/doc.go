// Package wire encodes and decodes the JSON bodies of offsetd's hot HTTP
// paths (a commit, a point fetch, a group's offsets) without reflection,
// for the server and the Go client alike.
//
// The encoders write the bytes encoding/json writes for the same values,
// so that a body does not depend on which path produced it. The Decoder
// reads only a plain subset of JSON (no escapes in strings, no null, no
// fraction or exponent in numbers, no key it was not asked about): on
// anything else it fails, and the caller decodes the body again with
// encoding/json, which accepts it or explains what is wrong with it. So
// the fast path never decides what is valid; it only skips the slow one
// for the bodies that clients actually send.
//
//	d := wire.NewDecoder(body)
//	d.Open('{')
//	for n := 0; d.Next('}', n); n++ {
//		switch string(d.Key()) {
//		case "version":
//			v = d.Uint()
//		default:
//			d.Fail()
//		}
//	}
//	if !d.End() {
//		// decode body with encoding/json instead
//	}
package wire
