#include "test.h"

int t_failed;

int main(void)
{
	test_parse();
	test_env();
	test_capture();
	test_result();
	test_jsonrpc();
	test_profile();
	test_redact();
	return t_failed ? 1 : 0;
}
