/* nolayer: make isolation layers unavailable for real, to test the fallback ladder.
 *
 *   nolayer LAYER[,LAYER...] -- COMMAND [ARG...]
 *
 * Installs a seccomp filter on itself (inherited by COMMAND) that makes the kernel refuse:
 *   userns    clone/unshare with CLONE_NEWUSER -> EPERM, clone3 -> ENOSYS
 *             (what Ubuntu's AppArmor restriction or user.max_user_namespaces=0 look like)
 *   clone3    clone3 -> ENOSYS, clone untouched (a kernel before 5.3, or the seccomp profile
 *             of an older container runtime): namespaces must still come, through clone
 *   netns, ipcns, utsns, cgroupns
 *             clone/unshare with that namespace's flag -> EPERM, clone3 -> ENOSYS (a
 *             container runtime's seccomp profile, or user.max_net_namespaces=0): user
 *             namespaces work, that one namespace does not
 *   nethelper clone with CLONE_VM but neither CLONE_VFORK nor CLONE_THREAD -> EPERM (a tool
 *             such as valgrind, which runs no such process): the init's helper for the
 *             network namespace cannot start, and the init makes the namespace itself
 *   landlock  landlock_create_ruleset -> ENOSYS (an old kernel, or landlock not in lsm=)
 *   seccomp   seccomp(SECCOMP_SET_MODE_FILTER) and prctl(PR_SET_SECCOMP) -> EINVAL
 *             (a kernel without CONFIG_SECCOMP_FILTER)
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc < 4 || strcmp(argv[2], "--")) {
		fprintf(stderr,
		        "usage: nolayer "
		        "userns,clone3,netns,ipcns,utsns,cgroupns,nethelper,landlock,seccomp -- "
		        "COMMAND [ARG...]\n");
		return 2;
	}
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
	if (!ctx)
		return 2;
	char *list = strdup(argv[1]);
	for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
		int r = 0;
		if (!strcmp(tok, "userns")) {
			r |= seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(unshare), 1,
			                      SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_NEWUSER, CLONE_NEWUSER));
			r |= seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
			                      SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_NEWUSER, CLONE_NEWUSER));
			r |= seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
		} else if (!strcmp(tok, "netns") || !strcmp(tok, "ipcns") ||
		           !strcmp(tok, "utsns") || !strcmp(tok, "cgroupns")) {
			unsigned long f = tok[0] == 'n'   ? CLONE_NEWNET
			                  : tok[0] == 'i' ? CLONE_NEWIPC
			                  : tok[0] == 'u' ? CLONE_NEWUTS
			                                  : CLONE_NEWCGROUP;
			r |= seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(unshare), 1,
			                      SCMP_A0(SCMP_CMP_MASKED_EQ, f, f));
			r |= seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
			                      SCMP_A0(SCMP_CMP_MASKED_EQ, f, f));
			r |= seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
		} else if (!strcmp(tok, "nethelper")) {
			r |= seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
			                      SCMP_A0(SCMP_CMP_MASKED_EQ,
			                              CLONE_VM | CLONE_VFORK | CLONE_THREAD,
			                              CLONE_VM));
		} else if (!strcmp(tok, "clone3")) {
			r |= seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
		} else if (!strcmp(tok, "landlock")) {
			r |= seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS),
			                      SCMP_SYS(landlock_create_ruleset), 0);
		} else if (!strcmp(tok, "seccomp")) {
			/* the filter below is installed first, so this only binds the command */
			r |= seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EINVAL), SCMP_SYS(seccomp), 0);
			r |= seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EINVAL), SCMP_SYS(prctl), 1,
			                      SCMP_A0(SCMP_CMP_EQ, PR_SET_SECCOMP));
		} else {
			fprintf(stderr, "nolayer: unknown layer '%s'\n", tok);
			return 2;
		}
		if (r) {
			fprintf(stderr, "nolayer: cannot build the filter for %s\n", tok);
			return 2;
		}
	}
	if (seccomp_load(ctx) < 0) {
		perror("nolayer: seccomp_load");
		return 2;
	}
	execvp(argv[3], argv + 3);
	perror(argv[3]);
	return 127;
}
