package main

// Faults the benchmark turns on while the operator runs, sparing the benchmark's own client:
//   - an outage: open watches break mid-stream, new requests hang until it ends and then
//     break too (a partition, not a polite error);
//   - a 429 storm: new requests are refused with 429 and Retry-After, as priority and
//     fairness does when a priority level's queues are full (open watches carry on);
//   - malformed events: the next N events of a kind reach an operator's watch as half a line;
//   - expiry: a kind's history is dropped and its watches end, so each resumes into 410 Gone
//     and lists again (a forced relist).

import (
	"math/rand/v2"
	"net/http"
	"sync"
	"time"
)

type Faults struct {
	mu               sync.Mutex
	outageUntil      time.Time
	outage           chan struct{} // closed when an outage starts
	closing          chan struct{} // closed to end every watch cleanly
	throttleUntil    time.Time
	throttleFraction float64
	malformed        map[*Kind]int
	counts           map[string]int64
}

func newFaults() *Faults {
	return &Faults{
		outage: make(chan struct{}), closing: make(chan struct{}),
		malformed: map[*Kind]int{}, counts: map[string]int64{},
	}
}

// gate holds a request through an outage (then breaks it) or refuses it in a 429 storm;
// true when it answered.
func (f *Faults) gate(w http.ResponseWriter, request *http.Request) bool {
	f.mu.Lock()
	until, throttleUntil, fraction := f.outageUntil, f.throttleUntil, f.throttleFraction
	f.mu.Unlock()
	now := time.Now()
	if now.Before(until) {
		f.count("held through an outage")
		timer := time.NewTimer(until.Sub(now))
		select {
		case <-timer.C:
		case <-request.Context().Done():
			timer.Stop()
		}
		panic(http.ErrAbortHandler)
	}
	if now.Before(throttleUntil) && rand.Float64() < fraction {
		f.count("429")
		w.Header().Set("Retry-After", "1")
		writeStatus(w, http.StatusTooManyRequests, "TooManyRequests", "Too many requests, please try again later.",
			&statusDetails{RetryAfterSeconds: 1})
		return true
	}
	return false
}

func (f *Faults) count(what string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.counts[what]++
}

func (f *Faults) inOutage() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return time.Now().Before(f.outageUntil)
}

func (f *Faults) channels() (<-chan struct{}, <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.outage, f.closing
}

func (f *Faults) startOutage(length time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.outageUntil = time.Now().Add(length)
	close(f.outage)
	f.outage = make(chan struct{})
	f.counts["outages"]++
}

func (f *Faults) throttle(length time.Duration, fraction float64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.throttleUntil, f.throttleFraction = time.Now().Add(length), fraction
	f.counts["429 storms"]++
}

func (f *Faults) malform(kind *Kind, count int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.malformed[kind] += count
}

func (f *Faults) takeMalformed(kind *Kind) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.malformed[kind] <= 0 {
		return false
	}
	f.malformed[kind]--
	f.counts["malformed events sent"]++
	return true
}

func (f *Faults) closeWatches() {
	f.mu.Lock()
	defer f.mu.Unlock()
	close(f.closing)
	f.closing = make(chan struct{})
}

func (f *Faults) snapshot() map[string]int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	counts := map[string]int64{}
	for key, value := range f.counts {
		counts[key] = value
	}
	return counts
}
