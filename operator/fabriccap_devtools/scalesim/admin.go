package main

// The benchmark's side door (plain HTTP on 127.0.0.1, its own port): churn, probes (a change
// whose delivery and effect are timed), faults, and what the simulator counted.
//
//	GET  /stats                 requests, watches, delivery latencies, LISTs, probes, sink, faults, churn
//	POST /stats/reset           start the figures afresh
//	GET  /writes?since=<ns>     FabricCapability status writes that arrived since (unix ns); &name= one
//	GET  /published             how many FabricCapabilities have a status, and since when
//	POST /churn                 start churn (ChurnSpec); DELETE /churn stops it
//	POST /probe/vars            {"resource","namespace","name","vars":{...}}: change a templated object
//	POST /probe/create          {"template","namespace","name","node","vars":{...}}
//	POST /probe/delete          {"resource","namespace","name"}
//	POST /fault/outage          {"seconds"}
//	POST /fault/throttle        {"seconds","fraction"}
//	POST /fault/malformed       {"resource","count"}
//	POST /fault/expire          {"resources":[...]}: drop their history and end their watches

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"
)

type Admin struct {
	server    *Server
	templates map[string]*Template
	mu        sync.Mutex
	churn     *Churn
}

type probeRequest struct {
	Resource  string            `json:"resource"`
	Template  string            `json:"template"`
	Namespace string            `json:"namespace"`
	Name      string            `json:"name"`
	Node      string            `json:"node"`
	Vars      map[string]string `json:"vars"`
}

type faultRequest struct {
	Seconds   float64  `json:"seconds"`
	Fraction  float64  `json:"fraction"`
	Resource  string   `json:"resource"`
	Resources []string `json:"resources"`
	Count     int      `json:"count"`
}

func readRequest(w http.ResponseWriter, request *http.Request, into any) bool {
	if err := json.NewDecoder(request.Body).Decode(into); err != nil {
		http.Error(w, "bad request: "+err.Error(), http.StatusBadRequest)
		return false
	}
	return true
}

func (a *Admin) routes() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /stats", a.stats)
	mux.HandleFunc("POST /stats/reset", func(w http.ResponseWriter, _ *http.Request) {
		a.server.stats.reset()
		writeJSON(w, http.StatusOK, map[string]bool{"reset": true})
	})
	mux.HandleFunc("GET /writes", func(w http.ResponseWriter, request *http.Request) {
		since, _ := strconv.ParseInt(request.URL.Query().Get("since"), 10, 64)
		writeJSON(w, http.StatusOK, a.server.sink.writesSince(since, request.URL.Query().Get("name")))
	})
	mux.HandleFunc("GET /published", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, a.server.sink.published())
	})
	mux.HandleFunc("POST /churn", a.startChurn)
	mux.HandleFunc("DELETE /churn", a.stopChurn)
	mux.HandleFunc("POST /probe/vars", a.probeVars)
	mux.HandleFunc("POST /probe/create", a.probeCreate)
	mux.HandleFunc("POST /probe/delete", a.probeDelete)
	mux.HandleFunc("POST /fault/outage", func(w http.ResponseWriter, request *http.Request) {
		var fault faultRequest
		if readRequest(w, request, &fault) {
			a.server.faults.startOutage(seconds(fault.Seconds))
			writeJSON(w, http.StatusOK, map[string]int64{"at": time.Now().UnixNano()})
		}
	})
	mux.HandleFunc("POST /fault/throttle", func(w http.ResponseWriter, request *http.Request) {
		var fault faultRequest
		if readRequest(w, request, &fault) {
			a.server.faults.throttle(seconds(fault.Seconds), fault.Fraction)
			writeJSON(w, http.StatusOK, map[string]int64{"at": time.Now().UnixNano()})
		}
	})
	mux.HandleFunc("POST /fault/malformed", func(w http.ResponseWriter, request *http.Request) {
		var fault faultRequest
		if !readRequest(w, request, &fault) {
			return
		}
		kind := kindByResource(fault.Resource)
		if kind == nil {
			http.Error(w, "no resource "+fault.Resource, http.StatusBadRequest)
			return
		}
		a.server.faults.malform(kind, max(fault.Count, 1))
		writeJSON(w, http.StatusOK, map[string]int64{"at": time.Now().UnixNano()})
	})
	mux.HandleFunc("POST /fault/expire", func(w http.ResponseWriter, request *http.Request) {
		var fault faultRequest
		if !readRequest(w, request, &fault) {
			return
		}
		for _, resource := range fault.Resources {
			kind := kindByResource(resource)
			if kind == nil {
				http.Error(w, "no resource "+resource, http.StatusBadRequest)
				return
			}
			a.server.store.expireHistory(kind)
		}
		a.server.faults.closeWatches()
		writeJSON(w, http.StatusOK, map[string]int64{"at": time.Now().UnixNano()})
	})
	return mux
}

