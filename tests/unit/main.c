#include "test.h"

int t_failed;

int main(void)
{
	test_parse();
	test_env();
	test_capture();
	test_result();
	return t_failed ? 1 : 0;
}
