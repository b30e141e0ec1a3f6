// The program that owns the test suites' shared precompiled header (tests/CMakeLists.txt,
// gpustream_test_pch): the header is compiled for this target, with the suites' flags (an
// executable, like them), and reused by every suite. It is built, never run.
int main() { return 0; }
