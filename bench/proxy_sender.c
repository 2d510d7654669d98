/* The load generator of bench/proxy_protocol.py: dnsperf cannot put a PROXY v2 header in
 * front of its queries (it writes its query ID into the first two bytes of what it sends).
 * SOCKETS UDP sockets, bound to 127.0.0.2 and connected to 127.0.0.1:PORT, each keep
 * WINDOW copies of one query (after HEADER, when given) in flight, each with an ID of its
 * own; every reply read is counted and answered by a new query, recvmmsg and sendmmsg in
 * batches of 64. A socket that hears nothing for 200 ms sends its window again (lost
 * queries). After SECONDS it prints the replies per second. Not a DNS client: replies are
 * counted, not read.
 *
 *     cc -O2 -o proxy_sender bench/proxy_sender.c
 *     ./proxy_sender PORT SECONDS SOCKETS WINDOW QUERY_HEX [HEADER_HEX]
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>

#define BATCH 64
#define SIZE 1024
#define MAX_SOCKETS 256
#define LOST_S 0.2

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

static size_t unhex(const char *hex, unsigned char *out, size_t room) {
    size_t n = strlen(hex) / 2;
    if (n > room)
        exit(2);
    for (size_t i = 0; i < n; i++)
        sscanf(hex + 2 * i, "%2hhx", &out[i]);
    return n;
}

static unsigned char datagram[BATCH][SIZE], replies[BATCH][SIZE];
static struct iovec send_iov[BATCH], recv_iov[BATCH];
static struct mmsghdr send_msgs[BATCH], recv_msgs[BATCH];
static size_t length, id_at;
static unsigned id;

/* Send n queries on fd, each with the next ID. */
static void send_queries(int fd, int n) {
    while (n > 0) {
        int k = n < BATCH ? n : BATCH;
        for (int i = 0; i < k; i++) {
            datagram[i][id_at] = (unsigned char)(id >> 8);
            datagram[i][id_at + 1] = (unsigned char)id++;
            send_iov[i].iov_len = length;
        }
        int sent = sendmmsg(fd, send_msgs, (unsigned)k, 0);
        if (sent <= 0)
            return; /* a full socket buffer: these count as lost */
        n -= sent;
    }
}

int main(int argc, char **argv) {
    if (argc != 6 && argc != 7) {
        fprintf(stderr, "usage: proxy_sender PORT SECONDS SOCKETS WINDOW QUERY_HEX [HEADER_HEX]\n");
        return 2;
    }
    int port = atoi(argv[1]), sockets = atoi(argv[3]), window = atoi(argv[4]);
    double seconds = atof(argv[2]);
    if (sockets < 1 || sockets > MAX_SOCKETS || window < 1)
        return 2;
    unsigned char query[SIZE];
    size_t header = argc == 7 ? unhex(argv[6], datagram[0], SIZE / 2) : 0;
    size_t query_len = unhex(argv[5], query, SIZE / 2);
    memcpy(datagram[0] + header, query, query_len);
    length = header + query_len, id_at = header;
    for (int i = 0; i < BATCH; i++) {
        memcpy(datagram[i], datagram[0], length);
        send_iov[i].iov_base = datagram[i];
        send_msgs[i].msg_hdr.msg_iov = &send_iov[i];
        send_msgs[i].msg_hdr.msg_iovlen = 1;
        recv_iov[i].iov_base = replies[i];
        recv_iov[i].iov_len = SIZE;
        recv_msgs[i].msg_hdr.msg_iov = &recv_iov[i];
        recv_msgs[i].msg_hdr.msg_iovlen = 1;
    }
    int epoll = epoll_create1(0), fds[MAX_SOCKETS];
    double heard[MAX_SOCKETS];
    struct sockaddr_in self = {.sin_family = AF_INET}, server = {.sin_family = AF_INET};
    inet_pton(AF_INET, "127.0.0.2", &self.sin_addr);
    inet_pton(AF_INET, "127.0.0.1", &server.sin_addr);
    server.sin_port = htons((unsigned short)port);
    double start = now();
    for (int s = 0; s < sockets; s++) {
        fds[s] = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
        if (bind(fds[s], (struct sockaddr *)&self, sizeof self) != 0 ||
            connect(fds[s], (struct sockaddr *)&server, sizeof server) != 0) {
            perror("socket");
            return 1;
        }
        struct epoll_event event = {.events = EPOLLIN, .data.u32 = (unsigned)s};
        epoll_ctl(epoll, EPOLL_CTL_ADD, fds[s], &event);
        heard[s] = start;
        send_queries(fds[s], window);
    }
    long long answered = 0;
    double end = start + seconds;
    struct epoll_event ready[MAX_SOCKETS];
    for (double t = start; t < end; t = now()) {
        int n = epoll_wait(epoll, ready, MAX_SOCKETS, 50);
        for (int r = 0; r < n; r++) {
            int s = (int)ready[r].data.u32;
            for (;;) {
                for (int i = 0; i < BATCH; i++)
                    recv_msgs[i].msg_hdr.msg_flags = 0;
                int got = recvmmsg(fds[s], recv_msgs, BATCH, MSG_DONTWAIT, NULL);
                if (got <= 0)
                    break;
                answered += got;
                heard[s] = t;
                send_queries(fds[s], got);
            }
        }
        for (int s = 0; s < sockets; s++)
            if (t - heard[s] > LOST_S) { /* every query of its window lost: a new window */
                heard[s] = t;
                send_queries(fds[s], window);
            }
    }
    double took = now() - start;
    printf("answered %lld in %.3f s: %.0f per second\n", answered, took, answered / took);
    return 0;
}
