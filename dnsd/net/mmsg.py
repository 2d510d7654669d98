"""Batched UDP I/O: Linux recvmmsg(2) and sendmmsg(2) through ctypes.

Python's socket module has no batched calls, and on a virtual machine every system call
is dear: one recvmmsg brings up to `size` datagrams and one sendmmsg sends every reply of
the batch. The kernel writes into buffers allocated once; per datagram Python copies the
query out and the reply in (memoryview slices) and writes two integers. ctypes releases
the GIL while the call blocks, so the asyncio thread runs meanwhile. MSG_WAITFORONE: the
call blocks for the first datagram only, so a lone query is answered at once.

`available()` says whether this platform has the calls; otherwise the caller uses plain
recvfrom/sendto.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import socket
import struct
import sys

MSG_WAITFORONE = 0x10000
SLOT = 4096  # bytes per datagram; a longer query is cut and (MSG_TRUNC) treated as malformed
SEND_SLOT = 4096  # replies are cut to the client's limit (≤ 1232 with EDNS); larger: sendto
NAME_SIZE = 28  # sockaddr_in6; sockaddr_in is 16
MSG_TRUNC = 0x20


class _IoVec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


class _MsgHdr(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_void_p),
        ("namelen", ctypes.c_uint32),
        ("iov", ctypes.c_void_p),
        ("iovlen", ctypes.c_size_t),
        ("control", ctypes.c_void_p),
        ("controllen", ctypes.c_size_t),
        ("flags", ctypes.c_int),
    ]


class _MMsgHdr(ctypes.Structure):
    _fields_ = [("hdr", _MsgHdr), ("len", ctypes.c_uint)]


HDR = ctypes.sizeof(_MMsgHdr)
LEN_AT = _MMsgHdr.len.offset
NAME_AT = _MsgHdr.name.offset
NAMELEN_AT = _MsgHdr.namelen.offset
FLAGS_AT = _MsgHdr.flags.offset
IOV = ctypes.sizeof(_IoVec)


def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.recvmmsg.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_uint, ctypes.c_int,
                                  ctypes.c_void_p]  # fmt: skip
        libc.sendmmsg.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_uint, ctypes.c_int]
    except (OSError, AttributeError):
        return None
    return libc


_LIBC = _libc()


def available() -> bool:
    return _LIBC is not None


class DatagramBatch:
    """Receive up to `size` datagrams at once and send the replies at once."""

    def __init__(self, sock: socket.socket, size: int = 64) -> None:
        if _LIBC is None:
            raise OSError(errno.ENOSYS, "recvmmsg/sendmmsg not available")
        self.sock = sock
        self.size = size
        self._fd = sock.fileno()
        self._recvmmsg = _LIBC.recvmmsg
        self._sendmmsg = _LIBC.sendmmsg
        self._rbuf = ctypes.create_string_buffer(size * SLOT)
        self._sbuf = ctypes.create_string_buffer(size * SEND_SLOT)
        self._names = ctypes.create_string_buffer(size * NAME_SIZE)
        self._riov = (_IoVec * size)()
        self._siov = (_IoVec * size)()
        self._rmsg = (_MMsgHdr * size)()
        self._smsg = (_MMsgHdr * size)()
        rbuf, sbuf = ctypes.addressof(self._rbuf), ctypes.addressof(self._sbuf)
        self._names_at = ctypes.addressof(self._names)
        for i in range(size):
            self._riov[i].base, self._riov[i].len = rbuf + i * SLOT, SLOT
            self._siov[i].base = sbuf + i * SEND_SLOT
            hdr = self._rmsg[i].hdr
            hdr.name, hdr.namelen = self._names_at + i * NAME_SIZE, NAME_SIZE
            hdr.iov, hdr.iovlen = ctypes.addressof(self._riov[i]), 1
            out = self._smsg[i].hdr
            out.iov, out.iovlen = ctypes.addressof(self._siov[i]), 1
        self._rmsg_at = ctypes.addressof(self._rmsg)
        self._smsg_at = ctypes.addressof(self._smsg)
        self._rmv = memoryview(self._rmsg).cast("B")
        self._smv = memoryview(self._smsg).cast("B")
        self._siov_mv = memoryview(self._siov).cast("B")
        self._rbuf_mv = memoryview(self._rbuf).cast("B")
        self._sbuf_mv = memoryview(self._sbuf).cast("B")
        self.names = memoryview(self._names).cast("B")
        self.queued = 0

    def receive(self) -> int:
        """Block until at least one datagram; return how many arrived (0 on EINTR/EAGAIN).
        (The kernel sets each namelen to the length it wrote — always the same for one
        socket's family — so the buffers need no reset between calls.)"""
        count = int(self._recvmmsg(self._fd, self._rmsg_at, self.size, MSG_WAITFORONE, None))
        if count < 0:
            err = ctypes.get_errno()
            if err in (errno.EINTR, errno.EAGAIN):
                return 0
            raise OSError(err, os.strerror(err))
        return count

    def datagram(self, i: int) -> bytes | None:
        """The i-th datagram of the last receive; None if it was longer than a slot."""
        flags, length = struct.unpack_from("i4xI", self._rmv, i * HDR + FLAGS_AT)
        if flags & MSG_TRUNC:
            return None
        at = i * SLOT
        return bytes(self._rbuf_mv[at : at + length])

    def source_key(self, i: int) -> bytes:
        """The sender's IP address bytes (family-tagged), without the port: a cheap key."""
        at = i * NAME_SIZE
        family = self.names[at]  # little-endian sa_family: AF_INET 2, AF_INET6 10
        if family == socket.AF_INET:
            return bytes(self.names[at + 4 : at + 8])
        return bytes(self.names[at + 8 : at + 24])

    def source(self, i: int) -> tuple[str, int]:
        """The sender as (host, port) — for logs and for the first query of a client."""
        at = i * NAME_SIZE
        name = bytes(self.names[at : at + NAME_SIZE])
        port = struct.unpack_from("!H", name, 2)[0]
        if name[0] == socket.AF_INET:
            return socket.inet_ntop(socket.AF_INET, name[4:8]), port
        return socket.inet_ntop(socket.AF_INET6, name[8:24]), port

    def queue(self, i: int, reply: bytes) -> None:
        """Queue `reply` to the sender of datagram i (sent by `flush`)."""
        length = len(reply)
        if length > SEND_SLOT:
            self.sock.sendto(reply, self.source(i))
            return
        j = self.queued
        at = j * SEND_SLOT
        self._sbuf_mv[at : at + length] = reply
        struct.pack_into("Q", self._siov_mv, j * IOV + 8, length)
        struct.pack_into("PI", self._smv, j * HDR + NAME_AT,
                         self._names_at + i * NAME_SIZE, _namelen(self._rmv, i))  # fmt: skip
        self.queued = j + 1

    def flush(self) -> int:
        """Send every queued reply; returns how many could not be sent."""
        sent_from, failed = 0, 0
        while sent_from < self.queued:
            count = int(self._sendmmsg(self._fd, self._smsg_at + sent_from * HDR,
                                       self.queued - sent_from, 0))  # fmt: skip
            if count <= 0:
                err = ctypes.get_errno()
                if count < 0 and err == errno.EINTR:
                    continue
                failed += 1  # the first unsent one fails: skip it, send the rest
                sent_from += 1
                continue
            sent_from += count
        self.queued = 0
        return failed


def _namelen(rmv: memoryview, i: int) -> int:
    return int(struct.unpack_from("I", rmv, i * HDR + NAMELEN_AT)[0])


__all__ = ["DatagramBatch", "available"]
