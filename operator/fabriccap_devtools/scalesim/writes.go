package main

// Writes through the API: create, merge patch, update and delete, with the API server's
// rules the operator relies on (status subresource, generation, no-op writes that change
// nothing and make no event, resourceVersion preconditions, 409 on an existing name). The
// writes the operator makes are also the sink's: counted, and FabricCapability statuses
// logged with their arrival time for the benchmark's latency.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"
)

const maxBodyBytes = 16 << 20

func managerOf(request *http.Request) string {
	// The writer's fieldManager when it names one, as the API server records it; else the
	// User-Agent's product, as the API server defaults it.
	if manager := request.URL.Query().Get("fieldManager"); manager != "" {
		if len(manager) > 128 {
			manager = manager[:128]
		}
		return manager
	}
	agent := request.Header.Get("User-Agent")
	if agent == "" {
		return "unknown"
	}
	if slash := strings.Index(agent, "/"); slash > 0 {
		agent = agent[:slash]
	}
	if len(agent) > 128 {
		agent = agent[:128]
	}
	return agent
}

func readDocument(w http.ResponseWriter, request *http.Request) (document, bool) {
	raw, err := io.ReadAll(io.LimitReader(request.Body, maxBodyBytes+1))
	if err != nil || len(raw) > maxBodyBytes {
		writeStatus(w, http.StatusRequestEntityTooLarge, "RequestEntityTooLarge", "the request body is too large or unreadable", nil)
		return nil, false
	}
	body, err := decodeDocument(raw)
	if err != nil {
		writeStatus(w, http.StatusBadRequest, "BadRequest", "the body of the request is not a JSON object: "+err.Error(), nil)
		return nil, false
	}
	return body, true
}

// storedObject turns a prepared body into a stored object: kind and apiVersion dropped for
// built-in kinds, the resourceVersion a hole.
func storedObject(kind *Kind, body document, serial uint64, created string) (*Object, error) {
	metadata := childMap(body, "metadata")
	metadata["resourceVersion"] = "@@RV@@"
	if kind.BuiltIn {
		delete(body, "kind")
		delete(body, "apiVersion")
	} else {
		body["kind"], body["apiVersion"] = kind.Name, kind.APIVersion()
	}
	name, _ := metadata["name"].(string)
	namespace, _ := metadata["namespace"].(string)
	template, err := compileTemplate(kind.Resource+"/"+name, kind, encodeDocument(body), true)
	if err != nil {
		return nil, err
	}
	if kind.Resource == "nodes" {
		template.topology = topologyOf(body)
	}
	return &Object{
		Name: name, Namespace: namespace, NodeName: stringAt(body, "spec", "nodeName"),
		Serial: serial, Created: created, Template: template,
	}, nil
}

func (s *Server) create(w http.ResponseWriter, request *http.Request, found target) {
	body, ok := readDocument(w, request)
	if !ok {
		return
	}
	if found.kind.Namespaced && found.namespace == "" {
		writeStatus(w, http.StatusNotFound, "NotFound", "the server could not find the requested resource", nil)
		return
	}
	if found.kind.CountOnly {
		s.recordCountOnly(w, found, body)
		return
	}
	object, failure := s.createDocument(found.kind, found.namespace, body, managerOf(request), time.Now())
	if failure != nil {
		writeJSON(w, failure.Code, failure)
		return
	}
	s.sink.wrote("create", found.kind, "", object, !exempt(request))
	writeBody(w, http.StatusCreated, append(object.JSON(true), '\n'))
}

