/* udpblast: the fabric throughput benchmark's UDP sender and receiver (IPv6).
 *
 *   udpblast send DST PORT RATE_PPS DURATION_S PAYLOAD_BYTES SENDER_ID [SRC [RUN]]
 *   udpblast recv PORT DURATION_S [RUN]
 *   udpblast raw IFNAME FRAME_HEX RATE_PPS DURATION_S
 *
 * Every datagram's payload starts with a 24-byte header (network byte order):
 *   magic "TFUB" (4) | version u8 = 1 | sender id u8 | run u16 | seq u64 | send time u64
 * (send time: CLOCK_REALTIME in nanoseconds), padded with zeros to PAYLOAD_BYTES. The UDP
 * checksum is zero (UDP_NO_CHECK6_TX/RX): a micro-SID path changes the destination address on
 * the way, so the checksum the sender could compute would not verify at the receiver.
 *
 * send: paces RATE_PPS datagrams per second for DURATION_S seconds (bursts of what is due
 * every 100 us, sent with sendmmsg), then prints one JSON line: sent, send_errors, duration_s.
 * recv: receives for DURATION_S seconds (or until SIGTERM/SIGINT) with recvmmsg and the
 * kernel's receive timestamps (SO_TIMESTAMPNS); datagrams without the header are counted as
 * bad, a sequence number seen before as a duplicate, one of another run (RUN, default 0: a
 * step of a benchmark that left datagrams behind in the network) as stale; prints one JSON
 * line: packets, bytes, bad, duplicates, stale, first/last receive time, one-way latency p50/p99/max in microseconds
 * (nearest rank over every datagram received).
 * raw: sends one Ethernet frame (given in hex) over and over on IFNAME from a packet socket
 * (sendmmsg, bypassing the qdisc), RATE_PPS per second (0: as fast as it can) for DURATION_S
 * seconds or until SIGINT/SIGTERM, then prints sent, send_errors, duration_s (switch.bench_net's
 * generator: tcpreplay's one send per frame tops out near 300k frames/s here).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#ifndef UDP_NO_CHECK6_TX
#define UDP_NO_CHECK6_TX 101
#define UDP_NO_CHECK6_RX 102
#endif
#ifndef SOL_UDP
#define SOL_UDP 17
#endif
#define HDR 24
#define BATCH 64
#define TICK_NS 100000LL
#define MAX_SENDERS 256
#define MAX_SEQ (1u << 26) /* per sender: a bitmap of 8 MiB */

static volatile sig_atomic_t stop_flag;
static void on_signal(int sig) { (void)sig; stop_flag = 1; }

