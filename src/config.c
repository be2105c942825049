/* The configuration object: validated setters with safe defaults. */
#include "internal.h"

#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>

#define MAX_ARGS 4096
#define MAX_ARG_BYTES (1u << 20)

corral_config *corral_config_new(void)
{
	struct corral_config *cfg = calloc(1, sizeof(*cfg));
	if (!cfg)
		return NULL;
	cfg->timeout_ms = 60000;
	cfg->kill_after_ms = 2000;
	cfg->output_cap = 1u << 20;
	cfg->stdin_fd = -1;
	cfg->stdout_fd = cfg->stderr_fd = cfg->cmd_fd3 = -1;
	cfg->mode = CORRAL_MODE_REQUIRED;
	cfg->net = CORRAL_NET_NONE;
	cfg->limits[CORRAL_LIMIT_NOFILE] = 1024;
	/* A fork bomb must not take the host's pid table; 1024 is plenty for builds. */
	cfg->limits[CORRAL_LIMIT_PIDS] = 1024;
	cfg->pids_default = true;
	return cfg;
}

static void strv_free(char **v)
{
	if (!v)
		return;
	for (char **p = v; *p; p++)
		free(*p);
	free(v);
}

static char **strv_dup(const char *const *v)
{
	size_t n = 0;
	while (v[n])
		n++;
	char **out = calloc(n + 1, sizeof(char *));
	if (!out)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		out[i] = strdup(v[i]);
		if (!out[i]) {
			strv_free(out);
			return NULL;
		}
	}
	return out;
}

static void env_entries_free(struct env_entry *e, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(e[i].name);
		free(e[i].value);
	}
	free(e);
}

static void strvn_free(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

static void rules_free(struct cmd_rule *r, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(r[i].match);
		free(r[i].reason);
	}
	free(r);
}

static void policy_fields_free(corral_config *cfg)
{
	free(cfg->profile_name);
	strvn_free(cfg->fs_read, cfg->n_read);
	strvn_free(cfg->fs_write, cfg->n_write);
	strvn_free(cfg->fs_deny, cfg->n_deny);
	strvn_free(cfg->protected_paths, cfg->n_protected);
	strvn_free(cfg->env_allow, cfg->n_env_allow);
	strvn_free(cfg->env_deny, cfg->n_env_deny);
	strvn_free(cfg->redact_strings, cfg->n_redact_strings);
	rules_free(cfg->cmd_allow, cfg->n_cmd_allow);
	rules_free(cfg->cmd_deny, cfg->n_cmd_deny);
}

static char **strvn_dup(char **v, size_t n)
{
	if (!n)
		return NULL;
	char **out = calloc(n + 1, sizeof(char *));
	if (!out)
		return NULL;
	for (size_t i = 0; i < n; i++)
		if (!(out[i] = strdup(v[i]))) {
			strvn_free(out, i);
			return NULL;
		}
	return out;
}

static struct cmd_rule *rules_dup(const struct cmd_rule *r, size_t n)
{
	if (!n)
		return NULL;
	struct cmd_rule *out = calloc(n, sizeof(*out));
	if (!out)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		out[i].match = strdup(r[i].match);
		out[i].reason = r[i].reason ? strdup(r[i].reason) : NULL;
		if (!out[i].match || (r[i].reason && !out[i].reason)) {
			rules_free(out, i + 1);
			return NULL;
		}
	}
	return out;
}

