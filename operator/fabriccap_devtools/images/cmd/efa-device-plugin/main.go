// efa-device-plugin is the test stand-in for aws-efa-k8s-device-plugin. It speaks the kubelet's
// real device-plugin v1beta1 gRPC API and advertises N fake devices (efa0..efaN-1) of one
// resource, vpc.amazonaws.com/efa by default. Tests steer it through two files in -state-dir,
// a hostPath that each fabriccap node binds to a directory of its own:
//
//	unhealthy   device IDs (efa0, efa3, ...) one per line, or "all"; '#' starts a comment
//	count       optional: the number of devices, overriding -devices
//
// Both are polled every -poll and a change is streamed to the kubelet at once (ListAndWatch).
// A restarting kubelet wipes the device-plugin directory and recreates kubelet.sock; the plugin
// notices (its own socket vanished, or kubelet.sock is a new file) and serves and registers
// again.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

type config struct {
	resource   string
	devices    int
	pluginDir  string
	socketName string
	stateDir   string
	poll       time.Duration
	preStart   bool
}

type plugin struct {
	pluginapi.UnimplementedDevicePluginServer
	cfg config

	mu      sync.Mutex
	devs    []*pluginapi.Device
	changed chan struct{} // closed and replaced whenever devs changes
}

func envOr(key, fallback string) string {
	if value := os.Getenv(key); value != "" {
		return value
	}
	return fallback
}

func main() {
	log.SetFlags(log.LstdFlags | log.Lmicroseconds | log.LUTC)
	defaultDevices, err := strconv.Atoi(envOr("EFA_DEVICE_COUNT", "4"))
	if err != nil || defaultDevices < 0 {
		log.Fatalf("EFA_DEVICE_COUNT=%q is not a count of devices", os.Getenv("EFA_DEVICE_COUNT"))
	}
	cfg := config{}
	flag.StringVar(&cfg.resource, "resource", envOr("EFA_RESOURCE_NAME", "vpc.amazonaws.com/efa"), "extended resource name")
	flag.IntVar(&cfg.devices, "devices", defaultDevices, "number of devices (env EFA_DEVICE_COUNT)")
	flag.StringVar(&cfg.pluginDir, "plugin-dir", pluginapi.DevicePluginPath, "the kubelet's device-plugin directory")
	flag.StringVar(&cfg.socketName, "socket", "fabriccap-efa.sock", "socket name in -plugin-dir")
	flag.StringVar(&cfg.stateDir, "state-dir", envOr("FABRICCAP_EFA_STATE_DIR", "/var/lib/fabriccap-efa"), "directory holding the unhealthy and count files")
	flag.DurationVar(&cfg.poll, "poll", 250*time.Millisecond, "how often the state files and kubelet.sock are checked")
	flag.BoolVar(&cfg.preStart, "prestart", true, "ask the kubelet to call PreStartContainer")
	list := flag.Bool("list", false, "print the devices the state files describe, and exit")
	flag.Parse()

	p := &plugin{cfg: cfg, changed: make(chan struct{})}
	p.devs = p.readDevices()
	if *list {
		fmt.Println(describe(p.devs))
		return
	}
	log.Printf("starting on node %s: resource=%s devices=%s state=%s plugin-dir=%s",
		envOr("NODE_NAME", "?"), cfg.resource, describe(p.devs), cfg.stateDir, cfg.pluginDir)

	stop := make(chan os.Signal, 2)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	for {
		restart, err := p.serveOnce(stop)
		if err != nil {
			log.Printf("error: %v; retrying in 1s", err)
			select {
			case <-stop:
				return
			case <-time.After(time.Second):
			}
			continue
		}
		if !restart {
			log.Printf("stopped")
			return
		}
	}
}