static int64_t now_ns(clockid_t clk) {
    struct timespec ts;
    clock_gettime(clk, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void put64(unsigned char *p, uint64_t v) {
    for (int i = 7; i >= 0; i--) { p[i] = (unsigned char)(v & 0xff); v >>= 8; }
}

static uint64_t get64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v = (v << 8) | p[i];
    return v;
}

/* Sleep until the next tick after `next` (or, when behind, start the ticks again from `t`);
 * the new `next`. */
static int64_t pace(int64_t next, int64_t t) {
    next += TICK_NS;
    if (next <= t) return t;
    struct timespec ts = {next / 1000000000LL, next % 1000000000LL};
    clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
    return next;
}

/* A sender's JSON line: datagrams sent, send errors, seconds since `start`. */
static int report_sent(uint64_t seq, uint64_t errors, int64_t start) {
    double took = (double)(now_ns(CLOCK_MONOTONIC) - start) / 1e9;
    printf("{\"sent\": %llu, \"send_errors\": %llu, \"duration_s\": %.6f}\n",
           (unsigned long long)(seq - errors), (unsigned long long)errors, took);
    return 0;
}

static int parse_addr(const char *text, int port, struct sockaddr_in6 *sa) {
    memset(sa, 0, sizeof *sa);
    sa->sin6_family = AF_INET6;
    sa->sin6_port = htons((uint16_t)port);
    return inet_pton(AF_INET6, text, &sa->sin6_addr) == 1 ? 0 : -1;
}

static int do_send(int argc, char **argv) {
    if (argc < 8) return 2;
    struct sockaddr_in6 dst, src;
    if (parse_addr(argv[2], atoi(argv[3]), &dst)) {
        fprintf(stderr, "udpblast: bad destination address %s\n", argv[2]);
        return 2;
    }
    double rate = atof(argv[4]), duration = atof(argv[5]);
    int size = atoi(argv[6]), id = atoi(argv[7]);
    if (rate <= 0 || duration <= 0 || size < HDR || size > 9000 || id < 0 || id >= MAX_SENDERS) {
        fprintf(stderr, "udpblast: rate and duration > 0, %d <= payload <= 9000, 0 <= id < %d\n",
                HDR, MAX_SENDERS);
        return 2;
    }
    int fd = socket(AF_INET6, SOCK_DGRAM, 0);
    if (fd < 0) { perror("udpblast: socket"); return 1; }
    int sndbuf = 4 << 20;
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
    int on = 1; /* a micro-SID path rewrites the destination: no checksum can match it */
    setsockopt(fd, SOL_UDP, UDP_NO_CHECK6_TX, &on, sizeof on);
    int run = argc > 9 ? atoi(argv[9]) : 0;
    if (argc > 8 && strcmp(argv[8], "-")) {
        if (parse_addr(argv[8], 0, &src) || bind(fd, (struct sockaddr *)&src, sizeof src)) {
            fprintf(stderr, "udpblast: cannot bind to %s\n", argv[8]);
            return 1;
        }
    }
    if (connect(fd, (struct sockaddr *)&dst, sizeof dst)) { perror("udpblast: connect"); return 1; }
    static unsigned char bufs[BATCH][9000];
    struct mmsghdr msgs[BATCH];
    struct iovec iov[BATCH];
    memset(bufs, 0, sizeof bufs);
    memset(msgs, 0, sizeof msgs);
    for (int i = 0; i < BATCH; i++) {
        memcpy(bufs[i], "TFUB", 4);
        bufs[i][4] = 1;
        bufs[i][5] = (unsigned char)id;
        bufs[i][6] = (unsigned char)(run >> 8);
        bufs[i][7] = (unsigned char)(run & 0xff);
        iov[i].iov_base = bufs[i];
        iov[i].iov_len = (size_t)size;
        msgs[i].msg_hdr.msg_iov = &iov[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
    }
    uint64_t seq = 0, errors = 0;
    int64_t start = now_ns(CLOCK_MONOTONIC), end = start + (int64_t)(duration * 1e9);
    int64_t next = start;
    while (!stop_flag) {
        int64_t t = now_ns(CLOCK_MONOTONIC);
        if (t >= end) break;
        uint64_t due = (uint64_t)((double)(t - start) * rate / 1e9) + 1;
        /* a sender slower than RATE_PPS stops at the end all the same: what it owes past the
         * deadline is not sent (sent/duration_s say what it managed) */
        while (seq < due && !stop_flag && now_ns(CLOCK_MONOTONIC) < end) {
            int n = (int)(due - seq < BATCH ? due - seq : BATCH);
            uint64_t stamp = (uint64_t)now_ns(CLOCK_REALTIME);
            for (int i = 0; i < n; i++) {
                put64(bufs[i] + 8, seq + (uint64_t)i);
                put64(bufs[i] + 16, stamp);
            }
            int sent = sendmmsg(fd, msgs, (unsigned)n, 0);
            if (sent <= 0) { /* no room: count one datagram as lost and move on */
                errors++;
                seq++;
                continue;
            }
            seq += (uint64_t)sent;
        }
        next = pace(next, t);
    }
    return report_sent(seq, errors, start);
}

static int cmp64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static int do_recv(int argc, char **argv) {
    if (argc < 4) return 2;
    int port = atoi(argv[2]);
    double duration = atof(argv[3]);
    int run = argc > 4 ? atoi(argv[4]) : 0;
    int fd = socket(AF_INET6, SOCK_DGRAM, 0);
    if (fd < 0) { perror("udpblast: socket"); return 1; }
    int on = 1, rcvbuf = 8 << 20;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof rcvbuf);
    setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &on, sizeof on);
    setsockopt(fd, SOL_UDP, UDP_NO_CHECK6_RX, &on, sizeof on);
    struct sockaddr_in6 any;
    parse_addr("::", port, &any);
    if (bind(fd, (struct sockaddr *)&any, sizeof any)) { perror("udpblast: bind"); return 1; }
    struct timeval tv = {0, 100000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    printf("{\"ready\": true}\n");
    fflush(stdout);
    static unsigned char bufs[BATCH][9216];
    static char ctrl[BATCH][64];
    struct mmsghdr msgs[BATCH];
    struct iovec iov[BATCH];
    unsigned char *seen[MAX_SENDERS] = {0};
    size_t cap = 1 << 20, n_lat = 0;
    int64_t *lat = malloc(cap * sizeof *lat);
    uint64_t packets = 0, bytes = 0, bad = 0, dups = 0, stale = 0;
    int64_t first = 0, last = 0;
    int64_t end = now_ns(CLOCK_MONOTONIC) + (int64_t)(duration * 1e9);
    if (!lat) return 1;
    while (!stop_flag && now_ns(CLOCK_MONOTONIC) < end) {
        for (int i = 0; i < BATCH; i++) {
            iov[i].iov_base = bufs[i];
            iov[i].iov_len = sizeof bufs[i];
            memset(&msgs[i].msg_hdr, 0, sizeof msgs[i].msg_hdr);
            msgs[i].msg_hdr.msg_iov = &iov[i];
            msgs[i].msg_hdr.msg_iovlen = 1;
            msgs[i].msg_hdr.msg_control = ctrl[i];
            msgs[i].msg_hdr.msg_controllen = sizeof ctrl[i];
        }
        int got = recvmmsg(fd, msgs, BATCH, MSG_WAITFORONE, NULL);
        if (got <= 0) continue;
        for (int i = 0; i < got; i++) {
            unsigned len = msgs[i].msg_len;
            const unsigned char *p = bufs[i];
            if (len < HDR || memcmp(p, "TFUB", 4) || p[4] != 1) { bad++; continue; }
            if (((p[6] << 8) | p[7]) != run) { stale++; continue; }
            uint64_t seq = get64(p + 8);
            int sender = p[5];
            if (seq < MAX_SEQ) {
                if (!seen[sender] && !(seen[sender] = calloc(MAX_SEQ / 8, 1))) return 1;
                if (seen[sender][seq >> 3] & (1u << (seq & 7))) { dups++; continue; }
                seen[sender][seq >> 3] |= (unsigned char)(1u << (seq & 7));
            }
            int64_t rx = 0;
            for (struct cmsghdr *c = CMSG_FIRSTHDR(&msgs[i].msg_hdr); c;
                 c = CMSG_NXTHDR(&msgs[i].msg_hdr, c)) {
                if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SO_TIMESTAMPNS) {
                    struct timespec ts;
                    memcpy(&ts, CMSG_DATA(c), sizeof ts);
                    rx = (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
                }
            }
            if (!rx) rx = now_ns(CLOCK_REALTIME);
            if (!first) first = rx;
            last = rx;
            packets++;
            bytes += len;
            if (n_lat == cap) {
                cap *= 2;
                int64_t *more = realloc(lat, cap * sizeof *lat);
                if (!more) return 1;
                lat = more;
            }
            lat[n_lat++] = rx - (int64_t)get64(p + 16);
        }
    }
    double p50 = 0, p99 = 0, mx = 0;
    if (n_lat) {
        qsort(lat, n_lat, sizeof *lat, cmp64);
        p50 = (double)lat[(n_lat - 1) / 2] / 1e3;
        p99 = (double)lat[(size_t)((double)(n_lat - 1) * 0.99)] / 1e3;
        mx = (double)lat[n_lat - 1] / 1e3;
    }
    printf("{\"packets\": %llu, \"bytes\": %llu, \"bad\": %llu, \"duplicates\": %llu, "
           "\"stale\": %llu, "
           "\"first_ns\": %lld, \"last_ns\": %lld, \"p50_us\": %.1f, \"p99_us\": %.1f, "
           "\"max_us\": %.1f}\n",
           (unsigned long long)packets, (unsigned long long)bytes, (unsigned long long)bad,
           (unsigned long long)dups, (unsigned long long)stale, (long long)first, (long long)last, p50, p99, mx);
    return 0;
}

static int do_raw(int argc, char **argv) {
    if (argc < 6) return 2;
    double rate = atof(argv[4]), duration = atof(argv[5]);
    const char *hex = argv[3];
    size_t hl = strlen(hex);
    static unsigned char frame[9216];
    if (hl % 2 || hl / 2 < 14 || hl / 2 > sizeof frame || rate < 0 || duration <= 0) {
        fprintf(stderr, "udpblast: a frame of 14..9216 bytes in hex, rate >= 0, duration > 0\n");
        return 2;
    }
    for (size_t i = 0; i < hl / 2; i++) {
        unsigned v;
        if (sscanf(hex + 2 * i, "%2x", &v) != 1) {
            fprintf(stderr, "udpblast: the frame is not hex\n");
            return 2;
        }
        frame[i] = (unsigned char)v;
    }
    unsigned ifindex = if_nametoindex(argv[2]);
    if (!ifindex) { fprintf(stderr, "udpblast: no interface %s\n", argv[2]); return 1; }
    int fd = socket(AF_PACKET, SOCK_RAW, 0);
    if (fd < 0) { perror("udpblast: socket"); return 1; }
    int on = 1, sndbuf = 4 << 20;
    setsockopt(fd, SOL_PACKET, PACKET_QDISC_BYPASS, &on, sizeof on);
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
    struct sockaddr_ll sll;
    memset(&sll, 0, sizeof sll);
    sll.sll_family = AF_PACKET;
    sll.sll_ifindex = (int)ifindex;
    if (bind(fd, (struct sockaddr *)&sll, sizeof sll)) { perror("udpblast: bind"); return 1; }
    struct mmsghdr msgs[BATCH];
    struct iovec iov = {frame, hl / 2};
    memset(msgs, 0, sizeof msgs);
    for (int i = 0; i < BATCH; i++) {
        msgs[i].msg_hdr.msg_iov = &iov;
        msgs[i].msg_hdr.msg_iovlen = 1;
    }
    uint64_t seq = 0, errors = 0;
    int64_t start = now_ns(CLOCK_MONOTONIC), end = start + (int64_t)(duration * 1e9);
    int64_t next = start;
    while (!stop_flag) {
        int64_t t = now_ns(CLOCK_MONOTONIC);
        if (t >= end) break;
        uint64_t due = rate > 0 ? (uint64_t)((double)(t - start) * rate / 1e9) + 1 : seq + BATCH;
        while (seq < due && !stop_flag && now_ns(CLOCK_MONOTONIC) < end) {
            int n = (int)(due - seq < BATCH ? due - seq : BATCH);
            int sent = sendmmsg(fd, msgs, (unsigned)n, 0);
            if (sent <= 0) { errors++; seq++; continue; }
            seq += (uint64_t)sent;
        }
        if (rate <= 0) continue;
        next = pace(next, t);
    }
    return report_sent(seq, errors, start);
}

int main(int argc, char **argv) {
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
    if (argc >= 2 && !strcmp(argv[1], "send")) {
        int rc = do_send(argc, argv);
        if (rc == 2 && argc < 8)
            fprintf(stderr, "usage: udpblast send DST PORT RATE_PPS DURATION_S PAYLOAD ID [SRC [RUN]]\n");
        return rc;
    }
    if (argc >= 2 && !strcmp(argv[1], "recv")) {
        int rc = do_recv(argc, argv);
        if (rc == 2) fprintf(stderr, "usage: udpblast recv PORT DURATION_S [RUN]\n");
        return rc;
    }
    if (argc >= 2 && !strcmp(argv[1], "raw")) {
        int rc = do_raw(argc, argv);
        if (rc == 2) fprintf(stderr, "usage: udpblast raw IFNAME FRAME_HEX RATE_PPS DURATION_S\n");
        return rc;
    }
    fprintf(stderr, "usage: udpblast send DST PORT RATE_PPS DURATION_S PAYLOAD ID [SRC|- [RUN]]\n"
                    "       udpblast recv PORT DURATION_S [RUN]\n"
                    "       udpblast raw IFNAME FRAME_HEX RATE_PPS DURATION_S\n");
    return 2;
}