// createDocument stores a new object as the API server would: name (or generateName),
// server metadata, defaults, managedFields; a name that exists is a 409.
func (s *Server) createDocument(kind *Kind, namespace string, body document, manager string, now time.Time) (*Object, *apiStatus) {
	if given, _ := body["kind"].(string); given != "" && given != kind.Name {
		failure := newStatus(http.StatusBadRequest, "BadRequest", fmt.Sprintf("the kind %q does not match %q", given, kind.Name), nil)
		return nil, &failure
	}
	metadata := childMap(body, "metadata")
	name, _ := metadata["name"].(string)
	if name == "" {
		if prefix, _ := metadata["generateName"].(string); prefix != "" {
			name = prefix + randomSuffix()
		}
	}
	if name == "" {
		failure := newStatus(http.StatusUnprocessableEntity, "Invalid", kind.Name+" is invalid: metadata.name: Required value: name or generateName is required", nil)
		return nil, &failure
	}
	if kind.Namespaced {
		if given, _ := metadata["namespace"].(string); given != "" && given != namespace {
			failure := newStatus(http.StatusBadRequest, "BadRequest", "the namespace of the provided object does not match the namespace sent on the request", nil)
			return nil, &failure
		}
		metadata["namespace"] = namespace
	} else {
		delete(metadata, "namespace")
	}
	metadata["name"] = name
	created := now.UTC().Format(time.RFC3339)
	metadata["uid"] = newUID()
	metadata["creationTimestamp"] = created
	delete(metadata, "resourceVersion")
	delete(metadata, "managedFields")
	if kind.Generation {
		metadata["generation"] = jsonNumber(1)
	}
	if kind.Resource == "pods" {
		defaultPod(body)
	}
	recordManager(body, manager, kind.APIVersion(), "", created, managedFieldsOf(body, false, kind.Resource == "pods"))
	switch {
	case kind.Resource == "pods":
		var topology map[string]string
		if node := s.store.get(kindByResource("nodes"), stringAt(body, "spec", "nodeName")); node != nil {
			topology = node.Template.topology
		}
		admitPod(body, topology, false)
	case kind.Resource == "nodes":
		admitNode(body) // nodes register with their status
	case kind.Resource == "namespaces":
		body["status"] = document{"phase": "Active"}
		childMap(body, "spec")["finalizers"] = []any{"kubernetes"}
	case kind.StatusSubresource:
		delete(body, "status") // the others start without, or with their CRD's default
		if kind.StatusDefault != nil {
			status, err := decodeDocument(kind.StatusDefault)
			if err != nil {
				failure := newStatus(http.StatusInternalServerError, "InternalError", err.Error(), nil)
				return nil, &failure
			}
			body["status"] = status
		}
	}

	key := name
	if kind.Namespaced {
		key = namespace + "/" + name
	}
	s.store.mu.Lock()
	defer s.store.mu.Unlock()
	if existing := s.store.kinds[kind].slots[key]; existing != nil {
		failure := newStatus(http.StatusConflict, "AlreadyExists", fmt.Sprintf("%s %q already exists", kind.GroupResource(), name),
			&statusDetails{Name: name, Group: kind.Group, Kind: kind.Resource})
		return nil, &failure
	}
	object, err := storedObject(kind, body, s.store.nextSerial(), created)
	if err != nil {
		failure := newStatus(http.StatusInternalServerError, "InternalError", err.Error(), nil)
		return nil, &failure
	}
	s.store.commit("ADDED", object, now, 0)
	return object, nil
}

func jsonNumber(value int64) any { return json.Number(strconv.FormatInt(value, 10)) }

