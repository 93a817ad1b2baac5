"""Adapter: run one role (or playbook) with ansible-runner and report what happened.

Each run gets its own private_data_dir under one work directory owned by this process; it is removed when the
run ends, so nothing accumulates in /tmp (upstream keeps up to 20 artifact dirs per object forever). The
ansible-runner CLI runs in its own session: SIGTERM makes it cancel the playbook (it kills ansible-playbook's
process group itself and writes its artifacts), SIGKILL of our child's group is the last resort.
"""

import glob
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
import dataclasses
from dataclasses import dataclass
from typing import Optional

log = logging.getLogger(__name__)


@dataclass
class RunResult:
    ok: bool
    status: str                       # successful, failed, canceled, timeout, error
    rc: Optional[int] = None
    message: str = ""                 # the failing task's res.msg (or a runner error)
    field: Optional[str] = None       # the spec field a validating module named, if any
    task: str = ""
    changed: int = 0
    stats: dict = dataclasses.field(default_factory=dict)
    duration: float = 0.0
    stdout_tail: str = ""


def failure_from_events(events):
    """(message, field, task) of the last ``runner_on_failed`` event that was not ignored; None if none."""
    failed = [e for e in events if e.get("event") == "runner_on_failed"
              and not (e.get("event_data") or {}).get("ignore_errors")]
    if not failed:
        unreachable = [e for e in events if e.get("event") == "runner_on_unreachable"]
        failed = unreachable
    if not failed:
        return None
    last = max(failed, key=lambda e: e.get("counter", 0))
    data = last.get("event_data") or {}
    res = data.get("res") or {}
    message = res.get("msg") or res.get("message") or res.get("stderr") or ""
    if not message and res.get("results"):  # a loop: the first failed item's message
        for item in res["results"]:
            if isinstance(item, dict) and item.get("failed"):
                message = item.get("msg") or item.get("stderr") or ""
                break
    if not isinstance(message, str):
        message = json.dumps(message, default=str)
    return message, res.get("field"), data.get("task", "")


def changed_from_events(events):
    for event in events:
        if event.get("event") == "playbook_on_stats":
            data = event.get("event_data") or {}
            return sum((data.get("changed") or {}).values()), {
                k: sum((data.get(k) or {}).values()) for k in ("ok", "changed", "failures", "skipped", "dark")}
    return 0, {}


def playbook_for_role(role):
    # gather_facts off: the roles need no facts, and it saves a second per run.
    return [{"name": "Reconcile with %s" % role, "hosts": "localhost", "gather_facts": False,
             "tasks": [{"name": "Run %s" % role, "ansible.builtin.import_role": {"name": role}}]}]


