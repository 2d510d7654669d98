/* The harness ceiling for bench/peers.py: the least a UDP DNS responder can do. It turns
 * every datagram around as an answer (QR set, one A record 127.0.0.80 after the question) with
 * recvmmsg/sendmmsg in batches of 64. Not a DNS server; it shows how many queries per
 * second dnsperf can drive and count on this machine with the chosen settings.
 *
 *     cc -O2 -o responder bench/responder.c && ./responder PORT
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define BATCH 64
#define SIZE 512

static const unsigned char ANSWER[] = {0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 30, 0, 4, 127, 0, 0, 80};

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: responder PORT\n");
        return 2;
    }
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    int buffer = 4 << 20;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buffer, sizeof buffer);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons(atoi(argv[1]))};
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd, (struct sockaddr *)&addr, sizeof addr) != 0) {
        perror("bind");
        return 1;
    }
    static unsigned char data[BATCH][SIZE + sizeof ANSWER];
    static struct sockaddr_in peers[BATCH];
    static struct iovec iov[BATCH];
    static struct mmsghdr msgs[BATCH];
    for (;;) {
        for (int i = 0; i < BATCH; i++) {
            iov[i].iov_base = data[i];
            iov[i].iov_len = SIZE;
            memset(&msgs[i].msg_hdr, 0, sizeof msgs[i].msg_hdr);
            msgs[i].msg_hdr.msg_iov = &iov[i];
            msgs[i].msg_hdr.msg_iovlen = 1;
            msgs[i].msg_hdr.msg_name = &peers[i];
            msgs[i].msg_hdr.msg_namelen = sizeof peers[i];
        }
        int n = recvmmsg(fd, msgs, BATCH, MSG_WAITFORONE, NULL);
        if (n <= 0)
            continue;
        for (int i = 0; i < n; i++) {
            unsigned len = msgs[i].msg_len, end = 12;
            while (end < len && data[i][end])
                end += data[i][end] + 1;
            end += 5; /* the root label, QTYPE, QCLASS: the question ends here */
            if (len < 17 || end > len) {
                iov[i].iov_len = 0;
                continue;
            }
            data[i][2] |= 0x84; /* QR, AA */
            data[i][7] = 1;     /* ANCOUNT 1 */
            data[i][10] = data[i][11] = 0; /* no additional records (an OPT is dropped) */
            memcpy(data[i] + end, ANSWER, sizeof ANSWER);
            iov[i].iov_len = end + sizeof ANSWER;
        }
        sendmmsg(fd, msgs, n, 0);
    }
}
