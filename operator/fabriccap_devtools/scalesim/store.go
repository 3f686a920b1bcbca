package main

// The store: current objects per kind, the event history watches read, and LIST snapshots.
//
// One resourceVersion counter for every kind, as etcd's revision. Every change takes the
// store's lock, gets the next version, replaces the object's slot and appends an event to its
// kind's history. Like the API server's watch cache, a kind keeps at most historyCapacity
// events (the watch cache's upper bound is 100*1024); a watch from a version older than the
// oldest event it still has gets 410 Gone ("too old resource version"). A LIST takes a
// snapshot (the object versions of that instant, in key order); its continue tokens name the
// snapshot's version, so every page comes from the same instant, and a token whose snapshot
// has been dropped gets 410 Expired, as one whose revision etcd has compacted.

import (
	"slices"
	"sort"
	"sync"
	"time"
)

type slot struct {
	key    string
	object *Object // nil once deleted
}

type Event struct {
	Type   string // ADDED, MODIFIED, DELETED
	Object *Object
	RV     uint64
	At     time.Time // when the change was committed: the start of its delivery latency
	Probe  uint64    // a probe's id (the benchmark times it end to end), else 0
}

type snapshot struct {
	rv      uint64
	objects []*Object // in key order
	taken   time.Time
}

type kindStore struct {
	kind  *Kind
	slots map[string]*slot
	// Slots in key order, and those added since it was last sorted. A LIST sorts the few new
	// ones and merges them in, dropping deleted slots: no per-write sorting.
	ordered []*slot
	added   []*slot
	deleted int
	// The event history: events[head:] are kept; droppedRV is the version of the newest
	// event dropped (a watch from an older version would miss events).
	events    []*Event
	head      int
	droppedRV uint64
	// Closed and replaced on every change: how a watch waits for news.
	wake      chan struct{}
	snapshots map[uint64]*snapshot
	// CountOnly kinds (Events): the names recorded, so a second create of one is a 409.
	names map[string]struct{}
}

type Store struct {
	mu              sync.Mutex
	rv              uint64
	serial          uint64
	kinds           map[*Kind]*kindStore
	historyCapacity int
	snapshotTTL     time.Duration
	createdText     string // creationTimestamp of the current second, shared by its objects
	createdSecond   int64
}

func newStore(historyCapacity int, snapshotTTL time.Duration) *Store {
	store := &Store{kinds: map[*Kind]*kindStore{}, historyCapacity: historyCapacity, snapshotTTL: snapshotTTL, rv: 1}
	for _, kind := range servedKinds {
		store.kinds[kind] = &kindStore{
			kind:      kind,
			slots:     map[string]*slot{},
			wake:      make(chan struct{}),
			snapshots: map[uint64]*snapshot{},
			names:     map[string]struct{}{},
		}
	}
	return store
}

func (s *Store) kindStore(kind *Kind) *kindStore { return s.kinds[kind] }

// now's creationTimestamp text; called with the lock held.
func (s *Store) createdNow(now time.Time) string {
	if second := now.Unix(); second != s.createdSecond {
		s.createdSecond, s.createdText = second, now.UTC().Format(time.RFC3339)
	}
	return s.createdText
}

func (s *Store) nextSerial() uint64 {
	s.serial++
	return s.serial
}

// get returns the current version of an object, or nil.
func (s *Store) get(kind *Kind, key string) *Object {
	s.mu.Lock()
	defer s.mu.Unlock()
	if found := s.kinds[kind].slots[key]; found != nil {
		return found.object
	}
	return nil
}

// load puts an object in without an event: the world as it was before anyone watched.
// Called before serving, with no lock needed, or with the lock held.
func (s *Store) load(object *Object) {
	ks := s.kinds[object.Template.Kind]
	s.rv++
	object.RV = s.rv
	key := object.Key()
	entry := &slot{key: key, object: object}
	ks.slots[key] = entry
	ks.added = append(ks.added, entry)
}

