/* dnsd._fastloop: the UDP serving loop's hot part in C.
 *
 * One Batch per UDP socket: recvmmsg into buffers allocated once (the GIL released while
 * it blocks), then `answer_hits` answers every datagram the answer cache holds a table
 * for — dnsd.fastpath.AnswerCache keeps them in a dict, query bytes after the ID → answer
 * table (bytes, dnsd/answer_table.py, where the layout is documented). Nothing is decided
 * here: the walk draws rng.random() where the table says, compares it against the
 * cumulative weights stored there, follows the stored offsets, copies the stored reply
 * (its ID written in) and bumps the counters the table names. Every other case — no
 * table, a leaf without a finished reply, a sample order not in the table, another
 * client — goes back to the Python path with what was drawn, so nothing is drawn twice.
 * A table this code cannot read is FALLBACK: counted, and the Python path answers it.
 * Python errors (the random source, the rate limiter, memory) are propagated, never
 * cleared. The pure loop walks the same tables with dnsd.answer_table.walk.
 *
 * Queries are read here as a mirror of dnsd/query_view.py, for the shape this code
 * answers alone: header, one question as sent, at most one OPT of version 0 whose
 * payload size and DO flag it reads. It reads no EDNS option: a query with one (ECS,
 * a cookie, padding) goes to Python, whose query view is the only reader of options.
 *
 * dnstap (`tap`): each answer given here (or one in N) is appended to a bounded buffer as
 * two Frame Streams data frames, AUTH_QUERY and AUTH_RESPONSE, which the dnstap writer's
 * thread takes (`take_taps`) and writes. The protobuf framing is done here because the
 * library's costs 60 µs per query in Python, ten times what answering one costs; what
 * the frames say beyond the packets, addresses and times was encoded by the protobuf
 * library in Python: the identity and version (`tap`), the decision of a load-balanced
 * answer (the cache's `policies`, by the counter its leaf names). A full buffer drops the
 * query's frames and counts it (`tap_dropped`).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#define SLOT 4096      /* bytes per received datagram (a longer one is cut: MSG_TRUNC) */
#define SEND_SLOT 4096 /* bytes per queued reply; a longer one goes out with sendto */

/* The table layout: dnsd/answer_table.py (MAGIC, VERSION, HEADER, LEAF, DRAW, SAMPLE). */
#define TABLE_MAGIC "dnsT"
#define TABLE_VERSION 1
#define HEADER_SIZE 32
#define LEAF_SIZE 28
#define DRAW_SIZE 16
#define SAMPLE_SIZE 16
#define KIND_LEAF 0
#define KIND_DRAW 1
#define KIND_SAMPLE 2
#define HAS_REPLY 1
#define MAX_SAMPLE_ITEMS 1024
enum { HIT = 0, NOT_CACHED = 1, NEW_ORDER = 2, OTHER_CLIENT = 3, FALLBACK = 4, NO_TABLE = 5,
       PROXY_CHECK = 6 };
#define MAX_PROXY_NETS 64
#define PROXY_MAX_BODY 512 /* dnsd.net.proxy_protocol.MAX_BODY */
static const unsigned char PROXY_SIGNATURE[12] = "\r\n\r\n\x00\r\nQUIT\n";

typedef struct {
    PyObject_HEAD
    int fd;
    int ipv4;
    int size;
    int count;
    int queued;
    socklen_t namelen;
    unsigned char *rbuf, *sbuf;
    struct sockaddr_in6 *names;
    struct iovec *riov, *siov;
    struct mmsghdr *rmsg, *smsg;
    /* PROXY v2 (`unwrap`, set by the Python gate after each receive): per datagram, where
     * the query starts (-1: dropped) and the client's address it carries (length 0: the
     * sender itself; 4 or 16). Replies still go to the sender, the balancer. */
    int *skip;
    unsigned char *carried, *carried_len;
    /* `proxy_from`: the peers that must send a header (answer_hits reads the common ones
     * itself; anything else is PROXY_CHECK, for the Python gate to decide and count). */
    int proxy_nets;
    unsigned char proxy_addr[MAX_PROXY_NETS][16], proxy_len[MAX_PROXY_NETS],
        proxy_prefix[MAX_PROXY_NETS];
    /* dnstap (`tap`): frames waiting for the writer (tap_len of tap_cap bytes), the
     * Dnstap fields before and after `message` (encoded in Python), the server's address
     * and port, one query in tap_every, which of AUTH_QUERY (1) and AUTH_RESPONSE (2). */
    unsigned char *tap_buf, *tap_head, *tap_tail;
    Py_ssize_t tap_len, tap_cap, tap_head_len, tap_tail_len;
    unsigned char tap_server[16];
    int tap_server_len, tap_server_port, tap_every, tap_kinds;
    long long tap_seen, tap_dropped, tap_frames;
    struct timespec tap_received;   /* when the batch's answering began: the query time */
    PyObject *tap_policies;         /* during answer_hits: the cache's policies (borrowed) */
} Batch;

static void Batch_dealloc(Batch *self) {
    PyMem_Free(self->rbuf);
    PyMem_Free(self->sbuf);
    PyMem_Free(self->names);
    PyMem_Free(self->riov);
    PyMem_Free(self->siov);
    PyMem_Free(self->rmsg);
    PyMem_Free(self->smsg);
    PyMem_Free(self->skip);
    PyMem_Free(self->carried);
    PyMem_Free(self->carried_len);
    PyMem_Free(self->tap_buf);
    PyMem_Free(self->tap_head);
    PyMem_Free(self->tap_tail);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int Batch_init(Batch *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"fd", "ipv4", "size", NULL};
    int fd, ipv4, size = 64;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "ip|i", kwlist, &fd, &ipv4, &size))
        return -1;
    if (size < 1 || size > 1024) {
        PyErr_SetString(PyExc_ValueError, "size must be 1..1024");
        return -1;
    }
    self->fd = fd;
    self->ipv4 = ipv4;
    self->size = size;
    self->count = 0;
    self->queued = 0;
    self->proxy_nets = 0;
    self->namelen = ipv4 ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
    self->rbuf = PyMem_Calloc((size_t)size, SLOT);
    self->sbuf = PyMem_Calloc((size_t)size, SEND_SLOT);
    self->names = PyMem_Calloc((size_t)size, sizeof(struct sockaddr_in6));
    self->riov = PyMem_Calloc((size_t)size, sizeof(struct iovec));
    self->siov = PyMem_Calloc((size_t)size, sizeof(struct iovec));
    self->rmsg = PyMem_Calloc((size_t)size, sizeof(struct mmsghdr));
    self->smsg = PyMem_Calloc((size_t)size, sizeof(struct mmsghdr));
    self->skip = PyMem_Calloc((size_t)size, sizeof(int));
    self->carried = PyMem_Calloc((size_t)size, 16);
    self->carried_len = PyMem_Calloc((size_t)size, 1);
    if (!self->rbuf || !self->sbuf || !self->names || !self->riov || !self->siov ||
        !self->rmsg || !self->smsg || !self->skip || !self->carried || !self->carried_len) {
        PyErr_NoMemory();
        return -1;
    }
    for (int i = 0; i < size; i++) {
        self->riov[i].iov_base = self->rbuf + (size_t)i * SLOT;
        self->riov[i].iov_len = SLOT;
        self->rmsg[i].msg_hdr.msg_iov = &self->riov[i];
        self->rmsg[i].msg_hdr.msg_iovlen = 1;
        self->rmsg[i].msg_hdr.msg_name = &self->names[i];
        self->rmsg[i].msg_hdr.msg_namelen = sizeof(struct sockaddr_in6);
        self->siov[i].iov_base = self->sbuf + (size_t)i * SEND_SLOT;
        self->smsg[i].msg_hdr.msg_iov = &self->siov[i];
        self->smsg[i].msg_hdr.msg_iovlen = 1;
    }
    return 0;
}

/* Block until at least one datagram; how many arrived (0 on EINTR/EAGAIN). */
static PyObject *Batch_receive(Batch *self, PyObject *Py_UNUSED(ignored)) {
    int n, err = 0;
    for (int i = 0; i < self->size; i++) {
        self->rmsg[i].msg_hdr.msg_namelen = sizeof(struct sockaddr_in6);
        self->rmsg[i].msg_hdr.msg_flags = 0;
        self->skip[i] = 0;
        self->carried_len[i] = 0;
    }
    Py_BEGIN_ALLOW_THREADS
    n = recvmmsg(self->fd, self->rmsg, (unsigned)self->size, MSG_WAITFORONE, NULL);
    if (n < 0)
        err = errno;
    Py_END_ALLOW_THREADS
    if (n < 0) {
        self->count = 0;
        if (err == EINTR || err == EAGAIN)
            return PyLong_FromLong(0);
        errno = err;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    self->count = n;
    return PyLong_FromLong(n);
}

static int check_index(Batch *self, Py_ssize_t i) {
    if (i < 0 || i >= self->count) {
        PyErr_SetString(PyExc_IndexError, "no such datagram in this batch");
        return -1;
    }
    return 0;
}

/* datagram(i): its bytes, or None when the kernel cut it (longer than a slot). */
static PyObject *Batch_datagram(Batch *self, PyObject *arg) {
    Py_ssize_t i = PyLong_AsSsize_t(arg);
    if ((i == -1 && PyErr_Occurred()) || check_index(self, i) < 0)
        return NULL;
    if (self->rmsg[i].msg_hdr.msg_flags & MSG_TRUNC || self->skip[i] < 0)
        Py_RETURN_NONE;
    return PyBytes_FromStringAndSize((const char *)self->rbuf + i * SLOT + self->skip[i],
                                     self->rmsg[i].msg_len - self->skip[i]);
}

/* unwrap(i, skip, address): datagram i's query starts at `skip` (-1: drop it) and its
 * client is `address` (4 or 16 bytes; empty: the sender). Set by the PROXY v2 gate. */
static PyObject *Batch_unwrap(Batch *self, PyObject *args) {
    Py_ssize_t i;
    int skip;
    Py_buffer address;
    if (!PyArg_ParseTuple(args, "niy*", &i, &skip, &address))
        return NULL;
    if (check_index(self, i) < 0 || skip < -1 || skip > (int)self->rmsg[i].msg_len ||
        (address.len != 0 && address.len != 4 && address.len != 16)) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "unwrap: a skip within the datagram, 0/4/16 bytes");
        PyBuffer_Release(&address);
        return NULL;
    }
    self->skip[i] = skip;
    self->carried_len[i] = (unsigned char)address.len;
    memcpy(self->carried + (size_t)i * 16, address.buf, (size_t)address.len);
    PyBuffer_Release(&address);
    Py_RETURN_NONE;
}

