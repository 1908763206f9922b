package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/valyala/bytebufferpool"
)

// decodeBody reads r's body, at most opts.MaxBodyBytes, and decodes it
// strictly into dst: one JSON value, valid UTF-8, no unknown fields, no
// trailing data, every number fitting its field. (encoding/json would
// quietly replace invalid UTF-8 and ignore unknown fields.)
func (s *Server) decodeBody(w http.ResponseWriter, r *http.Request, dst any) *apiError {
	buf, e := s.readBody(w, r)
	if e != nil {
		return e
	}
	// encoding/json copies what it keeps (strings, RawMessage).
	defer bytebufferpool.Put(buf)
	return decodeJSON(buf.B, dst)
}

func decodeJSON(body []byte, dst any) *apiError {
	if len(bytes.TrimSpace(body)) == 0 {
		return errorf(http.StatusBadRequest, codeMalformedJSON, "empty request body, want a JSON object")
	}
	if !utf8.Valid(body) {
		return errorf(http.StatusBadRequest, codeMalformedJSON, "request body is not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return jsonError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return errorf(http.StatusBadRequest, codeMalformedJSON, "trailing data after the JSON object at byte %d", dec.InputOffset())
	}
	if e := checkSurrogates(body); e != nil {
		return e
	}
	return checkKeys(body, keysOf(reflect.TypeOf(dst)))
}

// checkSurrogates rejects a \u escape of a lone UTF-16 surrogate (\ud800
// not followed by \udc00-\udfff, or a \udc00 on its own). It is no
// character: encoding/json decodes it to U+FFFD, so two different names
// would land on one key. body is valid JSON, so a backslash is always an
// escape inside a string.
func checkSurrogates(body []byte) *apiError {
	for i := 0; i < len(body); i++ {
		if body[i] != '\\' {
			continue
		}
		if i+1 < len(body) && body[i+1] != 'u' {
			i++ // \\, \" and the like
			continue
		}
		r := hex4(body, i+2)
		switch {
		case r >= 0xd800 && r <= 0xdbff:
			if i+11 < len(body) && body[i+6] == '\\' && body[i+7] == 'u' {
				if lo := hex4(body, i+8); lo >= 0xdc00 && lo <= 0xdfff {
					i += 11
					continue
				}
			}
		case r >= 0xdc00 && r <= 0xdfff:
		default:
			i += 5
			continue
		}
		return errorf(http.StatusBadRequest, codeInvalidArgument,
			"string escape %s at byte %d is a lone UTF-16 surrogate, not a character (it would be stored as U+FFFD)", body[i:i+6], i)
	}
	return nil
}

// hex4 returns the value of the four hex digits at b[i:], or -1.
func hex4(b []byte, i int) int {
	if i+4 > len(b) {
		return -1
	}
	v, err := strconv.ParseUint(string(b[i:i+4]), 16, 16)
	if err != nil {
		return -1
	}
	return int(v)
}

// fieldKeys are the object keys a request type accepts.
type fieldKeys struct {
	names      map[string]bool
	numericKey bool // a map with integer keys
	anyKey     bool // a map with string keys
}

var keysCache sync.Map // reflect.Type → *fieldKeys

// keysOf collects the JSON names of every struct field reachable from t.
func keysOf(t reflect.Type) *fieldKeys {
	if k, ok := keysCache.Load(t); ok {
		return k.(*fieldKeys)
	}
	k := &fieldKeys{names: map[string]bool{}}
	seen := map[reflect.Type]bool{}
	var walk func(reflect.Type)
	walk = func(t reflect.Type) {
		if seen[t] {
			return
		}
		seen[t] = true
		switch t.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Array:
			walk(t.Elem())
		case reflect.Map:
			switch t.Key().Kind() {
			case reflect.String:
				k.anyKey = true
			default:
				k.numericKey = true
			}
			walk(t.Elem())
		case reflect.Struct:
			for f := range t.Fields() {
				name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
				if name == "" && f.Anonymous {
					walk(f.Type) // encoding/json promotes its fields
					continue
				}
				if name == "-" || !f.IsExported() {
					continue
				}
				if name == "" {
					name = f.Name
				}
				k.names[name] = true
				walk(f.Type)
			}
		}
	}
	walk(t)
	keysCache.Store(t, k)
	return k
}

// checkKeys rejects what encoding/json lets through: an object key that
// matches a field only case-insensitively ("Offset" for "offset"), and a
// key given twice in one object (encoding/json keeps the last).
func checkKeys(body []byte, keys *fieldKeys) *apiError {
	if keys.anyKey {
		return nil
	}
	type frame struct {
		object, wantKey bool
		seen            map[string]bool
	}
	var stack []frame
	valueDone := func() {
		if n := len(stack); n > 0 && stack[n-1].object {
			stack[n-1].wantKey = true
		}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil // io.EOF; syntax errors were reported by Decode
		}
		if n := len(stack); n > 0 && stack[n-1].object && stack[n-1].wantKey {
			if tok == json.Delim('}') {
				stack = stack[:n-1]
				valueDone()
				continue
			}
			key, _ := tok.(string)
			if !keys.names[key] {
				if _, err := strconv.ParseInt(key, 10, 64); !keys.numericKey || err != nil {
					return errorf(http.StatusBadRequest, codeUnknownField, "unknown field %q (names are case-sensitive)", key)
				}
			}
			if stack[n-1].seen[key] {
				return errorf(http.StatusBadRequest, codeMalformedJSON, "field %q given twice in one object", key)
			}
			stack[n-1].seen[key] = true
			stack[n-1].wantKey = false
			continue
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, frame{object: true, wantKey: true, seen: map[string]bool{}})
		case json.Delim('['):
			stack = append(stack, frame{})
		case json.Delim(']'):
			stack = stack[:len(stack)-1]
			valueDone()
		default:
			valueDone()
		}
	}
}

// jsonError explains a decoding error of encoding/json.
func jsonError(err error) *apiError {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syntax):
		return errorf(http.StatusBadRequest, codeMalformedJSON, "malformed JSON at byte %d: %v", syntax.Offset, err)
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return errorf(http.StatusBadRequest, codeMalformedJSON, "truncated JSON")
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			field = "the request"
		}
		return errorf(http.StatusBadRequest, codeWrongType, "%s: JSON %s does not fit %s", field, typ.Value, typ.Type)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return errorf(http.StatusBadRequest, codeUnknownField, "unknown field %s", strings.TrimPrefix(err.Error(), "json: unknown field "))
	}
	return errorf(http.StatusBadRequest, codeMalformedJSON, "malformed JSON: %v", err)
}

func missing(field string) *apiError {
	return errorf(http.StatusBadRequest, codeMissingField, "missing field %q", field)
}