func seconds(value float64) time.Duration { return time.Duration(value * float64(time.Second)) }

func (a *Admin) stats(w http.ResponseWriter, _ *http.Request) {
	report := a.server.stats.snapshot()
	report["rv"] = a.server.store.currentRV()
	report["objects"] = a.server.store.counts()
	report["history"] = a.server.store.historyLengths()
	report["sink"] = a.server.sink.snapshot()
	report["faults"] = a.server.faults.snapshot()
	a.mu.Lock()
	if a.churn != nil {
		report["churn"] = a.churn.snapshot()
	}
	a.mu.Unlock()
	writeJSON(w, http.StatusOK, report)
}

func (a *Admin) startChurn(w http.ResponseWriter, request *http.Request) {
	var spec ChurnSpec
	if !readRequest(w, request, &spec) {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.churn != nil {
		a.churn.end()
	}
	churn, err := a.server.startChurn(spec, a.templates)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	a.churn = churn
	writeJSON(w, http.StatusOK, map[string]int64{"at": churn.started.UnixNano()})
}

func (a *Admin) stopChurn(w http.ResponseWriter, _ *http.Request) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.churn == nil {
		writeJSON(w, http.StatusOK, map[string]any{})
		return
	}
	a.churn.end()
	writeJSON(w, http.StatusOK, a.churn.snapshot())
}

// commitProbe stores a probe's change and answers with its record.
func (a *Admin) commitProbe(w http.ResponseWriter, eventType string, object *Object, now time.Time) {
	id := a.server.stats.newProbe(now)
	store := a.server.store
	store.mu.Lock()
	event := store.commit(eventType, object, now, id)
	store.mu.Unlock()
	a.server.stats.probeCommitted(id, event)
	writeJSON(w, http.StatusOK, map[string]any{"probe": id, "rv": event.RV, "at": event.At.UnixNano()})
}

// probedObject reads a probe request naming an existing object; on any error it has answered
// the request and returns nil.
func (a *Admin) probedObject(w http.ResponseWriter, request *http.Request) (*probeRequest, *Object) {
	var probe probeRequest
	if !readRequest(w, request, &probe) {
		return nil, nil
	}
	kind := kindByResource(probe.Resource)
	if kind == nil {
		http.Error(w, "no resource "+probe.Resource, http.StatusBadRequest)
		return nil, nil
	}
	key := probe.Name
	if kind.Namespaced {
		key = probe.Namespace + "/" + probe.Name
	}
	current := a.server.store.get(kind, key)
	if current == nil {
		http.Error(w, "no "+key, http.StatusNotFound)
		return nil, nil
	}
	return &probe, current
}

func (a *Admin) probeVars(w http.ResponseWriter, request *http.Request) {
	probe, current := a.probedObject(w, request)
	if current == nil {
		return
	}
	changes := map[int]string{}
	for name, value := range probe.Vars {
		index := current.Template.varIndex(name)
		if index < 0 {
			http.Error(w, fmt.Sprintf("%s has no @@%s@@", probe.Name, name), http.StatusBadRequest)
			return
		}
		changes[index] = value
	}
	a.commitProbe(w, "MODIFIED", current.withVars(changes), time.Now())
}

func (a *Admin) probeCreate(w http.ResponseWriter, request *http.Request) {
	var probe probeRequest
	if !readRequest(w, request, &probe) {
		return
	}
	template := a.templates[probe.Template]
	if template == nil {
		http.Error(w, "no template "+probe.Template, http.StatusBadRequest)
		return
	}
	vars := make([]string, len(template.VarNames))
	for index, name := range template.VarNames {
		value, ok := probe.Vars[name]
		if !ok {
			http.Error(w, "no value for @@"+name+"@@", http.StatusBadRequest)
			return
		}
		vars[index] = value
	}
	now := time.Now()
	store := a.server.store
	store.mu.Lock()
	object := &Object{
		Name: probe.Name, Namespace: probe.Namespace, NodeName: probe.Node, Serial: store.nextSerial(),
		Created: store.createdNow(now), Template: template, Vars: vars,
	}
	store.mu.Unlock()
	a.commitProbe(w, "ADDED", object, now)
}

func (a *Admin) probeDelete(w http.ResponseWriter, request *http.Request) {
	_, current := a.probedObject(w, request)
	if current == nil {
		return
	}
	gone := *current
	a.commitProbe(w, "DELETED", &gone, time.Now())
}
