"""No Python file of ``plugins/`` is longer than 500 lines but declarative schema data: a concern that outgrows it
is split by concern (see docs/architecture.md), not left to grow."""

import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LIMIT = 500
# Declarative data, not logic: the API's OpenAPI schemas (descriptions, defaults, bounds, CEL rules) from which the
# CRDs are generated.
EXEMPT = {"plugins/module_utils/api/schema.py": "the SlurmCluster and NodeSet schemas, declarative data"}
FILES = sorted(os.path.relpath(os.path.join(d, f), ROOT).replace(os.sep, "/")
               for d, _, fs in os.walk(os.path.join(ROOT, "plugins")) for f in fs if f.endswith(".py"))


def lines(rel):
    with open(os.path.join(ROOT, rel), encoding="utf-8") as handle:
        return len(handle.read().splitlines())


@pytest.mark.parametrize("rel", [f for f in FILES if f not in EXEMPT])
def test_no_file_of_plugins_is_over_500_lines(rel):
    assert lines(rel) <= LIMIT, "%s has %d lines: split it by concern" % (rel, lines(rel))


def test_the_exemptions_name_files_that_exist_and_need_them():
    for rel in EXEMPT:
        assert rel in FILES and lines(rel) > LIMIT, rel
