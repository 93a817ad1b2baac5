"""docs/security.md's table of every way a SlurmCluster's author could take another user's identity or the jail: each
way has a row, and each row names tests that exist (a file, and the test function where the row names one)."""

import ast
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WAYS = ("directory URIs", "plain LDAP", "id ranges", "uid collisions with jail users",
        "uid collisions with system accounts", "restore image", "restore Secrets", "restore target",
        "backup destination")


def _rows():
    with open(os.path.join(ROOT, "docs", "security.md")) as f:
        text = f.read()
    table = text.split("<!-- security-table: identity -->", 1)[1].strip().split("\n\n", 1)[0]
    lines = [line for line in table.splitlines() if line.startswith("|")][2:]
    return dict((cells[0], cells[-1]) for cells in ([c.strip() for c in line.strip("|").split("|")] for line in lines))


def _defined(path):
    with open(os.path.join(ROOT, path)) as f:
        tree = ast.parse(f.read(), path)
    return set(node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef))


def test_every_way_has_a_row_that_names_tests_that_exist():
    rows = _rows()
    assert sorted(rows) == sorted(WAYS), sorted(rows)
    for way, cell in rows.items():
        references = re.findall(r"`(tests/[^`:]+)(?:::([A-Za-z0-9_]+))?`", cell)
        assert references, (way, cell)
        for path, name in references:
            assert os.path.isfile(os.path.join(ROOT, path)), (way, path)
            assert not name or name in _defined(path), (way, path, name)
