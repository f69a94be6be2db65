#!/usr/bin/env python3
"""A scripted OpenAI-compatible server for measuring foveal end to end.

It answers every `POST /v1/chat/completions` at once with the same short
reply, streamed as server-sent events (`Hello!`, a stop finish and a usage
chunk, then `[DONE]`), or as one JSON object when the request does not ask
for a stream; `GET /v1/models` lists one model. No model runs: the time a
client spends is its own.

    python3 scripts/scripted-openai-server.py [--port 8099] [--host 127.0.0.1]

With `--script FILE` it answers from a script instead: FILE holds one
JSON object a line, each the reply to one request, in order —
`{"text": "..."}` for a text reply, or `{"tool": NAME, "arguments":
{...}}` for a call of tool NAME (a skill's tool, to see it run through
`foveal ask` or `foveal run`) — and once the script is used up it
answers `Hello!` again. Blank lines and lines starting with `#` are
skipped.

    {"tool": "word_count", "arguments": {"text": "one two"}}
    {"text": "Counted."}

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
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

REPLY = "Hello!"
MODEL = "scripted"

# The scripted replies still to give (`--script`), and its lock.
SCRIPT = []
SCRIPT_LOCK = threading.Lock()


def load_script(path):
    """The replies of a script file, checked: each a text or a tool call."""
    replies = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            try:
                reply = json.loads(line)
            except ValueError as e:
                raise SystemExit(f"{path}:{n}: not JSON: {e}")
            if not isinstance(reply, dict) or not (
                isinstance(reply.get("text"), str) or isinstance(reply.get("tool"), str)
            ):
                raise SystemExit(f'{path}:{n}: expected {{"text": ...}} or {{"tool": NAME, "arguments": {{...}}}}')
            replies.append(reply)
    return replies


def next_reply():
    with SCRIPT_LOCK:
        return SCRIPT.pop(0) if SCRIPT else {"text": REPLY}


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
        reply = next_reply()
        tool = reply.get("tool")
        arguments = json.dumps(reply.get("arguments", {}))
        call = {"id": "call_1", "type": "function", "function": {"name": tool, "arguments": arguments}}
        if not request.get("stream"):
            message = {"role": "assistant", "content": None if tool else reply["text"]}
            if tool:
                message["tool_calls"] = [call]
            data = json.dumps({
                "id": "chatcmpl-scripted",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": MODEL,
                "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if tool else "stop"}],
                "usage": usage,
            }).encode()
            self.send_bytes(200, "application/json", data)
            return
        if tool:
            body = chunk({"role": "assistant", "tool_calls": [dict(call, index=0)]}) + chunk({}, finish="tool_calls")
        else:
            body = chunk({"role": "assistant", "content": ""}) + chunk({"content": reply["text"]}) + chunk({}, finish="stop")
        data = body + chunk(None, usage=usage) + b"data: [DONE]\n\n"
        self.send_bytes(200, "text/event-stream", data)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8099)
    parser.add_argument("--script", metavar="FILE", help="reply from FILE, one JSON object a line (see above)")
    args = parser.parse_args()
    if args.script:
        SCRIPT.extend(load_script(args.script))
    server = ThreadingHTTPServer((args.host, args.port), Handler)
    print(f"listening on http://{args.host}:{server.server_address[1]}/v1", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    sys.exit(main())
