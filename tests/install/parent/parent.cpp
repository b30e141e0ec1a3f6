// The parent's own program (never built by the test: configuring and installing is the point).
int main() { return 0; }
