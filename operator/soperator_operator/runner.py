"""Adapter: run one role (or playbook) and report what happened, without paying Python start-up per run.

A forkserver (``ForkServer``) is forked once from the operator's process, before it starts a thread, so that the
two share, copy-on-write, everything the operator had imported by then (Python, the Kubernetes client, the
collection's core); the server then imports Ansible and the collection's converge code and initialises Ansible's
plugin loader (``warm.py``). Each run is a child forked from it that runs ``ansible-playbook`` in-process
(``PlaybookCLI``) in its own session and writes its results through the ``soperator_events`` callback plugin as
JSON lines. Modules with an action plugin that works in-process (the
collection's ``slurm_cluster``) then run inside Ansible's forked worker, so a reconcile starts no new Python
interpreter at all.

Each run gets its own directory (extra vars, playbook, events, log), removed when the run ends. Cancelling
(``should_stop``, the run timeout) sends SIGTERM to the run's process group, then SIGKILL after ``stop_grace``.
"""

from __future__ import annotations

import dataclasses
import gc
import json
import logging
import os
import pickle
import select
import shutil
import signal
import socket
import struct
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn, TypedDict

if TYPE_CHECKING:  # a name only: runner is imported before Ansible's collection finder exists (the forkserver's
    # children unpickle it), so it imports nothing of the collection; extravars does (its KubeObject)
    from .extravars import ExtraVars

log = logging.getLogger(__name__)

CALLBACK = "soperator_events"
CALLBACK_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "callbacks")
EVENTS_ENV = "SOPERATOR_EVENTS_FILE"


class RunEvent(TypedDict, total=False):
    """One JSON line of a run's events file: what the callback ``callbacks/soperator_events.py`` writes (and the
    child's own first line). ``event``: child, play, task, ok, failed, unreachable or stats; ``t``: the monotonic
    time (child, play, task, ok, stats); ``task``: the task's name; ``ignored``: a failure the task ignores; ``res``:
    the fields of the task's result the callback keeps; ``stats``: the play's totals (ok, changed, failures, ...)."""
    event: str
    t: float
    task: str
    ignored: bool
    res: dict[str, Any]
    stats: dict[str, int]


@dataclass
class RunResult:
    ok: bool
    status: str                       # successful, failed, canceled, timeout, error
    rc: int | None = None
    message: str = ""                 # the failing task's msg (or a runner error)
    field: str | None = None          # the spec field a validating module named, if any
    reason: str | None = None         # the module's failure reason (errors.* in the collection), if any
    retryable: bool | None = None     # the module's verdict on retrying, if it gave one
    task: str = ""
    changed: int = 0
    stats: dict[str, int] = dataclasses.field(default_factory=dict)  # the play's totals (RunEvent's stats)
    duration: float = 0.0
    stdout_tail: str = ""
    requeue_after: float | None = None  # the smallest requeue_after a task returned
    ready: bool | None = None           # the converge module's verdict, when it ran
    phases: dict[str, float] = dataclasses.field(default_factory=dict)  # where the run's time went (run_phases)


# Where a run's time goes, in order: its directory and a fork of the warm forkserver; ansible-playbook's start
# (CLI, inventory, playbook and role loading); the tasks before the converge (preflight); Ansible's per-task cost
# around the converge (its forked task worker, argument handling, clients); the converge's own phases (the
# module's timings); what follows (the stats, the child's exit, the parent noticing it).
PHASES = ("fork", "play start", "preflight tasks", "task worker", "observe", "render", "apply", "status",
          "play end")


def run_phases(events: Sequence[RunEvent], started: float, ended: float) -> dict[str, float]:
    """Seconds per phase of PHASES from the events' monotonic timestamps (the same clock in every process)."""
    stamps: dict[str, float] = {}
    converge_start: float | None = None
    converge: RunEvent | None = None
    last_task: float | None = None
    for event in events:
        kind = event.get("event")
        if kind in ("child", "play") and "t" in event:
            stamps.setdefault(kind, float(event["t"]))
        elif kind == "task" and "t" in event:
            last_task = float(event["t"])
        elif kind == "ok" and isinstance((event.get("res") or {}).get("timings"), dict) and "t" in event:
            converge_start, converge = last_task, event
    if "child" not in stamps or "play" not in stamps or converge is None or converge_start is None:
        return {}
    timings = dict((k, float(v)) for k, v in converge["res"]["timings"].items())
    done = float(converge["t"])
    phases = {"fork": stamps["child"] - started, "play start": stamps["play"] - stamps["child"],
              "preflight tasks": converge_start - stamps["play"],
              "task worker": max(0.0, done - converge_start - sum(timings.values())),
              "play end": ended - done}
    phases.update((k, timings.get(k, 0.0)) for k in ("observe", "render", "apply", "status"))
    return phases


