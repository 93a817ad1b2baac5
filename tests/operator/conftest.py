"""Operator tests: the runtime package lives in operator/ (not a collection plugin), put it on sys.path."""

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OPERATOR_DIR = os.path.join(ROOT, "operator")
if OPERATOR_DIR not in sys.path:
    sys.path.insert(0, OPERATOR_DIR)

# The runtime puts Ansible's collection paths (~/.ansible/collections: an installed, maybe older, copy) first on
# sys.path when it is imported; the tests must import this checkout's collection (the tree tests/conftest.py made).
import soperator_operator  # noqa: E402,F401

_CHECKOUT = os.path.join(ROOT, ".cache", "collections")
if os.path.isdir(_CHECKOUT):
    if _CHECKOUT in sys.path:
        sys.path.remove(_CHECKOUT)
    sys.path.insert(0, _CHECKOUT)
