// sleeper is the test workload: it prints the device-plugin environment it was given
// (FABRICCAP_EFA_*), then sleeps until SIGTERM/SIGINT. With -exit-after it exits instead.
//
// With -print it first prints a file as it is, a log it stands for (an NCCL log excerpt from a
// ConfigMap). Several files (-print a,b) are one per run of the container, counted in -state
// (an emptyDir, which outlives a container's restarts): the first run prints a, the next b, and
// so on, the last file for every later run. The runs before the last file's exit after
// -exit-after, so that the kubelet restarts the container; the last one sleeps.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// run counts this run of the container in dir (0 for the first) and returns its number.
func run(dir string) int {
	if dir == "" {
		return 0
	}
	path := filepath.Join(dir, "runs")
	runs := 0
	if data, err := os.ReadFile(path); err == nil {
		runs, _ = strconv.Atoi(strings.TrimSpace(string(data)))
	}
	if err := os.WriteFile(path, []byte(strconv.Itoa(runs+1)), 0o644); err != nil {
		fmt.Fprintf(os.Stderr, "sleeper: cannot count runs in %s: %v\n", dir, err)
	}
	return runs
}

func main() {
	exitAfter := flag.Duration("exit-after", 0, "exit 0 after this long (0: run until signalled)")
	printFiles := flag.String("print", "", "files to print first, one per run of the container (comma-separated)")
	state := flag.String("state", "", "a directory that outlives restarts, where runs are counted")
	flag.Parse()
	number := run(*state)
	last := true
	if *printFiles != "" {
		files := strings.Split(*printFiles, ",")
		index := number
		if index >= len(files) {
			index = len(files) - 1
		}
		last = index == len(files)-1
		data, err := os.ReadFile(files[index])
		if err != nil {
			fmt.Fprintf(os.Stderr, "sleeper: %v\n", err)
			os.Exit(2)
		}
		os.Stdout.Write(data)
	}
	env := os.Environ()
	sort.Strings(env)
	for _, kv := range env {
		if strings.HasPrefix(kv, "FABRICCAP_") || strings.HasPrefix(kv, "EFA_") {
			fmt.Println(kv)
		}
	}
	host, _ := os.Hostname()
	fmt.Printf("sleeper on %s: started (run %d)\n", host, number)
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	var timeout <-chan time.Time
	if *exitAfter > 0 && (!last || *printFiles == "") {
		timeout = time.After(*exitAfter)
	}
	select {
	case sig := <-signals:
		fmt.Printf("sleeper: %v, exiting\n", sig)
	case <-timeout:
		fmt.Println("sleeper: done")
	}
}