/* Deep-copy the policy fields of src into d (whose pointers were shallow copies). */
static int policy_fields_dup(corral_config *d, const corral_config *src)
{
	d->profile_name = src->profile_name ? strdup(src->profile_name) : NULL;
	d->fs_read = strvn_dup(src->fs_read, src->n_read);
	d->fs_write = strvn_dup(src->fs_write, src->n_write);
	d->fs_deny = strvn_dup(src->fs_deny, src->n_deny);
	d->protected_paths = strvn_dup(src->protected_paths, src->n_protected);
	d->env_allow = strvn_dup(src->env_allow, src->n_env_allow);
	d->env_deny = strvn_dup(src->env_deny, src->n_env_deny);
	d->redact_strings = strvn_dup(src->redact_strings, src->n_redact_strings);
	d->cmd_allow = rules_dup(src->cmd_allow, src->n_cmd_allow);
	d->cmd_deny = rules_dup(src->cmd_deny, src->n_cmd_deny);
	if ((src->profile_name && !d->profile_name) || (src->n_read && !d->fs_read) ||
	    (src->n_write && !d->fs_write) || (src->n_deny && !d->fs_deny) ||
	    (src->n_protected && !d->protected_paths) || (src->n_env_allow && !d->env_allow) ||
	    (src->n_env_deny && !d->env_deny) || (src->n_cmd_allow && !d->cmd_allow) ||
	    (src->n_redact_strings && !d->redact_strings) || (src->n_cmd_deny && !d->cmd_deny)) {
		/* leave d freeable: count only what was copied */
		if (!d->fs_read)
			d->n_read = 0;
		if (!d->fs_write)
			d->n_write = 0;
		if (!d->fs_deny)
			d->n_deny = 0;
		if (!d->protected_paths)
			d->n_protected = 0;
		if (!d->env_allow)
			d->n_env_allow = 0;
		if (!d->env_deny)
			d->n_env_deny = 0;
		if (!d->redact_strings)
			d->n_redact_strings = 0;
		if (!d->cmd_allow)
			d->n_cmd_allow = 0;
		if (!d->cmd_deny)
			d->n_cmd_deny = 0;
		return -1;
	}
	return 0;
}

void corral_config_free(corral_config *cfg)
{
	if (!cfg)
		return;
	policy_fields_free(cfg);
	strv_free(cfg->argv);
	free(cfg->shell);
	free(cfg->workspace);
	free(cfg->cwd);
	env_entries_free(cfg->env, cfg->n_env);
	free(cfg->stdin_data);
	free(cfg);
}

int corral_config_set_argv(corral_config *cfg, const char *const *argv, struct corral_error *err)
{
	if (!argv || !argv[0] || !argv[0][0])
		return corral_set_error(err, CORRAL_EINVAL, 0, "config",
		                        "config: the command is empty; give a program to run");
	size_t n = 0, bytes = 0;
	for (; argv[n]; n++)
		bytes += strlen(argv[n]) + 1;
	if (n > MAX_ARGS || bytes > MAX_ARG_BYTES)
		return corral_set_error(err, CORRAL_EINVAL, 0, "config",
		                        "config: the command has %zu arguments / %zu bytes; the "
		                        "limit is %u arguments and %u bytes",
		                        n, bytes, MAX_ARGS, MAX_ARG_BYTES);
	char **v = strv_dup(argv);
	if (!v)
		return corral_set_error(err, CORRAL_ENOMEM, ENOMEM, "config",
		                        "config: out of memory");
	strv_free(cfg->argv);
	free(cfg->shell);
	cfg->shell = NULL;
	cfg->argv = v;
	return 0;
}

int corral_config_set_shell(corral_config *cfg, const char *command, struct corral_error *err)
{
	if (!command || !*command)
		return corral_set_error(
		    err, CORRAL_EINVAL, 0, "config",
		    "config: the shell command is empty; give a command string");
	if (strlen(command) > MAX_ARG_BYTES)
		return corral_set_error(err, CORRAL_EINVAL, 0, "config",
		                        "config: the shell command is longer than %u bytes",
		                        MAX_ARG_BYTES);
	const char *v[] = {"/bin/sh", "-c", command, NULL};
	int r = corral_config_set_argv(cfg, v, err);
	if (r < 0)
		return r;
	cfg->shell = strdup(command);
	if (!cfg->shell)
		return corral_set_error(err, CORRAL_ENOMEM, ENOMEM, "config",
		                        "config: out of memory");
	return 0;
}

/* The kernel's interface file systems. A workspace is bound read-write into the sandbox at
 * its host path: one of these would hand the sandbox the host kernel's settings, which it
 * otherwise never sees (it gets a /proc of its own and no /sys). By statfs magic and by the
 * type name mountinfo gives. */
