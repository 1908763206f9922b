package client

import (
	"fmt"
	"reflect"
	"unicode/utf8"
)

// checkUTF8 refuses a call with a string that is not valid UTF-8 (a lone
// UTF-16 surrogate in WTF-8, say): encoding/json would send each bad byte
// as U+FFFD, so the server would store another name than the caller's, and
// two different names could land on one key. The server applies the same
// rule to what it receives.
func checkUTF8(req call) error {
	for _, seg := range req.path.list() {
		if !utf8.ValidString(seg) {
			return fmt.Errorf("%w: path segment %q is not valid UTF-8", ErrInvalid, seg)
		}
	}
	for k, vs := range req.query {
		for _, v := range vs {
			if !utf8.ValidString(k) || !utf8.ValidString(v) {
				return fmt.Errorf("%w: query parameter %q=%q is not valid UTF-8", ErrInvalid, k, v)
			}
		}
	}
	if s, ok := invalidString(reflect.ValueOf(req.body)); ok {
		return fmt.Errorf("%w: %q in the request is not valid UTF-8", ErrInvalid, s)
	}
	return nil
}

// invalidString returns the first string reachable from v that is not
// valid UTF-8, map keys included.
func invalidString(v reflect.Value) (string, bool) {
	switch v.Kind() {
	case reflect.String:
		if s := v.String(); !utf8.ValidString(s) {
			return s, true
		}
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			return invalidString(v.Elem())
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			if s, ok := invalidString(v.Index(i)); ok {
				return s, true
			}
		}
	case reflect.Map:
		for it := v.MapRange(); it.Next(); {
			if s, ok := invalidString(it.Key()); ok {
				return s, true
			}
			if s, ok := invalidString(it.Value()); ok {
				return s, true
			}
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				if s, ok := invalidString(v.Field(i)); ok {
					return s, true
				}
			}
		}
	}
	return "", false
}
