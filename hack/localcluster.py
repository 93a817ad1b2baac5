#!/usr/bin/env python3
"""A real Kubernetes control plane on loopback, for development, tests and the demo: the entry of the package
``hack/localcluster/`` (usage and design in its docstring; ``python3 hack/localcluster.py --help``).

Stdlib only: it must run before the venv exists.
"""

import sys

from localcluster.commands import main  # hack/ is sys.path[0] when this file runs

if __name__ == "__main__":
    sys.exit(main())
