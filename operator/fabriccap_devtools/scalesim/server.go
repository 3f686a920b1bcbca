package main

// The API endpoint: routing Kubernetes paths to the store, the Status errors the API server
// answers with, and the gate every request passes first (an outage, a 429 storm).

import (
	"encoding/json"
	"fmt"
	"log"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Clients presenting this bearer token are the benchmark's own: faults spare them, as
// priority and fairness spares system:masters, and their watches are left out of the
// delivery figures (which are the operator's).
const exemptToken = "scalesim-bench"

type Server struct {
	store    *Store
	faults   *Faults
	stats    *Stats
	sink     *Sink
	reads    *ReadLag
	bookmark time.Duration // how often an idle watch gets a BOOKMARK (the watch cache: 1 min)

	unknownMu sync.Mutex
	unknown   map[string]bool
}

type target struct {
	kind        *Kind
	namespace   string
	name        string
	subresource string
}

func (t target) key() string {
	if t.kind.Namespaced {
		return t.namespace + "/" + t.name
	}
	return t.name
}

// parsePath reads /api/v1/... and /apis/<group>/<version>/... paths.
func parsePath(path string) (target, bool) {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	var group, version string
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		version, parts = parts[1], parts[2:]
	case len(parts) >= 4 && parts[0] == "apis":
		group, version, parts = parts[1], parts[2], parts[3:]
	default:
		return target{}, false
	}
	var namespace string
	if len(parts) >= 3 && parts[0] == "namespaces" {
		namespace, parts = parts[1], parts[2:]
	} else if len(parts) == 2 && parts[0] == "namespaces" && group == "" {
		// /api/v1/namespaces/<name>: a Namespace itself
		return target{kind: kindsByPath[groupVersionResource{"", version, "namespaces"}], name: parts[1]}, true
	}
	kind := kindsByPath[groupVersionResource{group, version, parts[0]}]
	if kind == nil || len(parts) > 3 || namespace != "" && !kind.Namespaced {
		return target{}, false
	}
	found := target{kind: kind, namespace: namespace}
	if len(parts) >= 2 {
		found.name = parts[1]
	}
	if len(parts) == 3 {
		found.subresource = parts[2]
		if found.subresource != "status" {
			return target{}, false
		}
	}
	return found, true
}

func exempt(request *http.Request) bool {
	return request.Header.Get("Authorization") == "Bearer "+exemptToken
}

func (s *Server) ServeHTTP(w http.ResponseWriter, request *http.Request) {
	if !exempt(request) {
		if s.faults.gate(w, request) { // held through an outage, or answered 429
			return
		}
	}
	path := request.URL.Path
	switch path {
	case "/version":
		writeJSON(w, http.StatusOK, map[string]string{
			"major": "1", "minor": "35", "gitVersion": "v1.35.4-scalesim", "platform": "linux/amd64",
		})
		return
	case "/healthz", "/readyz", "/livez":
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte("ok"))
		return
	}
	if request.Method == http.MethodGet && s.discovery(w, request) {
		return
	}
	found, ok := parsePath(path)
	if !ok {
		s.noteUnknown(request)
		writeStatus(w, http.StatusNotFound, "NotFound", "the server could not find the requested resource", nil)
		return
	}
	query := request.URL.Query()
	switch {
	case request.Method == http.MethodGet && found.name == "" && isTrue(query.Get("watch")):
		s.stats.request("WATCH", found, exempt(request))
		s.watch(w, request, found, query)
	case request.Method == http.MethodGet && found.name == "":
		s.stats.request("LIST", found, exempt(request))
		s.list(w, request, found, query)
	case request.Method == http.MethodGet:
		s.stats.request("GET", found, exempt(request))
		s.getObject(w, found, wantsMetadataOnly(request.Header.Get("Accept")))
	case request.Method == http.MethodPost && found.name == "":
		s.stats.request("POST", found, exempt(request))
		s.create(w, request, found)
	case request.Method == http.MethodPatch && found.name != "":
		s.stats.request("PATCH", found, exempt(request))
		s.patch(w, request, found)
	case request.Method == http.MethodPut && found.name != "":
		s.stats.request("PUT", found, exempt(request))
		s.update(w, request, found)
	case request.Method == http.MethodDelete && found.name != "":
		s.stats.request("DELETE", found, exempt(request))
		s.remove(w, request, found)
	default:
		writeStatus(w, http.StatusMethodNotAllowed, "MethodNotAllowed",
			fmt.Sprintf("the server does not allow this method on the requested resource (%s %s)", request.Method, path), nil)
	}
}