// finishLoading makes the loaded world the start of every kind's history.
func (s *Store) finishLoading() {
	for _, ks := range s.kinds {
		ks.droppedRV = s.rv
		ks.compact()
	}
}

// commit records a change with the lock held: the object gets the next version, its slot
// the object (nil for DELETED), its kind's history the event. Returns the event.
func (s *Store) commit(eventType string, object *Object, now time.Time, probe uint64) *Event {
	ks := s.kinds[object.Template.Kind]
	s.rv++
	object.RV = s.rv
	key := object.Key()
	entry := ks.slots[key]
	switch {
	case eventType == "DELETED":
		if entry != nil {
			entry.object = nil
			delete(ks.slots, key)
			ks.deleted++
		}
	case entry == nil:
		entry = &slot{key: key, object: object}
		ks.slots[key] = entry
		ks.added = append(ks.added, entry)
	default:
		entry.object = object
	}
	event := &Event{Type: eventType, Object: object, RV: s.rv, At: now, Probe: probe}
	ks.events = append(ks.events, event)
	if kept := len(ks.events) - ks.head; kept > s.historyCapacity {
		ks.droppedRV = ks.events[ks.head].RV
		ks.events[ks.head] = nil
		ks.head++
		if ks.head > s.historyCapacity/4+1024 { // reclaim the dropped front now and then
			ks.events = append([]*Event(nil), ks.events[ks.head:]...)
			ks.head = 0
		}
	}
	if ks.deleted+len(ks.added) > len(ks.ordered)/2+4096 {
		ks.compact()
	}
	close(ks.wake)
	ks.wake = make(chan struct{})
	return event
}

// bumpRV takes a version for a write that is not stored (an Event).
func (s *Store) bumpRV() uint64 {
	s.rv++
	return s.rv
}

// backgroundWrites advances the version by perSecond a second, in ticks, until stop closes:
// the writes a real cluster makes to kinds nobody here watches (above all the nodes' Leases,
// each renewed every 10 s). No watch is woken (nothing of its kind changed), but its next
// bookmark carries the new version, as the API server's watch cache does once etcd reports
// progress. Without them a quiet simulator's bookmarks repeat one version for minutes, which
// no cluster of this size does, and a client that checks for progress reads that as a stall.
func (s *Store) backgroundWrites(perSecond int, stop <-chan struct{}) {
	const tick = 100 * time.Millisecond
	ticker := time.NewTicker(tick)
	defer ticker.Stop()
	owed := 0.0
	for {
		select {
		case <-stop:
			return
		case <-ticker.C:
		}
		owed += float64(perSecond) * tick.Seconds()
		whole := uint64(owed)
		owed -= float64(whole)
		s.mu.Lock()
		s.rv += whole
		s.mu.Unlock()
	}
}

// nodeLeaseRenewals is the background write rate of a cluster with this many nodes: each
// node's kubelet renews its Lease every 10 s, and the control plane's components theirs.
func nodeLeaseRenewals(nodes int) int {
	return nodes/10 + 1
}

// compact sorts the slots added since the last time, merges them into the ordered ones and
// drops deleted slots. With the lock held.
func (ks *kindStore) compact() {
	if len(ks.added) == 0 && ks.deleted == 0 {
		return
	}
	added := ks.added
	sort.Slice(added, func(i, j int) bool { return added[i].key < added[j].key })
	merged := make([]*slot, 0, len(ks.ordered)+len(added))
	i, j := 0, 0
	for i < len(ks.ordered) || j < len(added) {
		var next *slot
		if j >= len(added) || i < len(ks.ordered) && ks.ordered[i].key < added[j].key {
			next, i = ks.ordered[i], i+1
		} else {
			next, j = added[j], j+1
		}
		// A key deleted and created again has a dead slot and a live one: keep the live one.
		if next.object != nil && ks.slots[next.key] == next {
			merged = append(merged, next)
		}
	}
	ks.ordered, ks.added, ks.deleted = merged, nil, 0
}

