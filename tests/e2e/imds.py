"""One node's instance metadata service, IMDSv2 only, as the node software reads it.

``python -m tests.e2e.imds METADATA_JSON`` serves, on 169.254.169.254:80 inside the node's network
namespace: ``PUT /latest/api/token`` (a session token), and with that token in
``X-aws-ec2-metadata-token``: ``meta-data/instance-id``, ``meta-data/local-ipv4`` and
``meta-data/tags/instance/<key>`` (the launch template enables instance tags in IMDS). A GET without
the token is refused with 401, as on an instance that requires IMDSv2.
"""

from __future__ import annotations

import json
import secrets
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


def serve(metadata: dict[str, str], host: str = "169.254.169.254", port: int = 80) -> None:
    """Serve `metadata` (path under /latest/ -> text) until killed."""
    token = secrets.token_hex(16)

    class Handler(BaseHTTPRequestHandler):
        def _reply(self, code: int, text: str = "") -> None:
            body = text.encode()
            self.send_response(code)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_PUT(self) -> None:
            ok = self.path == "/latest/api/token" and self.headers.get("X-aws-ec2-metadata-token-ttl-seconds")
            self._reply(200, token) if ok else self._reply(400)

        def do_GET(self) -> None:
            if self.headers.get("X-aws-ec2-metadata-token") != token:
                return self._reply(401)
            value = metadata.get(self.path.removeprefix("/latest/"))
            return self._reply(404) if value is None else self._reply(200, value)

        def log_message(self, *_: object) -> None:
            pass

    ThreadingHTTPServer((host, port), Handler).serve_forever()


if __name__ == "__main__":
    serve(json.loads(Path(sys.argv[1]).read_text()))
