package server

import (
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// query is a request's query string, checked against the parameters a
// route knows: an unknown or repeated parameter is bad input, so that a
// typo is not silently ignored.
type query struct {
	v url.Values
}

func parseQuery(r *http.Request, known ...string) (query, *apiError) {
	if r.URL.RawQuery == "" {
		return query{}, nil
	}
	v, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return query{}, errorf(http.StatusBadRequest, codeInvalidArgument, "bad query string: %v", err)
	}
	for k, vals := range v {
		if !slices.Contains(known, k) {
			return query{}, errorf(http.StatusBadRequest, codeInvalidArgument, "unknown query parameter %q (known: %s)", k, strings.Join(known, ", "))
		}
		if len(vals) > 1 && k != "partition" {
			return query{}, errorf(http.StatusBadRequest, codeInvalidArgument, "query parameter %q given %d times", k, len(vals))
		}
		for _, s := range vals {
			if !utf8.ValidString(s) {
				return query{}, errorf(http.StatusBadRequest, codeInvalidArgument, "query parameter %q is not valid UTF-8", k)
			}
		}
	}
	return query{v: v}, nil
}

func (q query) has(name string) bool { return q.v.Has(name) }

// str returns a parameter that must be present and non-empty.
func (q query) str(name string) (string, *apiError) {
	s := q.v.Get(name)
	if s == "" {
		return "", errorf(http.StatusBadRequest, codeInvalidArgument, "query parameter %q is required", name)
	}
	return s, nil
}

func (q query) int64(name string) (int64, *apiError) {
	s, e := q.str(name)
	if e != nil {
		return 0, e
	}
	return parseInt(name, s, math.MinInt64, math.MaxInt64)
}

func (q query) int32(name string) (int32, *apiError) {
	s, e := q.str(name)
	if e != nil {
		return 0, e
	}
	v, e := parseInt(name, s, math.MinInt32, math.MaxInt32)
	return int32(v), e
}

// int32s returns every value of a repeatable parameter.
func (q query) int32s(name string) ([]int32, *apiError) {
	var out []int32
	for _, s := range q.v[name] {
		v, e := parseInt(name, s, math.MinInt32, math.MaxInt32)
		if e != nil {
			return nil, e
		}
		out = append(out, int32(v))
	}
	return out, nil
}

func parseInt(name, s string, lo, hi int64) (int64, *apiError) {
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < lo || v > hi {
		return 0, errorf(http.StatusBadRequest, codeInvalidArgument, "%s %q is not an integer in [%d, %d]", name, s, lo, hi)
	}
	return v, nil
}

// wait returns the ?wait= of a long poll (0 when absent), capped at limit.
func (q query) wait(limit time.Duration) (time.Duration, *apiError) {
	if !q.has("wait") {
		return 0, nil
	}
	s := q.v.Get("wait")
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, errorf(http.StatusBadRequest, codeInvalidArgument, "wait %q is not a duration such as 30s", s)
	}
	return min(d, limit), nil
}