static PyObject *source_key(Batch *self, Py_ssize_t i) {
    if (self->carried_len[i] == 4) { /* the client a PROXY v2 header carries */
        uint32_t word;
        memcpy(&word, self->carried + (size_t)i * 16, 4);
        return PyLong_FromUnsignedLong(word);
    }
    if (self->carried_len[i] == 16)
        return PyBytes_FromStringAndSize((const char *)self->carried + (size_t)i * 16, 16);
    if (self->ipv4) {
        uint32_t word;
        memcpy(&word, &((struct sockaddr_in *)&self->names[i])->sin_addr, 4);
        return PyLong_FromUnsignedLong(word); /* as dnsd.net.mmsg reads it: native order */
    }
    return PyBytes_FromStringAndSize((const char *)&self->names[i].sin6_addr, 16);
}

/* source_key(i): the sender without the port (IPv4: an int; IPv6: 16 bytes). */
static PyObject *Batch_source_key(Batch *self, PyObject *arg) {
    Py_ssize_t i = PyLong_AsSsize_t(arg);
    if ((i == -1 && PyErr_Occurred()) || check_index(self, i) < 0)
        return NULL;
    return source_key(self, i);
}

/* source(i): the sender as (host, port). */
static PyObject *Batch_source(Batch *self, PyObject *arg) {
    Py_ssize_t i = PyLong_AsSsize_t(arg);
    char host[INET6_ADDRSTRLEN];
    if ((i == -1 && PyErr_Occurred()) || check_index(self, i) < 0)
        return NULL;
    struct sockaddr_in6 *name = &self->names[i];
    if (name->sin6_family == AF_INET) {
        struct sockaddr_in *v4 = (struct sockaddr_in *)name;
        inet_ntop(AF_INET, &v4->sin_addr, host, sizeof host);
        return Py_BuildValue("(si)", host, ntohs(v4->sin_port));
    }
    inet_ntop(AF_INET6, &name->sin6_addr, host, sizeof host);
    return Py_BuildValue("(si)", host, ntohs(name->sin6_port));
}

/* Queue the reply id + body to the sender of datagram i; a reply larger than a slot goes
 * out at once with sendto (a failed send is a lost datagram, as with sendmmsg). 0, or -1
 * with MemoryError set. */