static const struct {
	unsigned long magic;
	const char *name;
} kernel_fs[] = {{PROC_SUPER_MAGIC, "proc"},
                 {SYSFS_MAGIC, "sysfs"},
                 {DEBUGFS_MAGIC, "debugfs"},
                 {TRACEFS_MAGIC, "tracefs"},
                 {SECURITYFS_MAGIC, "securityfs"},
                 {CGROUP_SUPER_MAGIC, "cgroup"},
                 {CGROUP2_SUPER_MAGIC, "cgroup2"},
                 {BPF_FS_MAGIC, "bpf"},
                 {PSTOREFS_MAGIC, "pstore"},
                 {EFIVARFS_MAGIC, "efivarfs"},
                 {BINFMTFS_MAGIC, "binfmt_misc"},
                 {DEVPTS_SUPER_MAGIC, "devpts"},
                 {SELINUX_MAGIC, "selinuxfs"},
                 {SMACK_MAGIC, "smackfs"},
                 {NSFS_MAGIC, "nsfs"},
                 {0x62656570UL, "configfs"},
                 {0x65735543UL, "fusectl"},
                 {0x19800202UL, "mqueue"},
                 {0x67596969UL, "rpc_pipefs"},
                 {0x07655821UL, "resctrl"}};

/* By statfs magic: the name, or NULL for any other file system. */
static const char *kernel_fs_name(unsigned long type)
{
	for (size_t i = 0; i < ARRAY_SIZE(kernel_fs); i++)
		if (kernel_fs[i].magic == type)
			return kernel_fs[i].name;
	return NULL;
}

/* By the type name mountinfo gives (a bind shows the type of what it binds). */
static bool kernel_fs_type(const char *t)
{
	for (size_t i = 0; i < ARRAY_SIZE(kernel_fs); i++)
		if (!strcmp(t, kernel_fs[i].name))
			return true;
	return false;
}

/* The device /dev is on, when /dev is a mount of its own (0 when it is not: then its nodes
 * cannot be told from the root's files by device). */
static dev_t host_dev_device(void)
{
	struct stat d, r;
	return stat("/dev", &d) == 0 && stat("/", &r) == 0 && d.st_dev != r.st_dev ? d.st_dev : 0;
}

int kernel_tree_check(const char *label, const char *tree, bool self, const char *mountinfo,
                      struct corral_error *err)
{
	if (self) {
		struct statfs sf;
		struct stat st;
		const char *kfs =
		    statfs(tree, &sf) == 0 ? kernel_fs_name((unsigned long)sf.f_type) : NULL;
		const char *under = path_within(tree, "/proc")  ? "/proc"
		                    : path_within(tree, "/sys") ? "/sys"
		                                                : NULL;
		dev_t dd = host_dev_device();
		bool on_dev = dd && stat(tree, &st) == 0 && st.st_dev == dd;
		if (kfs || under || on_dev)
			return corral_set_error(
			    err, CORRAL_EINVAL, 0, label,
			    "%s: %s is %s %s, not a directory of files: bound read-write into the "
			    "sandbox it would let the command change %s; leave it out (or give it "
			    "read-only)",
			    label, tree,
			    on_dev ? "on"
			    : kfs  ? "on"
			           : "under",
			    on_dev ? "the host's /dev"
			    : kfs  ? kfs
			           : under,
			    on_dev ? "the host's device nodes" : "the host kernel's settings");
	}
	if (!mountinfo)
		return 0;
	dev_t dd = host_dev_device();
	for (const char *line = mountinfo; *line;) {
		const char *nl = strchr(line, '\n');
		size_t len = nl ? (size_t)(nl - line) : strlen(line);
		char buf[PATH_MAX * 2 + 256];
		const char *next = nl ? nl + 1 : line + len;
		if (len >= sizeof(buf)) {
			line = next;
			continue;
		}
		memcpy(buf, line, len);
		buf[len] = 0;
		line = next;
		/* "ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - TYPE SOURCE SUPER" */
		char *f[5], *save = NULL, *tok = strtok_r(buf, " ", &save);
		int nf = 0;
		while (tok && nf < 5) {
			f[nf++] = tok;
			if (nf < 5)
				tok = strtok_r(NULL, " ", &save);
		}
		if (nf < 5)
			continue;
		char *type = NULL;
		while ((tok = strtok_r(NULL, " ", &save)))
			if (!strcmp(tok, "-")) {
				type = strtok_r(NULL, " ", &save);
				break;
			}
		if (!type)
			continue;
		mountinfo_unescape(f[4]);
		const char *mp = f[4];
		/* strictly below the tree (the tree's own file system is checked above) */
		if (!path_within(mp, tree) || !strcmp(mp, tree))
			continue;
		unsigned maj = 0, mnr = 0;
		bool devices =
		    !strcmp(type, "devtmpfs") ||
		    (dd && sscanf(f[2], "%u:%u", &maj, &mnr) == 2 && makedev(maj, mnr) == dd);
		if (!devices && !kernel_fs_type(type))
			continue;
		return corral_set_error(
		    err, CORRAL_EINVAL, 0, label,
		    "%s: %s has %s mounted at %s: the sandbox gets what is mounted below it, so "
		    "it would let the command change %s; unmount it (umount %s) or pass a "
		    "directory without it",
		    label, tree, devices ? "the host's /dev" : type, mp,
		    devices ? "the host's device nodes" : "the host kernel's settings", mp);
	}
	return 0;
}