// serveOnce serves the plugin socket and registers with the kubelet. It returns restart=true
// when the kubelet went away (it restarted), false on a stop signal.
func (p *plugin) serveOnce(stop <-chan os.Signal) (bool, error) {
	sock := filepath.Join(p.cfg.pluginDir, p.cfg.socketName)
	kubeletSock := filepath.Join(p.cfg.pluginDir, "kubelet.sock")
	_ = os.Remove(sock)
	listener, err := net.Listen("unix", sock)
	if err != nil {
		return true, fmt.Errorf("listen %s: %w", sock, err)
	}
	server := grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(server, p)
	go func() { _ = server.Serve(listener) }()
	defer func() {
		server.Stop()
		_ = os.Remove(sock)
	}()

	kubeletID, err := waitForKubelet(kubeletSock, p.cfg.poll, stop)
	if err != nil {
		return false, nil // stop signal
	}
	if err := p.register(kubeletSock); err != nil {
		return true, err
	}
	log.Printf("registered %s with the kubelet (endpoint %s)", p.cfg.resource, p.cfg.socketName)

	tick := time.NewTicker(p.cfg.poll)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return false, nil
		case <-tick.C:
		}
		if _, err := os.Stat(sock); err != nil {
			log.Printf("own socket %s gone (kubelet restarted?); registering again", sock)
			return true, nil
		}
		if id, err := fileID(kubeletSock); err != nil || id != kubeletID {
			log.Printf("kubelet.sock changed (kubelet restarted); registering again")
			return true, nil
		}
		p.refresh()
	}
}

// fileID tells one kubelet.sock from the next: a restarted kubelet creates a new file.
func fileID(path string) (string, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return "", err
	}
	return fmt.Sprintf("%d:%d.%d", st.Ino, st.Ctim.Sec, st.Ctim.Nsec), nil
}

func waitForKubelet(path string, poll time.Duration, stop <-chan os.Signal) (string, error) {
	for logged := false; ; {
		if id, err := fileID(path); err == nil {
			return id, nil
		}
		if !logged {
			log.Printf("waiting for %s", path)
			logged = true
		}
		select {
		case <-stop:
			return "", fmt.Errorf("stopped")
		case <-time.After(poll):
		}
	}
}

func (p *plugin) register(kubeletSock string) error {
	conn, err := grpc.NewClient("unix://"+kubeletSock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = pluginapi.NewRegistrationClient(conn).Register(ctx, &pluginapi.RegisterRequest{
		Version:      pluginapi.Version,
		Endpoint:     p.cfg.socketName,
		ResourceName: p.cfg.resource,
		Options: &pluginapi.DevicePluginOptions{
			PreStartRequired:                p.cfg.preStart,
			GetPreferredAllocationAvailable: true,
		},
	})
	if err != nil {
		return fmt.Errorf("register with the kubelet: %w", err)
	}
	return nil
}

// readDevices builds the device list from -devices and the state files. A count file that
// does not hold a count is ignored (and logged), so a half-written file cannot zero a node.
func (p *plugin) readDevices() []*pluginapi.Device {
	n := p.cfg.devices
	if data, err := os.ReadFile(filepath.Join(p.cfg.stateDir, "count")); err == nil {
		if value, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil && value >= 0 {
			n = value
		} else {
			log.Printf("ignoring count file: %q is not a count", strings.TrimSpace(string(data)))
		}
	}
	unhealthy := map[string]bool{}
	if data, err := os.ReadFile(filepath.Join(p.cfg.stateDir, "unhealthy")); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if i := strings.IndexByte(line, '#'); i >= 0 {
				line = line[:i]
			}
			if line = strings.TrimSpace(line); line != "" {
				unhealthy[line] = true
			}
		}
	}
	devs := make([]*pluginapi.Device, 0, n)
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("efa%d", i)
		health := pluginapi.Healthy
		if unhealthy[id] || unhealthy["all"] {
			health = pluginapi.Unhealthy
		}
		devs = append(devs, &pluginapi.Device{ID: id, Health: health})
	}
	return devs
}