static int queue_reply(Batch *self, Py_ssize_t i, const unsigned char *id, const char *body,
                       Py_ssize_t body_len) {
    Py_ssize_t length = 2 + body_len;
    if (length > SEND_SLOT) {
        unsigned char *big = PyMem_Malloc((size_t)length);
        if (big == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        memcpy(big, id, 2);
        memcpy(big + 2, body, (size_t)body_len);
        (void)sendto(self->fd, big, (size_t)length, 0, (struct sockaddr *)&self->names[i],
                     self->namelen);
        PyMem_Free(big);
        return 0;
    }
    int j = self->queued++;
    unsigned char *out = self->sbuf + (size_t)j * SEND_SLOT;
    memcpy(out, id, 2);
    memcpy(out + 2, body, (size_t)body_len);
    self->siov[j].iov_len = (size_t)length;
    self->smsg[j].msg_hdr.msg_name = &self->names[i];
    self->smsg[j].msg_hdr.msg_namelen = self->namelen;
    return 0;
}

/* queue(i, reply): queue a reply the Python path made. */
static PyObject *Batch_queue(Batch *self, PyObject *args) {
    Py_ssize_t i;
    Py_buffer reply;
    if (!PyArg_ParseTuple(args, "ny*", &i, &reply))
        return NULL;
    if (check_index(self, i) < 0 || reply.len < 2) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "a reply is at least 2 bytes");
        PyBuffer_Release(&reply);
        return NULL;
    }
    int rc = queue_reply(self, i, reply.buf, (const char *)reply.buf + 2, reply.len - 2);
    PyBuffer_Release(&reply);
    if (rc < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* flush(): send every queued reply; how many could not be sent. */
static PyObject *Batch_flush(Batch *self, PyObject *Py_UNUSED(ignored)) {
    int sent_from = 0, failed = 0, queued = self->queued;
    Py_BEGIN_ALLOW_THREADS
    while (sent_from < queued) {
        int n = sendmmsg(self->fd, self->smsg + sent_from, (unsigned)(queued - sent_from), 0);
        if (n <= 0) {
            if (n < 0 && errno == EINTR)
                continue;
            failed++; /* the first unsent one fails: skip it, send the rest */
            sent_from++;
            continue;
        }
        sent_from += n;
    }
    Py_END_ALLOW_THREADS
    self->queued = 0;
    return PyLong_FromLong(failed);
}

static PyObject *Batch_queued(Batch *self, void *Py_UNUSED(closure)) {
    return PyLong_FromLong(self->queued);
}

/* -- dnstap ------------------------------------------------------------------------- */

#define TAP_MAX_CAPACITY (256 << 20)
#define TAP_QUERY 1
#define TAP_RESPONSE 2
/* Per frame beyond the packets, the head, the tail and the policy: its length, the tags,
 * every varint at its longest and both addresses. */
#define TAP_FIXED 128

typedef struct {
    const unsigned char *address; /* the client (4 or 16 bytes) and its port */
    Py_ssize_t address_len;
    int port;
    const unsigned char *query; /* the query as received (its ID first) */
    Py_ssize_t query_len;
    const char *body; /* the reply after its ID (the query's ID goes first) */
    Py_ssize_t body_len;
    const char *policy; /* Message.policy, tag and length first (encoded in Python), or "" */
    Py_ssize_t policy_len;
} TapEntry;

static unsigned char *put_varint(unsigned char *o, uint64_t v) {
    while (v >= 0x80) {
        *o++ = (unsigned char)(v | 0x80);
        v >>= 7;
    }
    *o++ = (unsigned char)v;
    return o;
}

static unsigned char *put_bytes(unsigned char *o, unsigned char tag, const void *p, Py_ssize_t n) {
    *o++ = tag;
    o = put_varint(o, (uint64_t)n);
    memcpy(o, p, (size_t)n);
    return o + n;
}

static unsigned char *put_fixed32(unsigned char *o, unsigned char tag, uint32_t v) {
    *o++ = tag;
    o[0] = (unsigned char)v, o[1] = (unsigned char)(v >> 8);
    o[2] = (unsigned char)(v >> 16), o[3] = (unsigned char)(v >> 24);
    return o + 4;
}

/* A dnstap Message (dnstap.proto: field number << 3 | wire type) of `kind` into o. */
static unsigned char *tap_message(Batch *self, unsigned char *o, int kind, const TapEntry *e,
                                  const struct timespec *answered) {
    *o++ = 0x08, *o++ = (unsigned char)kind;                    /* type: AUTH_QUERY/RESPONSE */
    *o++ = 0x10, *o++ = e->address_len == 4 ? 1 : 2;            /* socket_family: INET(6) */
    *o++ = 0x18, *o++ = 1;                                      /* socket_protocol: UDP */
    o = put_bytes(o, 0x22, e->address, e->address_len);        /* query_address */
    if (self->tap_server_len)
        o = put_bytes(o, 0x2a, self->tap_server, self->tap_server_len); /* response_address */
    *o++ = 0x30, o = put_varint(o, (uint64_t)e->port);         /* query_port */
    *o++ = 0x38, o = put_varint(o, (uint64_t)self->tap_server_port); /* response_port */
    *o++ = 0x40, o = put_varint(o, (uint64_t)self->tap_received.tv_sec); /* query_time_sec */
    o = put_fixed32(o, 0x4d, (uint32_t)self->tap_received.tv_nsec);    /* query_time_nsec */
    if (kind == TAP_QUERY)
        return put_bytes(o, 0x52, e->query, e->query_len); /* query_message */
    *o++ = 0x60, o = put_varint(o, (uint64_t)answered->tv_sec); /* response_time_sec */
    o = put_fixed32(o, 0x6d, (uint32_t)answered->tv_nsec);     /* response_time_nsec */
    *o++ = 0x72, o = put_varint(o, (uint64_t)(2 + e->body_len)); /* response_message */
    memcpy(o, e->query, 2);
    memcpy(o + 2, e->body, (size_t)e->body_len);
    o += 2 + e->body_len;
    memcpy(o, e->policy, (size_t)e->policy_len); /* policy */
    return o + e->policy_len;
}

/* Append an answered query's frames (one query in tap_every): both, or none and counted
 * when the buffer cannot hold them. */
static void tap_answer(Batch *self, const TapEntry *e) {
    if (self->tap_buf == NULL || (self->tap_every > 1 && ++self->tap_seen % self->tap_every))
        return;
    Py_ssize_t frame = TAP_FIXED + self->tap_head_len + self->tap_tail_len, need = 0;
    if (self->tap_kinds & TAP_QUERY)
        need += frame + e->query_len;
    if (self->tap_kinds & TAP_RESPONSE)
        need += frame + 2 + e->body_len + e->policy_len;
    if (need > self->tap_cap - self->tap_len) {
        self->tap_dropped++;
        return;
    }
    struct timespec answered;
    clock_gettime(CLOCK_REALTIME, &answered);
    for (int kind = TAP_QUERY; kind <= TAP_RESPONSE; kind++) {
        if (!(self->tap_kinds & kind))
            continue;
        /* length, the head (identity, version), Dnstap.message (tag 14, its length, the
         * Message: written 3 bytes on and moved back once its length is known), the tail */
        unsigned char *start = self->tap_buf + self->tap_len, *o = start + 4;
        memcpy(o, self->tap_head, (size_t)self->tap_head_len);
        o += self->tap_head_len;
        *o++ = 0x72;
        unsigned char *message = o + 3, *end = tap_message(self, message, kind, e, &answered);
        Py_ssize_t message_len = end - message;
        unsigned char *moved = put_varint(o, (uint64_t)message_len);
        memmove(moved, message, (size_t)message_len);
        o = moved + message_len;
        memcpy(o, self->tap_tail, (size_t)self->tap_tail_len);
        o += self->tap_tail_len;
        uint32_t length = (uint32_t)(o - start - 4);
        start[0] = (unsigned char)(length >> 24), start[1] = (unsigned char)(length >> 16);
        start[2] = (unsigned char)(length >> 8), start[3] = (unsigned char)length;
        self->tap_len += o - start;
        self->tap_frames++;
    }
}

/* tap(head, tail, server, server_port, every, kinds, capacity): from now on, every answer
 * given here (one in `every`) is kept as dnstap frames for take_taps. */
static PyObject *Batch_tap(Batch *self, PyObject *args) {
    Py_buffer head, tail, server;
    int server_port, every, kinds;
    Py_ssize_t capacity;
    if (!PyArg_ParseTuple(args, "y*y*y*iiin", &head, &tail, &server, &server_port, &every,
                          &kinds, &capacity))
        return NULL;
    PyObject *out = NULL;
    if ((server.len != 0 && server.len != 4 && server.len != 16) || every < 1 ||
        kinds < 1 || kinds > 3 || capacity < 65536 || capacity > TAP_MAX_CAPACITY ||
        head.len > 4096 || tail.len > 4096 || self->tap_buf != NULL) {
        PyErr_SetString(PyExc_ValueError, "tap: once, with sane settings");
    } else {
        self->tap_buf = PyMem_Malloc((size_t)capacity);
        self->tap_head = PyMem_Malloc((size_t)head.len + 1);
        self->tap_tail = PyMem_Malloc((size_t)tail.len + 1);
        if (!self->tap_buf || !self->tap_head || !self->tap_tail) {
            PyErr_NoMemory();
        } else {
            memcpy(self->tap_head, head.buf, (size_t)head.len);
            memcpy(self->tap_tail, tail.buf, (size_t)tail.len);
            memcpy(self->tap_server, server.buf, (size_t)server.len);
            self->tap_head_len = head.len, self->tap_tail_len = tail.len;
            self->tap_server_len = (int)server.len, self->tap_server_port = server_port;
            self->tap_every = every, self->tap_kinds = kinds, self->tap_cap = capacity;
            out = Py_NewRef(Py_None);
        }
        if (out == NULL) { /* none of it kept: dnstap stays off here */
            PyMem_Free(self->tap_buf);
            PyMem_Free(self->tap_head);
            PyMem_Free(self->tap_tail);
            self->tap_buf = self->tap_head = self->tap_tail = NULL;
        }
    }
    PyBuffer_Release(&head);
    PyBuffer_Release(&tail);
    PyBuffer_Release(&server);
    return out;
}

/* take_taps() -> (frames, count): the frames kept since the last call, and how many. */
static PyObject *Batch_take_taps(Batch *self, PyObject *Py_UNUSED(ignored)) {
    PyObject *data = PyBytes_FromStringAndSize((const char *)self->tap_buf,
                                               self->tap_buf ? self->tap_len : 0);
    if (data == NULL)
        return NULL;
    long long frames = self->tap_frames;
    self->tap_len = 0;
    self->tap_frames = 0;
    return Py_BuildValue("(NL)", data, frames);
}

static PyObject *Batch_tap_dropped(Batch *self, void *Py_UNUSED(closure)) {
    return PyLong_FromLongLong(self->tap_dropped);
}

/* The port datagram i came from (the same offset in sockaddr_in and sockaddr_in6). */
static int sender_port(Batch *self, Py_ssize_t i) {
    return ntohs(self->names[i].sin6_port);
}

/* -- answer tables ------------------------------------------------------------------- */

typedef struct {
    int code;
    uint32_t value; /* HIT: the leaf's offset; NOT_CACHED: leaf id; NEW_ORDER: sample id */
    uint32_t take;  /* NEW_ORDER: the order drawn */
    uint16_t order[MAX_SAMPLE_ITEMS];
} Walked;

typedef struct {
    const unsigned char *at;
    Py_ssize_t len;
} Table;

static int has(const Table *t, Py_ssize_t at, Py_ssize_t size) {
    return at >= 0 && size >= 0 && at <= t->len && size <= t->len - at;
}

static uint32_t u32(const Table *t, Py_ssize_t at) {
    const unsigned char *p = t->at + at;
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static int32_t i32(const Table *t, Py_ssize_t at) {
    uint32_t v = u32(t, at);
    int32_t out;
    memcpy(&out, &v, 4);
    return out;
}

static double f64(const Table *t, Py_ssize_t at) {
    uint64_t v = (uint64_t)u32(t, at) | (uint64_t)u32(t, at + 4) << 32;
    double out;
    memcpy(&out, &v, 8);
    return out;
}

/* One rng.random(): 0 with *out set, or -1 with the Python error set. */
static int draw_random(PyObject *random, double *out) {
    PyObject *r = PyObject_CallNoArgs(random);
    if (r == NULL)
        return -1;
    *out = PyFloat_AsDouble(r);
    Py_DECREF(r);
    return (*out == -1.0 && PyErr_Occurred()) ? -1 : 0;
}

/* Where the draws lead in table `t` for a client at `source` (4 or 16 bytes): 0 with *w
 * filled (FALLBACK when the table cannot be read), or -1 with the Python error set. */
static int walk_table(const Table *t, const unsigned char *source, Py_ssize_t source_len,
                      PyObject *random, Walked *w) {
    w->code = FALLBACK;
    w->value = 0;
    w->take = 0;
    if (!has(t, 0, HEADER_SIZE) || memcmp(t->at, TABLE_MAGIC, 4) != 0 ||
        (t->at[4] | t->at[5] << 8) != TABLE_VERSION)
        return 0;
    Py_ssize_t address_len = t->at[6];
    if (address_len != 0 && address_len != 4 && address_len != 16)
        return 0;
    if (address_len && (address_len != source_len || memcmp(t->at + 16, source, address_len))) {
        w->code = OTHER_CLIENT;
        return 0;
    }
    Py_ssize_t at = u32(t, 12), parent = HEADER_SIZE - 1;
    double weights[MAX_SAMPLE_ITEMS], running[MAX_SAMPLE_ITEMS];
    uint16_t remaining[MAX_SAMPLE_ITEMS], items[MAX_SAMPLE_ITEMS];
    for (;;) {
        if (at <= parent || !has(t, at, 1)) /* children follow their parent: walks end */
            return 0;
        parent = at;
        int kind = t->at[at];
        if (kind == KIND_LEAF) {
            if (!has(t, at, LEAF_SIZE))
                return 0;
            if (t->at[at + 1] & HAS_REPLY) {
                if (!has(t, u32(t, at + 8), u32(t, at + 12)))
                    return 0;
                w->code = HIT;
                w->value = (uint32_t)at;
            } else {
                w->code = NOT_CACHED;
                w->value = u32(t, at + 4);
            }
            return 0;
        }
        if (kind == KIND_DRAW) {
            if (!has(t, at, DRAW_SIZE))
                return 0;
            Py_ssize_t n = u32(t, at + 4), start = at + DRAW_SIZE;
            if (n > (t->len / 12) || !has(t, start, 8 * n + 4 * (n + 1)))
                return 0;
            double r;
            if (draw_random(random, &r) < 0)
                return -1;
            /* the mirror of dnsd.steering.draws.branch_at */
            double point = r * f64(t, at + 8);
            Py_ssize_t lo = 0, hi = n; /* the first threshold above the point */
            while (lo < hi) {
                Py_ssize_t mid = (lo + hi) / 2;
                if (point < f64(t, start + 8 * mid))
                    hi = mid;
                else
                    lo = mid + 1;
            }
            at = u32(t, start + 8 * n + 4 * lo);
            continue;
        }
        if (kind != KIND_SAMPLE || !has(t, at, SAMPLE_SIZE))
            return 0;
        Py_ssize_t take = t->at[at + 2] | t->at[at + 3] << 8, n = u32(t, at + 4);
        Py_ssize_t m = u32(t, at + 8), start = at + SAMPLE_SIZE, entry_size = 2 * take + 4;
        if (take < 1 || take > n || n > MAX_SAMPLE_ITEMS || m > t->len / entry_size ||
            !has(t, start, 8 * n + m * entry_size))
            return 0;
        for (Py_ssize_t i = 0; i < n; i++) {
            weights[i] = f64(t, start + 8 * i);
            remaining[i] = (uint16_t)i;
        }
        Py_ssize_t left = n;
        /* The mirror of dnsd.steering.draws.draw_order (weighted_draw's thresholds over
         * what is left, branch_at's pick); tests/property/test_draw_rule.py holds them
         * to the same picks from the same random stream. */
        for (Py_ssize_t k = 0; k < take; k++) {
            Py_ssize_t count = 0;
            double scale = 0.0;
            for (Py_ssize_t i = 0; i < left; i++) {
                if (weights[remaining[i]] > 0) {
                    scale += weights[remaining[i]];
                    running[count] = scale;
                    items[count++] = (uint16_t)i;
                }
            }
            int uniform = count == 0; /* only zero weights: thresholds 1 .. left-1 */
            if (uniform) {
                scale = (double)left;
                count = left - 1;
            }
            double r;
            if (draw_random(random, &r) < 0)
                return -1;
            double point = r * scale;
            Py_ssize_t lo = 0, hi = count;
            while (lo < hi) {
                Py_ssize_t mid = (lo + hi) / 2;
                if (point < (uniform ? (double)(mid + 1) : running[mid]))
                    hi = mid;
                else
                    lo = mid + 1;
            }
            Py_ssize_t pick = uniform ? lo : items[lo < count ? lo : count - 1];
            w->order[k] = remaining[pick];
            memmove(remaining + pick, remaining + pick + 1, (size_t)(left - pick - 1) * 2);
            left--;
        }
        Py_ssize_t entry = start + 8 * n, found = -1;
        for (Py_ssize_t j = 0; j < m && found < 0; j++, entry += entry_size) {
            Py_ssize_t k = 0;
            while (k < take && (t->at[entry + 2 * k] | t->at[entry + 2 * k + 1] << 8) == w->order[k])
                k++;
            if (k == take)
                found = u32(t, entry + 2 * take);
        }
        if (found < 0) {
            w->code = NEW_ORDER;
            w->value = u32(t, at + 12);
            w->take = (uint32_t)take;
            return 0;
        }
        at = found;
    }
}

/* (code, value, order or None): what the walk returns to Python. */
static PyObject *walked_tuple(const Walked *w) {
    if (w->code != NEW_ORDER)
        return Py_BuildValue("(ikO)", w->code, (unsigned long)w->value, Py_None);
    PyObject *order = PyTuple_New(w->take);
    if (order == NULL)
        return NULL;
    for (uint32_t k = 0; k < w->take; k++) {
        PyObject *item = PyLong_FromLong(w->order[k]);
        if (item == NULL) {
            Py_DECREF(order);
            return NULL;
        }
        PyTuple_SET_ITEM(order, k, item);
    }
    return Py_BuildValue("(ikN)", w->code, (unsigned long)w->value, order);
}

/* walk(table, address, rng) -> (code, value, order): the compiled walk on its own (the
 * property tests compare it with dnsd.answer_table.walk). */
static PyObject *fastloop_walk(PyObject *Py_UNUSED(module), PyObject *args) {
    Py_buffer table, source;
    PyObject *rng, *out = NULL;
    if (!PyArg_ParseTuple(args, "y*y*O", &table, &source, &rng))
        return NULL;
    PyObject *random = PyObject_GetAttrString(rng, "random");
    Walked *w = PyMem_Malloc(sizeof(Walked));
    if (random != NULL && w == NULL)
        PyErr_NoMemory();
    if (random != NULL && w != NULL) {
        Table t = {table.buf, table.len};
        if (walk_table(&t, source.buf, source.len, random, w) == 0)
            out = walked_tuple(w);
    }
    PyMem_Free(w);
    Py_XDECREF(random);
    PyBuffer_Release(&table);
    PyBuffer_Release(&source);
    return out;
}

/* The datagram's source address as the tables hold it: 4 bytes for IPv4 (also mapped into
 * IPv6, as dnsd.net.udp.client_address reads it), else 16. */
static Py_ssize_t source_address(Batch *self, Py_ssize_t i, const unsigned char **out) {
    if (self->carried_len[i]) { /* the client a PROXY v2 header carries */
        *out = self->carried + (size_t)i * 16;
        if (self->carried_len[i] == 16 && IN6_IS_ADDR_V4MAPPED((struct in6_addr *)*out)) {
            *out += 12;
            return 4;
        }
        return self->carried_len[i];
    }
    if (self->ipv4) {
        *out = (const unsigned char *)&((struct sockaddr_in *)&self->names[i])->sin_addr;
        return 4;
    }
    const unsigned char *a = (const unsigned char *)&self->names[i].sin6_addr;
    if (IN6_IS_ADDR_V4MAPPED(&self->names[i].sin6_addr)) {
        *out = a + 12;
        return 4;
    }
    *out = a;
    return 16;
}

/* Whether `address` (4 or 16 bytes) is in one of the proxy_from networks. */
static int proxy_listed(Batch *self, const unsigned char *address, Py_ssize_t len) {
    for (int n = 0; n < self->proxy_nets; n++) {
        if (self->proxy_len[n] != len)
            continue;
        int bits = self->proxy_prefix[n], whole = bits / 8, rest = bits % 8;
        if (memcmp(self->proxy_addr[n], address, (size_t)whole) != 0)
            continue;
        if (rest && ((self->proxy_addr[n][whole] ^ address[whole]) & (0xFF << (8 - rest))))
            continue;
        return 1;
    }
    return 0;
}

/* The PROXY v2 gate for datagram i: 0 as it came (a peer not listed, no header), 1 read
 * (skip and carried set: a listed peer's IPv4/IPv6 UDP header), -1 for the Python gate
 * (every other case: LOCAL, a bad or missing header, a header from a peer not listed). */
static int proxy_gate(Batch *self, Py_ssize_t i) {
    const unsigned char *d = self->rbuf + i * SLOT, *source;
    Py_ssize_t len = self->rmsg[i].msg_len;
    Py_ssize_t source_len = source_address(self, i, &source);
    int signed_ = len >= 12 && memcmp(d, PROXY_SIGNATURE, 12) == 0;
    if (!proxy_listed(self, source, source_len))
        return signed_ ? -1 : 0;
    if (!signed_ || len < 28 || d[12] != 0x21)
        return -1;
    Py_ssize_t body = (Py_ssize_t)d[14] << 8 | d[15], length = 16 + body;
    Py_ssize_t need = d[13] == 0x12 ? 28 : d[13] == 0x22 ? 52 : 0;
    if (!need || body > PROXY_MAX_BODY || length < need || length > len)
        return -1;
    self->skip[i] = (int)length;
    self->carried_len[i] = need == 28 ? 4 : 16;
    memcpy(self->carried + (size_t)i * 16, d + 16, self->carried_len[i]);
    return 1;
}

/* proxy_from([(network address bytes, prefix length)]): the peers whose datagrams start
 * with a PROXY v2 header, read in answer_hits. */
static PyObject *Batch_proxy_from(Batch *self, PyObject *arg) {
    PyObject *seq = PySequence_Fast(arg, "proxy_from: a list of (address, prefix)");
    if (seq == NULL)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n > MAX_PROXY_NETS) {
        Py_DECREF(seq);
        PyErr_SetString(PyExc_ValueError, "proxy_from: at most 64 networks");
        return NULL;
    }
    for (Py_ssize_t k = 0; k < n; k++) {
        Py_buffer address;
        int prefix;
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, k), "y*i", &address, &prefix)) {
            Py_DECREF(seq);
            return NULL;
        }
        int ok = (address.len == 4 || address.len == 16) && prefix >= 0 &&
                 prefix <= address.len * 8;
        if (ok) {
            memcpy(self->proxy_addr[k], address.buf, (size_t)address.len);
            self->proxy_len[k] = (unsigned char)address.len;
            self->proxy_prefix[k] = (unsigned char)prefix;
        }
        PyBuffer_Release(&address);
        if (!ok) {
            Py_DECREF(seq);
            PyErr_SetString(PyExc_ValueError, "proxy_from: 4 or 16 bytes and a prefix");
            return NULL;
        }
    }
    self->proxy_nets = (int)n;
    Py_DECREF(seq);
    Py_RETURN_NONE;
}