def read_events(path: str) -> list[RunEvent]:
    events: list[RunEvent] = []
    try:
        with open(path, encoding="utf-8") as handle:
            for line in handle:
                try:
                    events.append(json.loads(line))
                except ValueError:
                    continue
    except OSError:
        pass
    return events


def summarize(events: Sequence[RunEvent], result: RunResult) -> RunResult:
    """Fill ``result`` from the callback's events: failure details, changes, requeue and readiness."""
    failed = [e for e in events if e.get("event") in ("failed", "unreachable") and not e.get("ignored")]
    if failed:
        last = failed[-1]
        res = last.get("res") or {}
        result.message = res.get("msg") or ""
        result.field = res.get("field")
        result.reason = res.get("reason")
        result.retryable = res.get("retryable")
        result.task = last.get("task", "")
    for event in events:
        res = event.get("res") or {}
        if event.get("event") == "ok":
            if res.get("requeue_after") is not None:
                value = float(res["requeue_after"])
                result.requeue_after = value if result.requeue_after is None else min(result.requeue_after, value)
            if "ready" in res:
                result.ready = bool(res["ready"])
        if event.get("event") == "stats":
            result.stats = event.get("stats") or {}
            result.changed = int(result.stats.get("changed") or 0)
    return result


def playbook_for_role(role: str, tasks_from: str | None = None) -> list[dict[str, Any]]:
    # gather_facts off: the roles need no facts, and it saves a second per run. rolespec_validate off: the vars are
    # the watches file's, the same at every run, and the modules validate their own arguments; the role's argument
    # spec would cost every run one more task (a forked worker), ~0.04 s.
    include: dict[str, object] = {"name": role, "rolespec_validate": False}
    if tasks_from:
        include["tasks_from"] = tasks_from
    return [{"name": "Reconcile with %s" % role, "hosts": "localhost", "gather_facts": False,
             "tasks": [{"name": "Run %s" % role, "ansible.builtin.import_role": include}]}]


def _child(argv: list[str], log_path: str, events_path: str) -> NoReturn:
    """In the forked child: a new session, output to the run's log, then ansible-playbook in-process."""
    os.setsid()
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.environ[EVENTS_ENV] = events_path
    with open(events_path, "a", encoding="utf-8") as handle:
        handle.write(json.dumps({"event": "child", "t": time.monotonic()}) + "\n")
    rc = 250
    try:
        from ansible.cli.playbook import PlaybookCLI

        rc = PlaybookCLI(argv).run()
    except SystemExit as exc:
        rc = exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # noqa: BLE001  report anything, then leave without running atexit handlers
        import traceback

        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(rc if isinstance(rc, int) else 1)


