#!/usr/bin/python3
# e2e only: nvidia-smi for a container without a GPU. With --query-gpu it serves a recorded real output (RECORDING,
# written in by the test: tests/unit/fixtures/gpu/h100-query-gpu.yaml, which names its source) with the columns asked,
# in their order, refusing an unknown field as nvidia-smi does; without arguments it says what it is.
import csv
import io
import sys

RECORDING = None  # the test writes the recorded --query-gpu output here

args = sys.argv[1:]
asked = [a[len("--query-gpu="):].split(",") for a in args if a.startswith("--query-gpu=")]
if not args:
    print("nvidia-smi stand-in (e2e): serves a recorded NVIDIA H100 80GB HBM3")
    sys.exit(0)
if not asked:
    print("nvidia-smi stand-in: no recording for %s" % " ".join(args))
    sys.exit(2)
rows = list(csv.reader(io.StringIO(RECORDING), skipinitialspace=True))
header = [h.strip().split(" [")[0] for h in rows[0]]
for field in asked[0]:
    if field not in header:
        print('Field "%s" is not a valid field to query.' % field)
        sys.exit(2)
cols = [header.index(field) for field in asked[0]]
for row in rows[0 if "--format=csv" in args else 1:]:
    print(", ".join(row[c].strip() for c in cols))
