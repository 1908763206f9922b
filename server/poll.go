package server

import (
	"net/http"
	"strings"
	"time"
)

// version is one read of a pollable resource: its entity tag, the key its
// encoded body has in the response cache, and how to encode that body.
// The key must carry everything the body is derived from, the version
// included, so that the bytes under it never change. encode reports
// current=false when the resource has moved past this version since it was
// read (its body would not match the ETag); the poll then reads again.
type version struct {
	etag   string // quoted, as sent in the ETag header
	key    string
	encode func() (body []byte, current bool, err error)
}

// pollable is a resource that can be conditionally and long polled. watch
// returns a channel closed at the resource's next possible change (its
// group's next commit, say), maybe a second one (nil if none), and stop,
// which ends the watch; read returns its current version. A poll calls
// watch before read, so no change between them is missed.
type pollable struct {
	watch func() (changed, also <-chan struct{}, stop func(), err error)
	read  func() (version, error)
}

// servePolled answers a GET of a versioned resource: 200 with the body and
// its ETag, or 304 when If-None-Match names the current version. With
// ?wait= (capped at MaxWait) and If-None-Match, it holds the request until
// the version changes (200) or the wait ends (304).
func (s *Server) servePolled(w http.ResponseWriter, r *http.Request, wait time.Duration, p pollable) {
	inm := r.Header.Get("If-None-Match")
	if inm == "" {
		wait = 0
	}
	var timer *time.Timer
	stop := func() {}
	defer func() { stop() }()
	for {
		var changed, also <-chan struct{}
		if wait > 0 {
			stop()
			var err error
			if changed, also, stop, err = p.watch(); err != nil {
				stop = func() {}
				s.fail(w, r, err)
				return
			}
		}
		v, err := p.read()
		if err != nil {
			s.fail(w, r, err)
			return
		}
		if inm == "" || !etagMatches(inm, v.etag) {
			if s.writeVersion(w, r, v) {
				return
			}
			continue
		}
		if wait <= 0 {
			notModified(w, v.etag)
			return
		}
		if timer == nil {
			timer = time.NewTimer(wait)
			defer timer.Stop()
		}
		if s.pollWaiting != nil {
			s.pollWaiting()
		}
		select {
		case <-changed:
		case <-also:
		case <-timer.C:
			notModified(w, v.etag)
			return
		case <-s.closing:
			notModified(w, v.etag)
			return
		case <-r.Context().Done():
			return // the client is gone
		}
	}
}

// writeVersion answers 200 with v's body, from the response cache when it
// holds it. It returns false, writing nothing, when v is no longer current.
func (s *Server) writeVersion(w http.ResponseWriter, r *http.Request, v version) bool {
	body, ok := s.responses.Get(v.key)
	if s.responses != nil {
		s.metrics.cacheLookup(ok)
	}
	if !ok {
		b, current, err := v.encode()
		if err != nil {
			s.fail(w, r, err)
			return true
		}
		if !current {
			return false
		}
		body = b
		if s.encoded != nil {
			s.encoded()
		}
		s.responses.Set(v.key, body)
	}
	h := w.Header()
	h["Etag"] = []string{v.etag}
	h["Cache-Control"] = noCache
	h["Content-Type"] = jsonContentType
	w.Write(body)
	return true
}

// noCache is the Cache-Control header's value of every polled answer,
// shared like jsonContentType.
var noCache = []string{"no-cache"}

func notModified(w http.ResponseWriter, etag string) {
	h := w.Header()
	h["Etag"] = []string{etag}
	h["Cache-Control"] = noCache
	w.WriteHeader(http.StatusNotModified)
}

// etagMatches reports whether an If-None-Match header names etag, with the
// weak comparison RFC 9110 prescribes for it. "*" matches any current
// version; an unquoted tag is accepted as if quoted, for clients that send
// the bare version.
func etagMatches(header, etag string) bool {
	for tag := range strings.SplitSeq(header, ",") {
		tag = strings.TrimSpace(tag)
		tag = strings.TrimPrefix(tag, "W/")
		if tag == "*" || tag == etag || `"`+tag+`"` == etag {
			return true
		}
	}
	return false
}
