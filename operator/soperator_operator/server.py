"""/healthz, /readyz and /metrics on one port (stdlib http.server, one thread)."""

import logging
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

log = logging.getLogger(__name__)


def serve(bind: str, port: int, healthy: Callable[[], bool], ready: Callable[[], bool],
          metrics_text: Callable[[], str]) -> ThreadingHTTPServer:
    """Start the server in a daemon thread; the callables answer per request. Returns the server."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802  http.server's naming
            path = self.path.split("?", 1)[0]
            if path == "/healthz":
                self._reply(200 if healthy() else 500, "ok\n" if healthy() else "unhealthy\n")
            elif path == "/readyz":
                ok = ready()
                self._reply(200 if ok else 503, "ok\n" if ok else "not ready\n")
            elif path == "/metrics":
                self._reply(200, metrics_text(), "text/plain; version=0.0.4; charset=utf-8")
            else:
                self._reply(404, "not found\n")

        def _reply(self, code: int, text: str, ctype: str = "text/plain; charset=utf-8") -> None:
            data = text.encode()
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, fmt: str, *args: object) -> None:
            log.debug("http: " + fmt, *args)

    server = ThreadingHTTPServer((bind, port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True, name="http").start()
    return server
