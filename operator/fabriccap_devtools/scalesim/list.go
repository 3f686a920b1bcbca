package main

// LIST: pages of one snapshot, continue tokens in the API server's own format, field
// selectors, and gzip above 128 KiB as the API server compresses (level 1) for clients that
// accept it (aiohttp does by default).

import (
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

const (
	gzipThresholdBytes = 128 * 1024
	gzipLevel          = 1
	flushEveryBytes    = 192 * 1024
)

type fieldRequirement struct {
	field, value string
	negate       bool
}

// parseFieldSelector reads "a=b,c!=d". Like the API server, a field the kind has no index
// for is a 400.
func parseFieldSelector(kind *Kind, text string) ([]fieldRequirement, error) {
	if text == "" {
		return nil, nil
	}
	var requirements []fieldRequirement
	for _, term := range strings.Split(text, ",") {
		var requirement fieldRequirement
		switch {
		case strings.Contains(term, "!="):
			parts := strings.SplitN(term, "!=", 2)
			requirement = fieldRequirement{parts[0], parts[1], true}
		case strings.Contains(term, "=="):
			parts := strings.SplitN(term, "==", 2)
			requirement = fieldRequirement{parts[0], parts[1], false}
		case strings.Contains(term, "="):
			parts := strings.SplitN(term, "=", 2)
			requirement = fieldRequirement{parts[0], parts[1], false}
		default:
			return nil, fmt.Errorf("invalid selector: %q", text)
		}
		switch requirement.field {
		case "metadata.name", "metadata.namespace":
		case "spec.nodeName":
			if kind.Resource != "pods" {
				return nil, fmt.Errorf("field label not supported: %s", requirement.field)
			}
		default:
			return nil, fmt.Errorf("field label not supported: %s", requirement.field)
		}
		requirements = append(requirements, requirement)
	}
	return requirements, nil
}

func matchesFields(object *Object, requirements []fieldRequirement) bool {
	for _, requirement := range requirements {
		var value string
		switch requirement.field {
		case "metadata.name":
			value = object.Name
		case "metadata.namespace":
			value = object.Namespace
		case "spec.nodeName":
			value = object.NodeName
		}
		if (value == requirement.value) == requirement.negate {
			return false
		}
	}
	return true
}

type continueToken struct {
	Version string `json:"v"`
	RV      uint64 `json:"rv"`
	Start   string `json:"start"`
}

func encodeContinue(rv uint64, lastKey string) string {
	body, _ := json.Marshal(continueToken{Version: "meta.k8s.io/v1", RV: rv, Start: "/" + lastKey + "\x00"})
	return base64.RawURLEncoding.EncodeToString(body)
}

func decodeContinue(token string) (uint64, string, error) {
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(token, "="))
	if err != nil {
		return 0, "", fmt.Errorf("continue key is not valid: %v", err)
	}
	var decoded continueToken
	if err := json.Unmarshal(raw, &decoded); err != nil {
		return 0, "", fmt.Errorf("continue key is not valid: %v", err)
	}
	if decoded.Version != "meta.k8s.io/v1" || !strings.HasPrefix(decoded.Start, "/") {
		return 0, "", fmt.Errorf("continue key is not valid: unknown version %q", decoded.Version)
	}
	return decoded.RV, strings.TrimPrefix(decoded.Start, "/"), nil
}

