#include "test.h"

int t_failed;

int main(void)
{
	/* line-buffered even into a pipe: the PASS lines before a crash reach tests/run.sh */
	setvbuf(stdout, NULL, _IOLBF, 0);
	test_parse();
	test_env();
	test_env_policy_kept();
	test_capture();
	test_result();
	test_jsonrpc();
	test_profile();
	test_redact();
	test_seccomp();
	test_memory();
	test_plankey();
	test_hcache();
	test_template();
	return t_failed ? 1 : 0;
}
