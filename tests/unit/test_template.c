/* The mount template's part of a plan (mount_template_prepare, DESIGN §4 and §18): which ops
 * a template holds, and which mount points it must make for the sandbox's own ops, the ones
 * that land on its read-only tmpfs (its root, its /dev). No namespace: the plan is only
 * built and looked at. */
#include "internal.h"
#include "test.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static const struct mount_op *op_at(const struct mount_plan *p, enum mount_op_kind kind,
                                    const char *dst)
{
	for (size_t i = 0; i < p->n_ops; i++)
		if (p->ops[i].kind == kind && p->ops[i].dst && !strcmp(p->ops[i].dst, dst))
			return &p->ops[i];
	return NULL;
}

static int build(struct mount_plan *p, const char *ws, char *const *read, size_t n_read)
{
	struct mount_request q;
	memset(&q, 0, sizeof(q));
	q.workspace = ws;
	q.cwd = ws;
	q.read = read;
	q.n_read = n_read;
	struct corral_error err = {0};
	if (mount_plan_build(p, &q, &err) < 0)
		return -1;
	return mount_template_prepare(p, NULL);
}

void test_template(void)
{
	char wv[] = "/var/tmp/corral-unit-tpl-XXXXXX", wt[] = "/tmp/corral-unit-tpl-XXXXXX";
	char file[] = "/var/tmp/corral-unit-tplf-XXXXXX";
	int ffd = mkstemp(file);
	if (!mkdtemp(wv) || !mkdtemp(wt) || ffd < 0) {
		CHECK("template: scratch paths", false);
		return;
	}
	close(ffd);
	char *read[] = {file};
	struct mount_plan p;
	CHECK("template: a plan with a workspace outside /tmp is prepared",
	      build(&p, wv, read, 1) == 0);
	const struct mount_op *o = op_at(&p, MOP_BIND_RO, "/usr");
	CHECK("template: /usr is the template's", o && o->tpl && o->has_id);
	o = op_at(&p, MOP_TMPFS, "/dev");
	CHECK("template: /dev's tmpfs is the template's", o && o->tpl);
	o = op_at(&p, MOP_BIND_DEV, "/dev/null");
	CHECK("template: /dev/null is the template's, with an identity to check",
	      o && o->tpl && o->has_id && S_ISCHR(o->id_mode));
	o = op_at(&p, MOP_DEVPTS, "/dev/pts");
	CHECK("template: devpts is the sandbox's; the template makes its dir and /dev/ptmx",
	      o && !o->tpl && o->tpl_make == (TPL_MAKE_DIR | TPL_MAKE_PTMX));
	o = op_at(&p, MOP_TMPFS, "/dev/shm");
	CHECK("template: /dev/shm is the sandbox's; the template makes its dir",
	      o && !o->tpl && o->tpl_make == TPL_MAKE_DIR);
	o = op_at(&p, MOP_PROC, "/proc");
	CHECK("template: /proc is the sandbox's; the template makes its dir",
	      o && !o->tpl && o->tpl_make == TPL_MAKE_DIR);
	o = op_at(&p, MOP_RO_REMOUNT, "/proc/sys");
	CHECK("template: nothing is made inside the sandbox's /proc", o && !o->tpl && !o->tpl_make);
	o = op_at(&p, MOP_TMPFS, "/tmp");
	CHECK("template: /tmp is the sandbox's; the template makes its dir",
	      o && !o->tpl && o->tpl_make == TPL_MAKE_DIR);
	o = op_at(&p, MOP_BIND_RW, wv);
	CHECK("template: a workspace on the root: the template makes its directory",
	      o && !o->tpl && o->tpl_make == TPL_MAKE_DIR);
	o = op_at(&p, MOP_BIND_RO, file);
	CHECK("template: an extra file on the root: the template makes a file",
	      o && !o->tpl && o->tpl_make == TPL_MAKE_FILE);
	size_t without = 0, bound = 0;
	for (size_t i = 0; i < p.n_ops; i++)
		if (p.ops[i].tpl && p.ops[i].kind != MOP_SYMLINK && p.ops[i].src) {
			bound++;
			without += !p.ops[i].has_id && !p.ops[i].optional;
		}
	CHECK("template: every bound source of the template has an identity to check",
	      bound > 10 && without == 0);
	mount_plan_free(&p);

	CHECK("template: a plan with a workspace under /tmp is prepared",
	      build(&p, wt, NULL, 0) == 0);
	o = op_at(&p, MOP_BIND_RW, wt);
	CHECK("template: a workspace inside the sandbox's /tmp: nothing made for it",
	      o && !o->tpl && !o->tpl_make);
	mount_plan_free(&p);
	unlink(file);
	rmdir(wv);
	rmdir(wt);
}
