// scalesim: an API server for the kinds fabriccap watches, fast enough to serve 100,000
// Nodes and a million Pods on a laptop, and honest about the protocol the operator relies on
// (paged LIST from one snapshot, WATCH with bookmarks and 410 Gone, streaming lists, gzip).
// Writes go to a sink that stores what must read back (the operator's FabricCapabilities
// and Leases) and counts the rest (Events). A new FabricCapability is served with its CRD's
// status default (--status-default, which the launcher reads from the CRD), as the API server
// serves it. The benchmark drives churn, probes and faults through a separate admin port.
//
// Started by fabriccap_devtools.scalesim (which builds it into the cache through gotools);
// it listens on 127.0.0.1 only, writes two kubeconfigs (the operator's, and the benchmark's
// whose token faults spare), and writes a ready file with both addresses once serving.
package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha1"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"flag"
	"fmt"
	"log"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

const operatorToken = "scalesim-operator"

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "the API's address (loopback only)")
	adminListen := flag.String("admin-listen", "127.0.0.1:0", "the admin API's address (plain HTTP)")
	plain := flag.Bool("plain-http", false, "serve the API over plain HTTP instead of TLS")
	kubeconfig := flag.String("kubeconfig", "", "write the operator's kubeconfig here")
	benchKubeconfig := flag.String("bench-kubeconfig", "", "write the benchmark's kubeconfig here (faults spare it)")
	readyFile := flag.String("ready-file", "", "write {server, admin} here once serving")
	world := flag.String("world", "", "a world file (fabriccap_devtools.scalesim.world) to start with")
	historyCapacity := flag.Int("history", 100*1024, "events kept per kind (the watch cache's upper bound)")
	bookmarkInterval := flag.Duration("bookmark-interval", time.Minute, "BOOKMARK period of an idle watch")
	snapshotTTL := flag.Duration("snapshot-ttl", 5*time.Minute, "how long a LIST snapshot (its continue tokens) lives")
	statusLog := flag.Int("status-log", 200_000, "FabricCapability status writes kept for /writes")
	deliverySamples := flag.Int("delivery-samples", 5_000_000, "watch delivery latencies kept per kind")
	readLagPeriod := flag.Duration("read-lag-period", 0,
		"how often the operator's reads of its watches are sampled from /proc/net/tcp (readlag.go); 0: never")
	backgroundWrites := flag.Int("background-writes", -1,
		"versions taken a second by writes to kinds not served here (Leases); -1: the world's nodes/10 + 1, 0: none")
	var statusDefaults statusDefaultFlags
	flag.Var(&statusDefaults, "status-default",
		"RESOURCE=JSON: the status an object of that kind is served with until its status is written (repeatable)")
	flag.Parse()
	log.SetFlags(log.LstdFlags | log.Lmicroseconds)
	log.SetPrefix("scalesim ")

	server := &Server{
		store:    newStore(*historyCapacity, *snapshotTTL),
		faults:   newFaults(),
		stats:    newStats(*deliverySamples),
		sink:     newSink(*statusLog),
		bookmark: *bookmarkInterval,
		unknown:  map[string]bool{},
	}
	if *readLagPeriod > 0 {
		server.reads = newReadLag(server.stats, "/proc/net/tcp")
		go server.reads.run(*readLagPeriod)
	}
	templates := map[string]*Template{}
	if *world != "" {
		started := time.Now()
		if err := server.loadWorld(*world, templates); err != nil {
			log.Fatalf("loading %s: %v", *world, err)
		}
		log.Printf("loaded %v in %.1fs", server.store.counts(), time.Since(started).Seconds())
	}
	if *backgroundWrites < 0 {
		*backgroundWrites = nodeLeaseRenewals(server.store.counts()[kindByResource("nodes").GroupResource()])
	}
	if *backgroundWrites > 0 {
		log.Printf("background writes: %d a second", *backgroundWrites)
		go server.store.backgroundWrites(*backgroundWrites, nil)
	}

	listener, err := net.Listen("tcp", *listen)
	must(err)
	apiListener := countingListener{listener} // the bytes each connection sent: readlag.go
	adminListener, err := net.Listen("tcp", *adminListen)
	must(err)
	scheme := "https"
	api := &http.Server{
		Handler:           server,
		ReadHeaderTimeout: 30 * time.Second,
		// HTTP/1.1 only: what the operator's aiohttp client speaks.
		TLSNextProto: map[string]func(*http.Server, *tls.Conn, http.Handler){},
		// The connection under each request, for the watches' read latencies (readlag.go).
		ConnContext: func(ctx context.Context, conn net.Conn) context.Context {
			return context.WithValue(ctx, connKey{}, conn)
		},
		ErrorLog: log.New(os.Stderr, "scalesim http ", log.LstdFlags),
	}
	var caPEM []byte
	if *plain {
		scheme = "http"
		go func() { serveOrDie(api.Serve(apiListener)) }()
	} else {
		certificate, certPEM := selfSigned()
		caPEM = certPEM
		api.TLSConfig = &tls.Config{Certificates: []tls.Certificate{certificate}, MinVersion: tls.VersionTLS12}
		go func() { serveOrDie(api.ServeTLS(apiListener, "", "")) }()
	}
	admin := &Admin{server: server, templates: templates}
	go func() {
		serveOrDie((&http.Server{Handler: admin.routes(), ReadHeaderTimeout: 10 * time.Second}).Serve(adminListener))
	}()
	go func() {
		for range time.Tick(min(10*time.Second, max(*snapshotTTL/2, 10*time.Millisecond))) {
			server.store.expireSnapshots(time.Now())
		}
	}()

	address := fmt.Sprintf("%s://%s", scheme, apiListener.Addr())
	if *kubeconfig != "" {
		must(writeKubeconfig(*kubeconfig, address, caPEM, operatorToken))
	}
	if *benchKubeconfig != "" {
		must(writeKubeconfig(*benchKubeconfig, address, caPEM, exemptToken))
	}
	ready := map[string]string{"server": address, "admin": "http://" + adminListener.Addr().String()}
	if *readyFile != "" {
		encoded, _ := json.Marshal(ready)
		must(os.WriteFile(*readyFile+".tmp", encoded, 0o600))
		must(os.Rename(*readyFile+".tmp", *readyFile))
	}
	log.Printf("serving %s, admin %s", ready["server"], ready["admin"])

	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	<-signals
	log.Printf("stopping")
}

