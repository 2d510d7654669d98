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
NAME_WORDS = NAME_SIZE // 4
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
FLAGS_AT = _MsgHdr.flags.offset
IOV = ctypes.sizeof(_IoVec)


def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.recvmmsg.argtypes = [
            ctypes.c_int,
            ctypes.c_void_p,
            ctypes.c_uint,
            ctypes.c_int,
            ctypes.c_void_p,
        ]
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
        # One socket, one family: the sender's address is always at the same place.
        ipv4 = sock.family == socket.AF_INET
        namelen = 16 if ipv4 else NAME_SIZE
        self._ipv4 = ipv4
        self._moved = False
        self._names_at = ctypes.addressof(self._names)
        for i in range(size):
            self._riov[i].base, self._riov[i].len = rbuf + i * SLOT, SLOT
            self._siov[i].base = sbuf + i * SEND_SLOT
            hdr = self._rmsg[i].hdr
            hdr.name, hdr.namelen = self._names_at + i * NAME_SIZE, NAME_SIZE
            hdr.iov, hdr.iovlen = ctypes.addressof(self._riov[i]), 1
            out = self._smsg[i].hdr
            out.iov, out.iovlen = ctypes.addressof(self._siov[i]), 1
            out.name, out.namelen = self._names_at + i * NAME_SIZE, namelen
        self._rmsg_at = ctypes.addressof(self._rmsg)
        self._smsg_at = ctypes.addressof(self._smsg)
        self._rmv = memoryview(self._rmsg).cast("B")
        self._smv = memoryview(self._smsg).cast("B")
        self._siov_mv = memoryview(self._siov).cast("B")
        self._rbuf_mv = memoryview(self._rbuf).cast("B")
        self._sbuf_mv = memoryview(self._sbuf).cast("B")
        self.names = memoryview(self._names).cast("B")
        # 32-bit views for reading lengths, flags and IPv4 addresses by plain indexing.
        self._words = self._rmv.cast("I")
        self._name_words = self.names.cast("I")
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

    def datagrams(self, count: int) -> list[bytes | None]:
        """The datagrams of the last receive; None for one longer than a slot."""
        words, rbuf = self._words, self._rbuf_mv
        per, flags_at, len_at = HDR // 4, FLAGS_AT // 4, LEN_AT // 4
        return [
            None
            if words[i * per + flags_at] & MSG_TRUNC
            else bytes(rbuf[i * SLOT : i * SLOT + words[i * per + len_at]])
            for i in range(count)
        ]

    def source_keys(self, count: int) -> list[int | bytes]:
        """A cheap key per sender, without the port: the IPv4 address as an int, or the
        IPv6 address bytes."""
        if self._ipv4:
            words = self._name_words  # sockaddr_in: the address is the second 32-bit word
            return [words[i * NAME_WORDS + 1] for i in range(count)]
        names = self.names
        return [bytes(names[i * NAME_SIZE + 8 : i * NAME_SIZE + 24]) for i in range(count)]

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
        if i != j:  # reply j goes to sender i (set up as j == i: no dropped replies before)
            struct.pack_into("P", self._smv, j * HDR + NAME_AT, self._names_at + i * NAME_SIZE)
            self._moved = True
        self.queued = j + 1

    def flush(self) -> int:
        """Send every queued reply; returns how many could not be sent."""
        sent_from, failed = 0, 0
        while sent_from < self.queued:
            count = int(
                self._sendmmsg(
                    self._fd, self._smsg_at + sent_from * HDR, self.queued - sent_from, 0
                )
            )
            if count <= 0:
                err = ctypes.get_errno()
                if count < 0 and err == errno.EINTR:
                    continue
                failed += 1  # the first unsent one fails: skip it, send the rest
                sent_from += 1
                continue
            sent_from += count
        if self._moved:  # put the name pointers back: reply j → sender j
            for j in range(self.queued):
                struct.pack_into("P", self._smv, j * HDR + NAME_AT, self._names_at + j * NAME_SIZE)
            self._moved = False
        self.queued = 0
        return failed


__all__ = ["DatagramBatch", "available"]