func describe(devs []*pluginapi.Device) string {
	if len(devs) == 0 {
		return "(no devices)"
	}
	parts := make([]string, 0, len(devs))
	for _, d := range devs {
		parts = append(parts, d.ID+"="+d.Health)
	}
	return strings.Join(parts, ",")
}

func (p *plugin) refresh() {
	devs := p.readDevices()
	p.mu.Lock()
	defer p.mu.Unlock()
	if describe(devs) == describe(p.devs) {
		return
	}
	log.Printf("devices changed: %s -> %s", describe(p.devs), describe(devs))
	p.devs = devs
	close(p.changed)
	p.changed = make(chan struct{})
}

func (p *plugin) snapshot() ([]*pluginapi.Device, chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.devs), p.changed
}

func (p *plugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return &pluginapi.DevicePluginOptions{PreStartRequired: p.cfg.preStart, GetPreferredAllocationAvailable: true}, nil
}

func (p *plugin) ListAndWatch(_ *pluginapi.Empty, stream grpc.ServerStreamingServer[pluginapi.ListAndWatchResponse]) error {
	log.Printf("ListAndWatch: kubelet connected")
	for {
		devs, changed := p.snapshot()
		if err := stream.Send(&pluginapi.ListAndWatchResponse{Devices: devs}); err != nil {
			log.Printf("ListAndWatch: send failed: %v", err)
			return err
		}
		log.Printf("ListAndWatch: sent %s", describe(devs))
		select {
		case <-changed:
		case <-stream.Context().Done():
			log.Printf("ListAndWatch: kubelet disconnected")
			return nil
		}
	}
}

// GetPreferredAllocation keeps the devices the kubelet must include, then the lowest indexes.
func (p *plugin) GetPreferredAllocation(_ context.Context, req *pluginapi.PreferredAllocationRequest) (*pluginapi.PreferredAllocationResponse, error) {
	resp := &pluginapi.PreferredAllocationResponse{}
	for _, c := range req.ContainerRequests {
		chosen := slices.Clone(c.MustIncludeDeviceIDs)
		available := slices.Clone(c.AvailableDeviceIDs)
		slices.SortFunc(available, func(a, b string) int { return deviceIndex(a) - deviceIndex(b) })
		for _, id := range available {
			if len(chosen) >= int(c.AllocationSize) {
				break
			}
			if !slices.Contains(chosen, id) {
				chosen = append(chosen, id)
			}
		}
		log.Printf("GetPreferredAllocation: size=%d available=%v -> %v", c.AllocationSize, c.AvailableDeviceIDs, chosen)
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerPreferredAllocationResponse{DeviceIDs: chosen})
	}
	return resp, nil
}

func deviceIndex(id string) int {
	n, err := strconv.Atoi(strings.TrimPrefix(id, "efa"))
	if err != nil {
		return 1 << 30
	}
	return n
}

// Allocate hands the container its device IDs as environment variables (there is no
// /dev/infiniband here to pass as DeviceSpecs).
func (p *plugin) Allocate(_ context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	devs, _ := p.snapshot()
	known := map[string]bool{}
	for _, d := range devs {
		known[d.ID] = true
	}
	resp := &pluginapi.AllocateResponse{}
	for _, c := range req.ContainerRequests {
		for _, id := range c.DevicesIds {
			if !known[id] {
				return nil, fmt.Errorf("unknown device %q", id)
			}
		}
		log.Printf("Allocate: %v", c.DevicesIds)
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerAllocateResponse{
			Envs: map[string]string{
				"FABRICCAP_EFA_DEVICES":  strings.Join(c.DevicesIds, ","),
				"FABRICCAP_EFA_RESOURCE": p.cfg.resource,
			},
			Annotations: map[string]string{"fabriccap.dev/efa-devices": strings.Join(c.DevicesIds, ",")},
		})
	}
	return resp, nil
}

func (p *plugin) PreStartContainer(_ context.Context, req *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
	log.Printf("PreStartContainer: %v", req.DevicesIds)
	return &pluginapi.PreStartContainerResponse{}, nil
}