func must(err error) {
	if err != nil {
		log.Fatal(err)
	}
}

func serveOrDie(err error) {
	if err != nil && err != http.ErrServerClosed {
		log.Fatal(err)
	}
}

// selfSigned is a fresh ECDSA certificate for 127.0.0.1 that is its own CA (the kubeconfig
// trusts it): no key outlives the process.
func selfSigned() (tls.Certificate, []byte) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(err)
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	must(err)
	publicKey, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	must(err)
	keyID := sha1.Sum(publicKey)
	template := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "scalesim"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(7 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		SubjectKeyId:          keyID[:],
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:              []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, template, template, &key.PublicKey, key)
	must(err)
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyDER, err := x509.MarshalECPrivateKey(key)
	must(err)
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	certificate, err := tls.X509KeyPair(certPEM, keyPEM)
	must(err)
	return certificate, certPEM
}

func writeKubeconfig(path, server string, caPEM []byte, token string) error {
	cluster := fmt.Sprintf("    server: %s\n", server)
	if caPEM != nil {
		cluster += fmt.Sprintf("    certificate-authority-data: %s\n", base64.StdEncoding.EncodeToString(caPEM))
	}
	text := "apiVersion: v1\nkind: Config\nclusters:\n- name: scalesim\n  cluster:\n" + cluster +
		"users:\n- name: scalesim\n  user:\n    token: " + token + "\n" +
		"contexts:\n- name: scalesim\n  context:\n    cluster: scalesim\n    user: scalesim\n" +
		"current-context: scalesim\n"
	return os.WriteFile(path, []byte(text), 0o600)
}

// statusDefaultFlags sets each --status-default RESOURCE=JSON on its kind, as a CRD's default
// for status is: the API server serves it until the status is written (the caller reads it
// from the CRD, the one place it is said).
type statusDefaultFlags []string

func (f *statusDefaultFlags) String() string { return fmt.Sprint(*f) }

func (f *statusDefaultFlags) Set(value string) error {
	resource, raw, found := strings.Cut(value, "=")
	kind := kindByResource(resource)
	switch {
	case !found:
		return fmt.Errorf("want RESOURCE=JSON, got %q", value)
	case kind == nil || !kind.StatusSubresource:
		return fmt.Errorf("%q is no served kind with a status subresource", resource)
	}
	if _, err := decodeDocument([]byte(raw)); err != nil {
		return fmt.Errorf("the status default of %s is not a JSON object: %v", resource, err)
	}
	kind.StatusDefault = json.RawMessage(raw)
	*f = append(*f, value)
	return nil
}
