"""A stand-in of OpenEnv's GenericEnvClient for the tests, in the standard
library alone. It has the calls examples/trl/delegate_env.py makes and
sends the messages OpenEnv's client sends on /ws. It was written from
OpenEnv's client, not copied. Credentials in base_url go as Basic auth,
as the websockets library sends them."""

import base64
import json
import os
import socket
import struct
import urllib.parse
from types import SimpleNamespace


class GenericEnvClient:
    def __init__(self, base_url):
        self.url = urllib.parse.urlsplit(base_url)
        self.sock = None
        self.buf = b""

    def sync(self):
        return self

    def connect(self):
        u = self.url
        self.sock = socket.create_connection((u.hostname, u.port), timeout=30)
        key = base64.b64encode(os.urandom(16)).decode()
        lines = [
            "GET /ws HTTP/1.1",
            f"Host: {u.hostname}:{u.port}",
            "Upgrade: websocket",
            "Connection: Upgrade",
            f"Sec-WebSocket-Key: {key}",
            "Sec-WebSocket-Version: 13",
        ]
        if u.password is not None:
            cred = f"{u.username}:{u.password}".encode()
            lines.append("Authorization: Basic " + base64.b64encode(cred).decode())
        self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        head = self._until(b"\r\n\r\n")
        status = head.split(b"\r\n", 1)[0].decode()
        if status.split(" ")[1:2] != ["101"]:
            raise ConnectionError("handshake: " + status)

    def reset(self, **kwargs):
        return self._exchange({"type": "reset", "data": kwargs})

    def step(self, action):
        return self._exchange({"type": "step", "data": action})

    def close(self):
        if self.sock is not None:
            self._send(0x8, struct.pack(">H", 1000))
            self.sock.close()
            self.sock = None

    def _exchange(self, msg):
        self._send(0x1, json.dumps(msg).encode())
        answer = self._receive()
        if answer["type"] == "error":
            raise RuntimeError(answer["data"]["message"])
        d = answer["data"]
        return SimpleNamespace(observation=d["observation"], reward=d.get("reward"), done=d.get("done", False))

    def _send(self, opcode, payload):
        # A client masks every frame.
        mask = os.urandom(4)
        n = len(payload)
        if n < 126:
            head = struct.pack(">BB", 0x80 | opcode, 0x80 | n)
        elif n < 1 << 16:
            head = struct.pack(">BBH", 0x80 | opcode, 0x80 | 126, n)
        else:
            head = struct.pack(">BBQ", 0x80 | opcode, 0x80 | 127, n)
        self.sock.sendall(head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))

    def _receive(self):
        while True:
            b0, b1 = self._read(2)
            opcode, n = b0 & 0x0F, b1 & 0x7F
            if not b0 & 0x80:
                raise ConnectionError("a fragmented frame")
            if n == 126:
                (n,) = struct.unpack(">H", self._read(2))
            elif n == 127:
                (n,) = struct.unpack(">Q", self._read(8))
            payload = self._read(n)
            if opcode == 0x1:
                return json.loads(payload)
            if opcode == 0x9:
                self._send(0xA, payload)
            elif opcode == 0x8:
                raise ConnectionError("closed by the server")

    def _until(self, sep):
        while sep not in self.buf:
            self._fill()
        head, self.buf = self.buf.split(sep, 1)
        return head

    def _read(self, n):
        while len(self.buf) < n:
            self._fill()
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def _fill(self):
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionError("the server closed the connection")
        self.buf += chunk