/* Both checks are advisory (the child resolves again without symlinks); they exist to give a
 * clear error before anything is built. */
int corral_config_set_workspace(corral_config *cfg, const char *dir, struct corral_error *err)
{
	if (!dir || !*dir)
		return corral_set_error(err, CORRAL_EINVAL, 0, "workspace",
		                        "workspace: empty path; give an existing directory");
	char *real = realpath(dir, NULL);
	if (!real) {
		int e = errno;
		return corral_set_error(
		    err, CORRAL_EINVAL, e, "workspace", "workspace: %s: %s; %s", dir, strerror(e),
		    e == ENOENT    ? "create it or pass an existing directory with --workspace"
		    : e == EACCES  ? "a directory on its way cannot be searched by this user; fix "
		                     "the permissions or pass another directory"
		    : e == ELOOP   ? "a symbolic link on its way loops; pass the real directory"
		    : e == ENOTDIR ? "a part of the path is not a directory; pass a directory"
		                   : "pass an existing directory with --workspace");
	}
	struct stat st;
	if (stat(real, &st) < 0 || !S_ISDIR(st.st_mode)) {
		free(real);
		return corral_set_error(err, CORRAL_EINVAL, ENOTDIR, "workspace",
		                        "workspace: %s is not a directory; pass a directory", dir);
	}
	/* The sandbox shows the workspace as the caller could use it: one the caller cannot
	 * list and enter would fail later, on a path inside it, with a misleading reason. */
	/* (access, not faccessat2 with AT_EACCESS: older container seccomp profiles answer
	 * faccessat2 with EPERM, which glibc does not fall back from; corral is not setuid) */
	if (access(real, R_OK | X_OK) < 0) {
		int e = errno;
		corral_set_error(
		    err, CORRAL_EINVAL, e, "workspace",
		    "workspace: %s: %s for uid %u (it needs to read and enter it); fix "
		    "its permissions or pass a directory this user can use",
		    dir, strerror(e), (unsigned)geteuid());
		free(real);
		return CORRAL_EINVAL;
	}
	if (!strcmp(real, "/")) {
		free(real);
		return corral_set_error(err, CORRAL_EINVAL, 0, "workspace",
		                        "workspace: / cannot be the workspace (it would expose the "
		                        "whole host read-write); pass a project directory");
	}
	/* by its file system, wherever it is mounted, and by its place (/sys/fs/cgroup is
	 * a tmpfs with the cgroup trees beneath) */
	struct statfs sf;
	const char *kfs = statfs(real, &sf) == 0 ? kernel_fs_name((unsigned long)sf.f_type) : NULL;
	const char *under = path_within(real, "/proc")  ? "/proc"
	                    : path_within(real, "/sys") ? "/sys"
	                                                : NULL;
	/* The host's /dev (its device nodes, on the file system /dev itself is on): bound
	 * read-write it would cover the sandbox's own /dev, and its nodes could be removed or
	 * replaced. A file system mounted below it (/dev/shm, a tmpfs) is an ordinary one. */
	struct stat dev_st;
	dev_t dd = host_dev_device(); /* (also a bind of /dev elsewhere) */
	bool host_dev = dd ? st.st_dev == dd
	                   : path_within(real, "/dev") && stat("/dev", &dev_st) == 0 &&
	                         dev_st.st_dev == st.st_dev;
	if (host_dev || kfs || under) {
		bool moved = strcmp(dir, real) != 0;
		corral_set_error(
		    err, CORRAL_EINVAL, 0, "workspace",
		    "workspace: %s%s%s%s is %s %s, %s, not a directory of files: the workspace is "
		    "mounted read-write into the sandbox, %s; pass a project directory%s",
		    dir, moved ? " (" : "", moved ? real : "", moved ? ")" : "",
		    host_dev || kfs ? "on" : "under",
		    host_dev ? "the host's /dev"
		    : kfs    ? kfs
		             : under,
		    host_dev ? "its device nodes" : "the host kernel's interface",
		    host_dev
		        ? "over the sandbox's own /dev, and the host's nodes could be removed or "
		          "replaced"
		        : "which could then change the kernel's settings (a sandbox gets a /proc "
		          "of its own and no /sys)",
		    host_dev ? " (a file system mounted below /dev, such as /dev/shm, is fine)"
		             : "");
		free(real);
		return CORRAL_EINVAL;
	}
	free(cfg->workspace);
	cfg->workspace = real;
	return 0;
}

