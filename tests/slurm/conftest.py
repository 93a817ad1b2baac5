"""One real Slurm cluster (munge, slurmctld, two slurmd) per test session, and one with accounting (MariaDB,
slurmdbd, slurmctld, two dynamic slurmd; slurmrestd and the exporter started by their tests).

Needs root (namespaces, chroot, mounts): skipped without it, failed under CI=true (tests/prerequisites.py).
Set SPANK_TEST_KEEP=1 to keep the work directory (rootfs, logs) after the session.
"""

from __future__ import annotations

import pytest
from accounting_cluster import AccountingCluster
from cloud_cluster import CloudCluster
from dynamic_cluster import DynamicCluster
from prerequisites import require_root, require_tools
from slurm_cluster import Cluster, running

HOST_TOOLS = ("unshare", "nsenter", "chroot", "zstd", "tar", "mount")


@pytest.fixture(scope="session")
def real_slurm_host():
    """What every real-Slurm cluster of this suite needs from the host."""
    require_root("real Slurm: namespaces, chroot and mounts")
    require_tools(HOST_TOOLS)


@pytest.fixture(scope="session")
def cluster(real_slurm_host):
    with running(Cluster()) as c:
        yield c


@pytest.fixture(scope="session")
def acct(real_slurm_host):
    with running(AccountingCluster()) as c:
        c.start_node(0)
        c.start_node(1)
        yield c


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """On failure, attach the tail of the Slurm logs to the report."""
    outcome = yield
    rep = outcome.get_result()
    c = item.funcargs.get("cluster") if hasattr(item, "funcargs") else None
    if rep.when == "call" and rep.failed and isinstance(c, Cluster):
        for name in ("slurmctld.log", "slurmd-n1.log", "slurmd-n2.log"):
            tail = "\n".join(c.log(name).splitlines()[-40:])
            rep.sections.append((name, tail))
    a = item.funcargs.get("acct") if hasattr(item, "funcargs") else None
    if rep.when == "call" and rep.failed and isinstance(a, AccountingCluster):
        for name in ("mariadb.log", "slurmdbd.log", "slurmctld.log", "slurmrestd.log", "exporter.log"):
            rep.sections.append((name, a.log_tail(name, 40)))
    values = list(item.funcargs.values()) if hasattr(item, "funcargs") else []
    clouds = [v for v in values if isinstance(v, CloudCluster)]
    # Other dynamic clusters (GPU, health checks): their daemons' logs go with the work directory.
    dynamic = [v for v in values if isinstance(v, DynamicCluster) and not isinstance(v, AccountingCluster)]
    if rep.when == "call" and rep.failed:
        for cloud in clouds + dynamic:
            rep.sections.append(("slurmctld.log", "\n".join(cloud.log("slurmctld.log").splitlines()[-60:])))
            rep.sections.append(("slurmd logs", cloud.slurmd_logs()))
