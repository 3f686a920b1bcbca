package main

import (
	"encoding/json"
	"sync"
	"testing"
	"time"
)

// The admin handler encodes a snapshot after Stats' lock is released, while the operator's
// requests and watches go on counting. A snapshot that shared the counting maps was a fatal
// error ("concurrent map iteration and map write"), which no handler recovers from: a
// 100,000-node benchmark lost its simulator that way.
func TestASnapshotIsEncodedWhileRequestsGoOnCounting(t *testing.T) {
	stats := newStats(1000)
	kinds := []*Kind{kindByResource("nodes"), kindByResource("pods")}
	deadline := time.Now().Add(500 * time.Millisecond)
	var counting sync.WaitGroup
	for worker := range 4 {
		counting.Add(1)
		go func() {
			defer counting.Done()
			for step := 0; time.Now().Before(deadline); step++ {
				kind := kinds[(worker+step)%len(kinds)]
				stats.request("get", target{kind: kind}, false)
				stats.watchOpened(kind, false)
				stats.listed(kind, 1, 100, time.Millisecond, false)
				stats.watchClosed(kind, false)
			}
		}()
	}
	encoded := 0
	for time.Now().Before(deadline) {
		if _, err := json.Marshal(stats.snapshot()); err != nil {
			t.Fatalf("encoding a snapshot: %v", err)
		}
		encoded++
	}
	counting.Wait()
	if encoded == 0 {
		t.Fatal("no snapshot was encoded")
	}
	var report struct {
		Requests map[string]int64 `json:"requests"`
	}
	body, _ := json.Marshal(stats.snapshot())
	if err := json.Unmarshal(body, &report); err != nil || len(report.Requests) != len(kinds) {
		t.Fatalf("the snapshot's requests: %v (%v)", report.Requests, err)
	}
}
