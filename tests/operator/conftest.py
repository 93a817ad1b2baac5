"""Operator tests: the runtime package lives in operator/ (not a collection plugin), put it on sys.path."""

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OPERATOR_DIR = os.path.join(ROOT, "operator")
if OPERATOR_DIR not in sys.path:
    sys.path.insert(0, OPERATOR_DIR)
