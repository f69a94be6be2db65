#!/usr/bin/env python3
"""A scripted OpenAI-compatible server for measuring foveal end to end.

It answers every `POST /v1/chat/completions` at once with the same short
reply, streamed as server-sent events (`Hello!`, a stop finish and a usage
chunk, then `[DONE]`), or as one JSON object when the request does not ask
for a stream; `GET /v1/models` lists one model. No model runs: the time a
client spends is its own.

    python3 scripts/scripted-openai-server.py [--port 8099] [--host 127.0.0.1]

With `FOVEAL_BENCH_DUMP=FILE` it writes each request body it receives to
FILE (the last one wins), so its bytes and tokens can be counted; by
default it records nothing. It prints `listening on http://HOST:PORT/v1`
on stdout when it is ready. Standard library only.
"""

import argparse
import json
import os
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

REPLY = "Hello!"
MODEL = "scripted"


def chunk(delta, finish=None, usage=None):
    body = {
        "id": "chatcmpl-scripted",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": MODEL,
        "choices": [] if usage else [
            {"index": 0, "delta": delta, "finish_reason": finish}
        ],
    }
    if usage:
        body["usage"] = usage
    return b"data: " + json.dumps(body, separators=(",", ":")).encode() + b"\n\n"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def send_bytes(self, status, content_type, data):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path.rstrip("/") in ("/v1/models", "/models"):
            data = json.dumps(
                {"object": "list", "data": [{"id": MODEL, "object": "model", "owned_by": "scripted"}]}
            ).encode()
            self.send_bytes(200, "application/json", data)
        else:
            self.send_bytes(404, "application/json", b'{"error":{"message":"not found"}}')

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
            self.send_bytes(404, "application/json", b'{"error":{"message":"not found"}}')
            return
        dump = os.environ.get("FOVEAL_BENCH_DUMP")
        if dump:
            with open(dump, "wb") as f:
                f.write(raw)
        try:
            request = json.loads(raw)
        except ValueError:
            self.send_bytes(400, "application/json", b'{"error":{"message":"body is not JSON"}}')
            return
        usage = {"prompt_tokens": max(1, len(raw) // 4), "completion_tokens": 3, "total_tokens": max(1, len(raw) // 4) + 3}
        if not request.get("stream"):
            data = json.dumps({
                "id": "chatcmpl-scripted",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": MODEL,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": REPLY}, "finish_reason": "stop"}],
                "usage": usage,
            }).encode()
            self.send_bytes(200, "application/json", data)
            return
        data = (
            chunk({"role": "assistant", "content": ""})
            + chunk({"content": REPLY})
            + chunk({}, finish="stop")
            + chunk(None, usage=usage)
            + b"data: [DONE]\n\n"
        )
        self.send_bytes(200, "text/event-stream", data)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8099)
    args = parser.parse_args()
    server = ThreadingHTTPServer((args.host, args.port), Handler)
    print(f"listening on http://{args.host}:{server.server_address[1]}/v1", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    sys.exit(main())
