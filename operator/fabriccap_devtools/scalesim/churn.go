package main

// Churn at given rates, made inside the simulator (a client making 1,700 writes a second
// would load the same two cores the operator runs on):
//   - node heartbeats: a variable the operator does not read (the conditions' heartbeat
//     times and the status manager's managedFields time, @@HB@@) takes the current second;
//   - node changes: a variable it reads (@@EFA@@: allocatable and capacity) flips between
//     two values;
//   - pod creations from weighted templates (GPU pods asking for the fabric or not, CPU
//     pods), on given nodes, each deleted again after a lifetime;
//   - ResourceSlice updates: a variable (@@GEN@@, the pool generation) counts up.
// Each is an event like any other: the store's version, the history, the watches.

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

type podChoice struct {
	Template string            `json:"template"`
	Weight   float64           `json:"weight"`
	Vars     map[string]string `json:"vars"` // {n}: the pod's number, {job}: n/8, {job12}: the same in 12 digits, {node}
}

type ChurnSpec struct {
	Seconds float64 `json:"seconds"` // 0: until stopped

	HeartbeatsPerSecond float64 `json:"heartbeatsPerSecond"`
	HeartbeatVar        string  `json:"heartbeatVar"`

	NodeChangesPerSecond float64  `json:"nodeChangesPerSecond"`
	NodeChangeVar        string   `json:"nodeChangeVar"`
	NodeChangeValues     []string `json:"nodeChangeValues"`
	NodeChangeNodes      []string `json:"nodeChangeNodes"` // none: every node with the variable

	PodCreatesPerSecond float64     `json:"podCreatesPerSecond"`
	PodTemplates        []podChoice `json:"podTemplates"`
	PodNodes            []string    `json:"podNodes"`
	PodNamespace        string      `json:"podNamespace"`
	PodLifetimeSeconds  float64     `json:"podLifetimeSeconds"`
	PodNamePrefix       string      `json:"podNamePrefix"`

	SliceUpdatesPerSecond float64 `json:"sliceUpdatesPerSecond"`
	SliceVar              string  `json:"sliceVar"`
}

type livePod struct {
	key     string
	created time.Time
}

type Churn struct {
	spec     ChurnSpec
	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}
	mu       sync.Mutex
	counts   map[string]int64
	started  time.Time
	ended    time.Time
	problems []string
}

// end stops the churn (if its time has not run out already) and waits for it.
func (c *Churn) end() {
	select {
	case <-c.done:
	default:
		c.stopOnce.Do(func() { close(c.stop) })
		<-c.done
	}
}

func (c *Churn) add(what string, count int64) {
	if count == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.counts[what] += count
}

func (c *Churn) snapshot() map[string]any {
	c.mu.Lock()
	defer c.mu.Unlock()
	counts := map[string]int64{}
	for key, value := range c.counts {
		counts[key] = value
	}
	ended := c.ended
	if ended.IsZero() {
		ended = time.Now()
	}
	return map[string]any{"counts": counts, "seconds": ended.Sub(c.started).Seconds(), "problems": slices.Clone(c.problems)}
}

// objectsWithVar lists the keys of a kind's objects whose template has the variable.
func (s *Server) objectsWithVar(kind *Kind, variable string) []string {
	s.store.mu.Lock()
	defer s.store.mu.Unlock()
	var keys []string
	for key, entry := range s.store.kinds[kind].slots {
		if entry.object.Template.varIndex(variable) >= 0 {
			keys = append(keys, key)
		}
	}
	return keys
}

func (s *Server) startChurn(spec ChurnSpec, templates map[string]*Template) (*Churn, error) {
	if spec.HeartbeatVar == "" {
		spec.HeartbeatVar = "HB"
	}
	if spec.NodeChangeVar == "" {
		spec.NodeChangeVar = "EFA"
	}
	if spec.SliceVar == "" {
		spec.SliceVar = "GEN"
	}
	if spec.PodNamePrefix == "" {
		spec.PodNamePrefix = "churn-"
	}
	if spec.NodeChangesPerSecond > 0 && len(spec.NodeChangeValues) != 2 {
		return nil, fmt.Errorf("nodeChangeValues needs the two values to flip between")
	}
	total := 0.0
	for _, choice := range spec.PodTemplates {
		template := templates[choice.Template]
		if template == nil {
			return nil, fmt.Errorf("no template %q", choice.Template)
		}
		for _, name := range template.VarNames {
			if _, ok := choice.Vars[name]; !ok {
				return nil, fmt.Errorf("pod template %s: no value for @@%s@@", choice.Template, name)
			}
		}
		total += choice.Weight
	}
	if spec.PodCreatesPerSecond > 0 && (total <= 0 || len(spec.PodNodes) == 0 || spec.PodNamespace == "") {
		return nil, fmt.Errorf("pod churn needs podTemplates with weights, podNodes and a podNamespace")
	}
	churn := &Churn{spec: spec, stop: make(chan struct{}), done: make(chan struct{}), counts: map[string]int64{}, started: time.Now()}
	nodes := kindByResource("nodes")
	heartbeatNodes := s.objectsWithVar(nodes, spec.HeartbeatVar)
	changeNodes := spec.NodeChangeNodes
	if len(changeNodes) == 0 {
		changeNodes = s.objectsWithVar(nodes, spec.NodeChangeVar)
	}
	slices := s.objectsWithVar(kindByResource("resourceslices"), spec.SliceVar)
	if spec.HeartbeatsPerSecond > 0 && len(heartbeatNodes) == 0 {
		return nil, fmt.Errorf("no node has @@%s@@ to heartbeat", spec.HeartbeatVar)
	}
	go s.runChurn(churn, templates, heartbeatNodes, changeNodes, slices)
	return churn, nil
}

