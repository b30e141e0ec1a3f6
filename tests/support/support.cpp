// Shared test helpers live in tests/support/*.hpp; this file keeps the library non-empty.
namespace gpustream::test {
int support_anchor = 0;
}
