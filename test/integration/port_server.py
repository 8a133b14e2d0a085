"""A user's server on a sandbox port, for gateway.test.ts: written into a real sandbox and run there
with the image's Python, whose standard library is all it needs.

  any method, any path: {ip, method, url, body, headers}, ip being the address the gateway dialled
  POST /sink: reads the body in pieces and answers {bytes, sha256}, holding none of it
  GET /quiet?seconds=N: sends its headers, then nothing for N seconds, then "after N seconds"
  an Upgrade to WebSocket: echoes text and binary messages, answers pings and a close

Bodies come with a Content-Length or chunked (a proxied stream of unknown length).
"""
import base64
import hashlib
import json
import socket
import struct
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

WEBSOCKET_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def body_pieces(self):
        """The request body in pieces of at most 1 MiB."""
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return
                while size > 0:
                    piece = self.rfile.read(min(size, 1 << 20))
                    if not piece:
                        raise ConnectionError("the body ended inside a chunk")
                    size -= len(piece)
                    yield piece
                self.rfile.readline()
        left = int(self.headers.get("Content-Length") or 0)
        while left > 0:
            piece = self.rfile.read(min(left, 1 << 20))
            if not piece:
                raise ConnectionError("the body ended early")
            left -= len(piece)
            yield piece

    def answer(self, status, payload, content_type="application/json"):
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def handle_any(self):
        if self.headers.get("Upgrade", "").lower() == "websocket":
            return self.websocket()
        url = urlparse(self.path)
        if self.command == "POST" and url.path == "/sink":
            digest, count = hashlib.sha256(), 0
            for piece in self.body_pieces():
                digest.update(piece)
                count += len(piece)
            return self.answer(200, {"bytes": count, "sha256": digest.hexdigest()})
        if url.path == "/quiet":
            seconds = float(parse_qs(url.query)["seconds"][0])
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self.wfile.flush()
            time.sleep(seconds)
            text = b"after %g seconds" % seconds
            self.wfile.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(text), text))
            return None
        body = b"".join(self.body_pieces()).decode()
        return self.answer(
            200,
            {
                "ip": self.connection.getsockname()[0],
                "method": self.command,
                "url": self.path,
                "body": body,
                "headers": {k.lower(): v for k, v in self.headers.items()},
            },
        )

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = handle_any

    def websocket(self):
        key = self.headers["Sec-WebSocket-Key"].encode()
        accept = base64.b64encode(hashlib.sha1(key + WEBSOCKET_GUID).digest()).decode()
        self.send_response(101)
        self.send_header("Upgrade", "websocket")
        self.send_header("Connection", "Upgrade")
        self.send_header("Sec-WebSocket-Accept", accept)
        self.end_headers()
        self.wfile.flush()
        self.close_connection = True
        while True:
            head = self.rfile.read(2)
            if len(head) < 2:
                return
            opcode, length = head[0] & 0x0F, head[1] & 0x7F
            if length == 126:
                length = struct.unpack(">H", self.rfile.read(2))[0]
            elif length == 127:
                length = struct.unpack(">Q", self.rfile.read(8))[0]
            mask = self.rfile.read(4) if head[1] & 0x80 else b"\0\0\0\0"
            data = bytes(b ^ mask[i % 4] for i, b in enumerate(self.rfile.read(length)))
            if opcode == 0x8:
                self.frame(0x8, data[:2])
                return
            self.frame(0xA if opcode == 0x9 else opcode, data)

    def frame(self, opcode, data):
        n = len(data)
        if n < 126:
            head = struct.pack(">BB", 0x80 | opcode, n)
        elif n < 1 << 16:
            head = struct.pack(">BBH", 0x80 | opcode, 126, n)
        else:
            head = struct.pack(">BBQ", 0x80 | opcode, 127, n)
        self.wfile.write(head + data)
        self.wfile.flush()


class Server(ThreadingHTTPServer):
    daemon_threads = True
    address_family = socket.AF_INET


if __name__ == "__main__":
    Server(("0.0.0.0", int(sys.argv[1])), Handler).serve_forever()
