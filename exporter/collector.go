// Copyright: soperator.slurm contributors
// GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

package main

import (
	"context"
	"log"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// slurmCollector runs the active collectors once: one set of Slurm calls (sinfo, squeue, sshare, sdiag).
type slurmCollector struct {
	run    func(name string, args ...string) (string, error)
	active []string
	now    func() time.Time
}

func gauge(ch chan<- prometheus.Metric, name, help string, value float64, labels []string, values ...string) {
	ch <- prometheus.MustNewConstMetric(prometheus.NewDesc(name, help, labels, nil), prometheus.GaugeValue, value,
		values...)
}

// Collect runs every active collector (one after the other) and sends what they found.
func (c *slurmCollector) Collect(ch chan<- prometheus.Metric) {
	for _, name := range c.active {
		start := c.now()
		err := map[string]func(chan<- prometheus.Metric) error{
			"nodes": c.nodes, "partitions": c.partitions, "queue": c.queue, "drain_reason": c.drains,
			"fairshare": c.fairshare, "scheduler": c.scheduler,
		}[name](ch)
		success := 1.0
		if err != nil {
			success = 0
			log.Printf("collector %s: %v", name, err)
		}
		gauge(ch, "slurm_exporter_collector_success", "1 when the collector's commands answered, else 0.", success,
			[]string{"collector"}, name)
		gauge(ch, "slurm_exporter_collector_duration_seconds", "How long the collector took.",
			c.now().Sub(start).Seconds(), []string{"collector"}, name)
	}
}

// cache is what scrapes are answered with: the last collection's metrics. Only its loop asks Slurm, one
// collection at a time, once per interval, whatever the number of scrapes: an unauthenticated HTTP request never
// turns into a Slurm RPC. Unchecked collector (Describe sends nothing): the metrics depend on what Slurm has.
type cache struct {
	collect func(chan<- prometheus.Metric)
	now     func() time.Time

	mu          sync.RWMutex
	metrics     []prometheus.Metric
	last        time.Time
	collections float64
	ready       chan struct{} // closed once the first collection is in
	readyOnce   sync.Once
}

func newCache(collect func(chan<- prometheus.Metric), now func() time.Time) *cache {
	return &cache{collect: collect, now: now, ready: make(chan struct{})}
}

// refresh runs one collection and makes it the answer of the following scrapes.
func (k *cache) refresh() {
	ch := make(chan prometheus.Metric)
	var found []prometheus.Metric
	done := make(chan struct{})
	go func() {
		for m := range ch {
			found = append(found, m)
		}
		close(done)
	}()
	k.collect(ch)
	close(ch)
	<-done
	k.mu.Lock()
	k.metrics, k.last = found, k.now()
	k.collections++
	k.mu.Unlock()
	k.readyOnce.Do(func() { close(k.ready) })
}

// loop collects at once, then at each tick until ctx ends. A collection that outlasts the interval delays the next
// one (a ticker drops the ticks it could not deliver): never two at a time.
func (k *cache) loop(ctx context.Context, ticks <-chan time.Time) {
	k.refresh()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticks:
			k.refresh()
		}
	}
}

// Ready reports whether the first collection is in (the readiness probe).
func (k *cache) Ready() bool {
	select {
	case <-k.ready:
		return true
	default:
		return false
	}
}

func (k *cache) Describe(chan<- *prometheus.Desc) {}

func (k *cache) Collect(ch chan<- prometheus.Metric) {
	k.mu.RLock()
	metrics, last, collections := k.metrics, k.last, k.collections
	k.mu.RUnlock()
	for _, m := range metrics {
		ch <- m
	}
	ch <- prometheus.MustNewConstMetric(prometheus.NewDesc("slurm_exporter_collections_total",
		"Collections from Slurm since the exporter started (one set of Slurm calls each, one per interval).",
		nil, nil), prometheus.CounterValue, collections)
	if !last.IsZero() {
		gauge(ch, "slurm_exporter_last_collection_age_seconds", "Seconds since the last collection from Slurm "+
			"ended: the age of every slurm_* value of this scrape.", k.now().Sub(last).Seconds(), nil)
	}
}

func (c *slurmCollector) nodes(ch chan<- prometheus.Metric) error {
	out, err := c.run("sinfo", "-h", "-N", "-o", "%N|%T|%R")
	if err != nil {
		return err
	}
	counts := ParseNodes(out)
	for _, partition := range sortedKeys(counts.ByPartition) {
		for _, bucket := range NodeStates {
			gauge(ch, "slurm_nodes_"+bucket, "Nodes in state "+bucket+", per partition.",
				float64(counts.ByPartition[partition][bucket]), []string{"partition"}, partition)
		}
	}
	gauge(ch, "slurm_nodes_total", "Nodes Slurm knows (each once).", float64(counts.Total), nil)
	return nil
}

func (c *slurmCollector) partitions(ch chan<- prometheus.Metric) error {
	out, err := c.run("sinfo", "-h", "-o", "%R|%C")
	if err != nil {
		return err
	}
	cpus := PartitionCPUs(out)
	names := []string{"allocated", "idle", "other", "total"}
	for _, partition := range sortedKeys(cpus) {
		for i, kind := range names {
			gauge(ch, "slurm_partition_cpus_"+kind, "CPUs "+kind+", per partition.", cpus[partition][i],
				[]string{"partition"}, partition)
		}
	}
	return nil
}

