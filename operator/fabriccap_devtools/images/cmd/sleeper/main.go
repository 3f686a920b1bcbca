// sleeper is the test workload: it prints the device-plugin environment it was given
// (FABRICCAP_EFA_*), then sleeps until SIGTERM/SIGINT. With -exit-after it exits instead.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"time"
)

func main() {
	exitAfter := flag.Duration("exit-after", 0, "exit 0 after this long (0: run until signalled)")
	flag.Parse()
	env := os.Environ()
	sort.Strings(env)
	for _, kv := range env {
		if strings.HasPrefix(kv, "FABRICCAP_") || strings.HasPrefix(kv, "EFA_") {
			fmt.Println(kv)
		}
	}
	host, _ := os.Hostname()
	fmt.Printf("sleeper on %s: started\n", host)
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	var timeout <-chan time.Time
	if *exitAfter > 0 {
		timeout = time.After(*exitAfter)
	}
	select {
	case sig := <-signals:
		fmt.Printf("sleeper: %v, exiting\n", sig)
	case <-timeout:
		fmt.Println("sleeper: done")
	}
}
