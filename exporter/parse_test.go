// Copyright: soperator.slurm contributors
// GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func recorded(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name+".txt"))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestNodesFromSinfo(t *testing.T) {
	counts := ParseNodes(recorded(t, "sinfo_nodes"))
	want := map[string]map[string]int{"cpu": {"mix": 1, "drain": 1}}
	if !reflect.DeepEqual(counts.ByPartition, want) || counts.Total != 2 {
		t.Fatalf("got %v total %d", counts.ByPartition, counts.Total)
	}
	// A node in two partitions counts once in the total.
	if got := ParseNodes("n1|idle|a\nn1|idle|b\n").Total; got != 1 {
		t.Fatalf("total %d", got)
	}
}

func TestNodeBuckets(t *testing.T) {
	for state, bucket := range map[string]string{
		"idle": "idle", "idle*": "idle", "idle~": "idle", "allocated": "alloc", "mixed-": "mix", "drained": "drain",
		"draining": "drain", "mixed+drain": "drain", "down*": "down", "completing": "comp", "planned": "planned",
		"reserved": "resv", "maint": "maint", "fail": "fail", "failing": "fail", "inval": "inval", "unknown": "other",
	} {
		if got := nodeBucket(state); got != bucket {
			t.Errorf("%s: got %s, want %s", state, got, bucket)
		}
	}
}

func TestDrainsFromSinfo(t *testing.T) {
	got := ParseDrains(recorded(t, "sinfo_drains"))
	want := []Drain{{Node: "demo-cpu-1", Reason: "soperator: health: gpu: xid 79 on GPU 0", Since: "2026-11-24T15:16:37"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %#v", got)
	}
}

func TestJobsFromSqueue(t *testing.T) {
	jobs := ParseJobs(recorded(t, "squeue"))
	if len(jobs) != 3 {
		t.Fatalf("got %d jobs", len(jobs))
	}
	if jobs[0] != (Job{Partition: "cpu", State: "pending", Reason: "BeginTime", User: "root", CPUs: 1,
		Submitted: 1795533397}) {
		t.Fatalf("got %#v", jobs[0])
	}
	if jobs[2].State != "running" {
		t.Fatalf("got %#v", jobs[2])
	}
}

func TestPartitionCPUs(t *testing.T) {
	got := PartitionCPUs(recorded(t, "sinfo_partitions"))
	if got["cpu"] != [4]float64{1, 1, 2, 4} {
		t.Fatalf("got %v", got)
	}
}

func TestSharesFromSshare(t *testing.T) {
	shares := ParseShares(recorded(t, "sshare"))
	if len(shares) != 2 || shares[0].Account != "root" || shares[0].User != "" || shares[0].HasFs {
		t.Fatalf("got %#v", shares)
	}
	if shares[1].User != "root" || !shares[1].HasFs || shares[1].Fs != 1 || shares[1].NormShares != 1 {
		t.Fatalf("got %#v", shares[1])
	}
}

func TestSdiag(t *testing.T) {
	got := ParseSdiag(recorded(t, "sdiag"))
	want := map[string]float64{
		"slurm_scheduler_threads": 1, "slurm_scheduler_queue_size": 0, "slurm_scheduler_dbd_queue_size": 0,
		"slurm_scheduler_jobs_submitted": 3, "slurm_scheduler_jobs_started": 1, "slurm_scheduler_jobs_completed": 0,
		"slurm_scheduler_jobs_canceled": 0, "slurm_scheduler_jobs_failed": 0, "slurm_scheduler_last_cycle": 596,
		"slurm_scheduler_mean_cycle": 596, "slurm_scheduler_backfill_last_cycle": 0,
		"slurm_scheduler_backfilled_jobs_since_start_total": 0,
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v", got)
	}
}

// The collector over the recorded outputs: the exposition a scrape gets, and a failing command reported as a
// failed collector instead of a failed scrape.
func TestCollector(t *testing.T) {
	outputs := map[string]string{"sinfo -h -N -o %N|%T|%R": "sinfo_nodes", "sinfo -h -o %R|%C": "sinfo_partitions",
		"squeue -h -a -r -o %P|%T|%C|%r|%u|%V": "squeue", "sinfo -h -N -o %N|%E|%H|%T": "sinfo_drains",
		"sdiag": "sdiag"}
	run := func(name string, args ...string) (string, error) {
		key := strings.Join(append([]string{name}, args...), " ")
		if file, ok := outputs[key]; ok {
			return recorded(t, file), nil
		}
		return "", os.ErrNotExist // sshare: no accounting
	}
	now := func() time.Time { return time.Unix(1795533457, 0) }
	c := &slurmCollector{run: run, active: collectorNames, now: now}
	last := newCache(c.Collect, now)
	last.refresh()
	registry := prometheus.NewPedanticRegistry()
	registry.MustRegister(last)
	expected := `
# HELP slurm_jobs_pending Jobs in state pending (squeue).
# TYPE slurm_jobs_pending gauge
slurm_jobs_pending 2
# HELP slurm_nodes_drain Nodes in state drain, per partition.
# TYPE slurm_nodes_drain gauge
slurm_nodes_drain{partition="cpu"} 1
# HELP slurm_queue_wait_seconds_max Seconds the longest-waiting pending job of a partition has waited since submission.
# TYPE slurm_queue_wait_seconds_max gauge
slurm_queue_wait_seconds_max{partition="cpu"} 60
# HELP slurm_exporter_collector_success 1 when the collector's commands answered, else 0.
# TYPE slurm_exporter_collector_success gauge
slurm_exporter_collector_success{collector="drain_reason"} 1
slurm_exporter_collector_success{collector="fairshare"} 0
slurm_exporter_collector_success{collector="nodes"} 1
slurm_exporter_collector_success{collector="partitions"} 1
slurm_exporter_collector_success{collector="queue"} 1
slurm_exporter_collector_success{collector="scheduler"} 1
`
	if err := testutil.GatherAndCompare(registry, strings.NewReader(expected), "slurm_jobs_pending",
		"slurm_nodes_drain", "slurm_queue_wait_seconds_max", "slurm_exporter_collector_success"); err != nil {
		t.Fatal(err)
	}
}