func (c *slurmCollector) queue(ch chan<- prometheus.Metric) error {
	out, err := c.run("squeue", "-h", "-a", "-r", "-o", "%P|%T|%C|%r|%u|%V")
	if err != nil {
		return err
	}
	jobs := ParseJobs(out)
	now := c.now().Unix()
	totals := map[string]float64{}
	cores := map[string]float64{}
	type key struct{ user, partition, reason string }
	pending := map[key]float64{}
	running := map[key]float64{}
	perPartition := map[string]map[string]float64{}
	waitSum := map[string]float64{}
	waitMax := map[string]float64{}
	for _, job := range jobs {
		totals[job.State]++
		cores[job.State] += float64(job.CPUs)
		if perPartition[job.Partition] == nil {
			perPartition[job.Partition] = map[string]float64{}
		}
		perPartition[job.Partition][job.State]++
		switch job.State {
		case "pending":
			pending[key{job.User, job.Partition, job.Reason}]++
			if job.Submitted > 0 && now > job.Submitted {
				wait := float64(now - job.Submitted)
				waitSum[job.Partition] += wait
				if wait > waitMax[job.Partition] {
					waitMax[job.Partition] = wait
				}
			}
		case "running":
			running[key{job.User, job.Partition, ""}]++
		}
	}
	for _, state := range JobStates {
		gauge(ch, "slurm_jobs_"+state, "Jobs in state "+state+" (squeue).", totals[state], nil)
	}
	gauge(ch, "slurm_jobs_cores_pending", "CPUs asked by pending jobs.", cores["pending"], nil)
	gauge(ch, "slurm_jobs_cores_running", "CPUs of running jobs.", cores["running"], nil)
	for k, v := range pending {
		gauge(ch, "slurm_queue_pending", "Pending jobs by user, partition and reason.", v,
			[]string{"user", "partition", "reason"}, k.user, k.partition, k.reason)
	}
	for k, v := range running {
		gauge(ch, "slurm_queue_running", "Running jobs by user and partition.", v, []string{"user", "partition"},
			k.user, k.partition)
	}
	for _, partition := range sortedKeys(perPartition) {
		gauge(ch, "slurm_partition_jobs_pending", "Pending jobs, per partition.", perPartition[partition]["pending"],
			[]string{"partition"}, partition)
		gauge(ch, "slurm_partition_jobs_running", "Running jobs, per partition.", perPartition[partition]["running"],
			[]string{"partition"}, partition)
		gauge(ch, "slurm_queue_wait_seconds_sum", "Seconds the pending jobs of a partition have waited since "+
			"submission, added up (divide by slurm_partition_jobs_pending for the mean).", waitSum[partition],
			[]string{"partition"}, partition)
		gauge(ch, "slurm_queue_wait_seconds_max", "Seconds the longest-waiting pending job of a partition has "+
			"waited since submission.", waitMax[partition], []string{"partition"}, partition)
	}
	return nil
}

func (c *slurmCollector) drains(ch chan<- prometheus.Metric) error {
	out, err := c.run("sinfo", "-h", "-N", "-o", "%N|%E|%H|%T")
	if err != nil {
		return err
	}
	for _, d := range ParseDrains(out) {
		gauge(ch, "slurm_node_drain_reason_info", "1 per drained or down node, with its reason and since when.", 1,
			[]string{"node", "reason", "since"}, d.Node, d.Reason, d.Since)
	}
	return nil
}

func (c *slurmCollector) fairshare(ch chan<- prometheus.Metric) error {
	out, err := c.run("sshare", "-a", "-n", "-P", "-o", "Account,User,RawShares,NormShares,RawUsage,NormUsage,FairShare")
	if err != nil {
		return err
	}
	for _, s := range ParseShares(out) {
		if s.User == "" {
			labels := []string{"account"}
			gauge(ch, "slurm_account_fairshare_raw_shares", "Shares of the account.", s.RawShares, labels, s.Account)
			gauge(ch, "slurm_account_fairshare_norm_shares", "Shares of the account among its siblings (0-1).",
				s.NormShares, labels, s.Account)
			gauge(ch, "slurm_account_fairshare_raw_usage_cpu_seconds", "Decayed usage of the account.", s.RawUsage,
				labels, s.Account)
			gauge(ch, "slurm_account_fairshare_norm_usage", "Usage of the account among its siblings (0-1).",
				s.NormUsage, labels, s.Account)
			if s.HasFs {
				gauge(ch, "slurm_account_fairshare", "Fairshare factor of the account.", s.Fs, labels, s.Account)
			}
			continue
		}
		labels := []string{"account", "user"}
		gauge(ch, "slurm_user_fairshare_raw_usage_cpu_seconds", "Decayed usage of the user in the account.",
			s.RawUsage, labels, s.Account, s.User)
		if s.HasFs {
			gauge(ch, "slurm_user_fairshare", "Fairshare factor of the user in the account (0-1).", s.Fs, labels,
				s.Account, s.User)
		}
	}
	return nil
}

func (c *slurmCollector) scheduler(ch chan<- prometheus.Metric) error {
	out, err := c.run("sdiag")
	if err != nil {
		return err
	}
	figures := ParseSdiag(out)
	for _, name := range sortedKeys(figures) {
		gauge(ch, name, "sdiag: "+name+" (resets when slurmctld restarts).", figures[name], nil)
	}
	return nil
}
