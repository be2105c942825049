/* Policy: profiles (builtin and JSON files), and the rules they carry. Pure code: parsing and
 * merging do no I/O beyond reading the profile file. Internal. */
#ifndef CORRAL_POLICY_H
#define CORRAL_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "corral.h"

struct cmd_rule {
	char *match;  /* a command name ("curl") or an absolute path ("/usr/bin/curl") */
	char *reason; /* may be NULL */
};

struct env_set_entry {
	char *name;
	char *value;
};

/* Where a list entry stands in the profile file, kept through parsing so that checks made
 * later (corral policy validate against a workspace) can point at it. index is the entry's
 * position in the JSON array (duplicates are dropped, so it may differ from the list's). */
struct profile_pos {
	unsigned line, col;
	size_t index;
};

/* A parsed profile. Every field is optional; *_set says whether the profile gave it.
 * Paths are kept as written ("~/x", "rel/to/workspace", "/abs"); they are resolved when the
 * profile is applied to a configuration, against its workspace and the caller's $HOME. */
struct profile {
	char *name;      /* builtin name, or the file path it came from */
	char *description;

	/* filesystem */
	char **fs_read;  /* extra read-only trees */
	size_t n_read;
	char **fs_write; /* extra read-write trees */
	size_t n_write;
	char **fs_deny;  /* hidden even inside allowed trees (deny wins) */
	size_t n_deny;
	char **protected_paths; /* workspace-relative; read-only even in a writable workspace */
	size_t n_protected;
	bool protected_set;     /* the profile replaced the default protected list */
	/* file positions of the entries above, parallel to each list; NULL for builtins */
	struct profile_pos *read_pos, *write_pos, *deny_pos, *protected_pos;
	int workspace_access;   /* 0 unset, 1 read-only, 2 read-write */
	bool etc_minimal;       /* strict: only what the dynamic loader needs from /etc */

	/* network */
	bool net_set;
	enum corral_net net;

	/* limits */
	bool limit_set[CORRAL_LIMIT__COUNT];
	uint64_t limits[CORRAL_LIMIT__COUNT];
	bool timeout_set, kill_after_set, output_cap_set;
	uint64_t timeout_ms, kill_after_ms;
	uint64_t output_cap;

	/* environment */
	char **env_allow; /* globs of host variables passed through */
	size_t n_env_allow;
	char **env_deny;  /* globs never passed (deny wins over allow) */
	size_t n_env_deny;
	bool env_deny_set; /* replaced the default deny list (otherwise added to it) */
	struct env_set_entry *env_set; /* always applied */
	size_t n_env_set;

	/* commands */
	struct cmd_rule *cmd_allow; /* when non-empty: only these may be executed */
	size_t n_cmd_allow;
	bool cmd_allow_set;
	struct cmd_rule *cmd_deny;
	size_t n_cmd_deny;

	bool mode_set;
	enum corral_mode mode;

	/* redaction: extra exact strings (4 to 4096 bytes), and the mode */
	char **redact_strings;
	size_t n_redact;
	bool redact_mode_set;
	enum corral_redaction redact_mode;
};

/* Parse a profile document. origin names it in errors ("profile.json"); errors say
 * "<origin>:<line>:<col>: <what was expected>". Unknown keys are errors. */
int profile_parse(const char *text, size_t len, const char *origin, struct profile *out,
                  struct corral_error *err);
/* Read and parse a file. */
int profile_load_file(const char *path, struct profile *out, struct corral_error *err);
/* A builtin profile by name: default, readonly, strict, network. */
int profile_builtin(const char *name, struct profile *out, struct corral_error *err);
/* Merge a profile into a configuration (policy.c): lists add to the configuration's (a
 * profile's protected list and env.deny_replace replace), scalars the profile gives replace
 * the configuration's. Options applied afterwards override the profile in turn. */
int policy_apply_profile(corral_config *cfg, const struct profile *p, struct corral_error *err);
/* Names of the builtins, NULL-terminated. */
extern const char *const profile_builtin_names[];
void profile_free(struct profile *p);

/* The default protected paths and env deny globs (documented in docs/policy.md). */
extern const char *const policy_default_protected[];
extern const char *const policy_default_env_deny[];

/* fnmatch-style glob match for environment variable names ('*' and '?'). */
bool policy_glob_match(const char *glob, const char *name);
/* The same, ASCII letters matched regardless of case (deny globs: `github_token` is as much
 * a token as `GITHUB_TOKEN`). */
bool policy_glob_match_nocase(const char *glob, const char *name);

#endif