/* carried_host(i): the client a PROXY v2 header of datagram i carries, or None. */
static PyObject *Batch_carried_host(Batch *self, PyObject *arg) {
    Py_ssize_t i = PyLong_AsSsize_t(arg);
    char host[INET6_ADDRSTRLEN];
    if ((i == -1 && PyErr_Occurred()) || check_index(self, i) < 0)
        return NULL;
    if (!self->carried_len[i])
        Py_RETURN_NONE;
    inet_ntop(self->carried_len[i] == 4 ? AF_INET : AF_INET6, self->carried + (size_t)i * 16,
              host, sizeof host);
    return PyUnicode_FromString(host);
}

/* Bump the counters a leaf names (-1: none); 0, or -1 when one is out of range. */
static int bump(const Table *t, Py_ssize_t leaf, long long *counters, Py_ssize_t n) {
    int32_t which[3] = {i32(t, leaf + 16), i32(t, leaf + 20), i32(t, leaf + 24)};
    for (int k = 0; k < 3; k++)
        if (which[k] < -1 || which[k] >= n)
            return -1;
    for (int k = 0; k < 3; k++)
        if (which[k] >= 0)
            counters[which[k]]++;
    return 0;
}

/* The Client of datagram i when there is a rate limiter (it needs one; a new client is
 * Python's to make): 1 with a new reference in *client (NULL without a limiter), 0 when
 * the client is not known yet, -1 with a Python error. */
static int known_client(Batch *self, Py_ssize_t i, PyObject *limit, PyObject *clients,
                        PyObject **client) {
    *client = NULL;
    if (limit == Py_None)
        return 1;
    PyObject *key = source_key(self, i);
    if (key == NULL)
        return -1;
    *client = PyDict_GetItemWithError(clients, key);
    Py_DECREF(key);
    if (*client == NULL)
        return PyErr_Occurred() ? -1 : 0;
    Py_INCREF(*client);
    return 1;
}

/* Send the reply (datagram i's ID, then `body`): queued, or first through the rate
 * limiter when there is one — limit(reply, client, query) -> reply | None (None: dropped,
 * and counted there). 1, or -1 with a Python error. */
static int deliver(Batch *self, Py_ssize_t i, const unsigned char *wire, Py_ssize_t length,
                   const char *body, Py_ssize_t body_len, PyObject *limit, PyObject *client) {
    if (limit == Py_None)
        return queue_reply(self, i, wire, body, body_len) < 0 ? -1 : 1;
    PyObject *full = PyBytes_FromStringAndSize(NULL, 2 + body_len), *sent = NULL;
    PyObject *query = full ? PyBytes_FromStringAndSize((const char *)wire, length) : NULL;
    if (query != NULL) {
        memcpy(PyBytes_AS_STRING(full), wire, 2);
        memcpy(PyBytes_AS_STRING(full) + 2, body, (size_t)body_len);
        sent = PyObject_CallFunctionObjArgs(limit, full, client, query, NULL);
    }
    Py_XDECREF(full);
    Py_XDECREF(query);
    if (sent == NULL)
        return -1;
    int rc = 1;
    if (PyBytes_Check(sent) && PyBytes_GET_SIZE(sent) >= 2)
        rc = queue_reply(self, i, (const unsigned char *)PyBytes_AS_STRING(sent),
                         PyBytes_AS_STRING(sent) + 2, PyBytes_GET_SIZE(sent) - 2) < 0 ? -1 : 1;
    Py_DECREF(sent);
    return rc;
}

