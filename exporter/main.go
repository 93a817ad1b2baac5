// Copyright: soperator.slurm contributors
// GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

// slurm-exporter serves Slurm's state as Prometheus metrics: nodes by state and partition, jobs by state, the
// queue (pending jobs by reason, their wait), partitions' CPUs, drain reasons, fairshare, scheduler figures. It runs
// the Slurm client commands (sinfo, squeue, sshare, sdiag), each with a timeout, once per --collect.interval in one
// goroutine, and answers every scrape with the last result: however many scrapes come, slurmctld sees one set of
// calls per interval.
//
// Flags and metric names follow github.com/sckyzo/slurm_exporter (--web.listen-address, --[no-]collector.<name>,
// slurm_nodes_idle, slurm_jobs_pending, slurm_node_drain_reason_info, ...) for the metrics both serve, so its
// dashboards and alerts work on ours and either image can stand in for the other. docs/metrics.md lists them.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// version is set at build time (-ldflags -X main.version=...).
var version = "dev"

// collectorNames in the order they run; every one is on unless --no-collector.<name>.
var collectorNames = []string{"nodes", "partitions", "queue", "drain_reason", "fairshare", "scheduler"}

type runner struct {
	binPath string
	timeout time.Duration
}

// run executes a Slurm command with the timeout; stdout, or an error with its stderr.
func (r runner) run(name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), r.timeout)
	defer cancel()
	path := name
	if r.binPath != "" {
		path = filepath.Join(r.binPath, name)
	}
	cmd := exec.CommandContext(ctx, path, args...)
	// Epoch seconds wherever Slurm prints a time (squeue's submit time).
	cmd.Env = append(os.Environ(), "SLURM_TIME_FORMAT=%s")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

func main() {
	listen := flag.String("web.listen-address", ":9341", "address to serve /metrics and /healthz on")
	timeout := flag.Duration("command.timeout", 10*time.Second, "timeout of each Slurm command")
	interval := flag.Duration("collect.interval", 30*time.Second, "how often to collect from Slurm (scrapes are "+
		"answered with the last collection)")
	binPath := flag.String("slurm.bin-path", "", "directory of the Slurm commands (default: PATH)")
	showVersion := flag.Bool("version", false, "print the version and exit")
	enabled := map[string]*bool{}
	disabled := map[string]*bool{}
	for _, name := range collectorNames {
		enabled[name] = flag.Bool("collector."+name, true, "run the "+name+" collector")
		disabled[name] = flag.Bool("no-collector."+name, false, "do not run the "+name+" collector")
	}
	flag.Parse()
	if *showVersion {
		fmt.Println("slurm-exporter", version)
		return
	}
	var active []string
	for _, name := range collectorNames {
		if *enabled[name] && !*disabled[name] {
			active = append(active, name)
		}
	}
	if *interval <= 0 {
		log.Fatalf("--collect.interval must be positive, not %s", *interval)
	}
	slurm := &slurmCollector{run: runner{binPath: *binPath, timeout: *timeout}.run, active: active, now: time.Now}
	last := newCache(slurm.Collect, time.Now)
	ticker := time.NewTicker(*interval)
	go last.loop(context.Background(), ticker.C)
	registry := prometheus.NewRegistry()
	registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		last)
	server := &http.Server{Addr: *listen, Handler: handler(registry, last), ReadHeaderTimeout: 10 * time.Second}
	log.Printf("slurm-exporter %s listening on %s, collectors %s, every %s", version, *listen,
		strings.Join(active, ","), *interval)
	log.Fatal(server.ListenAndServe())
}

// handler serves /metrics from the registry (never calling Slurm) and /healthz, ready once the first collection
// is in.
func handler(registry *prometheus.Registry, last *cache) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(registry, promhttp.HandlerOpts{ErrorLog: log.Default()}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		if !last.Ready() {
			http.Error(w, "no collection from Slurm yet", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	return mux
}
