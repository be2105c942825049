/* What a plan key looked at on the host, kept while inotify shows it unchanged (DESIGN §18).
 * Internal. */
#ifndef CORRAL_HCACHE_H
#define CORRAL_HCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>

/* A cache of lstat, readlink and faccessat results by absolute path, each kept only while
 * inotify watches on the path's inode and on every directory on its way (with the name
 * looked up there) have reported nothing about it, and while the mount table of this
 * process's mount namespace is unchanged (/proc/self/mountinfo, polled). Only paths on
 * local file systems, where inotify sees every change, are kept: ext2/3/4, XFS, Btrfs,
 * tmpfs, F2FS, overlayfs, bcachefs, ZFS and ramfs; a path elsewhere (NFS, FUSE, procfs,
 * devpts) is looked up every time. A stat result keeps only its type and permission bits,
 * device, inode, owner, group, rdev, and a regular file's size; the rest is zero.
 *
 * NULL stands for no cache: every function is then the system call itself (with the same
 * reduced stat). Not thread-safe: one user at a time. */
struct hcache;

/* NULL when inotify is not available (out of instances): no cache. */
struct hcache *hcache_new(void);
void hcache_free(struct hcache *c);
/* Take in what inotify and the mount table reported since the last call: anything about a
 * path the cache holds (or an event queue that overflowed) drops the whole cache. Call
 * before each use, so that nothing changed before it is answered from the cache. */
void hcache_sync(struct hcache *c);

/* This process's /proc/self/mountinfo as it was at the first call after the last change
 * hcache_sync() took in (the kernel formats the whole table for every read: hundreds of
 * mounts on a host with containers or snaps); NULL (no cache): the calling thread's
 * /proc/thread-self/mountinfo, read now. A malloc'ed copy, or NULL with errno. */
char *hc_mountinfo(struct hcache *c);

int hc_lstat(struct hcache *c, const char *path, struct stat *st);
int hc_stat(struct hcache *c, const char *path, struct stat *st);
ssize_t hc_readlink(struct hcache *c, const char *path, char *buf, size_t size);
/* realpath(path, NULL) */
char *hc_realpath(struct hcache *c, const char *path);
/* faccessat(AT_FDCWD, path, mode, AT_EACCESS) */
int hc_access(struct hcache *c, const char *path, int mode);

struct hcache_stats {
	unsigned long hits, misses, flushes;
	size_t entries, watches;
};
void hcache_stats(const struct hcache *c, struct hcache_stats *out);

#endif
