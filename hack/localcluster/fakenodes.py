"""The kwok node pool: fake nodes (some with GPUs) that play kubelet for the pods scheduled on them."""

import json

import localcluster as lc


def node_manifest(name, gpu):
    labels = {
        "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
        "type": "kwok", "soperator.dev/localcluster": "kwok",
    }
    capacity = {"cpu": "32", "memory": "128Gi", "pods": "110", "ephemeral-storage": "500Gi"}
    if gpu:
        labels.update({"nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": lc.GPU_PRODUCT,
                       "nvidia.com/gpu.count": "8"})
        capacity["nvidia.com/gpu"] = "8"
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": labels, "annotations": {lc.KWOK_ANNOTATION[0]: lc.KWOK_ANNOTATION[1]}},
        "status": {"allocatable": capacity, "capacity": capacity},
    }


def set_nodes(state, count, gpu_count):
    """Make the kwok pool exactly `count` nodes named kwok-node-<i>, the first `gpu_count` with GPUs."""
    if gpu_count > count:
        raise SystemExit("localcluster: --gpu-nodes (%d) cannot exceed the node count (%d)" % (gpu_count, count))
    want = {"kwok-node-%d" % i: i < gpu_count for i in range(count)}
    out = lc.kubectl(state, "get", "nodes", "-l", "type=kwok", "-o", "jsonpath={.items[*].metadata.name}").stdout
    have = set(out.split())
    extra = sorted(have - set(want))
    if extra:
        lc.kubectl(state, "delete", "node", "--wait=false", *extra)
    items = [node_manifest(n, gpu) for n, gpu in want.items()]
    for i in range(0, len(items), 250):
        body = json.dumps({"apiVersion": "v1", "kind": "List", "items": items[i:i + 250]})
        lc.kubectl(state, "apply", "--server-side", "--field-manager=localcluster", "-f", "-", input_data=body)
    # Status in an apply only counts when the object is created: nodes that already existed get their
    # capacity through the status subresource (a CPU node may have become a GPU node, or the reverse).
    for item in items:
        name = item["metadata"]["name"]
        if name in have:
            capacity = dict(item["status"]["capacity"])
            capacity.setdefault("nvidia.com/gpu", None)  # merge patch: null removes GPUs from a CPU node
            lc.kubectl(state, "patch", "node", name, "--subresource=status", "--type=merge", "-p",
                    json.dumps({"status": {"capacity": capacity, "allocatable": capacity}}))
    state["nodes"] = {"count": count, "gpu": gpu_count}
    lc.save_state(state)


def nodes_ready(state, count):
    out = lc.kubectl(state, "get", "nodes", "-l", "type=kwok", "-o",
                  "jsonpath={range .items[*]}{.status.conditions[?(@.type==\"Ready\")].status}{\"\\n\"}{end}",
                  check=False).stdout.split()
    return len(out) >= count and all(s == "True" for s in out)