// recordCountOnly acknowledges an Event: a version, no storage; a name seen before is a 409.
func (s *Server) recordCountOnly(w http.ResponseWriter, found target, body document) {
	metadata := childMap(body, "metadata")
	found.name, _ = metadata["name"].(string)
	if found.name == "" {
		if prefix, _ := metadata["generateName"].(string); prefix != "" {
			found.name = prefix + randomSuffix()
		}
	}
	metadata["name"], metadata["namespace"], metadata["uid"] = found.name, found.namespace, newUID()
	metadata["creationTimestamp"] = time.Now().UTC().Format(time.RFC3339)
	s.store.mu.Lock()
	names := s.store.kinds[found.kind].names
	if _, seen := names[found.key()]; seen {
		s.store.mu.Unlock()
		writeStatus(w, http.StatusConflict, "AlreadyExists", fmt.Sprintf("%s %q already exists", found.kind.GroupResource(), found.name), nil)
		return
	}
	if len(names) < 1_000_000 {
		names[found.key()] = struct{}{}
	}
	rv := s.store.bumpRV()
	s.store.mu.Unlock()
	childMap(body, "metadata")["resourceVersion"] = strconv.FormatUint(rv, 10)
	s.sink.countEvent()
	writeBody(w, http.StatusCreated, append(encodeDocument(body), '\n'))
}

// modify reads the current object, lets change rewrite it, and stores the result unless it
// changed nothing. A concurrent write in between makes it start over, as an API server's
// optimistic concurrency would for an unconditional write.
func (s *Server) modify(w http.ResponseWriter, request *http.Request, found target, change func(document) (document, error)) {
	kind := found.kind
	if kind.CountOnly {
		notFound(w, found)
		return
	}
	for attempt := 0; attempt < 10; attempt++ {
		current := s.store.get(kind, found.key())
		if current == nil {
			notFound(w, found)
			return
		}
		currentJSON := current.JSON(true)
		body, err := decodeDocument(currentJSON)
		if err != nil {
			writeStatus(w, http.StatusInternalServerError, "InternalError", err.Error(), nil)
			return
		}
		before := encodeDocument(withoutKeys(body, "metadata"))
		beforeMetadata := encodeDocument(withoutKeys(childMap(body, "metadata"), "managedFields", "resourceVersion"))
		beforeSpec := encodeDocument(withoutKeys(body, "metadata", "status"))
		serverFields := document{}
		for _, field := range []string{"name", "namespace", "uid", "creationTimestamp"} {
			if value, ok := childMap(body, "metadata")[field]; ok {
				serverFields[field] = value
			}
		}
		updated, err := change(body)
		if err != nil {
			if conflict, ok := err.(conflictError); ok {
				writeStatus(w, http.StatusConflict, "Conflict", conflict.message(kind, found.name), &statusDetails{Name: found.name, Group: kind.Group, Kind: kind.Resource})
				return
			}
			writeStatus(w, http.StatusUnprocessableEntity, "Invalid", err.Error(), nil)
			return
		}
		metadata := childMap(updated, "metadata")
		for field, value := range serverFields { // what the server owns stays the server's
			metadata[field] = value
		}
		delete(metadata, "resourceVersion")
		if bytes.Equal(encodeDocument(withoutKeys(updated, "metadata")), before) &&
			bytes.Equal(encodeDocument(withoutKeys(metadata, "managedFields", "resourceVersion")), beforeMetadata) {
			writeBody(w, http.StatusOK, append(currentJSON, '\n')) // a no-op: no new version, no event
			return
		}
		if kind.Generation && !bytes.Equal(encodeDocument(withoutKeys(updated, "metadata", "status")), beforeSpec) {
			generation, _ := strconv.ParseInt(fmt.Sprint(metadata["generation"]), 10, 64)
			metadata["generation"] = jsonNumber(generation + 1)
		}
		now := time.Now()
		subresource := found.subresource
		// A write to the main resource of a kind with a status subresource owns no status
		// field (the API server ignores its status): else the operator's own label PATCH would
		// read as a foreign writer of its status, and it would stop writing (a "write war").
		recordManager(updated, managerOf(request), kind.APIVersion(), subresource, now.UTC().Format(time.RFC3339),
			managedFieldsOf(updated, subresource == "status", subresource == "" && kind.StatusSubresource))
		object, err := storedObject(kind, updated, current.Serial, current.Created)
		if err != nil {
			writeStatus(w, http.StatusInternalServerError, "InternalError", err.Error(), nil)
			return
		}
		s.store.mu.Lock()
		if latest := s.store.kinds[kind].slots[found.key()]; latest == nil || latest.object != current {
			s.store.mu.Unlock()
			continue // changed meanwhile: read it again
		}
		s.store.commit("MODIFIED", object, now, 0)
		s.store.mu.Unlock()
		s.sink.wrote("update", kind, subresource, object, !exempt(request))
		writeBody(w, http.StatusOK, append(object.JSON(true), '\n'))
		return
	}
	writeStatus(w, http.StatusConflict, "Conflict", "the object kept changing", nil)
}

