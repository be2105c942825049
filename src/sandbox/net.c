/* Network namespace setup, child side. A new network namespace starts with a single device,
 * "lo", and it is down: even 127.0.0.1 is unreachable until someone raises it. Raising it
 * needs CAP_NET_ADMIN over the namespace, which the child holds through the user namespace
 * that owns the new network namespace, so this runs before capabilities are dropped.
 *
 * The system calls here go straight to the kernel where the architecture allows it
 * (net_sys): they also run in the init's helper (net_make_child, DESIGN §18), a process
 * that shares the init's memory and so glibc's errno with it while the init goes on.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sandbox/sandbox.h"

#ifndef SIOCGSKNS
#define SIOCGSKNS 0x894C
#endif

/* A system call with up to three arguments: the result, or -errno; errno is not touched. */
CORRAL_NO_ASAN static long net_sys(long nr, long a, long b, long c)
{
#if defined(__x86_64__)
	long ret;
	__asm__ volatile("syscall"
	                 : "=a"(ret)
	                 : "a"(nr), "D"(a), "S"(b), "d"(c)
	                 : "rcx", "r11", "memory");
	return ret;
#elif defined(__aarch64__)
	register long x8 __asm__("x8") = nr;
	register long x0 __asm__("x0") = a;
	register long x1 __asm__("x1") = b;
	register long x2 __asm__("x2") = c;
	__asm__ volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2) : "memory", "cc");
	return x0;
#else
	long r = syscall(nr, a, b, c);
	return r < 0 ? -errno : r;
#endif
}

bool net_helper_supported(void)
{
#if defined(__x86_64__) || defined(__aarch64__)
	return true;
#else
	return false;
#endif
}

CORRAL_NO_ASAN int net_loopback_up_child(void)
{
	/* Any socket of the namespace serves as a handle for the interface ioctls. */
	struct ifreq ifr = {.ifr_name = "lo"};
	long fd = net_sys(SYS_socket, AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return (int)fd;
	long r = net_sys(SYS_ioctl, fd, SIOCGIFFLAGS, (long)&ifr);
	if (r == 0) {
		/* The kernel assigns 127.0.0.1/8 and ::1 to lo when it comes up; no address
		 * setup. */
		ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
		r = net_sys(SYS_ioctl, fd, SIOCSIFFLAGS, (long)&ifr);
	}
	net_sys(SYS_close, fd, 0, 0);
	return (int)r;
}

CORRAL_NO_ASAN int net_make_child(int cpu, int target_fd, int *step)
{
	if (cpu >= 0 && cpu < CPU_SETSIZE) {
		/* (a failure only leaves it where the scheduler put it) */
		cpu_set_t one;
		CPU_ZERO(&one);
		CPU_SET(cpu, &one);
		net_sys(SYS_sched_setaffinity, 0, sizeof(one), (long)&one);
	}
	*step = 0;
	long r = net_sys(SYS_unshare, CLONE_NEWNET, 0, 0);
	if (r < 0)
		return (int)r;
	*step = 1;
	if ((r = net_loopback_up_child()) < 0)
		return (int)r;
	/* A descriptor of the namespace for the init's setns: any socket of it yields one. */
	*step = 2;
	long s = net_sys(SYS_socket, AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return (int)s;
	long ns = net_sys(SYS_ioctl, s, SIOCGSKNS, 0);
	net_sys(SYS_close, s, 0, 0);
	if (ns < 0)
		return (int)ns;
	r = net_sys(SYS_dup3, ns, target_fd, O_CLOEXEC);
	net_sys(SYS_close, ns, 0, 0);
	return r < 0 ? (int)r : 0;
}