def ansible_environment(python: str, work_root: str, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The ANSIBLE_* settings every run shares; they are read when Ansible is imported (in the forkserver)."""
    env = {
        "ANSIBLE_LOCAL_TEMP": os.path.join(work_root, "ansible-tmp"),
        "ANSIBLE_REMOTE_TEMP": os.path.join(work_root, "ansible-tmp"),
        "ANSIBLE_HOME": os.path.join(work_root, "ansible-home"),
        "ANSIBLE_RETRY_FILES_ENABLED": "false",
        "ANSIBLE_PIPELINING": "true",
        "ANSIBLE_DEPRECATION_WARNINGS": "false",
        "ANSIBLE_NOCOLOR": "true",
        "ANSIBLE_PYTHON_INTERPRETER": python,
        "ANSIBLE_CALLBACK_PLUGINS": CALLBACK_DIR,
        "ANSIBLE_CALLBACKS_ENABLED": CALLBACK,
        "ANSIBLE_LOCALHOST_WARNING": "false",
        "ANSIBLE_INVENTORY_UNPARSED_WARNING": "false",
        "ANSIBLE_FORKS": "1",
        # The runner writes an INI inventory (one local host): the other inventory plugins need not try it first.
        "ANSIBLE_INVENTORY_ENABLED": "ansible.builtin.ini",
        "PATH": os.pathsep.join([os.path.dirname(python), os.environ.get("PATH", "/usr/bin:/bin")]),
    }
    if _ansible_config_file() is None:
        env["ANSIBLE_CONFIG"] = os.path.join(work_root, "ansible.cfg")
    env.update(extra or {})
    return env


# Settings Ansible reads from a configuration file only. internal_poll_interval: how often a run's process looks for
# its task worker's result (default 1 ms: a thousand wake-ups a second while a task runs); 10 ms delays a task's end
# by 5 ms on average. Used when Ansible would find no configuration file of the user's (_ansible_config_file).
ANSIBLE_CFG = "[defaults]\ninternal_poll_interval = 0.01\n"


def _ansible_config_file() -> str | None:
    """The configuration file Ansible would read (the first that exists in its search order: $ANSIBLE_CONFIG,
    ./ansible.cfg unless the directory is world-writable, ~/.ansible.cfg, /etc/ansible/ansible.cfg), or None: then
    the runner's is used."""
    candidates = [os.environ["ANSIBLE_CONFIG"]] if os.environ.get("ANSIBLE_CONFIG") else []
    try:
        if not os.stat(os.getcwd()).st_mode & 0o002:
            candidates.append(os.path.join(os.getcwd(), "ansible.cfg"))
    except OSError:
        pass
    candidates += [os.path.expanduser("~/.ansible.cfg"), "/etc/ansible/ansible.cfg"]
    return next((path for path in candidates if os.path.exists(path)), None)


class RoleRunner:
    """Runs roles and playbooks in children of a warm forkserver (see the module docstring)."""

    def __init__(self, work_dir: str | None = None, python: str = sys.executable, env: Mapping[str, str] | None = None,
                 stop_grace: float = 30.0, timeout: float = 3600.0, warm: bool = True) -> None:
        base = work_dir or os.path.join(tempfile.gettempdir(), "soperator-operator")
        os.makedirs(base, mode=0o700, exist_ok=True)
        _remove_stale(base)
        self.root = tempfile.mkdtemp(prefix="%d-" % os.getpid(), dir=base)
        self.python = python
        self.stop_grace = stop_grace
        self.timeout = timeout
        for sub in ("ansible-tmp", "ansible-home"):
            os.makedirs(os.path.join(self.root, sub), mode=0o700, exist_ok=True)
        with open(os.path.join(self.root, "ansible.cfg"), "w", encoding="utf-8") as handle:
            handle.write(ANSIBLE_CFG)
        # The forkserver inherits this process's environment when it starts (at the first run), and Ansible
        # reads its configuration from it once, at import.
        os.environ.update(ansible_environment(python, self.root, env))
        self.server = ForkServer("soperator_operator.warm" if warm else None)
        self.ctx: Any = self.server  # where runs are started (a test counts them there)
        self._live: dict[str, int] = {}  # ident -> pid of the runs in flight

    def start(self, wait: bool = True) -> None:
        """Fork the forkserver now (else at the first run; before this process starts a thread: ForkServer).
        ``wait``: until it has done its imports (a few seconds, once), by a run of nothing."""
        self.server.start()
        if wait:
            proc = self.ctx.Process(target=os._exit, args=(0,), name="soperator-warm-up")
            proc.start()
            proc.join()

    def run(self, extravars: ExtraVars, role: str | None = None, playbook: str | None = None, ident: str = "run",
            should_stop: Callable[[], bool] = lambda: False, tasks_from: str | None = None) -> RunResult:
        """Run and wait. ``should_stop`` is polled: when it turns true the run is cancelled. ``tasks_from``: the
        role's entry point (default main)."""
        started = time.monotonic()
        pdd = tempfile.mkdtemp(prefix=_safe(ident) + "-", dir=self.root)
        try:
            argv = self._prepare(pdd, extravars, role, playbook, tasks_from)
            return self._execute(pdd, argv, should_stop, started, ident)
        finally:
            shutil.rmtree(pdd, ignore_errors=True)

    def cancel_all(self) -> None:
        """Kill every run in flight at once (leadership lost: nothing may write any more)."""
        for pid in list(self._live.values()):
            _kill_run(pid)

    def close(self, helpers: bool = False) -> None:
        """Kill the runs in flight and remove their files. ``helpers`` (leadership lost, the process exits next):
        also kill every child of this process, in the operator the forkserver, so that nothing of this replica
        outlives it."""
        self.cancel_all()
        if helpers:
            for pid in _descendants(os.getpid()):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        self.server.stop()
        shutil.rmtree(self.root, ignore_errors=True)

    def _prepare(self, pdd: str, extravars: ExtraVars, role: str | None, playbook: str | None,
                 tasks_from: str | None = None) -> list[str]:
        vars_path = os.path.join(pdd, "extravars.json")
        with open(vars_path, "w", encoding="utf-8") as handle:
            json.dump(extravars, handle, default=str)
        inventory = os.path.join(pdd, "hosts")
        with open(inventory, "w", encoding="utf-8") as handle:
            handle.write("localhost ansible_connection=local ansible_python_interpreter=%s\n" % self.python)
        if role:
            path = os.path.join(pdd, "main.yml")
            with open(path, "w", encoding="utf-8") as handle:
                json.dump(playbook_for_role(role, tasks_from), handle)
        elif playbook and os.path.isabs(playbook):
            path = playbook
        else:
            raise ValueError("a watches playbook must be an absolute path: %r" % (playbook,))
        return ["ansible-playbook", "-i", inventory, "-e", "@" + vars_path, path]

    def _execute(self, pdd: str, argv: list[str], should_stop: Callable[[], bool], started: float,
                 ident: str) -> RunResult:
        log_path, events_path = os.path.join(pdd, "run.log"), os.path.join(pdd, "events.jsonl")
        proc = self.ctx.Process(target=_child, args=(argv, log_path, events_path), name=ident)
        proc.start()
        pid = proc.pid
        assert pid is not None  # a started process has one
        self._live[ident] = pid
        stop_sent = None
        try:
            while True:
                proc.join(0.1)
                if proc.exitcode is not None:
                    break
                now = time.monotonic()
                if stop_sent is None and (should_stop() or now - started > self.timeout):
                    log.warning("cancelling run %s (pid %d)", ident, pid)
                    _signal_group(pid, signal.SIGTERM)
                    stop_sent = now
                elif stop_sent is not None and now - stop_sent > self.stop_grace:
                    _signal_group(pid, signal.SIGKILL)
                    proc.join()
                    break
        finally:
            self._live.pop(ident, None)
            _kill_run(pid)  # Ansible's own workers, should any be left
        rc = proc.exitcode
        ended = time.monotonic()
        output = _read(log_path) or ""
        timed_out = stop_sent is not None and time.monotonic() - started > self.timeout
        if rc == 0:
            status = "successful"
        elif stop_sent is not None:
            status = "timeout" if timed_out else "canceled"
        elif rc is not None and rc < 0:
            status = "error"
        else:
            status = "failed"
        events = read_events(events_path)
        result = summarize(events, RunResult(
            ok=rc == 0, status=status, rc=rc, duration=ended - started, stdout_tail=output[-4000:]))
        result.phases = run_phases(events, started, ended)
        if not result.ok and not result.message:
            if status == "canceled":
                result.message = "the run was cancelled"
            elif status == "timeout":
                result.message = "the run took longer than %.0fs and was cancelled" % self.timeout
            else:
                result.message = "ansible-playbook ended with rc %s: %s" % (rc, _last_line(output))
        return result


class ForkServer:
    """A process forked from this one that forks the runs: ``Process(target, args, name)`` as ``multiprocessing``'s
    (``start``, ``pid``, ``join``, ``exitcode``), ``target`` a module-level function.

    Forked, not executed anew (``multiprocessing``'s forkserver starts a fresh interpreter, and a resource tracker
    beside it): the server shares this process's heap, copy-on-write, and its ``preload`` module (``warm``) adds
    what only runs need. Fork it before this process starts a thread (a lock another thread held would stay locked
    in it). This process's objects are frozen first (``gc.freeze``), so that neither side's collector writes to
    the pages they share; the server does the same after its imports, for its runs.

    One request per run over a ``SOCK_SEQPACKET`` pair: the pickled target and arguments, and one end of a fresh
    socket pair on which the server answers the run's pid, then its exit status (as ``Process.exitcode``: the exit
    code, or minus the signal) once it has reaped it."""

    def __init__(self, preload: str | None = None) -> None:
        self.preload = preload
        self.pid: int | None = None
        self._sock: socket.socket | None = None
        self._lock = threading.Lock()

    def start(self) -> None:
        with self._lock:
            if self.pid is not None:
                return
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            gc.collect()
            gc.freeze()
            pid = os.fork()
            if pid == 0:  # the server: it never returns
                code = 1
                try:
                    ours.close()
                    _serve(theirs, self.preload)
                    code = 0
                except BaseException:  # noqa: BLE001  report anything, never return into the parent's code
                    import traceback

                    traceback.print_exc()
                finally:
                    os._exit(code)
            theirs.close()
            self._sock, self.pid = ours, pid

    def Process(self, target: Callable[..., Any], args: tuple[Any, ...] = (),  # noqa: N802  (multiprocessing's name)
                name: str = "run") -> ServerProcess:
        return ServerProcess(self, target, args, name)

    def _request(self, payload: bytes) -> socket.socket:
        """Send a run's request; the returned socket answers its pid, then its status."""
        for attempt in (1, 2):
            self.start()
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                with self._lock:
                    assert self._sock is not None
                    socket.send_fds(self._sock, [payload], [theirs.fileno()])
                return ours
            except OSError:
                ours.close()
                if attempt == 2:
                    raise
                log.warning("the forkserver is gone: forking a new one")
                self.stop()  # reaped: the next start forks a new one
            finally:
                theirs.close()
        raise AssertionError("unreachable")

    def stop(self) -> None:
        """End the server (runs in flight, in their own sessions, are the caller's to end)."""
        with self._lock:
            if self._sock is not None:
                self._sock.close()
                self._sock = None
            if self.pid is not None:
                try:
                    os.kill(self.pid, signal.SIGKILL)
                    os.waitpid(self.pid, 0)
                except (ProcessLookupError, ChildProcessError):
                    pass
                self.pid = None


class ServerProcess:
    """One run forked by the ``ForkServer`` (the part of ``multiprocessing.Process`` the runner uses)."""

    def __init__(self, server: ForkServer, target: Callable[..., Any], args: tuple[Any, ...], name: str) -> None:
        self.server, self.target, self.args, self.name = server, target, args, name
        self.pid: int | None = None
        self.exitcode: int | None = None
        self._status: socket.socket | None = None

    def start(self) -> None:
        payload = pickle.dumps((self.target, self.args, self.name))
        for attempt in (1, 2):
            self._status = self.server._request(payload)
            self.pid = _read_int(self._status)
            if self.pid is not None:
                return
            self._status.close()
            self._status = None
            if attempt == 1:  # the server died with the request unanswered
                log.warning("the forkserver is gone: forking a new one")
                self.server.stop()  # reaped: the next request forks a new one
        raise OSError("the forkserver did not start %s" % self.name)

    def join(self, timeout: float | None = None) -> None:
        if self._status is None:
            return
        ready, _, _ = select.select([self._status], [], [], timeout)
        if ready:
            code = _read_int(self._status)
            self.exitcode = 255 if code is None else code  # no status: the server is gone
            self._status.close()
            self._status = None


def _read_int(sock: socket.socket) -> int | None:
    data = b""
    while len(data) < 8:
        chunk = sock.recv(8 - len(data))
        if not chunk:
            return None
        data += chunk
    return int(struct.unpack("q", data)[0])


def _serve(sock: socket.socket, preload: str | None) -> None:
    """The server's loop: fork a run per request, answer its pid, then its status once reaped. Ends when the
    operator's end of ``sock`` closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's ^C is for the operator, which stops the runs
    _name_process("forkserver")  # its command line is the operator's (forked): ps and the bench tell it by this
    for name in [m for m in sys.modules if m == "ansible_collections" or m.startswith("ansible_collections.")]:
        if hasattr(sys.modules[name], "__path__"):
            # The collection's packages, imported by the operator as plain packages: Ansible's collection finder
            # must load them itself, or it never reads the collection's metadata and finds none of its roles
            # (test_runner.py). Its modules stay, shared with the operator.
            del sys.modules[name]
    if preload:
        __import__(preload)
    gc.collect()
    gc.freeze()
    _trim_malloc()
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    running: dict[int, int] = {}  # pid -> its status fd
    while True:
        ready, _, _ = select.select([sock.fileno(), wake_r], [], [])
        if wake_r in ready:
            while True:
                try:
                    if not os.read(wake_r, 512):
                        break
                except BlockingIOError:
                    break
            _reap(running)
        if sock.fileno() in ready:
            try:
                payload, fds, _flags, _addr = socket.recv_fds(sock, 1 << 20, 1)
            except OSError:
                payload, fds = b"", []
            if not payload:
                for fd in fds:
                    os.close(fd)
                return
            pid = os.fork()
            if pid == 0:  # the run
                code = 1
                try:
                    signal.set_wakeup_fd(-1)
                    for sig in (signal.SIGCHLD, signal.SIGINT):
                        signal.signal(sig, signal.SIG_DFL)
                    sock.close()
                    _name_process("run")
                    for fd in [wake_r, wake_w, *running.values()]:
                        os.close(fd)
                    target, args, _name = pickle.loads(payload)
                    target(*args)
                    code = 0
                except SystemExit as exc:
                    code = exc.code if isinstance(exc.code, int) else 1
                except BaseException:  # noqa: BLE001
                    import traceback

                    traceback.print_exc()
                finally:
                    os._exit(code)
            running[pid] = fds[0]
            _answer(fds[0], pid)


def _trim_malloc() -> None:
    """Give the heap's free pages back (glibc's malloc_trim): the imports' garbage, which the runs would otherwise
    share, dirty, and copy."""
    import ctypes

    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (AttributeError, OSError):  # not glibc
        pass


def _name_process(name: str) -> None:
    try:
        with open("/proc/self/comm", "w", encoding="ascii") as handle:
            handle.write(name)
    except OSError:  # not Linux: only a name
        pass


def _answer(fd: int, value: int) -> None:
    try:
        os.write(fd, struct.pack("q", value))
    except OSError:  # the operator no longer waits for it
        pass


def _reap(running: dict[int, int]) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        fd = running.pop(pid, None)
        if fd is not None:
            _answer(fd, os.waitstatus_to_exitcode(status))
            os.close(fd)


def _children(parent: int) -> list[int]:
    """Pids of the live processes whose parent is ``parent`` (Linux /proc)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry, encoding="utf-8") as handle:
                ppid = int(handle.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        if ppid == parent:
            found.append(int(entry))
    return found


def _descendants(root: int) -> list[int]:
    """Pids of every live process below ``root`` (children first), read before anything is killed: an orphan is
    handed to init and would no longer be found."""
    found: list[int] = []
    queue = [root]
    while queue:
        children = _children(queue.pop(0))
        found += children
        queue += children
    return found


def _kill_run(pid: int) -> None:
    """SIGKILL a run, its process group and every process below it: Ansible's task worker leaves the run's session
    (WorkerProcess._detach calls setsid), so the group alone would leave it running."""
    below = _descendants(pid)
    _signal_group(pid, signal.SIGKILL)
    for child in below:
        try:
            os.kill(child, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _signal_group(pid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read().strip()
    except OSError:
        return None


def _last_line(text: str | None) -> str:
    lines = [line for line in (text or "").splitlines() if line.strip()]
    return lines[-1][-500:] if lines else ""


def _safe(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in text)[:80] or "run"


def _remove_stale(base: str) -> None:
    """Remove work dirs of operator processes that are gone (named ``<pid>-...``)."""
    for name in os.listdir(base):
        pid = name.split("-", 1)[0]
        if not pid.isdigit():
            continue
        if int(pid) != os.getpid() and not os.path.exists("/proc/%s" % pid):
            shutil.rmtree(os.path.join(base, name), ignore_errors=True)


def new_ident(kind: str, namespace: str, name: str) -> str:
    return "%s-%s-%s-%s" % (kind.lower(), namespace, name, uuid.uuid4().hex[:6])