func (s *Server) noteUnknown(request *http.Request) {
	s.unknownMu.Lock()
	defer s.unknownMu.Unlock()
	key := request.Method + " " + request.URL.Path
	if !s.unknown[key] && len(s.unknown) < 1000 {
		s.unknown[key] = true
		log.Printf("not served: %s", key)
	}
}

func isTrue(value string) bool { return value == "true" || value == "1" }

func writeJSON(w http.ResponseWriter, code int, value any) {
	body, err := json.Marshal(value)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	writeBody(w, code, append(body, '\n'))
}

func writeBody(w http.ResponseWriter, code int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(code)
	_, _ = w.Write(body)
}

type statusDetails struct {
	Name              string `json:"name,omitempty"`
	Group             string `json:"group,omitempty"`
	Kind              string `json:"kind,omitempty"`
	RetryAfterSeconds int    `json:"retryAfterSeconds,omitempty"`
}

type apiStatus struct {
	Kind       string            `json:"kind"`
	APIVersion string            `json:"apiVersion"`
	Metadata   map[string]string `json:"metadata"`
	Status     string            `json:"status"`
	Message    string            `json:"message"`
	Reason     string            `json:"reason,omitempty"`
	Details    *statusDetails    `json:"details,omitempty"`
	Code       int               `json:"code"`
}

func newStatus(code int, reason, message string, details *statusDetails) apiStatus {
	return apiStatus{
		Kind: "Status", APIVersion: "v1", Metadata: map[string]string{}, Status: "Failure",
		Message: message, Reason: reason, Details: details, Code: code,
	}
}

func writeStatus(w http.ResponseWriter, code int, reason, message string, details *statusDetails) {
	writeJSON(w, code, newStatus(code, reason, message, details))
}

func notFound(w http.ResponseWriter, found target) {
	writeStatus(w, http.StatusNotFound, "NotFound",
		fmt.Sprintf("%s %q not found", found.kind.GroupResource(), found.name),
		&statusDetails{Name: found.name, Group: found.kind.Group, Kind: found.kind.Resource})
}

func (s *Server) getObject(w http.ResponseWriter, found target, metadataOnly bool) {
	object := s.store.get(found.kind, found.key())
	if object == nil {
		notFound(w, found)
		return
	}
	body := object.JSON(true)
	if metadataOnly {
		// The metadata's bytes as they are, not a decoded map encoded again: the API server
		// converts an object it holds decoded, and this answer must not cost the simulator
		// more than the whole object would.
		var parts struct {
			Metadata json.RawMessage `json:"metadata"`
		}
		if err := json.Unmarshal(body, &parts); err != nil {
			writeStatus(w, http.StatusInternalServerError, "InternalError", err.Error(), nil)
			return
		}
		partial := make([]byte, 0, len(parts.Metadata)+80)
		partial = append(partial, `{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":`...)
		body = append(append(partial, parts.Metadata...), '}')
	}
	writeBody(w, http.StatusOK, append(body, '\n'))
}

// wantsMetadataOnly: whether the client's first choice of media type is the object's metadata
// as meta.k8s.io/v1 PartialObjectMetadata in JSON (what client-go's metadata client asks for,
// and every kube-apiserver resource serves), rather than the whole object.
func wantsMetadataOnly(accept string) bool {
	first, _, _ := strings.Cut(accept, ",")
	parts := strings.Split(first, ";")
	params := map[string]string{}
	for _, part := range parts[1:] {
		key, value, _ := strings.Cut(strings.TrimSpace(part), "=")
		params[key] = value
	}
	return strings.TrimSpace(parts[0]) == "application/json" &&
		params["as"] == "PartialObjectMetadata" && params["g"] == "meta.k8s.io" && params["v"] == "v1"
}

// jitter returns a duration in [low, high).
func jitter(low, high time.Duration) time.Duration {
	return low + time.Duration(rand.Int64N(int64(high-low)))
}
