package main

// WATCH: chunked JSON lines from a resourceVersion, BOOKMARKs, 410 Gone for versions the
// history no longer has, and streaming lists (sendInitialEvents=true: the current objects as
// ADDED events, then a BOOKMARK annotated k8s.io/initial-events-end, as Kubernetes 1.27+).
//
// Each watch reads its kind's history itself, in batches, and flushes after each batch (the
// API server flushes when its watcher's channel is empty). The time from a change's commit
// to the flush that carried it is the change's delivery latency, recorded per kind for the
// operator's watches (not the benchmark's own).

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

const (
	watchBatch = 1000
	// The watch cache sends a last BOOKMARK this long before a watch's timeout.
	finalBookmarkLead = 2 * time.Second
)

func (s *Server) watch(w http.ResponseWriter, request *http.Request, found target, query url.Values) {
	kind := found.kind
	if kind.CountOnly {
		writeStatus(w, http.StatusMethodNotAllowed, "MethodNotAllowed", "scalesim does not watch "+kind.Resource, nil)
		return
	}
	if query.Get("labelSelector") != "" {
		writeStatus(w, http.StatusBadRequest, "BadRequest", "scalesim serves no labelSelector", nil)
		return
	}
	requirements, err := parseFieldSelector(kind, query.Get("fieldSelector"))
	if err != nil {
		writeStatus(w, http.StatusBadRequest, "BadRequest", err.Error(), nil)
		return
	}
	bookmarks := isTrue(query.Get("allowWatchBookmarks"))
	initialEvents := query.Get("sendInitialEvents")
	versionMatch := query.Get("resourceVersionMatch")
	if initialEvents != "" && versionMatch != "NotOlderThan" {
		writeStatus(w, http.StatusUnprocessableEntity, "Invalid",
			`ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan`, nil)
		return
	}
	if isTrue(initialEvents) && !bookmarks {
		writeStatus(w, http.StatusUnprocessableEntity, "Invalid",
			`ListOptions.meta.k8s.io "" is invalid: allowWatchBookmarks: Forbidden: sendInitialEvents requires setting allowWatchBookmarks to true`, nil)
		return
	}
	if initialEvents == "" && versionMatch != "" {
		writeStatus(w, http.StatusUnprocessableEntity, "Invalid",
			`ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided`, nil)
		return
	}
	timeout := jitter(30*time.Minute, 60*time.Minute) // the API server's default: minRequestTimeout x [1, 2)
	if text := query.Get("timeoutSeconds"); text != "" {
		seconds, err := strconv.Atoi(text)
		if err != nil || seconds < 0 {
			writeStatus(w, http.StatusBadRequest, "BadRequest", fmt.Sprintf("invalid timeoutSeconds %q", text), nil)
			return
		}
		timeout = time.Duration(seconds) * time.Second
	}
	version := query.Get("resourceVersion")
	// Legacy semantics: no version (or "0") starts with the current objects as ADDED events.
	sendInitial := isTrue(initialEvents) || initialEvents == "" && (version == "" || version == "0")
	var cursor uint64
	if !sendInitial {
		if cursor, err = strconv.ParseUint(version, 10, 64); err != nil {
			writeStatus(w, http.StatusBadRequest, "BadRequest", fmt.Sprintf("invalid resourceVersion %q", version), nil)
			return
		}
	}
	started := time.Now()
	var initial []*Object
	if sendInitial {
		s.store.mu.Lock()
		taken := s.store.snapshotNow(s.store.kindStore(kind), started)
		s.store.mu.Unlock()
		cursor = taken.rv
		low, high := 0, len(taken.objects)
		if found.namespace != "" {
			low, high = taken.namespaceRange(found.namespace)
		}
		initial = taken.objects[low:high]
	}

	exemptClient := exempt(request)
	s.stats.watchOpened(kind, exemptClient)
	defer s.stats.watchClosed(kind, exemptClient)
	var reads *readTracker
	if conn, ok := request.Context().Value(connKey{}).(net.Conn); ok && !exemptClient && s.reads != nil {
		if reads = s.reads.track(conn, kind); reads != nil {
			defer s.reads.untrack(reads)
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	controller := http.NewResponseController(w)
	_ = controller.Flush()
	out := bufio.NewWriterSize(w, 64*1024)
	flush := func() bool {
		if out.Flush() != nil || controller.Flush() != nil {
			return false
		}
		return true
	}
	line := make([]byte, 0, 64*1024)
	for _, object := range initial {
		if found.namespace != "" && object.Namespace != found.namespace || !matchesFields(object, requirements) {
			continue
		}
		line = appendEvent(line[:0], "ADDED", object)
		if _, err := out.Write(line); err != nil {
			return
		}
	}
	initial = nil
	if isTrue(initialEvents) {
		line = appendBookmark(line[:0], kind, cursor, true)
		if _, err := out.Write(line); err != nil {
			return
		}
	}
	if !flush() {
		return
	}
	if sendInitial {
		s.stats.initialStreamed(kind, time.Since(started), exemptClient)
	}

	deadline := started.Add(timeout)
	nextBookmark := started.Add(s.bookmark)
	finalBookmarkSent := false
	latencies := make([]time.Duration, 0, watchBatch)
	for {
		if !exemptClient && s.faults.inOutage() {
			panic(http.ErrAbortHandler) // a partition: the stream breaks mid-way
		}
		outage, closing := s.faults.channels()
		events, tooOld, wake, storeRV := s.store.eventsAfter(kind, cursor, watchBatch)
		if tooOld {
			line = appendTooOld(line[:0], cursor, s.store.oldestRV(kind))
			_, _ = out.Write(line)
			flush()
			return
		}
		if len(events) > 0 {
			delivered := events[:0]
			for _, event := range events {
				cursor = event.RV
				object := event.Object
				if found.namespace != "" && object.Namespace != found.namespace || !matchesFields(object, requirements) {
					continue
				}
				line = appendEvent(line[:0], event.Type, object)
				if !exemptClient && s.faults.takeMalformed(kind) {
					line = append(line[:len(line)/2], '\n') // half an event: not JSON
				}
				if _, err := out.Write(line); err != nil {
					return
				}
				delivered = append(delivered, event)
			}
			if !flush() {
				return
			}
			if !exemptClient && len(delivered) > 0 {
				sent := time.Now()
				latencies = latencies[:0]
				for _, event := range delivered {
					latencies = append(latencies, sent.Sub(event.At))
					if event.Probe != 0 {
						s.stats.probeDelivered(event.Probe, sent)
					}
				}
				s.stats.delivered(kind, latencies)
				if reads != nil {
					reads.sent(delivered)
				}
			}
			continue
		}
		cursor = max(cursor, storeRV) // nothing of this kind up to the store's version
		now := time.Now()
		if !now.Before(deadline) {
			return // timeoutSeconds: a clean end of the stream
		}
		if bookmarks {
			finalDue := !finalBookmarkSent && deadline.Sub(now) <= finalBookmarkLead
			if finalDue || !now.Before(nextBookmark) {
				finalBookmarkSent = finalBookmarkSent || finalDue
				line = appendBookmark(line[:0], kind, cursor, false)
				if _, err := out.Write(line); err != nil || !flush() {
					return
				}
				nextBookmark = now.Add(s.bookmark)
			}
		}
		wakeAt := deadline
		if bookmarks {
			wakeAt = minTime(wakeAt, nextBookmark)
			if !finalBookmarkSent {
				wakeAt = minTime(wakeAt, deadline.Add(-finalBookmarkLead))
			}
		}
		timer := time.NewTimer(max(wakeAt.Sub(now), time.Millisecond))
		select {
		case <-wake:
		case <-timer.C:
		case <-request.Context().Done():
			timer.Stop()
			return
		case <-outage:
			if !exemptClient {
				panic(http.ErrAbortHandler)
			}
		case <-closing:
			timer.Stop()
			return
		}
		timer.Stop()
	}
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func appendEvent(dst []byte, eventType string, object *Object) []byte {
	dst = append(dst, `{"type":"`...)
	dst = append(dst, eventType...)
	dst = append(dst, `","object":`...)
	dst = object.appendJSON(dst, true)
	return append(dst, "}\n"...)
}

func appendBookmark(dst []byte, kind *Kind, rv uint64, initialEventsEnd bool) []byte {
	dst = append(dst, `{"type":"BOOKMARK","object":{"kind":"`+kind.Name+`","apiVersion":"`+kind.APIVersion()+`","metadata":{"resourceVersion":"`...)
	dst = strconv.AppendUint(dst, rv, 10)
	dst = append(dst, '"')
	if initialEventsEnd {
		dst = append(dst, `,"annotations":{"k8s.io/initial-events-end":"true"}`...)
	}
	return append(dst, "}}}\n"...)
}

func appendTooOld(dst []byte, requested, oldest uint64) []byte {
	return fmt.Appendf(dst, `{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: %d (%d)","reason":"Expired","code":410}}`+"\n", requested, oldest)
}