// snapshotNow is the kind's objects at the current version, in key order (shared by LISTs
// at the same version). With the lock held.
func (s *Store) snapshotNow(ks *kindStore, now time.Time) *snapshot {
	if existing := ks.snapshots[s.rv]; existing != nil {
		return existing
	}
	ks.compact()
	objects := make([]*Object, len(ks.ordered))
	for index, entry := range ks.ordered {
		objects[index] = entry.object
	}
	taken := &snapshot{rv: s.rv, objects: objects, taken: now}
	ks.snapshots[s.rv] = taken
	return taken
}

// snapshotAt finds the snapshot a continue token names, or nil (expired).
func (s *Store) snapshotAt(kind *Kind, rv uint64) *snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.kinds[kind].snapshots[rv]
}

// expireSnapshots drops snapshots older than snapshotTTL, used or not, as etcd compacts
// revisions every few minutes (their continue tokens then get 410).
func (s *Store) expireSnapshots(now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ks := range s.kinds {
		for rv, taken := range ks.snapshots {
			if now.Sub(taken.taken) > s.snapshotTTL {
				delete(ks.snapshots, rv)
			}
		}
	}
}

// eventsAfter returns up to max events of a kind newer than rv, whether rv is too old for the
// history (410), the channel that is closed on the next change, and the store's version.
func (s *Store) eventsAfter(kind *Kind, rv uint64, max int) ([]*Event, bool, <-chan struct{}, uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ks := s.kinds[kind]
	if rv < ks.droppedRV {
		return nil, true, nil, s.rv
	}
	kept := ks.events[ks.head:]
	first := sort.Search(len(kept), func(i int) bool { return kept[i].RV > rv })
	pending := kept[first:]
	if len(pending) > max {
		pending = pending[:max]
	}
	return slices.Clone(pending), false, ks.wake, s.rv
}

// expireHistory drops a kind's whole history: every watch resuming from any version it has
// read gets 410 and must list again (the forced relist of the benchmarks), as after an API
// server restart over a compacted etcd. The newest version goes too: a watch that is up to
// date (a Node watch under heartbeats always is) resumes from it. The store moves one version
// on, with no event, so that a LIST after the fault returns a version a watch can resume from.
func (s *Store) expireHistory(kind *Kind) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ks := s.kinds[kind]
	s.rv++
	ks.events, ks.head, ks.droppedRV = nil, 0, s.rv
	close(ks.wake)
	ks.wake = make(chan struct{})
}

func (s *Store) counts() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	counts := map[string]int{}
	for kind, ks := range s.kinds {
		if len(ks.slots) > 0 {
			counts[kind.GroupResource()] = len(ks.slots)
		}
	}
	return counts
}

func (s *Store) historyLengths() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	lengths := map[string]int{}
	for kind, ks := range s.kinds {
		if kept := len(ks.events) - ks.head; kept > 0 {
			lengths[kind.GroupResource()] = kept
		}
	}
	return lengths
}

// indexOf is where a continue token's start key falls in a snapshot.
func (taken *snapshot) indexOf(start string) int {
	return sort.Search(len(taken.objects), func(i int) bool { return taken.objects[i].Key() >= start })
}

// namespaceRange is the part of a snapshot in one namespace (keys sort as namespace/name).
func (taken *snapshot) namespaceRange(namespace string) (int, int) {
	// "0" is the byte after "/": every key of the namespace sorts between the two.
	low := sort.Search(len(taken.objects), func(i int) bool { return taken.objects[i].Key() >= namespace+"/" })
	high := sort.Search(len(taken.objects), func(i int) bool { return taken.objects[i].Key() >= namespace+"0" })
	return low, high
}

func (s *Store) currentRV() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rv
}

// oldestRV is the oldest version a watch of the kind may resume from.
func (s *Store) oldestRV(kind *Kind) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.kinds[kind].droppedRV
}