func (s *Server) list(w http.ResponseWriter, request *http.Request, found target, query url.Values) {
	kind := found.kind
	if kind.CountOnly {
		writeBody(w, http.StatusOK, []byte(`{"kind":"`+kind.Name+`List","apiVersion":"`+kind.APIVersion()+`","metadata":{"resourceVersion":"`+strconv.FormatUint(s.store.currentRV(), 10)+`"},"items":[]}`+"\n"))
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
	limit := 0
	if text := query.Get("limit"); text != "" {
		if limit, err = strconv.Atoi(text); err != nil || limit < 0 {
			writeStatus(w, http.StatusBadRequest, "BadRequest", fmt.Sprintf("invalid limit %q", text), nil)
			return
		}
	}
	now := time.Now()
	started := now
	var taken *snapshot
	startKey := ""
	if token := query.Get("continue"); token != "" {
		rv, key, err := decodeContinue(token)
		if err != nil {
			writeStatus(w, http.StatusBadRequest, "BadRequest", "invalid continue token: "+err.Error(), nil)
			return
		}
		if taken = s.store.snapshotAt(kind, rv); taken == nil {
			writeStatus(w, http.StatusGone, "Expired",
				"The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.",
				nil)
			return
		}
		startKey = key
	} else {
		s.store.mu.Lock()
		taken = s.store.snapshotNow(s.store.kindStore(kind), now)
		s.store.mu.Unlock()
	}
	low, high := 0, len(taken.objects)
	if found.namespace != "" {
		low, high = taken.namespaceRange(found.namespace)
	}
	position := low
	if startKey != "" {
		position = max(taken.indexOf(startKey), low)
	}
	var items []*Object
	for ; position < high; position++ {
		object := taken.objects[position]
		if !matchesFields(object, requirements) {
			continue
		}
		if limit > 0 && len(items) == limit {
			break
		}
		items = append(items, object)
	}
	metadata := `{"resourceVersion":"` + strconv.FormatUint(taken.rv, 10) + `"`
	if position < high && len(items) > 0 {
		metadata += `,"continue":"` + encodeContinue(taken.rv, items[len(items)-1].Key()) + `"`
		if len(requirements) == 0 {
			metadata += `,"remainingItemCount":` + strconv.Itoa(high-position)
		}
	}
	metadata += "}"

	out := newDeferredGzip(w, acceptsGzip(request))
	buffer := make([]byte, 0, flushEveryBytes+64*1024)
	buffer = append(buffer, `{"kind":"`+kind.Name+`List","apiVersion":"`+kind.APIVersion()+`","metadata":`+metadata+`,"items":[`...)
	for index, object := range items {
		if index > 0 {
			buffer = append(buffer, ',')
		}
		buffer = object.appendJSON(buffer, !kind.BuiltIn)
		if len(buffer) >= flushEveryBytes {
			if _, err := out.Write(buffer); err != nil {
				return // the client went away
			}
			buffer = buffer[:0]
		}
	}
	buffer = append(buffer, "]}\n"...)
	if _, err := out.Write(buffer); err != nil {
		return
	}
	written := out.Close()
	s.stats.listed(kind, len(items), written, time.Since(started), exempt(request))
}

func acceptsGzip(request *http.Request) bool {
	for _, part := range strings.Split(request.Header.Get("Accept-Encoding"), ",") {
		if strings.TrimSpace(strings.SplitN(part, ";", 2)[0]) == "gzip" {
			return true
		}
	}
	return false
}

var gzipWriters = sync.Pool{New: func() any {
	writer, _ := gzip.NewWriterLevel(nil, gzipLevel)
	return writer
}}

// deferredGzip holds the first 128 KiB of a response: a response that stays smaller goes out
// as it is, with a Content-Length; a larger one is gzipped when the client accepts it.
type deferredGzip struct {
	w         http.ResponseWriter
	gzipOK    bool
	pending   []byte
	committed bool
	zipper    *gzip.Writer
	total     int
}

func newDeferredGzip(w http.ResponseWriter, gzipOK bool) *deferredGzip {
	return &deferredGzip{w: w, gzipOK: gzipOK}
}

func (d *deferredGzip) Write(data []byte) (int, error) {
	d.total += len(data)
	if d.committed {
		return d.write(data)
	}
	d.pending = append(d.pending, data...)
	if len(d.pending) <= gzipThresholdBytes {
		return len(data), nil
	}
	d.committed = true
	header := d.w.Header()
	header.Set("Content-Type", "application/json")
	if d.gzipOK {
		header.Set("Content-Encoding", "gzip")
		header.Add("Vary", "Accept-Encoding")
		d.zipper = gzipWriters.Get().(*gzip.Writer)
		d.zipper.Reset(d.w)
	}
	d.w.WriteHeader(http.StatusOK)
	pending := d.pending
	d.pending = nil
	if _, err := d.write(pending); err != nil {
		return 0, err
	}
	return len(data), nil
}

func (d *deferredGzip) write(data []byte) (int, error) {
	if d.zipper != nil {
		return d.zipper.Write(data)
	}
	return d.w.Write(data)
}

// Close ends the response and returns the bytes of JSON written.
func (d *deferredGzip) Close() int {
	if !d.committed {
		writeBody(d.w, http.StatusOK, d.pending)
		return d.total
	}
	if d.zipper != nil {
		_ = d.zipper.Close()
		d.zipper.Reset(nil)
		gzipWriters.Put(d.zipper)
	}
	return d.total
}
