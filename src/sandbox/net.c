/* Network namespace setup, child side. A new network namespace starts with a single device,
 * "lo", and it is down: even 127.0.0.1 is unreachable until someone raises it. Raising it
 * needs CAP_NET_ADMIN over the namespace, which the child holds through the user namespace
 * that owns the new network namespace, so this runs before capabilities are dropped.
 */
#include <errno.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sandbox/sandbox.h"

int net_loopback_up_child(void)
{
	/* Any socket of the namespace serves as a handle for the interface ioctls. */
	struct ifreq ifr = {.ifr_name = "lo"};
	int fd, ret = 0;

	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (ioctl(fd, SIOCGIFFLAGS, &ifr) < 0) {
		ret = -errno;
		goto out;
	}
	/* The kernel assigns 127.0.0.1/8 and ::1 to lo when it comes up; no address setup. */
	ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
	if (ioctl(fd, SIOCSIFFLAGS, &ifr) < 0)
		ret = -errno;
out:
	close(fd);
	return ret;
}