int corral_config_set_cwd(corral_config *cfg, const char *dir, struct corral_error *err)
{
	if (!cfg->workspace)
		return corral_set_error(err, CORRAL_ESTATE, 0, "cwd",
		                        "cwd: set the workspace before the working directory");
	if (!dir || !*dir)
		return corral_set_error(err, CORRAL_EINVAL, 0, "cwd", "cwd: empty path");
	char *joined;
	if (dir[0] == '/')
		joined = strdup(dir);
	else if (asprintf(&joined, "%s/%s", cfg->workspace, dir) < 0)
		joined = NULL;
	if (!joined)
		return corral_set_error(err, CORRAL_ENOMEM, ENOMEM, "cwd", "cwd: out of memory");
	char *real = realpath(joined, NULL);
	int saved = errno;
	free(joined);
	if (!real)
		return corral_set_error(err, CORRAL_EINVAL, saved, "cwd",
		                        "cwd: %s: %s; give a directory inside the workspace %s",
		                        dir, strerror(saved), cfg->workspace);
	if (!path_within(real, cfg->workspace)) {
		corral_set_error(
		    err, CORRAL_EINVAL, 0, "cwd",
		    "cwd: %s resolves to %s, outside the workspace %s; give a directory "
		    "inside it",
		    dir, real, cfg->workspace);
		free(real);
		return CORRAL_EINVAL;
	}
	struct stat st;
	if (stat(real, &st) == 0 && !S_ISDIR(st.st_mode)) {
		corral_set_error(err, CORRAL_EINVAL, ENOTDIR, "cwd",
		                 "cwd: %s is not a directory; give a directory inside the "
		                 "workspace %s",
		                 dir, cfg->workspace);
		free(real);
		return CORRAL_EINVAL;
	}
	free(cfg->cwd);
	cfg->cwd = real;
	return 0;
}

int corral_config_setenv(corral_config *cfg, const char *name, const char *value,
                         struct corral_error *err)
{
	if (!env_name_valid(name))
		return corral_set_error(
		    err, CORRAL_EINVAL, 0, "env",
		    "env: '%s' is not a valid variable name (letters, digits and "
		    "_; not starting with a digit)",
		    name ? name : "");
	if (value && strlen(value) > MAX_ARG_BYTES)
		return corral_set_error(err, CORRAL_EINVAL, 0, "env",
		                        "env: value of %s is too long", name);
	struct env_entry *grown = realloc(cfg->env, (cfg->n_env + 1) * sizeof(*grown));
	if (!grown)
		return corral_set_error(err, CORRAL_ENOMEM, ENOMEM, "env", "env: out of memory");
	cfg->env = grown;
	struct env_entry *e = &cfg->env[cfg->n_env];
	e->name = strdup(name);
	e->value = value ? strdup(value) : NULL;
	if (!e->name || (value && !e->value)) {
		free(e->name);
		free(e->value);
		return corral_set_error(err, CORRAL_ENOMEM, ENOMEM, "env", "env: out of memory");
	}
	cfg->n_env++;
	return 0;
}

