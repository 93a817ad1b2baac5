"""Is a failed run worth retrying soon (transient) or not until the spec changes (permanent)? Pure."""

import re

PERMANENT = "permanent"
TRANSIENT = "transient"

# An invalid spec: the renderer's message starts with the field path (spec.x[1].y: ...), or an assert in a role
# names the definition. Nothing a retry fixes.
_FIELD_PATH = re.compile(r"^(spec|metadata)(\.[A-Za-z0-9_-]+|\[\d+\]|\[[^\]\s]+\])*:\s")
_PERMANENT_PATTERNS = [
    re.compile(r"the definition must hold", re.I),
    re.compile(r"give exactly one of", re.I),
    re.compile(r"\bUnprocessable Entity\b|\(422\)|\bis invalid\b", re.I),
]

# The API or the network hiccupped, or an optimistic-concurrency write lost a race.
_TRANSIENT_PATTERNS = [
    re.compile(p, re.I) for p in (
        r"connection refused", r"connection reset", r"Max retries exceeded", r"timed? ?out", r"\btimeout\b",
        r"Temporary failure in name resolution", r"Name or service not known", r"No route to host",
        r"Service Unavailable", r"Internal Server Error", r"Bad Gateway", r"Gateway Time-?out",
        r"too many requests", r"\((?:429|5\d\d)\)", r"(?:status|code|HTTP)[ :=]*(?:429|5\d\d)\b",
        r"\bConflict\b", r"\(409\)", r"the object has been modified", r"etcdserver", r"RemoteDisconnected",
        r"EOF occurred", r"Failed to get client due to", r"Failed to load kubeconfig", r"is being deleted",
        r"not found in the cache|the server could not find the requested resource",
    )
]


def classify(message: str, field: str = None) -> str:
    """PERMANENT for an invalid definition (a ``field`` is named or the message starts with one), else TRANSIENT.

    Unknown failures count as transient: they are retried with a capped backoff, which is cheap, while
    calling them permanent could leave a cluster unreconciled until someone edits the spec.
    """
    if field:
        return PERMANENT
    text = (message or "").strip()
    if _FIELD_PATH.search(text):
        return PERMANENT
    for pattern in _TRANSIENT_PATTERNS:
        if pattern.search(text):
            return TRANSIENT
    for pattern in _PERMANENT_PATTERNS:
        if pattern.search(text):
            return PERMANENT
    return TRANSIENT


def backoff(failures: int, base: float = 1.0, cap: float = 300.0) -> float:
    """Seconds before retry number ``failures`` (1, 2, ...): base * 2**(n-1), capped."""
    if failures <= 0:
        return 0.0
    return min(cap, base * (2 ** min(failures - 1, 30)))


def is_transient_api_status(status: int) -> bool:
    """HTTP status codes from the API worth a retry (0 = no response at all)."""
    return status in (0, 409, 429) or 500 <= status <= 599
