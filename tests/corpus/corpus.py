"""Load the validation corpus (see README.md). Used by the unit tests and the API-server integration test."""

import glob
import os

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
PREFIX = "# expect:"


def load(path):
    """(documents, expect) of one corpus file; expect is None for valid files."""
    with open(path) as handle:
        text = handle.read()
    expect = None
    for line in text.splitlines():
        if line.startswith(PREFIX):
            expect = yaml.safe_load(line[len(PREFIX):])
            break
    docs = [doc for doc in yaml.safe_load_all(text) if doc is not None]
    return docs, expect


def files(kind):
    """Sorted paths of the ``valid`` or ``invalid`` corpus."""
    return sorted(glob.glob(os.path.join(HERE, kind, "*.yaml")))


def split(docs):
    """(the SlurmCluster or None, [NodeSets]) of a file's documents."""
    clusters = [d for d in docs if d.get("kind") == "SlurmCluster"]
    return (clusters[0] if clusters else None), [d for d in docs if d.get("kind") == "NodeSet"]
