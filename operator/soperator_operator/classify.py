"""Retry timing for failed runs and API calls. Pure.

Whether a failure is worth retrying is the reconciler's verdict (``reason``/``retryable`` in its result,
``errors.retryable`` in the collection): nothing here reads messages.
"""

PERMANENT = "permanent"
TRANSIENT = "transient"


def backoff(failures: int, base: float = 1.0, cap: float = 300.0) -> float:
    """Seconds before retry number ``failures`` (1, 2, ...): base * 2**(n-1), capped."""
    if failures <= 0:
        return 0.0
    doubling: int = 2 ** min(failures - 1, 30)
    return min(cap, base * doubling)