type conflictError struct{}

func (conflictError) Error() string { return "conflict" }

func (conflictError) message(kind *Kind, name string) string {
	return fmt.Sprintf("Operation cannot be fulfilled on %s %q: the object has been modified; please apply your changes to the latest version and try again", kind.GroupResource(), name)
}

// checkPrecondition: a resourceVersion in the request must be the current one.
func checkPrecondition(requested document, current document) error {
	wanted := stringAt(requested, "metadata", "resourceVersion")
	if wanted != "" && wanted != stringAt(current, "metadata", "resourceVersion") {
		return conflictError{}
	}
	return nil
}

func (s *Server) patch(w http.ResponseWriter, request *http.Request, found target) {
	mediaType, _, _ := mime.ParseMediaType(request.Header.Get("Content-Type"))
	if mediaType != "application/merge-patch+json" {
		writeStatus(w, http.StatusUnsupportedMediaType, "UnsupportedMediaType",
			fmt.Sprintf("scalesim serves merge patches only (application/merge-patch+json), not %q", mediaType), nil)
		return
	}
	patchBody, ok := readDocument(w, request)
	if !ok {
		return
	}
	s.modify(w, request, found, func(current document) (document, error) {
		if err := checkPrecondition(patchBody, current); err != nil {
			return nil, err
		}
		switch {
		case found.subresource == "status":
			if status, present := patchBody["status"]; present {
				current["status"] = mergePatch(current["status"], status)
			}
			return current, nil
		case found.kind.StatusSubresource:
			return mergePatch(current, withoutKeys(patchBody, "status")).(document), nil
		default:
			return mergePatch(current, patchBody).(document), nil
		}
	})
}

func (s *Server) update(w http.ResponseWriter, request *http.Request, found target) {
	replacement, ok := readDocument(w, request)
	if !ok {
		return
	}
	s.modify(w, request, found, func(current document) (document, error) {
		if err := checkPrecondition(replacement, current); err != nil {
			return nil, err
		}
		switch {
		case found.subresource == "status":
			if status, present := replacement["status"]; present {
				current["status"] = status
			} else {
				delete(current, "status")
			}
			return current, nil
		case found.kind.StatusSubresource:
			if status, present := current["status"]; present {
				replacement["status"] = status
			} else {
				delete(replacement, "status")
			}
		}
		// The server's metadata is kept; the rest of the object is the request's.
		replacementMetadata := childMap(replacement, "metadata")
		currentMetadataMap := childMap(current, "metadata")
		for _, field := range []string{"generation", "managedFields"} {
			if value, ok := currentMetadataMap[field]; ok {
				replacementMetadata[field] = value
			}
		}
		return replacement, nil
	})
}

func (s *Server) remove(w http.ResponseWriter, request *http.Request, found target) {
	kind := found.kind
	if kind.CountOnly {
		notFound(w, found)
		return
	}
	now := time.Now()
	s.store.mu.Lock()
	entry := s.store.kinds[kind].slots[found.key()]
	if entry == nil {
		s.store.mu.Unlock()
		notFound(w, found)
		return
	}
	gone := *entry.object
	s.store.commit("DELETED", &gone, now, 0)
	s.store.mu.Unlock()
	s.sink.wrote("delete", kind, "", &gone, !exempt(request))
	writeBody(w, http.StatusOK, append(gone.JSON(true), '\n'))
}