/* Answer datagram i from its table (a new reference to bytes): 1 answered, 0 not (w->code
 * says why), -1 a Python error. */
static int answer_one(Batch *self, Py_ssize_t i, PyObject *table, PyObject *random,
                      Py_buffer *counters, PyObject *limit, PyObject *clients, Walked *w) {
    const unsigned char *wire = self->rbuf + i * SLOT + self->skip[i], *source;
    Py_ssize_t length = self->rmsg[i].msg_len - self->skip[i];
    Py_ssize_t source_len = source_address(self, i, &source);
    PyObject *client = NULL;
    w->code = FALLBACK;
    w->value = 0;
    if (!PyBytes_CheckExact(table))
        return 0;
    int found = known_client(self, i, limit, clients, &client);
    if (found <= 0) {
        w->code = NO_TABLE;
        return found;
    }
    Table t = {(const unsigned char *)PyBytes_AS_STRING(table), PyBytes_GET_SIZE(table)};
    int rc = walk_table(&t, source, source_len, random, w);
    if (rc < 0 || w->code != HIT) {
        Py_XDECREF(client);
        return rc;
    }
    Py_ssize_t leaf = w->value, reply_at = u32(&t, leaf + 8), reply_len = u32(&t, leaf + 12);
    if (bump(&t, leaf, counters->buf, counters->len / (Py_ssize_t)sizeof(long long)) < 0) {
        w->code = FALLBACK;
        Py_XDECREF(client);
        return 0;
    }
    rc = deliver(self, i, wire, length, (const char *)t.at + reply_at, reply_len, limit, client);
    Py_XDECREF(client);
    if (rc == 1 && self->tap_buf != NULL) {
        TapEntry e = {source, source_len, sender_port(self, i), wire, length,
                      (const char *)t.at + reply_at, reply_len, "", 0};
        int32_t lb = i32(&t, leaf + 20); /* the decision's counter: its policy */
        PyObject *policies = self->tap_policies;
        if (lb >= 0 && policies != NULL && PyList_CheckExact(policies) &&
            lb < PyList_GET_SIZE(policies) && PyBytes_CheckExact(PyList_GET_ITEM(policies, lb))) {
            e.policy = PyBytes_AS_STRING(PyList_GET_ITEM(policies, lb));
            e.policy_len = PyBytes_GET_SIZE(PyList_GET_ITEM(policies, lb));
        }
        tap_answer(self, &e);
    }
    return rc;
}

/* -- zone answer tables (the layout: dnsd/zone_tables/) ---------------------------- */

#define ZONE_MAGIC "dnsZ"
#define ZONE_NODE_SIZE 20
#define ZONES_COUNTS 2 /* in answer_hits' `zones`: count key -> answers */
#define ZONE_ENTRY_SIZE 8
#define ZONE_ALL_PYTHON 1
#define ZONE_INLINE 1
#define NO_TEMPLATE 0xFFFFFFFFu
#define RELOC_BASE 512
#define EDNS_PAYLOAD 1232
#define PLAIN_UDP_LIMIT 512
#define MAX_LABELS 128

/* A byte a configured name has, lowered; 0 for any other (filled by name_bytes_init). */
static unsigned char name_lower[256];

static void name_bytes_init(void) {
    for (int c = 0; c < 256; c++) {
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '-' || c == '_' || c == '*';
        name_lower[c] = !ok ? 0 : (c >= 'A' && c <= 'Z') ? (unsigned char)(c + 32) : (unsigned char)c;
    }
}

static uint16_t be16(const unsigned char *p) { return (uint16_t)(p[0] << 8 | p[1]); }
static uint16_t le16(const unsigned char *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t le32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

typedef struct {
    const unsigned char *at; /* NULL: Python answers (or a table this code cannot read) */
    Py_ssize_t len;
} Template;

/* The templates list last found for a templates id, within one answer_hits call (the map
 * is the caller's and does not change meanwhile): most answers of a batch share it. */
typedef struct {
    PyObject *list; /* borrowed; NULL: none yet */
    uint32_t id;
} TemplatesMemo;

/* The template a node gives question type qtype (exact: the name itself, else a name below
 * it), into *out: in the node itself (INLINE) or one of its zone's shared ones, which
 * `templates` maps from the node's templates id. out->at stays NULL when Python answers (or
 * the node is not one this code can read). Returns 0, or -1 on a Python error. */
static int zone_template(const unsigned char *p, Py_ssize_t len, PyObject *templates,
                         TemplatesMemo *memo, int exact, uint16_t qtype, Template *out) {
    out->at = NULL, out->len = 0;
    if (len < ZONE_NODE_SIZE || memcmp(p, ZONE_MAGIC, 4) != 0 || p[4] & ZONE_ALL_PYTHON)
        return 0;
    int n_exact = p[5], n_below = p[6];
    if (len < ZONE_NODE_SIZE + (Py_ssize_t)(n_exact + n_below) * ZONE_ENTRY_SIZE)
        return 0;
    uint32_t index = le32(p + (exact ? 8 : 12));
    int inline_at = 0;
    const unsigned char *entry = p + ZONE_NODE_SIZE + (exact ? 0 : n_exact * ZONE_ENTRY_SIZE);
    for (int k = 0; k < (exact ? n_exact : n_below); k++, entry += ZONE_ENTRY_SIZE)
        if (le16(entry) == qtype) {
            index = le32(entry + 4);
            inline_at = le16(entry + 2) & ZONE_INLINE;
            break;
        }
    if (index == NO_TEMPLATE)
        return 0;
    if (inline_at) {
        if ((Py_ssize_t)index + 2 > len)
            return 0;
        Py_ssize_t size = le16(p + index);
        if ((Py_ssize_t)index + 2 + size > len)
            return 0;
        out->at = p + index + 2, out->len = size;
        return 0;
    }
    uint32_t templates_id = le32(p + 16);
    PyObject *shared_list = memo->list;
    if (shared_list == NULL || memo->id != templates_id) {
        PyObject *id = PyLong_FromUnsignedLong(templates_id);
        if (id == NULL)
            return -1;
        shared_list = PyDict_GetItemWithError(templates, id);
        Py_DECREF(id);
        if (shared_list == NULL)
            return PyErr_Occurred() ? -1 : 0;
        memo->list = shared_list, memo->id = templates_id;
    }
    if (!PyList_CheckExact(shared_list) || (Py_ssize_t)index >= PyList_GET_SIZE(shared_list))
        return 0;
    PyObject *shared = PyList_GET_ITEM(shared_list, index);
    if (!PyBytes_CheckExact(shared))
        return 0;
    out->at = (const unsigned char *)PyBytes_AS_STRING(shared);
    out->len = PyBytes_GET_SIZE(shared);
    return 0;
}

/* zlib's CRC-32 (dnsd.zone_tables.packed hashes names with zlib.crc32), eight bytes at a
 * time (slicing-by-8: a name's hash was a quarter of a random name's answer bytewise). */
static uint32_t crc_table[8][256];

static void crc_init(void) {
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[0][n] = c;
    }
    for (int t = 1; t < 8; t++)
        for (int n = 0; n < 256; n++)
            crc_table[t][n] = (crc_table[t - 1][n] >> 8) ^ crc_table[0][crc_table[t - 1][n] & 0xFF];
}