class RoleRunner:
    def __init__(self, work_dir=None, python=sys.executable, env=None, stop_grace=30.0, timeout=3600.0):
        base = work_dir or os.path.join(tempfile.gettempdir(), "soperator-operator")
        os.makedirs(base, mode=0o700, exist_ok=True)
        _remove_stale(base)
        self.root = tempfile.mkdtemp(prefix="%d-" % os.getpid(), dir=base)
        self.python = python
        self.env = dict(env or {})
        self.stop_grace = stop_grace
        self.timeout = timeout

    def run(self, extravars, role=None, playbook=None, ident="run", should_stop=lambda: False):
        """Run and wait. ``should_stop`` is polled: when it turns true the run is cancelled (see module doc)."""
        started = time.monotonic()
        pdd = tempfile.mkdtemp(prefix=_safe(ident) + "-", dir=self.root)
        try:
            self._prepare(pdd, extravars, role, playbook)
            return self._execute(pdd, playbook if playbook and not role else "main.yml", should_stop, started)
        finally:
            shutil.rmtree(pdd, ignore_errors=True)

    def close(self):
        shutil.rmtree(self.root, ignore_errors=True)

    def _prepare(self, pdd, extravars, role, playbook):
        for sub in ("env", "inventory", "project", "tmp"):
            os.makedirs(os.path.join(pdd, sub), mode=0o700)
        with open(os.path.join(pdd, "env", "extravars"), "w", encoding="utf-8") as handle:
            json.dump(extravars, handle, default=str)
        envvars = {
            # Everything Ansible writes stays inside this run's directory (readOnlyRootFilesystem in the pod).
            "ANSIBLE_LOCAL_TEMP": os.path.join(pdd, "tmp"),
            "ANSIBLE_REMOTE_TEMP": os.path.join(pdd, "tmp"),
            "ANSIBLE_HOME": os.path.join(pdd, "tmp", "ansible-home"),
            "ANSIBLE_RETRY_FILES_ENABLED": "false",
            "ANSIBLE_PIPELINING": "true",  # no module files written and removed per task
            "ANSIBLE_DEPRECATION_WARNINGS": "false",
            "ANSIBLE_NOCOLOR": "true",
            "ANSIBLE_PYTHON_INTERPRETER": self.python,
            # ansible-runner looks ansible-playbook up on PATH: the one next to our interpreter comes first.
            "PATH": os.pathsep.join([os.path.dirname(self.python), os.environ.get("PATH", "/usr/bin:/bin")]),
        }
        envvars.update(self.env)
        with open(os.path.join(pdd, "env", "envvars"), "w", encoding="utf-8") as handle:
            json.dump(envvars, handle)
        with open(os.path.join(pdd, "inventory", "hosts"), "w", encoding="utf-8") as handle:
            handle.write("localhost ansible_connection=local ansible_python_interpreter=%s\n" % self.python)
        if role:
            with open(os.path.join(pdd, "project", "main.yml"), "w", encoding="utf-8") as handle:
                json.dump(playbook_for_role(role), handle)
        elif not os.path.isabs(playbook or ""):
            raise ValueError("a watches playbook must be an absolute path: %r" % (playbook,))

    def _execute(self, pdd, playbook, should_stop, started):
        cmd = [self.python, "-m", "ansible_runner", "run", pdd, "--playbook", playbook, "--ident", "run", "-q"]
        output = os.path.join(pdd, "runner.log")
        with open(output, "wb") as out:
            proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                    start_new_session=True, close_fds=True)
            stop_sent = None
            while True:
                try:
                    proc.wait(timeout=0.2)
                    break
                except subprocess.TimeoutExpired:
                    pass
                now = time.monotonic()
                if stop_sent is None and (should_stop() or now - started > self.timeout):
                    log.warning("cancelling ansible-runner (pid %d)", proc.pid)
                    _signal_group(proc.pid, signal.SIGTERM)
                    stop_sent = now
                elif stop_sent is not None and now - stop_sent > self.stop_grace:
                    _signal_group(proc.pid, signal.SIGKILL)
                    proc.wait()
                    break
        artifacts = os.path.join(pdd, "artifacts", "run")
        events = []
        for path in glob.glob(os.path.join(artifacts, "job_events", "*.json")):
            try:
                with open(path, encoding="utf-8") as handle:
                    events.append(json.load(handle))
            except (OSError, ValueError):
                continue
        status = _read(os.path.join(artifacts, "status")) or ("canceled" if stop_sent else "error")
        rc_text = _read(os.path.join(artifacts, "rc"))
        stdout = _read(os.path.join(artifacts, "stdout")) or _read(output) or ""
        changed, stats = changed_from_events(events)
        result = RunResult(ok=status == "successful" and proc.returncode == 0, status=status,
                           rc=int(rc_text) if rc_text and rc_text.lstrip("-").isdigit() else proc.returncode,
                           changed=changed, stats=stats, duration=time.monotonic() - started,
                           stdout_tail=stdout[-4000:])
        if not result.ok:
            failure = failure_from_events(events)
            if failure:
                result.message, result.field, result.task = failure
            elif status == "canceled":
                result.message = "the run was cancelled (operator shutting down)"
            else:
                result.message = "ansible-runner ended with status %s (rc %s): %s" % (
                    status, result.rc, _last_line(stdout) or _last_line(_read(output) or ""))
        return result


def _signal_group(pid, sig):
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _read(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read().strip()
    except OSError:
        return None


def _last_line(text):
    lines = [line for line in (text or "").splitlines() if line.strip()]
    return lines[-1][-500:] if lines else ""


def _safe(text):
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in text)[:80] or "run"


def _remove_stale(base):
    """Remove work dirs of operator processes that are gone (named ``<pid>-...``)."""
    for name in os.listdir(base):
        pid = name.split("-", 1)[0]
        if not pid.isdigit():
            continue
        if int(pid) != os.getpid() and not os.path.exists("/proc/%s" % pid):
            shutil.rmtree(os.path.join(base, name), ignore_errors=True)


def new_ident(kind, namespace, name):
    return "%s-%s-%s-%s" % (kind.lower(), namespace, name, uuid.uuid4().hex[:6])
