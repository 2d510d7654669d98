/* dnsd._fastloop: the UDP serving loop's hot part in C.
 *
 * One Batch per UDP socket: recvmmsg into buffers allocated once (the GIL released while
 * it blocks), then `answer_hits` answers every datagram the answer cache already holds —
 * the same tables dnsd.fastpath.AnswerCache fills, read here instead of from Python:
 *
 *   query bytes after the ID → the reply after the ID (static answers), or an _LbMemo
 *   whose compiled draws (dnsd.steering.draws) are walked with the loop's own random
 *   source, one rng.random() per Draw exactly as draws.walk makes them, and whose
 *   finished reply for the outcome reached is copied out.
 *
 * The ID is written in, the reply queued, the metrics tables updated (the same dicts the
 * Python loop writes), and sendmmsg sends the batch. Everything else — a first query, a
 * stale plan, an outcome without a finished reply yet, a new client — is handed back to
 * the Python path as a miss (with the outcome already drawn, so no draw is made twice).
 * Nothing is decided here: this file only reads what Python decided and cached.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

#define SLOT 4096      /* bytes per received datagram (a longer one is cut: MSG_TRUNC) */
#define SEND_SLOT 4096 /* bytes per queued reply; a longer one goes out with sendto */
#define MAX_WALK 64    /* draw nodes on one path (plans nest at most a few levels) */
#define COUNT_KEY 58   /* the metrics key: reply bytes 2..60 */

static PyTypeObject *DrawType, *SampleType, *MemoType, *PlanType;
static PyObject *s_pick, *s_random;
/* Where the __slots__ of those classes sit in their objects: read directly (borrowed), as
 * the member descriptors would, without a call and a reference count per attribute. */
static Py_ssize_t at_scale, at_thresholds, at_branches, at_client, at_plan, at_valid, at_tree,
    at_tails;
#define SLOT_OF(obj, at) (*(PyObject **)((char *)(obj) + (at)))
/* reply → its metrics key, remembered until this many entries or reply bytes (the table
 * keeps those replies alive), then started afresh */
#define MAX_COUNT_KEYS 65536
#define MAX_COUNT_KEY_BYTES (8 << 20)

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
    PyObject *count_keys; /* reply (after the ID) → its metrics key */
    Py_ssize_t count_key_bytes; /* the replies' sizes in count_keys */
} Batch;

