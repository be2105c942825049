/* caps: drop every capability in the child before exec, with raw system calls only (no
 * libcap: the child may not allocate). */
#include <errno.h>
#include <linux/capability.h>
#include <linux/securebits.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sandbox/sandbox.h"

/* Upper bound for the capability loop. The kernel reports EINVAL past its own last
 * capability, which ends the loop, so a kernel newer than our headers is still covered. */
#define CAPS_MAX 63

int caps_drop_all_child(void)
{
	/* Order matters: dropping from the bounding set and setting securebits need
	 * CAP_SETPCAP, so both come before capset() empties the effective set. */
	for (unsigned long cap = 0; cap <= CAPS_MAX; cap++) {
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) == 0)
			continue;
		if (errno == EINVAL && cap > 0)
			break; /* past the kernel's last capability */
		return -errno;
	}

	/* EINVAL: a kernel before 4.3 has no ambient set, so there is nothing to clear. */
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
		return -errno;

	/* Defense in depth: uid 0 gains no capabilities at exec and setuid transitions leave
	 * the sets alone, locked so the command cannot undo it. Optional: without
	 * CAP_SETPCAP (or under an LSM that refuses it) the empty bounding set already
	 * guarantees that exec gains nothing. */
	(void)prctl(PR_SET_SECUREBITS,
	            SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP |
	                SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_KEEP_CAPS_LOCKED |
	                SECBIT_NO_CAP_AMBIENT_RAISE | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED,
	            0, 0, 0);

	/* Version 3 covers capabilities 0..63 in two 32-bit words; all zero empties the
	 * effective, permitted and inheritable sets at once. */
	struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
	struct __user_cap_data_struct data[2] = {{0}};
	if (syscall(SYS_capset, &hdr, data) < 0)
		return -errno;
	return 0;
}

int caps_clear_child(void)
{
	/* An unprivileged caller without a user namespace: the bounding set needs CAP_SETPCAP to
	 * shrink, but whatever capabilities it was given (ambient ones, raised by a wrapper such
	 * as setpriv or a systemd unit) can always be let go. With no_new_privs set, exec then
	 * gains none back. */
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
		return -errno;
	struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
	struct __user_cap_data_struct data[2] = {{0}};
	if (syscall(SYS_capset, &hdr, data) < 0)
		return -errno;
	return 0;
}

int caps_no_new_privs_child(void)
{
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return -errno;
	return 0;
}
