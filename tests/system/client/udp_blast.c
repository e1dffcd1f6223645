/* The raw UDP throughput of a link, the limit of tools/bench/ddp's client goodput.
 *   udp_blast sink PORT SECONDS       prints the payload bytes per second it received
 *   udp_blast send ADDR PORT SECONDS [MBIT [MTU]]  sends datagrams filling one IP MTU (default 1500: 1472
 *                                            bytes), up to 64 KiB per UDP GSO send, paced to MBIT of IP bytes per
 *                                            second (0 or absent: flat out; a flood far above a shaped link's
 *                                            rate burns the CPU that forwards) */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif

enum { kMaxPayload = 9172, kBatch = 64, kGsoBytes = 60000 };

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int sink(int port, double seconds) {
  int fd = socket(AF_INET, SOCK_DGRAM, 0);
  int buf = 8 << 20;
  setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof buf);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((unsigned short)port)};
  if (bind(fd, (struct sockaddr*)&a, sizeof a) != 0) return perror("bind"), 1;
  struct timeval tv = {.tv_sec = 0, .tv_usec = 300000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  static char data[kBatch][kMaxPayload];
  struct mmsghdr m[kBatch];
  struct iovec iov[kBatch];
  double first = 0, last = 0, end = now() + seconds + 10;
  long long bytes = 0;
  while (now() < end) {
    for (int i = 0; i < kBatch; ++i) {
      iov[i] = (struct iovec){data[i], sizeof data[i]};
      m[i].msg_hdr = (struct msghdr){.msg_iov = &iov[i], .msg_iovlen = 1};
    }
    int n = recvmmsg(fd, m, kBatch, 0, NULL);
    if (n <= 0) {
      if (first > 0) break;  /* the sender has finished */
      continue;
    }
    last = now();
    if (first == 0) first = last;
    else for (int i = 0; i < n; ++i) bytes += m[i].msg_len;  /* the first batch marks the start */
  }
  printf("%.0f\n", last > first ? (double)bytes / (last - first) : 0.0);
  return 0;
}

static int send_paced(const char* addr, int port, double seconds, double mbit, int payload_bytes) {
  int fd = socket(AF_INET, SOCK_DGRAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((unsigned short)port)};
  if (inet_pton(AF_INET, addr, &a.sin_addr) != 1) return fprintf(stderr, "bad address %s\n", addr), 1;
  if (connect(fd, (struct sockaddr*)&a, sizeof a) != 0) return perror("connect"), 1;
  int gso = payload_bytes;
  const int segments = setsockopt(fd, SOL_UDP, UDP_SEGMENT, &gso, sizeof gso) == 0 ? kGsoBytes / payload_bytes : 1;
  static char payload[kGsoBytes + kMaxPayload];
  const double send_s = mbit > 0 ? segments * (payload_bytes + 28) * 8 / (mbit * 1e6) : 0;
  double next = now();
  for (double end = next + seconds; now() < end;) {
    (void)send(fd, payload, (size_t)segments * (size_t)payload_bytes, 0);
    next += send_s;
    const double wait = next - now();
    if (wait > 0) {
      struct timespec ts = {(time_t)wait, (long)((wait - (double)(time_t)wait) * 1e9)};
      nanosleep(&ts, NULL);
    }
  }
  return 0;
}

int main(int argc, char** argv) {
  if (argc == 4 && strcmp(argv[1], "sink") == 0) return sink(atoi(argv[2]), atof(argv[3]));
  if (argc >= 5 && argc <= 7 && strcmp(argv[1], "send") == 0) {
    const int mtu = argc == 7 ? atoi(argv[6]) : 1500;
    if (mtu < 576 || mtu - 28 > kMaxPayload) return fprintf(stderr, "MTU %d is not in 576..%d\n", mtu, kMaxPayload + 28), 2;
    return send_paced(argv[2], atoi(argv[3]), atof(argv[4]), argc >= 6 ? atof(argv[5]) : 0, mtu - 28);
  }
  fprintf(stderr, "usage: udp_blast sink PORT SECONDS | send ADDR PORT SECONDS [MBIT [MTU]]\n");
  return 2;
}
