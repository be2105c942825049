/* A tiny test harness: each check prints PASS/FAIL lines that tests/run.sh counts. */
#ifndef CORRAL_TEST_H
#define CORRAL_TEST_H
#include <stdio.h>
#include <string.h>

extern int t_failed;
#define CHECK(name, cond)                                                                    \
	do {                                                                                 \
		if (cond) {                                                                  \
			printf("PASS %s\n", name);                                           \
		} else {                                                                     \
			printf("FAIL %s (%s:%d: %s)\n", name, __FILE__, __LINE__, #cond);    \
			t_failed++;                                                          \
		}                                                                            \
	} while (0)

void test_parse(void);
void test_env(void);
void test_env_policy_kept(void);
void test_capture(void);
void test_result(void);
void test_jsonrpc(void);
void test_profile(void);
void test_redact(void);
void test_seccomp(void);
void test_memory(void);
void test_plankey(void);
void test_template(void);
void test_hcache(void);
#endif