static void Batch_dealloc(Batch *self) {
    Py_XDECREF(self->count_keys);
    PyMem_Free(self->rbuf);
    PyMem_Free(self->sbuf);
    PyMem_Free(self->names);
    PyMem_Free(self->riov);
    PyMem_Free(self->siov);
    PyMem_Free(self->rmsg);
    PyMem_Free(self->smsg);
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
    self->namelen = ipv4 ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
    self->count_key_bytes = 0;
    Py_XSETREF(self->count_keys, PyDict_New());
    if (self->count_keys == NULL)
        return -1;
    self->rbuf = PyMem_Calloc((size_t)size, SLOT);
    self->sbuf = PyMem_Calloc((size_t)size, SEND_SLOT);
    self->names = PyMem_Calloc((size_t)size, sizeof(struct sockaddr_in6));
    self->riov = PyMem_Calloc((size_t)size, sizeof(struct iovec));
    self->siov = PyMem_Calloc((size_t)size, sizeof(struct iovec));
    self->rmsg = PyMem_Calloc((size_t)size, sizeof(struct mmsghdr));
    self->smsg = PyMem_Calloc((size_t)size, sizeof(struct mmsghdr));
    if (!self->rbuf || !self->sbuf || !self->names || !self->riov || !self->siov ||
        !self->rmsg || !self->smsg) {
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
    if (self->rmsg[i].msg_hdr.msg_flags & MSG_TRUNC)
        Py_RETURN_NONE;
    return PyBytes_FromStringAndSize((const char *)self->rbuf + i * SLOT, self->rmsg[i].msg_len);
}

static PyObject *source_key(Batch *self, Py_ssize_t i) {
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
 * out at once with sendto. */
static void queue_reply(Batch *self, Py_ssize_t i, const unsigned char *id, const char *body,
                        Py_ssize_t body_len) {
    Py_ssize_t length = 2 + body_len;
    if (length > SEND_SLOT) {
        unsigned char *big = PyMem_Malloc((size_t)length);
        if (big != NULL) {
            memcpy(big, id, 2);
            memcpy(big + 2, body, (size_t)body_len);
            (void)sendto(self->fd, big, (size_t)length, 0, (struct sockaddr *)&self->names[i],
                         self->namelen);
            PyMem_Free(big);
        }
        return;
    }
    int j = self->queued++;
    unsigned char *out = self->sbuf + (size_t)j * SEND_SLOT;
    memcpy(out, id, 2);
    memcpy(out + 2, body, (size_t)body_len);
    self->siov[j].iov_len = (size_t)length;
    self->smsg[j].msg_hdr.msg_name = &self->names[i];
    self->smsg[j].msg_hdr.msg_namelen = self->namelen;
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
    queue_reply(self, i, reply.buf, (const char *)reply.buf + 2, reply.len - 2);
    PyBuffer_Release(&reply);
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

/* draws.walk over a compiled plan: one rng.random() per Draw, Sample.pick for a Sample
 * (its own Python code), the Outcome returned (a new reference), or NULL with an error. */
static PyObject *walk(PyObject *node, PyObject *rng, PyObject *random) {
    Py_INCREF(node);
    for (int step = 0; step < MAX_WALK; step++) {
        PyTypeObject *type = Py_TYPE(node);
        PyObject *next;
        if (type == DrawType) {
            PyObject *scale = SLOT_OF(node, at_scale);
            PyObject *thresholds = SLOT_OF(node, at_thresholds);
            PyObject *branches = SLOT_OF(node, at_branches);
            next = NULL;
            if (scale == NULL || thresholds == NULL || branches == NULL ||
                !PyTuple_Check(thresholds) || !PyTuple_Check(branches)) {
                PyErr_SetString(PyExc_TypeError, "a draw without scale, thresholds or branches");
            } else {
                PyObject *r = PyObject_CallNoArgs(random);
                if (r != NULL) {
                    double point = PyFloat_AsDouble(r) * PyFloat_AsDouble(scale);
                    Py_DECREF(r);
                    Py_ssize_t lo = 0, hi = PyTuple_GET_SIZE(thresholds); /* bisect_right */
                    while (lo < hi) {
                        Py_ssize_t mid = (lo + hi) / 2;
                        if (point < PyFloat_AsDouble(PyTuple_GET_ITEM(thresholds, mid)))
                            hi = mid;
                        else
                            lo = mid + 1;
                    }
                    if (!PyErr_Occurred() && lo < PyTuple_GET_SIZE(branches)) {
                        next = PyTuple_GET_ITEM(branches, lo);
                        Py_INCREF(next);
                    } else if (!PyErr_Occurred()) {
                        PyErr_SetString(PyExc_IndexError, "a draw without its branch");
                    }
                }
            }
        } else if (type == SampleType) {
            next = PyObject_CallMethodObjArgs(node, s_pick, rng, Py_None, NULL);
        } else {
            return node; /* an Outcome */
        }
        Py_DECREF(node);
        if (next == NULL)
            return NULL;
        node = next;
    }
    Py_DECREF(node);
    PyErr_SetString(PyExc_RecursionError, "draws nested too deep");
    return NULL;
}

static int add_count(PyObject *table, PyObject *key) {
    PyObject *old = PyDict_GetItemWithError(table, key);
    if (old == NULL && PyErr_Occurred())
        return -1;
    long now = old == NULL ? 1 : PyLong_AsLong(old) + 1;
    if (now == 0 && PyErr_Occurred())
        return -1;
    PyObject *value = PyLong_FromLong(now);
    if (value == NULL)
        return -1;
    int rc = PyDict_SetItem(table, key, value);
    Py_DECREF(value);
    return rc;
}

/* The load-balanced memo's finished reply for the next draws, or NULL. *drawn receives the
 * outcome when one was drawn (a new reference) and no finished reply exists for it yet. */
static PyObject *memo_reply(PyObject *memo, PyObject *client, PyObject *rng, PyObject *random,
                            PyObject *lb_counts, PyObject *on_fallback, PyObject **drawn) {
    if (SLOT_OF(memo, at_client) != client)
        return NULL; /* made for another client: the Python path */
    PyObject *plan = SLOT_OF(memo, at_plan);
    if (plan == NULL || Py_TYPE(plan) != PlanType || SLOT_OF(plan, at_valid) != Py_True)
        return NULL;
    PyObject *tree = SLOT_OF(memo, at_tree), *tails = SLOT_OF(memo, at_tails);
    if (tree == NULL || tree == Py_None || tails == NULL || !PyDict_Check(tails))
        return NULL;
    Py_INCREF(tails); /* a Sample's pick runs Python code: hold what is read after it */
    PyObject *reply = NULL, *outcome = walk(tree, rng, random);
    PyObject *found = outcome ? PyDict_GetItemWithError(tails, outcome) : NULL;
    if (found == NULL) {
        if (outcome != NULL && !PyErr_Occurred()) {
            *drawn = outcome; /* the Python path finishes it with this outcome */
            outcome = NULL;
        }
        goto done;
    }
    /* (finished reply after the ID, (lb, pool, region), the fallback answered) */
    if (!PyTuple_Check(found) || PyTuple_GET_SIZE(found) != 3 ||
        !PyBytes_Check(PyTuple_GET_ITEM(found, 0)))
        goto done;
    if (add_count(lb_counts, PyTuple_GET_ITEM(found, 1)) < 0)
        goto done;
    if (PyTuple_GET_ITEM(found, 2) == Py_True) {
        PyObject *counted = PyTuple_GET_ITEM(found, 1);
        PyObject *lb = PyTuple_Check(counted) && PyTuple_GET_SIZE(counted) > 0
                           ? PyTuple_GET_ITEM(counted, 0)
                           : Py_None;
        PyObject *r = PyObject_CallOneArg(on_fallback, lb);
        if (r == NULL)
            goto done;
        Py_DECREF(r);
    }
    reply = PyTuple_GET_ITEM(found, 0);
    Py_INCREF(reply);
done:
    Py_XDECREF(outcome);
    Py_DECREF(tails);
    return reply;
}

/* The metrics key of a reply (its bytes 2..60: flags, rcode, counts, question), made once
 * per cached reply object: both are long-lived, so their hashes are computed once too. */
static PyObject *count_key(Batch *self, PyObject *reply) {
    PyObject *keys = self->count_keys;
    PyObject *key = PyDict_GetItemWithError(keys, reply);
    if (key != NULL) {
        Py_INCREF(key);
        return key;
    }
    if (PyErr_Occurred())
        return NULL;
    Py_ssize_t body = PyBytes_GET_SIZE(reply);
    key = PyBytes_FromStringAndSize(PyBytes_AS_STRING(reply), body < COUNT_KEY ? body : COUNT_KEY);
    if (key == NULL)
        return NULL;
    if (PyDict_GET_SIZE(keys) >= MAX_COUNT_KEYS || self->count_key_bytes > MAX_COUNT_KEY_BYTES) {
        PyDict_Clear(keys);
        self->count_key_bytes = 0;
    }
    if (PyDict_SetItem(keys, reply, key) < 0) {
        Py_DECREF(key);
        return NULL;
    }
    self->count_key_bytes += body;
    return key;
}

/* answer_hits(clients, memos, rng, lb_counts, counts, limit, on_fallback)
 *   -> (misses, answered)
 * Answers and queues every datagram of the batch whose reply the cache holds; `misses`
 * lists (i, drawn) for the others, drawn being the outcome already drawn or None.
 * `limit`: None, or the response rate limiter as limit(reply, client, query) -> reply|None. */
static PyObject *Batch_answer_hits(Batch *self, PyObject *args) {
    PyObject *clients, *memos, *rng, *lb_counts, *counts, *limit, *on_fallback;
    if (!PyArg_ParseTuple(args, "O!O!OO!O!OO", &PyDict_Type, &clients, &PyDict_Type, &memos,
                          &rng, &PyDict_Type, &lb_counts, &PyDict_Type, &counts, &limit,
                          &on_fallback))
        return NULL;
    PyObject *random = PyObject_GetAttr(rng, s_random);
    if (random == NULL)
        return NULL;
    PyObject *misses = PyList_New(0);
    if (misses == NULL) {
        Py_DECREF(random);
        return NULL;
    }
    long answered = 0;
    for (Py_ssize_t i = 0; i < self->count; i++) {
        const unsigned char *wire = self->rbuf + i * SLOT;
        Py_ssize_t length = self->rmsg[i].msg_len;
        PyObject *key = NULL, *tail = NULL, *reply = NULL, *drawn = NULL, *full = NULL;
        int hit = 0;
        if (!(self->rmsg[i].msg_hdr.msg_flags & MSG_TRUNC) && length >= 12) {
            key = source_key(self, i);
            PyObject *client = key ? PyDict_GetItemWithError(clients, key) : NULL;
            tail = client ? PyBytes_FromStringAndSize((const char *)wire + 2, length - 2) : NULL;
            PyObject *memo = tail ? PyDict_GetItemWithError(memos, tail) : NULL;
            Py_XINCREF(client); /* held: the walk and the limiter may run Python code */
            if (memo != NULL && PyBytes_CheckExact(memo)) {
                reply = memo;
                Py_INCREF(reply);
            } else if (memo != NULL && Py_TYPE(memo) == MemoType) {
                Py_INCREF(memo);
                reply = memo_reply(memo, client, rng, random, lb_counts, on_fallback, &drawn);
                Py_DECREF(memo);
            }
            if (reply != NULL) {
                Py_ssize_t body = PyBytes_GET_SIZE(reply);
                PyObject *key_of_reply = count_key(self, reply);
                hit = key_of_reply != NULL && add_count(counts, key_of_reply) == 0;
                Py_XDECREF(key_of_reply);
                if (hit && limit != Py_None) { /* RRL sees the finished reply */
                    full = PyBytes_FromStringAndSize(NULL, 2 + body);
                    PyObject *query = full ? PyBytes_FromStringAndSize((const char *)wire, length)
                                           : NULL;
                    PyObject *sent = NULL;
                    if (query != NULL) {
                        memcpy(PyBytes_AS_STRING(full), wire, 2);
                        memcpy(PyBytes_AS_STRING(full) + 2, PyBytes_AS_STRING(reply), body);
                        sent = PyObject_CallFunctionObjArgs(limit, full, client, query, NULL);
                    }
                    Py_XDECREF(query);
                    if (sent == NULL) {
                        hit = 0;
                    } else {
                        if (PyBytes_Check(sent) && PyBytes_GET_SIZE(sent) >= 2)
                            queue_reply(self, i, (const unsigned char *)PyBytes_AS_STRING(sent),
                                        PyBytes_AS_STRING(sent) + 2, PyBytes_GET_SIZE(sent) - 2);
                        Py_DECREF(sent); /* None: dropped by the limiter (it counted it) */
                    }
                } else if (hit) {
                    queue_reply(self, i, wire, PyBytes_AS_STRING(reply), body);
                }
            }
            Py_XDECREF(client);
        }
        if (PyErr_Occurred()) {
            /* A fault here costs nothing: the Python path answers (and logs) the query. */
            PyErr_Clear();
            hit = 0;
        }
        if (hit) {
            answered++;
        } else {
            PyObject *miss = Py_BuildValue("(nO)", i, drawn ? drawn : Py_None);
            if (miss == NULL || PyList_Append(misses, miss) < 0) {
                Py_XDECREF(miss);
                Py_XDECREF(key);
                Py_XDECREF(tail);
                Py_XDECREF(reply);
                Py_XDECREF(drawn);
                Py_XDECREF(full);
                Py_DECREF(misses);
                Py_DECREF(random);
                return NULL;
            }
            Py_DECREF(miss);
        }
        Py_XDECREF(key);
        Py_XDECREF(tail);
        Py_XDECREF(reply);
        Py_XDECREF(drawn);
        Py_XDECREF(full);
    }
    Py_DECREF(random);
    PyObject *out = Py_BuildValue("(Nl)", misses, answered);
    return out;
}

static PyMethodDef Batch_methods[] = {
    {"receive", (PyCFunction)Batch_receive, METH_NOARGS, "recvmmsg: how many arrived"},
    {"datagram", (PyCFunction)Batch_datagram, METH_O, "datagram i, or None when cut"},
    {"source", (PyCFunction)Batch_source, METH_O, "the sender of datagram i: (host, port)"},
    {"source_key", (PyCFunction)Batch_source_key, METH_O, "the sender of datagram i as a key"},
    {"queue", (PyCFunction)Batch_queue, METH_VARARGS, "queue a reply to the sender of i"},
    {"flush", (PyCFunction)Batch_flush, METH_NOARGS, "sendmmsg the queued replies"},
    {"answer_hits", (PyCFunction)Batch_answer_hits, METH_VARARGS,
     "answer the batch's cache hits: (misses, answered)"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Batch_getset[] = {
    {"queued", (getter)Batch_queued, NULL, "replies queued for the next flush", NULL},
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

/* The offset of slot `name` of `type` (a member descriptor from __slots__), or -1. */
static Py_ssize_t slot_offset(PyObject *type, const char *name) {
    PyObject *descr = PyObject_GetAttrString(type, name);
    if (descr == NULL)
        return -1;
    Py_ssize_t at = -1;
    if (Py_TYPE(descr) == &PyMemberDescr_Type) {
        PyMemberDef *member = ((PyMemberDescrObject *)descr)->d_member;
        if (member->type == T_OBJECT_EX || member->type == T_OBJECT)
            at = member->offset;
    }
    Py_DECREF(descr);
    if (at < 0)
        PyErr_Format(PyExc_TypeError, "%s is not a __slots__ attribute", name);
    return at;
}

/* setup(Draw, Sample, LbMemo, PlanEntry): the classes the walk and the memo look-up read. */
static PyObject *fastloop_setup(PyObject *Py_UNUSED(module), PyObject *args) {
    PyObject *draw, *sample, *memo, *plan;
    if (!PyArg_ParseTuple(args, "O!O!O!O!", &PyType_Type, &draw, &PyType_Type, &sample,
                          &PyType_Type, &memo, &PyType_Type, &plan))
        return NULL;
    if ((at_scale = slot_offset(draw, "scale")) < 0 ||
        (at_thresholds = slot_offset(draw, "thresholds")) < 0 ||
        (at_branches = slot_offset(draw, "branches")) < 0 ||
        (at_client = slot_offset(memo, "client")) < 0 ||
        (at_plan = slot_offset(memo, "plan")) < 0 || (at_tree = slot_offset(memo, "tree")) < 0 ||
        (at_tails = slot_offset(memo, "tails")) < 0 ||
        (at_valid = slot_offset(plan, "valid")) < 0)
        return NULL;
    Py_XSETREF(DrawType, (PyTypeObject *)Py_NewRef(draw));
    Py_XSETREF(SampleType, (PyTypeObject *)Py_NewRef(sample));
    Py_XSETREF(MemoType, (PyTypeObject *)Py_NewRef(memo));
    Py_XSETREF(PlanType, (PyTypeObject *)Py_NewRef(plan));
    Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"setup", fastloop_setup, METH_VARARGS, "setup(Draw, Sample, LbMemo, PlanEntry)"},
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
    s_pick = PyUnicode_InternFromString("pick");
    s_random = PyUnicode_InternFromString("random");
    if (!s_pick || !s_random)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&BatchType);
    if (PyModule_AddObject(m, "Batch", (PyObject *)&BatchType) < 0) {
        Py_DECREF(&BatchType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
