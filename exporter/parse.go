// Copyright: soperator.slurm contributors
// GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

package main

// Pure parsers of the Slurm commands' output: text in, facts out. Tested with outputs recorded from Slurm 24.11
// (testdata/), never invented ones.

import (
	"sort"
	"strconv"
	"strings"
)

// NodeStates are the node state buckets, named as the metrics slurm_nodes_<bucket> (the names of
// github.com/sckyzo/slurm_exporter, so dashboards and alerts written for it work here too).
var NodeStates = []string{"alloc", "comp", "down", "drain", "err", "fail", "idle", "inval", "maint", "mix",
	"planned", "resv", "other"}

// nodeBucket maps sinfo's long state (%T: "idle", "drained", "mixed-", "allocated*", "idle+drain"...) to a bucket.
// A drain flag wins over the base state: a drained node takes no new job whatever it runs.
func nodeBucket(state string) string {
	s := strings.ToLower(strings.TrimRight(state, "*~#!%$@^-"))
	if strings.Contains(s, "drain") {
		return "drain"
	}
	base := strings.SplitN(s, "+", 2)[0]
	switch {
	case strings.HasPrefix(base, "alloc"):
		return "alloc"
	case strings.HasPrefix(base, "comp"):
		return "comp"
	case strings.HasPrefix(base, "down"):
		return "down"
	case strings.HasPrefix(base, "err"):
		return "err"
	case strings.HasPrefix(base, "fail"):
		return "fail"
	case strings.HasPrefix(base, "idle"):
		return "idle"
	case strings.HasPrefix(base, "inval"):
		return "inval"
	case strings.HasPrefix(base, "maint"):
		return "maint"
	case strings.HasPrefix(base, "mix"):
		return "mix"
	case strings.HasPrefix(base, "plan"):
		return "planned"
	case strings.HasPrefix(base, "res"):
		return "resv"
	}
	return "other"
}

// NodeCounts: per partition, per bucket, how many nodes; and the distinct nodes.
type NodeCounts struct {
	ByPartition map[string]map[string]int
	Total       int
}

// ParseNodes reads `sinfo -h -N -o %N|%T|%R` (a node once per partition it is in).
func ParseNodes(out string) NodeCounts {
	counts := NodeCounts{ByPartition: map[string]map[string]int{}}
	seen := map[string]bool{}
	for _, line := range lines(out) {
		f := strings.Split(line, "|")
		if len(f) != 3 {
			continue
		}
		node, state, partition := f[0], f[1], f[2]
		if counts.ByPartition[partition] == nil {
			counts.ByPartition[partition] = map[string]int{}
		}
		counts.ByPartition[partition][nodeBucket(state)]++
		seen[node] = true
	}
	counts.Total = len(seen)
	return counts
}

// Drain is one drained or down node with the reason an admin, a health check or the operator gave.
type Drain struct {
	Node, Reason, Since string
}

// ParseDrains reads `sinfo -h -N -o %N|%E|%H|%T`: nodes that are drained, draining or down with a reason.
func ParseDrains(out string) []Drain {
	var found []Drain
	seen := map[string]bool{}
	for _, line := range lines(out) {
		f := strings.Split(line, "|")
		if len(f) != 4 || seen[f[0]] {
			continue
		}
		bucket := nodeBucket(f[3])
		if (bucket != "drain" && bucket != "down") || f[1] == "none" || f[1] == "" {
			continue
		}
		seen[f[0]] = true
		found = append(found, Drain{Node: f[0], Reason: f[1], Since: f[2]})
	}
	return found
}

// JobStates are the job states of the slurm_jobs_<state> totals (always emitted, zero included).
var JobStates = []string{"pending", "running", "suspended", "completing", "completed", "configuring", "failed",
	"timeout", "preempted", "node_fail", "cancelled"}

// Job is one line of `squeue -h -a -r -o %P|%T|%C|%r|%u|%V` (with SLURM_TIME_FORMAT=%s: %V in epoch seconds).
type Job struct {
	Partition, State, Reason, User string
	CPUs                           int
	Submitted                      int64
}

// ParseJobs reads squeue's lines; a job in several partitions (pending) counts in the first one listed.
func ParseJobs(out string) []Job {
	var jobs []Job
	for _, line := range lines(out) {
		f := strings.Split(line, "|")
		if len(f) != 6 {
			continue
		}
		cpus, _ := strconv.Atoi(f[2])
		submitted, _ := strconv.ParseInt(f[5], 10, 64)
		state := strings.ToLower(f[1])
		if state == "canceled" {
			state = "cancelled"
		}
		jobs = append(jobs, Job{Partition: strings.SplitN(f[0], ",", 2)[0], State: state, CPUs: cpus,
			Reason: f[3], User: f[4], Submitted: submitted})
	}
	return jobs
}

