package main

// What the simulator saw, for the benchmark: requests per verb and resource, LIST and
// streaming-list timings, watch delivery latencies per kind (the operator's watches only),
// probes, and the sink of the operator's writes (counts, and every FabricCapability status
// with the time it arrived).

import (
	"encoding/json"
	"maps"
	"slices"
	"sort"
	"sync"
	"time"
)

type listRecord struct {
	Resource string  `json:"resource"`
	Items    int     `json:"items"`
	Bytes    int     `json:"bytes"`
	Seconds  float64 `json:"seconds"`
	Bench    bool    `json:"bench"`
}

type probeRecord struct {
	ID        uint64 `json:"id"`
	At        int64  `json:"at"`        // unix ns: the change committed
	FirstSent int64  `json:"firstSent"` // unix ns: the first flush to an operator's watch carrying it
	RV        uint64 `json:"rv"`
}

type Stats struct {
	mu            sync.Mutex
	requests      map[string]int64
	benchRequests map[string]int64
	watchers      map[string]int64
	delivery      map[string][]float32 // seconds, per kind
	readDelivery  map[string][]float32 // seconds to the operator's read, per kind (readlag.go)
	deliveredMax  int
	lists         []listRecord
	initial       []listRecord
	probes        map[uint64]*probeRecord
	nextProbe     uint64
	since         time.Time
}

func newStats(deliveredMax int) *Stats {
	stats := &Stats{deliveredMax: deliveredMax, probes: map[uint64]*probeRecord{}}
	stats.reset()
	return stats
}

func (s *Stats) reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests, s.benchRequests = map[string]int64{}, map[string]int64{}
	if s.watchers == nil {
		s.watchers = map[string]int64{}
	}
	s.delivery = map[string][]float32{}
	s.readDelivery = map[string][]float32{}
	s.lists, s.initial = nil, nil
	s.since = time.Now()
}

