# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Ansible callback of the operator runtime: what a run's caller needs, as JSON lines in $SOPERATOR_EVENTS_FILE.

Failed tasks (their msg and the structured fields a module returns: field, reason, retryable), results that
carry ``requeue_after`` or ``ready`` (the converge module, with its phase timings), and the final stats. Nothing
else of a result is written (results may hold data the operator has no business keeping). The play's and each
task's start carry a monotonic timestamp ``t`` (the runner measures where a run's time goes).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: soperator_events
type: aggregate
short_description: Structured run results for the soperator operator runtime
description:
  - Writes failed task results, converge results and the play stats as JSON lines to the file named by the
    C(SOPERATOR_EVENTS_FILE) environment variable.
requirements:
  - C(SOPERATOR_EVENTS_FILE) set in the environment
"""

import json
import os
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ansible.plugins.callback import CallbackBase

if TYPE_CHECKING:  # Ansible ships no type information: these name what the callbacks are given
    from ansible.executor.stats import AggregateStats
    from ansible.executor.task_result import CallbackTaskResult
    from ansible.playbook.play import Play
    from ansible.playbook.task import Task

_FAILURE_KEYS = ("msg", "field", "reason", "retryable", "errors", "pending", "phase")
_OK_KEYS = ("requeue_after", "ready", "phase", "pending", "changed", "timings")


def _plain(value: Any) -> Any:
    """Tagged/unsafe values of Ansible as plain JSON types."""
    if isinstance(value, dict):
        return dict((str(k), _plain(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    return str(value)


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "soperator_events"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super(CallbackModule, self).__init__(*args, **kwargs)
        self._path = os.environ.get("SOPERATOR_EVENTS_FILE")

    def _write(self, event: dict[str, Any]) -> None:
        if not self._path:
            return
        with open(self._path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(_plain(event)) + "\n")

    @staticmethod
    def _pick(result: "CallbackTaskResult", keys: Iterable[str]) -> dict[str, Any]:
        res = result._result or {}
        if res.get("msg") is None and isinstance(res.get("results"), list):  # a loop: its first failed item
            for item in res["results"]:
                if isinstance(item, dict) and item.get("failed"):
                    res = item
                    break
        return dict((k, res[k]) for k in keys if k in res)

    def v2_playbook_on_play_start(self, play: "Play") -> None:
        self._write({"event": "play", "t": time.monotonic()})

    def v2_playbook_on_task_start(self, task: "Task", is_conditional: bool) -> None:
        self._write({"event": "task", "task": task.get_name(), "t": time.monotonic()})

    def v2_runner_on_failed(self, result: "CallbackTaskResult", ignore_errors: bool = False) -> None:
        self._write({"event": "failed", "task": result.task_name, "ignored": bool(ignore_errors),
                     "res": self._pick(result, _FAILURE_KEYS)})

    def v2_runner_on_unreachable(self, result: "CallbackTaskResult") -> None:
        self._write({"event": "unreachable", "task": result.task_name, "res": self._pick(result, ("msg",))})

    def v2_runner_on_ok(self, result: "CallbackTaskResult") -> None:
        res = result._result or {}
        if "requeue_after" in res or "ready" in res:
            self._write({"event": "ok", "task": result.task_name, "res": self._pick(result, _OK_KEYS),
                         "t": time.monotonic()})

    def v2_playbook_on_stats(self, stats: "AggregateStats") -> None:
        totals: dict[str, int] = {}
        for key in ("ok", "changed", "failures", "skipped", "dark", "rescued", "ignored"):
            totals[key] = sum((getattr(stats, key, None) or {}).values())
        self._write({"event": "stats", "stats": totals, "t": time.monotonic()})
