/* SPDX-License-Identifier: MIT */
/*
 * A TCP port for a rendezvous that a process is about to listen on, found
 * before it binds.  Binding port 0 and closing the socket would give a port
 * from ip_local_port_range, the range every outgoing connection takes its
 * local port from: on a busy machine the next connect() can take it before
 * the listener binds (seen in CI while apt downloaded beside the tests:
 * rank 0's bind failed and the test waited in vain).  So the port comes from
 * outside that range, pseudo-random per process, and is checked free now.
 */
#ifndef PD_TOOLS_LISTEN_PORT_H
#define PD_TOOLS_LISTEN_PORT_H

#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* Whether a listener with SO_REUSEADDR (as the rendezvous's) could bind
 * every address on port now: v6 with v4 mapped, else v4, as it does. */
static inline int listen_port_free(unsigned int port)
{
	struct sockaddr_in6 s6 = { .sin6_family = AF_INET6, .sin6_port = htons(port),
				   .sin6_addr = IN6ADDR_ANY_INIT };
	struct sockaddr_in s4 = { .sin_family = AF_INET, .sin_port = htons(port),
				  .sin_addr.s_addr = htonl(INADDR_ANY) };
	int one = 1, zero = 0, fd, ok = 0;

	fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd >= 0) {
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
		ok = !bind(fd, (struct sockaddr *)&s6, sizeof(s6));
		close(fd);
		if (ok || errno == EADDRINUSE)
			return ok;
	}
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return 0;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	ok = !bind(fd, (struct sockaddr *)&s4, sizeof(s4));
	close(fd);
	return ok;
}

/*
 * The first of n consecutive free ports outside the ephemeral range: below
 * it (from 10000) or, where it starts lower than that, above it; -1 if
 * neither has room or every try was taken.
 */
static inline int listen_ports(unsigned int n)
{
	unsigned int lo = 32768, hi = 60999, first, span, start, i, j;
	struct timespec ts;
	FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "re");

	if (f) {
		if (fscanf(f, "%u %u", &lo, &hi) != 2 || lo > hi || hi > 65535)
			lo = 32768, hi = 60999;
		fclose(f);
	}
	if (n < 1 || n > 16)
		return -1;
	if (lo >= 10000 + 1000 + n)
		first = 10000, span = lo - 10000 - n + 1;
	else if (65535 - hi >= 1000 + n)
		first = hi + 1, span = 65535 - hi - n + 1;
	else
		return -1;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	start = ((unsigned int)getpid() * 2654435761u ^ (unsigned int)ts.tv_nsec) % span;
	for (i = 0; i < 256; i++) {
		unsigned int port = first + (start + i) % span;

		for (j = 0; j < n && listen_port_free(port + j); j++)
			;
		if (j == n)
			return (int)port;
	}
	return -1;
}

static inline int listen_port(void)
{
	return listen_ports(1);
}

#endif