func (s *Stats) request(verb string, found target, bench bool) {
	key := verb + " " + found.kind.GroupResource()
	if found.subresource != "" {
		key += "/" + found.subresource
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if bench {
		s.benchRequests[key]++
	} else {
		s.requests[key]++
	}
}

func (s *Stats) watchOpened(kind *Kind, bench bool) {
	if bench {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.watchers[kind.GroupResource()]++
}

func (s *Stats) watchClosed(kind *Kind, bench bool) {
	if bench {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.watchers[kind.GroupResource()]--
}

func (s *Stats) listed(kind *Kind, items, bytes int, took time.Duration, bench bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.lists) < 100_000 {
		s.lists = append(s.lists, listRecord{kind.GroupResource(), items, bytes, took.Seconds(), bench})
	}
}

func (s *Stats) initialStreamed(kind *Kind, took time.Duration, bench bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.initial = append(s.initial, listRecord{Resource: kind.GroupResource(), Seconds: took.Seconds(), Bench: bench})
}

func (s *Stats) delivered(kind *Kind, latencies []time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keep(s.delivery, kind, latencies)
}

func (s *Stats) readDelivered(kind *Kind, latencies []time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keep(s.readDelivery, kind, latencies)
}

// keep adds latencies to a kind's samples, up to deliveredMax of them; s.mu held.
func (s *Stats) keep(into map[string][]float32, kind *Kind, latencies []time.Duration) {
	samples := into[kind.GroupResource()]
	for _, latency := range latencies {
		if len(samples) >= s.deliveredMax {
			break
		}
		samples = append(samples, float32(latency.Seconds()))
	}
	into[kind.GroupResource()] = samples
}

func (s *Stats) newProbe(at time.Time) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextProbe++
	s.probes[s.nextProbe] = &probeRecord{ID: s.nextProbe, At: at.UnixNano()}
	return s.nextProbe
}

func (s *Stats) probeCommitted(id uint64, event *Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if probe := s.probes[id]; probe != nil {
		probe.At, probe.RV = event.At.UnixNano(), event.RV
	}
}

func (s *Stats) probeDelivered(id uint64, sent time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if probe := s.probes[id]; probe != nil && probe.FirstSent == 0 {
		probe.FirstSent = sent.UnixNano()
	}
}

type deliverySummary struct {
	Count  int     `json:"count"`
	Median float64 `json:"p50"`
	P99    float64 `json:"p99"`
	Max    float64 `json:"max"`
}

func summarize(samples []float32) deliverySummary {
	if len(samples) == 0 {
		return deliverySummary{}
	}
	sorted := append([]float32(nil), samples...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	at := func(quantile float64) float64 {
		return float64(sorted[min(len(sorted)-1, int(float64(len(sorted))*quantile))])
	}
	return deliverySummary{Count: len(sorted), Median: at(0.5), P99: at(0.99), Max: float64(sorted[len(sorted)-1])}
}

// summarizeKinds summarizes each kind's samples, and all of them as "all".
func summarizeKinds(byKind map[string][]float32) map[string]deliverySummary {
	summaries := map[string]deliverySummary{}
	var all []float32
	for kind, samples := range byKind {
		summaries[kind] = summarize(samples)
		all = append(all, samples...)
	}
	summaries["all"] = summarize(all)
	return summaries
}

// snapshot copies what it reports: it is encoded after the lock is released, while requests
// and watch flushes go on changing the originals (a map iterated as it is written is a fatal
// error, not a panic a handler recovers from: the whole simulator exits).
func (s *Stats) snapshot() map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	delivery, readDelivery := summarizeKinds(s.delivery), summarizeKinds(s.readDelivery)
	probes := make([]probeRecord, 0, len(s.probes))
	for _, probe := range s.probes {
		probes = append(probes, *probe)
	}
	sort.Slice(probes, func(i, j int) bool { return probes[i].ID < probes[j].ID })
	return map[string]any{
		"since":          s.since.UnixNano(),
		"requests":       maps.Clone(s.requests),
		"benchRequests":  maps.Clone(s.benchRequests),
		"watchers":       maps.Clone(s.watchers),
		"delivery":       delivery,
		"readDelivery":   readDelivery,
		"lists":          slices.Clone(s.lists),
		"initialStreams": slices.Clone(s.initial),
		"probes":         probes,
	}
}

// -- the sink of the operator's writes

type StatusWrite struct {
	At     int64           `json:"at"` // unix ns
	Name   string          `json:"name"`
	RV     uint64          `json:"rv"`
	Status json.RawMessage `json:"status"`
}

type Sink struct {
	mu       sync.Mutex
	counts   map[string]int64 // "create fabriccapabilities", "update fabriccapabilities/status", ...
	events   int64
	log      []StatusWrite // the newest logCapacity status writes of FabricCapabilities
	capacity int
	// When each FabricCapability first got a status, and the latest of those times: when
	// everything the operator publishes was out.
	firstStatus map[string]int64
	lastFirst   int64
}

func newSink(capacity int) *Sink {
	return &Sink{counts: map[string]int64{}, capacity: capacity, firstStatus: map[string]int64{}}
}

func (s *Sink) wrote(verb string, kind *Kind, subresource string, object *Object, operator bool) {
	if !operator {
		return // the benchmark's own writes (populating, churn through the API) are not the operator's
	}
	key := verb + " " + kind.GroupResource()
	if subresource != "" {
		key += "/" + subresource
	}
	var status json.RawMessage
	if kind.Resource == "fabriccapabilities" && verb != "delete" {
		if body, err := decodeDocument(object.JSON(true)); err == nil {
			status = encodeDocument(body["status"])
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.counts[key]++
	if status != nil {
		now := time.Now().UnixNano()
		if len(s.log) >= s.capacity {
			s.log = append(s.log[:0], s.log[len(s.log)-s.capacity/2:]...)
		}
		s.log = append(s.log, StatusWrite{At: now, Name: object.Name, RV: object.RV, Status: status})
		// A first status is one the operator wrote (/status): a create's is its CRD's default.
		if _, seen := s.firstStatus[object.Name]; !seen && subresource == "status" && string(status) != "null" {
			s.firstStatus[object.Name] = now
			s.lastFirst = now
		}
	}
}

// published is how many FabricCapabilities have had a status, and when the last of them got
// its first.
func (s *Sink) published() map[string]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return map[string]int64{"withStatus": int64(len(s.firstStatus)), "lastFirstAt": s.lastFirst}
}

func (s *Sink) countEvent() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events++
	s.counts["create events"]++
}

func (s *Sink) snapshot() map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	counts := map[string]int64{}
	for key, value := range s.counts {
		counts[key] = value
	}
	return map[string]any{"writes": counts, "events": s.events, "logged": len(s.log)}
}

// writesSince returns the logged status writes that arrived at or after since (unix ns), of
// one FabricCapability or (name "") all.
func (s *Sink) writesSince(since int64, name string) []StatusWrite {
	s.mu.Lock()
	defer s.mu.Unlock()
	first := sort.Search(len(s.log), func(i int) bool { return s.log[i].At >= since })
	writes := []StatusWrite{}
	for _, write := range s.log[first:] {
		if name == "" || write.Name == name {
			writes = append(writes, write)
		}
	}
	return writes
}