int corral_config_set_limit(corral_config *cfg, enum corral_limit which, uint64_t value,
                            struct corral_error *err)
{
	static const struct {
		const char *name;
		uint64_t min, max;
	} bounds[CORRAL_LIMIT__COUNT] = {
	    [CORRAL_LIMIT_CPU_S] = {"cpu", 1, 366ULL * 86400},
	    [CORRAL_LIMIT_MEMORY] = {"memory", 1u << 20, 1ULL << 50},
	    [CORRAL_LIMIT_PIDS] = {"pids", 1, 4194304},
	    [CORRAL_LIMIT_NOFILE] = {"nofile", 16, 1u << 20},
	    [CORRAL_LIMIT_FSIZE] = {"fsize", 1, 1ULL << 60},
	    [CORRAL_LIMIT_TMPFS] = {"tmpfs", 1u << 20, 1ULL << 50},
	    [CORRAL_LIMIT_CPUS] = {"cpus (hundredths of a CPU)", 1, 100 * 4096},
	};
	if ((unsigned)which >= CORRAL_LIMIT__COUNT)
		return corral_set_error(err, CORRAL_EINVAL, 0, "limits", "limits: unknown limit %d",
		                        (int)which);
	if (value && (value < bounds[which].min || value > bounds[which].max))
		return corral_set_error(
		    err, CORRAL_EINVAL, 0, "limits",
		    "limits: %s=%llu is out of range (%llu..%llu, or 0 for none)",
		    bounds[which].name, (unsigned long long)value,
		    (unsigned long long)bounds[which].min, (unsigned long long)bounds[which].max);
	cfg->limits[which] = value;
	if (which == CORRAL_LIMIT_PIDS)
		cfg->pids_default = false;
	return 0;
}

int corral_config_set_timeout_ms(corral_config *cfg, uint64_t timeout_ms, uint64_t kill_after_ms,
                                 struct corral_error *err)
{
	const uint64_t year = 366ULL * 86400 * 1000;
	if (timeout_ms > year || kill_after_ms > 3600000)
		return corral_set_error(
		    err, CORRAL_EINVAL, 0, "timeout",
		    "timeout: %llu ms (grace %llu ms) is out of range (timeout up "
		    "to a year, grace up to an hour)",
		    (unsigned long long)timeout_ms, (unsigned long long)kill_after_ms);
	cfg->timeout_ms = timeout_ms;
	cfg->kill_after_ms = kill_after_ms;
	return 0;
}

int corral_config_set_output_cap(corral_config *cfg, size_t bytes, struct corral_error *err)
{
	if (bytes < 64 || bytes > (1u << 30))
		return corral_set_error(
		    err, CORRAL_EINVAL, 0, "output",
		    "output: cap of %zu bytes is out of range (64 bytes..1 GiB)", bytes);
	cfg->output_cap = bytes;
	return 0;
}

int corral_config_set_stdin_data(corral_config *cfg, const void *data, size_t len,
                                 struct corral_error *err)
{
	char *copy = malloc(len ? len : 1);
	if (!copy)
		return corral_set_error(err, CORRAL_ENOMEM, ENOMEM, "stdin",
		                        "stdin: out of memory");
	if (len)
		memcpy(copy, data, len);
	free(cfg->stdin_data);
	cfg->stdin_data = copy;
	cfg->stdin_len = len;
	cfg->stdin_is_data = true;
	cfg->stdin_fd = -1;
	return 0;
}

int corral_config_set_stdin_fd(corral_config *cfg, int fd, struct corral_error *err)
{
	if (fd < 0 || fcntl(fd, F_GETFD) < 0)
		return corral_set_error(err, CORRAL_EINVAL, EBADF, "stdin",
		                        "stdin: descriptor %d is not open", fd);
	free(cfg->stdin_data);
	cfg->stdin_data = NULL;
	cfg->stdin_is_data = false;
	cfg->stdin_fd = fd;
	return 0;
}

static int set_out_fd(int *slot, const char *name, int fd, struct corral_error *err)
{
	if (fd < -1 || (fd >= 0 && fcntl(fd, F_GETFD) < 0))
		return corral_set_error(err, CORRAL_EINVAL, EBADF, name,
		                        "%s: descriptor %d is not open", name, fd);
	*slot = fd;
	return 0;
}

int corral_config_set_stdout_fd(corral_config *cfg, int fd, struct corral_error *err)
{
	return set_out_fd(&cfg->stdout_fd, "stdout", fd, err);
}

int corral_config_set_stderr_fd(corral_config *cfg, int fd, struct corral_error *err)
{
	return set_out_fd(&cfg->stderr_fd, "stderr", fd, err);
}