func (s *Server) runChurn(churn *Churn, templates map[string]*Template, heartbeatNodes, changeNodes, slices []string) {
	defer close(churn.done)
	defer func() {
		churn.mu.Lock()
		churn.ended = time.Now()
		churn.mu.Unlock()
	}()
	spec := churn.spec
	nodes, pods, resourceSlices := kindByResource("nodes"), kindByResource("pods"), kindByResource("resourceslices")
	ticker := time.NewTicker(10 * time.Millisecond)
	defer ticker.Stop()
	var heartbeatBudget, changeBudget, createBudget, sliceBudget float64
	nextHeartbeat := 0
	podNumber := 0
	var live []livePod
	last := churn.started
	for {
		var now time.Time
		select {
		case <-churn.stop:
			return
		case now = <-ticker.C:
		}
		if spec.Seconds > 0 && now.Sub(churn.started).Seconds() >= spec.Seconds {
			return
		}
		elapsed := now.Sub(last).Seconds()
		last = now
		heartbeatBudget += spec.HeartbeatsPerSecond * elapsed
		changeBudget += spec.NodeChangesPerSecond * elapsed
		createBudget += spec.PodCreatesPerSecond * elapsed
		sliceBudget += spec.SliceUpdatesPerSecond * elapsed
		stamp := now.UTC().Format(time.RFC3339)
		var heartbeats, unchanged, changes, created, deleted, sliceUpdates int64

		s.store.mu.Lock()
		nodeStore := s.store.kinds[nodes]
		for ; heartbeatBudget >= 1; heartbeatBudget-- {
			key := heartbeatNodes[nextHeartbeat%len(heartbeatNodes)]
			nextHeartbeat++
			entry := nodeStore.slots[key]
			if entry == nil {
				continue
			}
			index := entry.object.Template.varIndex(spec.HeartbeatVar)
			if index < 0 {
				continue // rewritten through the API since: no template any more
			}
			if entry.object.Vars[index] == stamp {
				unchanged++ // the same second again: the API server would store nothing
				continue
			}
			s.store.commit("MODIFIED", entry.object.withVars(map[int]string{index: stamp}), now, 0)
			heartbeats++
		}
		for ; changeBudget >= 1 && len(changeNodes) > 0; changeBudget-- {
			entry := nodeStore.slots[changeNodes[rand.IntN(len(changeNodes))]]
			if entry == nil {
				continue
			}
			index := entry.object.Template.varIndex(spec.NodeChangeVar)
			if index < 0 {
				continue
			}
			value := spec.NodeChangeValues[0]
			if entry.object.Vars[index] == value {
				value = spec.NodeChangeValues[1]
			}
			s.store.commit("MODIFIED", entry.object.withVars(map[int]string{index: value}), now, 0)
			changes++
		}
		for ; createBudget >= 1; createBudget-- {
			choice := pickTemplate(spec.PodTemplates)
			template := templates[choice.Template]
			node := spec.PodNodes[rand.IntN(len(spec.PodNodes))]
			vars := make([]string, len(template.VarNames))
			for index, name := range template.VarNames {
				vars[index] = expandChurnValue(choice.Vars[name], podNumber, node)
			}
			object := &Object{
				Name: fmt.Sprintf("%s%08d", spec.PodNamePrefix, podNumber), Namespace: spec.PodNamespace, NodeName: node,
				Serial: s.store.nextSerial(), Created: s.store.createdNow(now), Template: template, Vars: vars,
			}
			podNumber++
			if existing := s.store.kinds[pods].slots[object.Key()]; existing != nil {
				continue
			}
			s.store.commit("ADDED", object, now, 0)
			live = append(live, livePod{key: object.Key(), created: now})
			created++
		}
		lifetime := time.Duration(spec.PodLifetimeSeconds * float64(time.Second))
		podStore := s.store.kinds[pods]
		for len(live) > 0 && now.Sub(live[0].created) >= lifetime && spec.PodLifetimeSeconds > 0 {
			if entry := podStore.slots[live[0].key]; entry != nil {
				gone := *entry.object
				s.store.commit("DELETED", &gone, now, 0)
				deleted++
			}
			live = live[1:]
		}
		sliceStore := s.store.kinds[resourceSlices]
		for ; sliceBudget >= 1 && len(slices) > 0; sliceBudget-- {
			entry := sliceStore.slots[slices[rand.IntN(len(slices))]]
			if entry == nil {
				continue
			}
			index := entry.object.Template.varIndex(spec.SliceVar)
			if index < 0 {
				continue
			}
			generation, _ := strconv.Atoi(entry.object.Vars[index])
			s.store.commit("MODIFIED", entry.object.withVars(map[int]string{index: strconv.Itoa(generation + 1)}), now, 0)
			sliceUpdates++
		}
		s.store.mu.Unlock()

		churn.add("node heartbeats", heartbeats)
		churn.add("node heartbeats skipped (same second)", unchanged)
		churn.add("node changes", changes)
		churn.add("pods created", created)
		churn.add("pods deleted", deleted)
		churn.add("slice updates", sliceUpdates)
	}
}

func pickTemplate(choices []podChoice) podChoice {
	total := 0.0
	for _, choice := range choices {
		total += choice.Weight
	}
	pick := rand.Float64() * total
	for _, choice := range choices {
		if pick < choice.Weight {
			return choice
		}
		pick -= choice.Weight
	}
	return choices[len(choices)-1]
}

func expandChurnValue(pattern string, number int, node string) string {
	if !strings.Contains(pattern, "{") {
		return pattern
	}
	return strings.NewReplacer(
		"{n}", strconv.Itoa(number),
		"{job}", strconv.Itoa(number/8),
		"{job12}", fmt.Sprintf("%012d", number/8),
		"{node}", node,
	).Replace(pattern)
}