// PartitionCPUs reads `sinfo -h -o %R|%C` (%C: allocated/idle/other/total).
func PartitionCPUs(out string) map[string][4]float64 {
	result := map[string][4]float64{}
	for _, line := range lines(out) {
		f := strings.Split(line, "|")
		if len(f) != 2 {
			continue
		}
		parts := strings.Split(f[1], "/")
		if len(parts) != 4 {
			continue
		}
		var v [4]float64
		for i, p := range parts {
			v[i], _ = strconv.ParseFloat(p, 64)
		}
		old := result[f[0]]
		for i := range v {
			v[i] += old[i] // a partition listed on several lines (different node states)
		}
		result[f[0]] = v
	}
	return result
}

// Share is one association of `sshare -a -n -P -o Account,User,RawShares,NormShares,RawUsage,NormUsage,FairShare`.
type Share struct {
	Account, User                                  string
	RawShares, NormShares, RawUsage, NormUsage, Fs float64
	HasFs                                          bool
}

// ParseShares reads sshare's associations (the root account's own line included); numbers that are empty
// (an account's FairShare under the classic algorithm) leave HasFs false.
func ParseShares(out string) []Share {
	var shares []Share
	for _, line := range lines(out) {
		f := strings.Split(line, "|")
		if len(f) != 7 {
			continue
		}
		s := Share{Account: strings.TrimSpace(f[0]), User: f[1]}
		s.RawShares = number(f[2])
		s.NormShares = number(f[3])
		s.RawUsage = number(f[4])
		s.NormUsage = number(f[5])
		if f[6] != "" {
			s.Fs, s.HasFs = number(f[6]), true
		}
		shares = append(shares, s)
	}
	return shares
}

// SdiagKeys maps sdiag's labels to the gauge names they are exported as.
var SdiagKeys = map[string]string{
	"Server thread count":  "slurm_scheduler_threads",
	"Agent queue size":     "slurm_scheduler_queue_size",
	"DBD Agent queue size": "slurm_scheduler_dbd_queue_size",
	"Jobs submitted":       "slurm_scheduler_jobs_submitted",
	"Jobs started":         "slurm_scheduler_jobs_started",
	"Jobs completed":       "slurm_scheduler_jobs_completed",
	"Jobs canceled":        "slurm_scheduler_jobs_canceled",
	"Jobs failed":          "slurm_scheduler_jobs_failed",
	"Last cycle":           "slurm_scheduler_last_cycle",
	"Mean cycle":           "slurm_scheduler_mean_cycle",
	"Cycles per minute":    "slurm_scheduler_cycle_per_minute",
	"Total backfilled jobs (since last slurm start)": "slurm_scheduler_backfilled_jobs_since_start_total",
}

// ParseSdiag reads the main scheduler's and the backfill scheduler's figures from sdiag's text. "Last cycle"
// and "Mean cycle" appear in both sections: the backfill ones get the slurm_scheduler_backfill_ prefix.
func ParseSdiag(out string) map[string]float64 {
	result := map[string]float64{}
	backfill := false
	for _, line := range strings.Split(out, "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "Backfilling stats") {
			backfill = true
		}
		if strings.HasPrefix(trimmed, "Latency for") || strings.HasPrefix(trimmed, "Remote Procedure Call") {
			backfill = false
		}
		key, value, ok := strings.Cut(trimmed, ":")
		if !ok {
			continue
		}
		name, known := SdiagKeys[strings.TrimSpace(key)]
		if !known {
			continue
		}
		v, err := strconv.ParseFloat(strings.Fields(value + " x")[0], 64)
		if err != nil {
			continue
		}
		switch {
		case backfill && (name == "slurm_scheduler_last_cycle" || name == "slurm_scheduler_mean_cycle"):
			name = strings.Replace(name, "slurm_scheduler_", "slurm_scheduler_backfill_", 1)
		case backfill != (name == "slurm_scheduler_backfilled_jobs_since_start_total"):
			continue // a main-scheduler figure in the backfill section, or the other way round
		}
		if _, done := result[name]; !done {
			result[name] = v
		}
	}
	return result
}

func number(s string) float64 {
	v, _ := strconv.ParseFloat(strings.TrimSpace(s), 64)
	return v
}

func lines(out string) []string {
	var result []string
	for _, line := range strings.Split(out, "\n") {
		if strings.TrimSpace(line) != "" {
			result = append(result, strings.TrimRight(line, "\r"))
		}
	}
	return result
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