int corral_config_set_tty(corral_config *cfg, int tty, struct corral_error *err)
{
	(void)err;
	cfg->tty = tty != 0;
	return 0;
}

int corral_config_set_mode(corral_config *cfg, enum corral_mode mode, struct corral_error *err)
{
	if (mode != CORRAL_MODE_REQUIRED && mode != CORRAL_MODE_AUTO && mode != CORRAL_MODE_NONE)
		return corral_set_error(err, CORRAL_EINVAL, 0, "mode",
		                        "mode: %d is not one of required, auto, none", (int)mode);
	cfg->mode = mode;
	return 0;
}

int corral_config_set_net(corral_config *cfg, enum corral_net net, struct corral_error *err)
{
	if (net != CORRAL_NET_NONE && net != CORRAL_NET_HOST)
		return corral_set_error(err, CORRAL_EINVAL, 0, "net",
		                        "net: %d is not one of none, host", (int)net);
	cfg->net = net;
	return 0;
}

void corral_config_set_output_cb(corral_config *cfg, corral_output_cb cb, void *userdata)
{
	cfg->out_cb = cb;
	cfg->out_ud = userdata;
}

struct corral_config *config_dup(const struct corral_config *src)
{
	struct corral_config *d = calloc(1, sizeof(*d));
	if (!d)
		return NULL;
	*d = *src;
	d->argv = NULL;
	d->shell = d->workspace = d->cwd = d->stdin_data = NULL;
	d->env = NULL;
	d->n_env = 0;
	if (policy_fields_dup(d, src) < 0)
		goto fail;
	if (src->argv && !(d->argv = strv_dup((const char *const *)src->argv)))
		goto fail;
	if (src->shell && !(d->shell = strdup(src->shell)))
		goto fail;
	if (src->workspace && !(d->workspace = strdup(src->workspace)))
		goto fail;
	if (src->cwd && !(d->cwd = strdup(src->cwd)))
		goto fail;
	if (src->stdin_is_data) {
		d->stdin_data = malloc(src->stdin_len ? src->stdin_len : 1);
		if (!d->stdin_data)
			goto fail;
		memcpy(d->stdin_data, src->stdin_data, src->stdin_len);
	}
	if (src->n_env) {
		d->env = calloc(src->n_env, sizeof(*d->env));
		if (!d->env)
			goto fail;
		for (size_t i = 0; i < src->n_env; i++) {
			d->env[i].name = strdup(src->env[i].name);
			d->env[i].value = src->env[i].value ? strdup(src->env[i].value) : NULL;
			d->n_env = i + 1;
			if (!d->env[i].name || (src->env[i].value && !d->env[i].value))
				goto fail;
		}
	}
	return d;
fail:
	corral_config_free(d);
	return NULL;
}

int corral_config_set_redaction(corral_config *cfg, enum corral_redaction mode,
                                struct corral_error *err)
{
	if (mode != CORRAL_REDACT_ON && mode != CORRAL_REDACT_FLAG && mode != CORRAL_REDACT_OFF)
		return corral_set_error(err, CORRAL_EINVAL, 0, "redact",
		                        "redact: %d is not one of redact, flag, off", (int)mode);
	cfg->redact_mode = (int)mode;
	return 0;
}

int corral_config_add_redaction(corral_config *cfg, const char *secret, struct corral_error *err)
{
	if (!secret || strlen(secret) < 4 || strlen(secret) > 4096)
		return corral_set_error(err, CORRAL_EINVAL, 0, "redact",
		                        "redact: a string to redact must have 4 to 4096 bytes");
	char **g = realloc(cfg->redact_strings, (cfg->n_redact_strings + 2) * sizeof(char *));
	if (!g)
		return corral_set_error(err, CORRAL_ENOMEM, ENOMEM, "redact", "out of memory");
	cfg->redact_strings = g;
	if (!(g[cfg->n_redact_strings] = strdup(secret)))
		return corral_set_error(err, CORRAL_ENOMEM, ENOMEM, "redact", "out of memory");
	g[++cfg->n_redact_strings] = NULL;
	return 0;
}

corral_config *corral_config_dup(const corral_config *cfg)
{
	return cfg ? config_dup(cfg) : NULL;
}
