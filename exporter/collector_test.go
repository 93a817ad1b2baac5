// Copyright: soperator.slurm contributors
// GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// countingSlurm answers every command with the recordings and counts the calls, and the most at one time.
type countingSlurm struct {
	t        *testing.T
	calls    atomic.Int64
	inFlight atomic.Int64
	most     atomic.Int64
	hold     chan struct{} // when set, each call waits for it
}

var commandFiles = map[string]string{"sinfo -h -N -o %N|%T|%R": "sinfo_nodes", "sinfo -h -o %R|%C": "sinfo_partitions",
	"squeue -h -a -r -o %P|%T|%C|%r|%u|%V": "squeue", "sinfo -h -N -o %N|%E|%H|%T": "sinfo_drains", "sdiag": "sdiag",
	"sshare -a -n -P -o Account,User,RawShares,NormShares,RawUsage,NormUsage,FairShare": "sshare"}

func (s *countingSlurm) run(name string, args ...string) (string, error) {
	s.calls.Add(1)
	now := s.inFlight.Add(1)
	defer s.inFlight.Add(-1)
	for {
		most := s.most.Load()
		if now <= most || s.most.CompareAndSwap(most, now) {
			break
		}
	}
	if s.hold != nil {
		<-s.hold
	}
	return recorded(s.t, commandFiles[strings.Join(append([]string{name}, args...), " ")]), nil
}

func newServer(t *testing.T, slurm *countingSlurm, now func() time.Time) (*cache, *httptest.Server) {
	t.Helper()
	last := newCache((&slurmCollector{run: slurm.run, active: collectorNames, now: now}).Collect, now)
	registry := prometheus.NewRegistry()
	registry.MustRegister(last)
	server := httptest.NewServer(handler(registry, last))
	t.Cleanup(server.Close)
	return last, server
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	response, err := http.Get(url)
	if err != nil {
		t.Error(err)
		return 0, ""
	}
	defer response.Body.Close()
	body, _ := io.ReadAll(response.Body)
	return response.StatusCode, string(body)
}

// 200 concurrent scrapes make no Slurm call: each is answered with the last collection.
func TestConcurrentScrapesNeverCallSlurm(t *testing.T) {
	slurm := &countingSlurm{t: t}
	clock := time.Unix(1795533457, 0)
	last, server := newServer(t, slurm, func() time.Time { return clock })
	if code, _ := get(t, server.URL+"/healthz"); code != http.StatusServiceUnavailable {
		t.Fatalf("healthz before the first collection: %d", code)
	}
	last.refresh()
	perCollection := slurm.calls.Load()
	if perCollection != int64(len(collectorNames)) {
		t.Fatalf("one collection made %d calls, want one per collector (%d)", perCollection, len(collectorNames))
	}
	if code, _ := get(t, server.URL+"/healthz"); code != http.StatusOK {
		t.Fatalf("healthz after the first collection: %d", code)
	}
	var wg sync.WaitGroup
	bodies := make([]string, 200)
	for i := range bodies {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			code, body := get(t, server.URL+"/metrics")
			if code != http.StatusOK {
				t.Errorf("scrape %d: %d", i, code)
			}
			bodies[i] = body
		}(i)
	}
	wg.Wait()
	if got := slurm.calls.Load(); got != perCollection {
		t.Fatalf("200 scrapes made %d Slurm calls", got-perCollection)
	}
	for i, body := range bodies {
		if !strings.Contains(body, "\nslurm_exporter_collections_total 1\n") || !strings.Contains(body,
			"\nslurm_jobs_pending 2\n") {
			t.Fatalf("scrape %d did not get the last collection:\n%s", i, body)
		}
	}
}

// The loop collects at once, then once per tick; a collection slower than the interval is never overlapped.
func TestOneCollectionPerTickNeverTwoAtATime(t *testing.T) {
	slurm := &countingSlurm{t: t, hold: make(chan struct{})}
	last, server := newServer(t, slurm, time.Now)
	ticks := make(chan time.Time)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { last.loop(ctx, ticks); close(done) }()
	// The first collection is stuck in its first command; ticks meanwhile find no one to take them.
	for slurm.inFlight.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	select {
	case ticks <- time.Now():
		t.Fatal("a tick was taken while a collection ran")
	case <-time.After(50 * time.Millisecond):
	}
	close(slurm.hold) // from now on every command answers at once
	for i := 0; i < 3; i++ {
		ticks <- time.Now()
	}
	cancel()
	<-done
	if got, want := slurm.calls.Load(), int64(4*len(collectorNames)); got != want {
		t.Fatalf("%d calls for the first collection and 3 ticks, want %d", got, want)
	}
	if most := slurm.most.Load(); most != 1 {
		t.Fatalf("%d Slurm calls at one time", most)
	}
	_, body := get(t, server.URL+"/metrics")
	if !strings.Contains(body, "\nslurm_exporter_collections_total 4\n") {
		t.Fatalf("collections_total after 4 collections:\n%s", body)
	}
}

// The age of the last result grows with the clock until the next collection resets it.
func TestAgeOfTheLastCollection(t *testing.T) {
	slurm := &countingSlurm{t: t}
	clock := time.Unix(1795533457, 0)
	last, _ := newServer(t, slurm, func() time.Time { return clock })
	registry := prometheus.NewPedanticRegistry()
	registry.MustRegister(last)
	if err := testutil.GatherAndCompare(registry, strings.NewReader(`
# HELP slurm_exporter_collections_total Collections from Slurm since the exporter started (one set of Slurm calls each, one per interval).
# TYPE slurm_exporter_collections_total counter
slurm_exporter_collections_total 0
`), "slurm_exporter_collections_total", "slurm_exporter_last_collection_age_seconds"); err != nil {
		t.Fatal(err) // no age before the first collection
	}
	last.refresh()
	clock = clock.Add(42 * time.Second)
	if got := testutil.ToFloat64(ageOnly{last}); got != 42 {
		t.Fatalf("age %v", got)
	}
	last.refresh()
	if got := testutil.ToFloat64(ageOnly{last}); got != 0 {
		t.Fatalf("age after a new collection %v", got)
	}
}

// ageOnly is the cache's age gauge alone (ToFloat64 wants one metric).
type ageOnly struct{ k *cache }

func (a ageOnly) Describe(chan<- *prometheus.Desc) {}

func (a ageOnly) Collect(ch chan<- prometheus.Metric) {
	all := make(chan prometheus.Metric)
	go func() { a.k.Collect(all); close(all) }()
	for m := range all {
		if strings.Contains(m.Desc().String(), `"slurm_exporter_last_collection_age_seconds"`) {
			ch <- m
		}
	}
}
