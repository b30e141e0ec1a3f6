/* fake_cli_common.h — what the fake command-line tools share (tests/fakes/fake_tool.c,
 * nvidia_smi/fake_nvidia_smi.c, macmon/fake_macmon.c): unbuffered output with write(2), sleeps,
 * the common misbehaviours (hang, crash, garbage), reading a small file and writing a pid file.
 *
 * Header-only (static inline): each fake stays one plain C program with nothing to link, built
 * without the sanitizer runtime so that it starts fast and dies of its own signals. Any failure
 * to write its output exits with code 3.
 */
#ifndef GPUSTREAM_FAKE_CLI_COMMON_H
#define GPUSTREAM_FAKE_CLI_COMMON_H

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Writes all of data[0..n) to fd. */
static inline void fake_put(int fd, const char* data, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, data, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      exit(3);
    }
    data += w;
    n -= (size_t)w;
  }
}

static inline void fake_put_str(int fd, const char* s) { fake_put(fd, s, strlen(s)); }

/* s, then a newline. */
static inline void fake_put_line(int fd, const char* s) {
  fake_put_str(fd, s);
  fake_put(fd, "\n", 1);
}

/* Sleeps ms milliseconds (nothing for ms <= 0), resuming after signals. */
static inline void fake_sleep_ms(long ms) {
  if (ms <= 0) return;
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

/* Never returns: waits for a signal to end the process. */
static inline void fake_hang(void) {
  for (;;) pause();
}

/* Dies of SIGSEGV, as a crashing tool would. */
static inline void fake_crash(void) {
  signal(SIGSEGV, SIG_DFL);
  raise(SIGSEGV);
  _exit(139); /* only when SIGSEGV is blocked */
}

/* n pseudo-random bytes (NULs, high bytes and newlines included), the same in every run. */
static inline void fake_put_garbage(int fd, long n) {
  unsigned state = 12345u;
  for (long k = 0; k < n; ++k) {
    state = state * 1103515245u + 12345u;
    char b = (char)(state >> 16);
    fake_put(fd, &b, 1);
  }
}

/* The whole file, NUL-terminated, in a malloc'd buffer (free it); its length in *len when len
 * is not NULL. NULL when the file cannot be read. */
static inline char* fake_read_file(const char* path, size_t* len) {
  FILE* f = fopen(path, "rb");
  if (!f) return NULL;
  size_t cap = 4096, n = 0, got;
  char* buf = malloc(cap);
  while (buf && (got = fread(buf + n, 1, cap - n - 1, f)) > 0) {
    n += got;
    if (cap - n - 1 == 0) {
      char* bigger = realloc(buf, cap *= 2);
      if (!bigger) free(buf);
      buf = bigger;
    }
  }
  fclose(f);
  if (!buf) return NULL;
  buf[n] = '\0';
  if (len) *len = n;
  return buf;
}

/* Writes the process's pid and a newline to path atomically (path.tmp, then rename): a reader
 * never sees a half-written file. Returns 0, or -1 on failure. */
static inline int fake_write_pid_file(const char* path) {
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  FILE* f = fopen(tmp, "w");
  if (!f) return -1;
  fprintf(f, "%ld\n", (long)getpid());
  if (fclose(f) != 0) return -1;
  return rename(tmp, path) == 0 ? 0 : -1;
}

#endif /* GPUSTREAM_FAKE_CLI_COMMON_H */