static uint32_t crc32_of(const unsigned char *p, Py_ssize_t n) {
    uint32_t c = 0xFFFFFFFFu;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    for (; n >= 8; p += 8, n -= 8) {
        uint32_t one, two;
        memcpy(&one, p, 4), memcpy(&two, p + 4, 4);
        one ^= c;
        c = crc_table[7][one & 0xFF] ^ crc_table[6][(one >> 8) & 0xFF] ^
            crc_table[5][(one >> 16) & 0xFF] ^ crc_table[4][one >> 24] ^
            crc_table[3][two & 0xFF] ^ crc_table[2][(two >> 8) & 0xFF] ^
            crc_table[1][(two >> 16) & 0xFF] ^ crc_table[0][two >> 24];
    }
#endif
    for (; n > 0; p++, n--)
        c = crc_table[0][(c ^ *p) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

/* The packed nodes (dnsd.zone_tables.packed): records, and a power of two of slots, each
 * two native u32: the record's offset + 1 (0: empty) and its name's CRC-32, searched from
 * crc32(key) one slot at a time (a slot that is not the name's is passed over without
 * reading its record: a random name's answer reads one line of slots and no record). */
typedef struct {
    const unsigned char *records;
    Py_ssize_t records_len;
    const unsigned char *slots; /* 8 bytes each, read with memcpy */
    Py_ssize_t n_slots;
} PackedNodes;

/* The node of `key` into *node and *node_len: 1 found, 0 not (nor in a table this code
 * cannot read: every offset and length is checked). */
static int packed_find(const PackedNodes *t, const unsigned char *key, Py_ssize_t key_len,
                       const uint32_t *known_hash, const unsigned char **node,
                       Py_ssize_t *node_len) {
    if (t->n_slots == 0 || (t->n_slots & (t->n_slots - 1)))
        return 0;
    uint32_t hash = known_hash != NULL ? *known_hash : crc32_of(key, key_len);
    size_t mask = (size_t)t->n_slots - 1, at = hash & mask;
    for (Py_ssize_t tries = 0; tries < t->n_slots; tries++, at = (at + 1) & mask) {
        uint32_t slot[2];
        memcpy(slot, t->slots + 8 * at, 8);
        if (slot[0] == 0)
            return 0;
        if (slot[1] != hash)
            continue;
        Py_ssize_t offset = (Py_ssize_t)slot[0] - 1;
        if (offset + 5 + key_len > t->records_len)
            return 0;
        const unsigned char *r = t->records + offset;
        if (r[0] != key_len || memcmp(r + 1, key, (size_t)key_len) != 0)
            continue;
        Py_ssize_t length = (Py_ssize_t)le32(r + 1 + key_len);
        if (length > t->records_len - (offset + 5 + key_len))
            return 0;
        *node = r + 5 + key_len, *node_len = length;
        return 1;
    }
    return 0;
}

/* A datagram's lowered name's CRC-32, found ahead of its turn (name_len 0: none). */
typedef struct {
    uint32_t hash;
    Py_ssize_t name_len;
} NameHint;

static Py_ssize_t lower_qname(const unsigned char *wire, Py_ssize_t n, unsigned char *lowered,
                              Py_ssize_t *name_len, int *starts, int *labels);

/* The hint for `wire`'s name, and its slot fetched into the cache meanwhile: a random
 * name's slot is a memory read the walk would otherwise wait for (75% of the walk's time
 * in a random-name flood), now overlapped with the datagram before it. */
static void prefetch_name(const PackedNodes *t, const unsigned char *wire, Py_ssize_t n,
                          NameHint *hint) {
    unsigned char lowered[256];
    hint->name_len = 0;
    if (t->n_slots == 0 || (t->n_slots & (t->n_slots - 1)) || n < 17)
        return;
    Py_ssize_t name_len = 0;
    if (lower_qname(wire, n, lowered, &name_len, NULL, NULL) == 0)
        return;
    hint->hash = crc32_of(lowered, name_len);
    hint->name_len = name_len;
    __builtin_prefetch(t->slots + 8 * (hint->hash & ((size_t)t->n_slots - 1)));
}

/* The question's name (from offset 12) lowered into `lowered` (at most 255 bytes, its
 * root label included) and its length in *name_len; with `starts`, each label's offset
 * in it (at most MAX_LABELS, counted in *labels, the root's not added). Returns the
 * offset just past the name, or 0 when it is not a plain uncompressed name. */
static Py_ssize_t lower_qname(const unsigned char *wire, Py_ssize_t n, unsigned char *lowered,
                              Py_ssize_t *name_len, int *starts, int *labels) {
    Py_ssize_t pos = 12, len = 0;
    for (;;) {
        if (pos >= n)
            return 0;
        int size = wire[pos];
        if (size == 0)
            break;
        if (size > 63 || pos + 1 + size > n || len + 1 + size + 1 > 255)
            return 0;
        if (starts != NULL) {
            if (*labels >= MAX_LABELS)
                return 0;
            starts[(*labels)++] = (int)len;
        }
        lowered[len++] = (unsigned char)size;
        for (int k = 1; k <= size; k++) {
            unsigned char c = name_lower[wire[pos + k]];
            if (c == 0)
                return 0;
            lowered[len++] = c;
        }
        pos += 1 + size;
    }
    lowered[len++] = 0;
    *name_len = len;
    return pos;
}

/* The reply to `wire` from the zone tables, after its ID, written into out (room for
 * SEND_SLOT - 2 bytes): its length, or 0 when Python answers, -1 on a Python error. The
 * same steps as dnsd.zone_tables.answer. */
static Py_ssize_t zone_reply(const unsigned char *wire, Py_ssize_t n, const PackedNodes *nodes,
                             const NameHint *hint, PyObject *templates, TemplatesMemo *memo,
                             unsigned char *out, uint16_t *qtype_out) {
    if (n < 17 || wire[2] & 0xF8 || memcmp(wire + 4, "\x00\x01\x00\x00\x00\x00", 6) != 0 ||
        wire[10] || wire[11] > 1)
        return 0;
    unsigned char lowered[256];
    int starts[MAX_LABELS + 1], labels = 0;
    Py_ssize_t name_len = 0;
    Py_ssize_t pos = lower_qname(wire, n, lowered, &name_len, starts, &labels);
    if (pos == 0)
        return 0;
    starts[labels++] = (int)name_len - 1;
    Py_ssize_t qend = pos + 5;
    if (qend > n)
        return 0;
    uint16_t qtype = be16(wire + pos + 1), qclass = be16(wire + pos + 3);
    if (qclass != 1 || qtype == 0 || qtype == 41 || (qtype >= 128 && qtype <= 255))
        return 0;
    int has_opt = wire[11], do_bit = 0;
    Py_ssize_t limit = PLAIN_UDP_LIMIT;
    if (has_opt) {
        const unsigned char *opt = wire + qend;
        if (qend + 11 != n || opt[0] || be16(opt + 1) != 41 || opt[6] || be16(opt + 9))
            return 0; /* other versions, and options (ECS, cookies): Python */
        Py_ssize_t payload = be16(opt + 3);
        limit = payload < PLAIN_UDP_LIMIT ? PLAIN_UDP_LIMIT : payload;
        if (limit > EDNS_PAYLOAD)
            limit = EDNS_PAYLOAD;
        do_bit = opt[7] & 0x80;
    } else if (qend != n) {
        return 0;
    }
    Template template = {NULL, 0};
    int found_node = 0;
    for (int k = 0; k < labels && !found_node; k++) {
        const unsigned char *node;
        Py_ssize_t node_len;
        const uint32_t *known = k == 0 && hint->name_len == name_len ? &hint->hash : NULL;
        if (!packed_find(nodes, lowered + starts[k], name_len - starts[k], known, &node,
                         &node_len))
            continue;
        found_node = 1;
        if (zone_template(node, node_len, templates, memo, k == 0, qtype, &template) < 0)
            return -1;
    }
    if (template.at == NULL)
        return 0; /* in no zone served here, or the closest encloser says: Python */
    const unsigned char *t = template.at;
    Py_ssize_t t_len = template.len;
    if (t_len < 10)
        return 0;
    int n_relocs = le16(t + 8);
    Py_ssize_t body = 10 + 2 * (Py_ssize_t)n_relocs, rest_len = t_len - body;
    Py_ssize_t question = qend - 12;
    Py_ssize_t total = 2 + 10 + question + rest_len + (has_opt ? 11 : 0);
    if (rest_len < 0 || total > limit || total > SEND_SLOT)
        return 0; /* too large for the client: Python truncates */
    unsigned char *o = out;
    o[0] = t[0] | (wire[2] & 0x01); /* RD and CD as asked */
    o[1] = t[1] | (wire[3] & 0x10);
    o[2] = 0, o[3] = 1;
    memcpy(o + 4, t + 2, 4); /* ANCOUNT, NSCOUNT */
    int arcount = be16(t + 6) + (has_opt ? 1 : 0);
    o[8] = (unsigned char)(arcount >> 8), o[9] = (unsigned char)arcount;
    memcpy(o + 10, wire + 12, (size_t)question);
    unsigned char *rest = o + 10 + question;
    memcpy(rest, t + body, (size_t)rest_len);
    for (int k = 0; k < n_relocs; k++) {
        int at = le16(t + 10 + 2 * k);
        if (at + 2 > rest_len)
            return 0;
        int target = (be16(rest + at) & 0x3FFF) - RELOC_BASE + (int)qend;
        if (target < 12 || target > 0x3FFF)
            return 0;
        rest[at] = (unsigned char)(0xC0 | target >> 8), rest[at + 1] = (unsigned char)target;
    }
    if (has_opt) {
        unsigned char *opt = rest + rest_len;
        static const unsigned char plain[11] = {0, 0, 41, EDNS_PAYLOAD >> 8, EDNS_PAYLOAD & 0xFF,
                                                0, 0, 0, 0, 0, 0};
        memcpy(opt, plain, 11);
        opt[7] = do_bit ? 0x80 : 0;
    }
    *qtype_out = qtype;
    return total - 2;
}

/* A batch's zone answers by count key, added to the counts dict once per batch. */
#define COUNT_KEYS 16
typedef struct {
    unsigned char key[COUNT_KEYS][4];
    long long n[COUNT_KEYS];
    int used;
} BatchCounts;

/* Add the batch's counts to `counts` (count key -> answers); 0, or -1 on a Python error. */
static int flush_counts(BatchCounts *c, PyObject *counts) {
    int rc = 0;
    for (int k = 0; k < c->used && rc == 0; k++) {
        PyObject *key = PyBytes_FromStringAndSize((const char *)c->key[k], 4);
        PyObject *was = key ? PyDict_GetItemWithError(counts, key) : NULL;
        long long before = was ? PyLong_AsLongLong(was) : 0;
        PyObject *now = (key && !PyErr_Occurred()) ? PyLong_FromLongLong(before + c->n[k]) : NULL;
        rc = now ? PyDict_SetItem(counts, key, now) : -1;
        Py_XDECREF(now);
        Py_XDECREF(key);
    }
    c->used = 0;
    return rc;
}

static int count_answer(BatchCounts *c, PyObject *counts, const unsigned char key[4]) {
    for (int k = 0; k < c->used; k++)
        if (memcmp(c->key[k], key, 4) == 0) {
            c->n[k]++;
            return 0;
        }
    if (c->used == COUNT_KEYS && flush_counts(c, counts) < 0)
        return -1;
    memcpy(c->key[c->used], key, 4);
    c->n[c->used++] = 1;
    return 0;
}

/* Answer datagram i from the zone tables `zones` (records, slots, counts, counted types,
 * templates) whose nodes are `nodes`: 1 answered, 0 Python answers, -1 a Python error.
 * Each answer is counted under its count key (dnsd.reply.count_key: flags and rcode,
 * question type). */
static int zone_answer(Batch *self, Py_ssize_t i, PyObject *zones, const PackedNodes *nodes,
                       const NameHint *hint, PyObject *limit, PyObject *clients,
                       BatchCounts *batch_counts, TemplatesMemo *memo) {
    PyObject *counts = PyTuple_GET_ITEM(zones, ZONES_COUNTS);
    PyObject *counted = PyTuple_GET_ITEM(zones, 3), *templates = PyTuple_GET_ITEM(zones, 4);
    const unsigned char *wire = self->rbuf + i * SLOT + self->skip[i];
    Py_ssize_t length = self->rmsg[i].msg_len - self->skip[i];
    unsigned char body[SEND_SLOT];
    uint16_t qtype = 0;
    Py_ssize_t body_len =
        zone_reply(wire, length, nodes, hint, templates, memo, body, &qtype);
    if (body_len <= 0)
        return (int)body_len;
    PyObject *client;
    int found = known_client(self, i, limit, clients, &client);
    if (found <= 0)
        return found;
    if (PyBytes_GET_SIZE(counted) != 65536 || !PyBytes_AS_STRING(counted)[qtype])
        qtype = 0xFFFF; /* a type the tally does not name: OTHER */
    unsigned char key[4] = {body[0], body[1], (unsigned char)(qtype >> 8), (unsigned char)qtype};
    int rc = count_answer(batch_counts, counts, key);
    if (rc == 0)
        rc = deliver(self, i, wire, length, (const char *)body, body_len, limit, client);
    Py_XDECREF(client);
    if (rc == 1 && self->tap_buf != NULL) {
        const unsigned char *source;
        Py_ssize_t source_len = source_address(self, i, &source);
        TapEntry e = {source, source_len, sender_port(self, i), wire, length,
                      (const char *)body, body_len, "", 0};
        tap_answer(self, &e);
    }
    return rc;
}

/* -- class answer tables (dnsd/lb_classes.py) -------------------------------------- */

#define CLASS_COUNTED 8 /* after the name in a count key: lb counter, fallback counter */
#define SLOT_BYTES 16   /* dnsd.lb_shapes: one slot's address in a member's vector */

/* The stored reply's records (after its 10-byte header, `len` bytes at `at`) into `out`,
 * each answer's slot number replaced by that slot's address from the member's `vector`:
 * 0, or -1 when a slot is not in it. dnsd.lb_shapes.addressed. */
static int addressed(const unsigned char *stored, Py_ssize_t len, const unsigned char *vector,
                     Py_ssize_t vector_len, unsigned char *out) {
    Py_ssize_t count = be16(stored + 4), pos = 0, records = len - 10;
    memcpy(out, stored + 10, (size_t)records);
    for (Py_ssize_t r = 0; r < count; r++) {
        if (pos + 12 + 4 > records)
            return -1;
        Py_ssize_t size = be16(out + pos + 10), at = pos + 12;
        uint32_t slot = ((uint32_t)out[at] << 24) | ((uint32_t)out[at + 1] << 16) |
                        ((uint32_t)out[at + 2] << 8) | out[at + 3];
        if ((size != 4 && size != 16) || at + size > records ||
            ((Py_ssize_t)slot + 1) * SLOT_BYTES > vector_len)
            return -1;
        memcpy(out + at, vector + (Py_ssize_t)slot * SLOT_BYTES, (size_t)size);
        pos = at + size;
    }
    return 0;
}

/* Answer datagram i, a query for a member name of a load-balancer class, from its class's
 * table `classes` (member names -> tag and address vector, class key -> table, counts): 1
 * answered, 0 not (w->code NO_TABLE: Python answers, as without a table), -1 a Python
 * error. The same steps as dnsd.lb_classes.answer: the class key is the tag, then the
 * query's bytes after the ID without its name; the stored reply lacks its question, copied
 * in from the query, and names slots, whose addresses come from the member's vector. */
static int class_answer(Batch *self, Py_ssize_t i, PyObject *classes, PyObject *random,
                        Py_buffer *counters, PyObject *limit, PyObject *clients, Walked *w) {
    PyObject *names = PyTuple_GET_ITEM(classes, 0), *tables = PyTuple_GET_ITEM(classes, 1);
    PyObject *counts = PyTuple_GET_ITEM(classes, 2);
    const unsigned char *wire = self->rbuf + i * SLOT + self->skip[i];
    Py_ssize_t n = self->rmsg[i].msg_len - self->skip[i];
    w->code = NO_TABLE;
    w->value = 0;
    if (PyDict_GET_SIZE(names) == 0 || n < 17 || wire[2] & 0xF8 ||
        memcmp(wire + 4, "\x00\x01\x00\x00\x00\x00", 6) != 0 || wire[10])
        return 0;
    unsigned char lowered[256 + CLASS_COUNTED];
    Py_ssize_t name_len = 0;
    Py_ssize_t pos = lower_qname(wire, n, lowered, &name_len, NULL, NULL);
    if (pos == 0)
        return 0;
    Py_ssize_t qend = pos + 5;
    if (qend > n)
        return 0;
    PyObject *name = PyBytes_FromStringAndSize((const char *)lowered, name_len);
    if (name == NULL)
        return -1;
    PyObject *value = PyDict_GetItemWithError(names, name);
    Py_DECREF(name);
    if (value == NULL)
        return PyErr_Occurred() ? -1 : 0;
    if (!PyBytes_CheckExact(value) || PyBytes_GET_SIZE(value) < 1 ||
        PyBytes_GET_SIZE(value) < 1 + (unsigned char)PyBytes_AS_STRING(value)[0])
        return 0;
    Py_INCREF(value); /* held: its vector is read after Python has run */
    const char *tag = PyBytes_AS_STRING(value) + 1;
    Py_ssize_t tag_len = (unsigned char)PyBytes_AS_STRING(value)[0], after = n - (pos + 1);
    const unsigned char *vector = (const unsigned char *)tag + tag_len;
    Py_ssize_t vector_len = PyBytes_GET_SIZE(value) - 1 - tag_len;
    PyObject *key = PyBytes_FromStringAndSize(NULL, tag_len + 10 + after);
    if (key == NULL) {
        Py_DECREF(value);
        return -1;
    }
    char *k = PyBytes_AS_STRING(key);
    memcpy(k, tag, (size_t)tag_len);
    memcpy(k + tag_len, wire + 2, 10);
    memcpy(k + tag_len + 10, wire + pos + 1, (size_t)after);
    PyObject *table = PyDict_GetItemWithError(tables, key);
    Py_DECREF(key);
    if (table == NULL || !PyBytes_CheckExact(table)) {
        Py_DECREF(value);
        return table == NULL && PyErr_Occurred() ? -1 : 0;
    }
    Py_INCREF(table); /* held: the random source and the limiter run Python */
    PyObject *client = NULL;
    int rc = known_client(self, i, limit, clients, &client); /* 1, 0: not known, -1 */
    const unsigned char *source;
    Py_ssize_t source_len = source_address(self, i, &source);
    Table t = {(const unsigned char *)PyBytes_AS_STRING(table), PyBytes_GET_SIZE(table)};
    if (rc > 0)
        rc = walk_table(&t, source, source_len, random, w) < 0 ? -1 : 1;
    if (rc <= 0 || w->code != HIT) {
        if (rc >= 0)
            w->code = NO_TABLE, w->value = 0, rc = 0;
        Py_XDECREF(client);
        Py_DECREF(table);
        Py_DECREF(value);
        return rc;
    }
    Py_ssize_t leaf = w->value, reply_at = u32(&t, leaf + 8), reply_len = u32(&t, leaf + 12);
    int32_t reply_counter = i32(&t, leaf + 16), lb = i32(&t, leaf + 20);
    int32_t fallback = i32(&t, leaf + 24);
    Py_ssize_t room = PLAIN_UDP_LIMIT, question = qend - 12;
    if (wire[11] && n >= qend + 11) {
        room = be16(wire + qend + 3);
        room = room < PLAIN_UDP_LIMIT ? PLAIN_UDP_LIMIT : room > EDNS_PAYLOAD ? EDNS_PAYLOAD : room;
    }
    Py_ssize_t n_counters = counters->len / (Py_ssize_t)sizeof(long long);
    unsigned char body[SEND_SLOT];
    w->code = NO_TABLE, w->value = 0;
    if (reply_len < 10 || !has(&t, reply_at, reply_len) || 2 + reply_len + question > room ||
        reply_counter < -1 || reply_counter >= n_counters ||
        addressed(t.at + reply_at, reply_len, vector, vector_len, body + 10 + question) < 0) {
        Py_XDECREF(client);
        Py_DECREF(table);
        Py_DECREF(value);
        return 0; /* too large for the client (or unreadable): Python answers */
    }
    memcpy(body, t.at + reply_at, 10);
    memcpy(body + 10, wire + 12, (size_t)question);
    Py_DECREF(table);
    Py_DECREF(value);
    if (reply_counter >= 0)
        ((long long *)counters->buf)[reply_counter]++;
    if (lb >= 0 || fallback >= 0) {
        int32_t which[2] = {lb, fallback};
        memcpy(lowered + name_len, which, CLASS_COUNTED); /* little-endian, as struct "<ii" */
        PyObject *counted = PyBytes_FromStringAndSize((const char *)lowered,
                                                      name_len + CLASS_COUNTED);
        PyObject *was = counted ? PyDict_GetItemWithError(counts, counted) : NULL;
        long long before = was ? PyLong_AsLongLong(was) : 0;
        PyObject *now = (counted && !PyErr_Occurred()) ? PyLong_FromLongLong(before + 1) : NULL;
        rc = now ? PyDict_SetItem(counts, counted, now) : -1;
        Py_XDECREF(now);
        Py_XDECREF(counted);
        if (rc < 0) {
            Py_XDECREF(client);
            return -1;
        }
    }
    w->code = HIT;
    rc = deliver(self, i, wire, n, (const char *)body, reply_len + question, limit, client);
    Py_XDECREF(client);
    return rc;
}

/* answer_hits(tables, rng, counters, limit, clients, zones=None, policies=None,
 *             classes=None) -> (misses, answered, fallbacks)
 * Answers and queues every datagram of the batch whose table leads to a finished reply,
 * and, without a table, those the zone tables answer (`zones`: dnsd.zone_tables.Tables.
 * for_c(), or None).
 * `misses` lists (i, code, value, order) for the others (dnsd.answer_table's codes, and
 * NO_TABLE); `counters`: the cache's int64 array the tables index; `limit`: None, or the
 * response rate limiter as limit(reply, client, query) -> reply | None, with `clients`
 * (source key → Client) to find the client; `policies`: with dnstap on (`tap`), the
 * cache's encoded Message.policy per counter; `classes`: the class tables
 * (dnsd.lb_classes.ClassTables.for_c(), or None). A Python error is raised, never cleared. */
static PyObject *Batch_answer_hits(Batch *self, PyObject *args) {
    PyObject *tables, *rng, *counters_obj, *limit, *clients, *zones = Py_None;
    PyObject *policies = Py_None, *classes = Py_None;
    Py_buffer counters;
    if (!PyArg_ParseTuple(args, "O!OOOO!|OOO", &PyDict_Type, &tables, &rng, &counters_obj,
                          &limit, &PyDict_Type, &clients, &zones, &policies, &classes))
        return NULL;
    if (classes != Py_None &&
        (!PyTuple_CheckExact(classes) || PyTuple_GET_SIZE(classes) != 3 ||
         !PyDict_CheckExact(PyTuple_GET_ITEM(classes, 0)) ||
         !PyDict_CheckExact(PyTuple_GET_ITEM(classes, 1)) ||
         !PyDict_CheckExact(PyTuple_GET_ITEM(classes, 2)))) {
        PyErr_SetString(PyExc_TypeError, "classes must be (dict, dict, dict) or None");
        return NULL;
    }
    if (zones != Py_None &&
        (!PyTuple_CheckExact(zones) || PyTuple_GET_SIZE(zones) != 5 ||
         !PyBytes_CheckExact(PyTuple_GET_ITEM(zones, 0)) ||
         !PyBytes_CheckExact(PyTuple_GET_ITEM(zones, 1)) ||
         !PyDict_CheckExact(PyTuple_GET_ITEM(zones, ZONES_COUNTS)) ||
         !PyBytes_CheckExact(PyTuple_GET_ITEM(zones, 3)) ||
         !PyDict_CheckExact(PyTuple_GET_ITEM(zones, 4)))) {
        PyErr_SetString(PyExc_TypeError,
                        "zones must be (bytes, bytes, dict, bytes, dict) or None");
        return NULL;
    }
    PackedNodes nodes = {NULL, 0, NULL, 0};
    if (zones != Py_None) {
        PyObject *records = PyTuple_GET_ITEM(zones, 0), *slots = PyTuple_GET_ITEM(zones, 1);
        nodes.records = (const unsigned char *)PyBytes_AS_STRING(records);
        nodes.records_len = PyBytes_GET_SIZE(records);
        nodes.slots = (const unsigned char *)PyBytes_AS_STRING(slots);
        nodes.n_slots = PyBytes_GET_SIZE(slots) / 8;
    }
    if (PyObject_GetBuffer(counters_obj, &counters, PyBUF_WRITABLE | PyBUF_FORMAT) < 0)
        return NULL;
    if (counters.itemsize != sizeof(long long) || counters.format == NULL ||
        strcmp(counters.format, "q") != 0) {
        PyBuffer_Release(&counters);
        PyErr_SetString(PyExc_TypeError, "counters must be an array('q')");
        return NULL;
    }
    PyObject *random = PyObject_GetAttrString(rng, "random");
    PyObject *misses = random ? PyList_New(0) : NULL;
    Walked *w = misses ? PyMem_Malloc(sizeof(Walked)) : NULL;
    if (misses != NULL && w == NULL)
        PyErr_NoMemory();
    long answered = 0, fallbacks = 0;
    BatchCounts batch_counts = {.used = 0};
    TemplatesMemo templates_memo = {.list = NULL, .id = 0};
    if (self->tap_buf != NULL) {
        self->tap_policies = policies; /* borrowed: held by the caller for the call */
        clock_gettime(CLOCK_REALTIME, &self->tap_received);
    }
    /* While datagrams go to the zone walk (a random-name flood), each one's successor has
     * its name hashed and its slot fetched ahead (cached answers never reach the walk:
     * none is fetched for them). */
    NameHint ahead = {0, 0};
    int zoned = zones != Py_None && !self->proxy_nets;
    for (Py_ssize_t i = 0; w != NULL && i < self->count; i++) {
        NameHint hint = ahead;
        ahead.name_len = 0;
        if (zoned && i + 1 < self->count && self->skip[i + 1] >= 0 &&
            !(self->rmsg[i + 1].msg_hdr.msg_flags & MSG_TRUNC))
            prefetch_name(&nodes, self->rbuf + (i + 1) * SLOT + self->skip[i + 1],
                          self->rmsg[i + 1].msg_len - self->skip[i + 1], &ahead);
        zoned = 0;
        if (self->skip[i] < 0)
            continue; /* dropped by the PROXY v2 gate (counted there) */
        if (self->proxy_nets && !self->carried_len[i] && !self->skip[i] &&
            proxy_gate(self, i) < 0) {
            PyObject *miss = Py_BuildValue("(n(iiO))", i, PROXY_CHECK, 0, Py_None);
            if (miss == NULL || PyList_Append(misses, miss) < 0) {
                Py_XDECREF(miss);
                break;
            }
            Py_DECREF(miss);
            continue;
        }
        const unsigned char *wire = self->rbuf + i * SLOT + self->skip[i];
        Py_ssize_t length = self->rmsg[i].msg_len - self->skip[i];
        int rc = 0;
        w->code = NO_TABLE;
        w->value = 0;
        if (!(self->rmsg[i].msg_hdr.msg_flags & MSG_TRUNC) && length >= 12) {
            PyObject *tail = PyBytes_FromStringAndSize((const char *)wire + 2, length - 2);
            PyObject *table = tail ? PyDict_GetItemWithError(tables, tail) : NULL;
            Py_XDECREF(tail);
            if (table != NULL) {
                Py_INCREF(table); /* held: the random source and the limiter run Python */
                rc = answer_one(self, i, table, random, &counters, limit, clients, w);
                Py_DECREF(table);
            } else if (tail == NULL || PyErr_Occurred()) {
                rc = -1;
            } else {
                if (classes != Py_None) /* a load-balanced name's first: its class's table */
                    rc = class_answer(self, i, classes, random, &counters, limit, clients, w);
                if (rc == 0 && zones != Py_None) {
                    rc = zone_answer(self, i, zones, &nodes, &hint, limit, clients,
                                     &batch_counts, &templates_memo);
                    zoned = !self->proxy_nets;
                }
            }
        }
        if (rc < 0)
            break;
        if (rc == 1) {
            answered++;
            continue;
        }
        fallbacks += w->code == FALLBACK;
        PyObject *walked = walked_tuple(w);
        PyObject *miss = walked ? Py_BuildValue("(nN)", i, walked) : NULL;
        if (miss == NULL || PyList_Append(misses, miss) < 0) {
            Py_XDECREF(miss);
            break;
        }
        Py_DECREF(miss);
    }
    PyMem_Free(w);
    self->tap_policies = NULL;
    PyBuffer_Release(&counters);
    Py_XDECREF(random);
    if (!PyErr_Occurred() && batch_counts.used)
        (void)flush_counts(&batch_counts, PyTuple_GET_ITEM(zones, ZONES_COUNTS));
    if (PyErr_Occurred()) { /* propagated: the supervisor logs, counts and restarts */
        Py_XDECREF(misses);
        return NULL;
    }
    return Py_BuildValue("(Nll)", misses, answered, fallbacks);
}

static PyMethodDef Batch_methods[] = {
    {"receive", (PyCFunction)Batch_receive, METH_NOARGS, "recvmmsg: how many arrived"},
    {"datagram", (PyCFunction)Batch_datagram, METH_O, "datagram i, or None when cut"},
    {"unwrap", (PyCFunction)Batch_unwrap, METH_VARARGS, "PROXY v2: where i's query starts"},
    {"proxy_from", (PyCFunction)Batch_proxy_from, METH_O, "PROXY v2: the peers to read"},
    {"carried_host", (PyCFunction)Batch_carried_host, METH_O, "PROXY v2: i's client, or None"},
    {"source", (PyCFunction)Batch_source, METH_O, "the sender of datagram i: (host, port)"},
    {"source_key", (PyCFunction)Batch_source_key, METH_O, "the sender of datagram i as a key"},
    {"queue", (PyCFunction)Batch_queue, METH_VARARGS, "queue a reply to the sender of i"},
    {"flush", (PyCFunction)Batch_flush, METH_NOARGS, "sendmmsg the queued replies"},
    {"answer_hits", (PyCFunction)Batch_answer_hits, METH_VARARGS,
     "answer the batch's table hits: (misses, answered, fallbacks)"},
    {"tap", (PyCFunction)Batch_tap, METH_VARARGS, "dnstap: keep frames of the answers given"},
    {"take_taps", (PyCFunction)Batch_take_taps, METH_NOARGS, "dnstap: (frames, count) kept"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Batch_getset[] = {
    {"queued", (getter)Batch_queued, NULL, "replies queued for the next flush", NULL},
    {"tap_dropped", (getter)Batch_tap_dropped, NULL, "dnstap: answers the full buffer lost", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject BatchType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "dnsd._fastloop.Batch",
    .tp_basicsize = sizeof(Batch),
    .tp_dealloc = (destructor)Batch_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "recvmmsg/sendmmsg buffers of one UDP socket, and the cache-hit answering",
    .tp_methods = Batch_methods,
    .tp_getset = Batch_getset,
    .tp_init = (initproc)Batch_init,
    .tp_new = PyType_GenericNew,
};

static PyMethodDef module_methods[] = {
    {"walk", fastloop_walk, METH_VARARGS, "walk(table, address, rng) -> (code, value, order)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "dnsd._fastloop",
    .m_doc = "dnsd's compiled UDP serving loop (optional)",
    .m_size = -1,
    .m_methods = module_methods,
};

PyMODINIT_FUNC PyInit__fastloop(void) {
    if (PyType_Ready(&BatchType) < 0)
        return NULL;
    crc_init();
    name_bytes_init();
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddIntConstant(m, "MAX_PROXY_NETS", MAX_PROXY_NETS) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&BatchType);
    if (PyModule_AddObject(m, "Batch", (PyObject *)&BatchType) < 0) {
        Py_DECREF(&BatchType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
