/* fake_tool: a command-line tool that behaves (and misbehaves) on request, for the subprocess
 * tests and as a stand-in for amd-smi, nvidia-smi or macmon. It runs its arguments as a small
 * script, left to right, then exits 0:
 *
 *   print TEXT        TEXT and a newline on stdout
 *   partial TEXT      TEXT on stdout, no newline
 *   stderr TEXT       TEXT and a newline on stderr
 *   lines N MS        "line 1" .. "line N" on stdout, MS milliseconds apart
 *   bytes N           N bytes on stdout, as lines of 63 'x' and a newline
 *   stderr-bytes N    N bytes on stderr, as lines of 63 'e' and a newline
 *   long N            one line of N 'y' and a newline
 *   garbage N         N pseudo-random bytes (NUL and high bytes included, newlines too)
 *   env NAME          the value of NAME (or "(unset)") and a newline
 *   pid               its own pid and a newline
 *   pid-file PATH     write its own pid to PATH (atomically: PATH.tmp, then rename)
 *   sleep MS          sleep
 *   hang              sleep forever
 *   ignore-term       ignore SIGTERM from here on
 *   crash             die of SIGSEGV
 *   spawn-hang        start a grandchild that keeps stdout/stderr open and sleeps forever
 *   exit K            exit with code K
 *
 * Output is written with write(2), unbuffered, so the reader sees it as soon as it is printed.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <errno.h>

static void put(int fd, const char* data, size_t n) {
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

static void put_str(int fd, const char* s) { put(fd, s, strlen(s)); }

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

static void fill_lines(int fd, long n, char c) {
  char line[64];
  memset(line, c, sizeof line);
  line[63] = '\n';
  while (n > 0) {
    size_t chunk = n < 64 ? (size_t)n : 64;
    put(fd, line, chunk);
    n -= (long)chunk;
  }
}

static const char* need(int argc, char** argv, int i) {
  if (i >= argc) {
    put_str(2, "fake_tool: missing argument\n");
    exit(2);
  }
  return argv[i];
}

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const char* cmd = argv[i];
    if (strcmp(cmd, "print") == 0) {
      put_str(1, need(argc, argv, ++i));
      put_str(1, "\n");
    } else if (strcmp(cmd, "partial") == 0) {
      put_str(1, need(argc, argv, ++i));
    } else if (strcmp(cmd, "stderr") == 0) {
      put_str(2, need(argc, argv, ++i));
      put_str(2, "\n");
    } else if (strcmp(cmd, "lines") == 0) {
      long n = atol(need(argc, argv, ++i));
      long ms = atol(need(argc, argv, ++i));
      for (long k = 1; k <= n; ++k) {
        char buf[64];
        snprintf(buf, sizeof buf, "line %ld\n", k);
        put_str(1, buf);
        if (k < n && ms > 0) sleep_ms(ms);
      }
    } else if (strcmp(cmd, "bytes") == 0) {
      fill_lines(1, atol(need(argc, argv, ++i)), 'x');
    } else if (strcmp(cmd, "stderr-bytes") == 0) {
      fill_lines(2, atol(need(argc, argv, ++i)), 'e');
    } else if (strcmp(cmd, "long") == 0) {
      long n = atol(need(argc, argv, ++i));
      char buf[4096];
      memset(buf, 'y', sizeof buf);
      while (n > 0) {
        size_t chunk = n < (long)sizeof buf ? (size_t)n : sizeof buf;
        put(1, buf, chunk);
        n -= (long)chunk;
      }
      put_str(1, "\n");
    } else if (strcmp(cmd, "garbage") == 0) {
      long n = atol(need(argc, argv, ++i));
      unsigned state = 12345u;
      for (long k = 0; k < n; ++k) {
        state = state * 1103515245u + 12345u;
        char b = (char)(state >> 16);
        put(1, &b, 1);
      }
    } else if (strcmp(cmd, "env") == 0) {
      const char* v = getenv(need(argc, argv, ++i));
      put_str(1, v ? v : "(unset)");
      put_str(1, "\n");
    } else if (strcmp(cmd, "pid") == 0) {
      char buf[32];
      snprintf(buf, sizeof buf, "%ld\n", (long)getpid());
      put_str(1, buf);
    } else if (strcmp(cmd, "pid-file") == 0) {
      const char* path = need(argc, argv, ++i);
      char tmp[4096];
      snprintf(tmp, sizeof tmp, "%s.tmp", path);
      FILE* f = fopen(tmp, "w");
      if (!f) return 4;
      fprintf(f, "%ld\n", (long)getpid());
      fclose(f);
      if (rename(tmp, path) != 0) return 4;
    } else if (strcmp(cmd, "sleep") == 0) {
      sleep_ms(atol(need(argc, argv, ++i)));
    } else if (strcmp(cmd, "hang") == 0) {
      for (;;) pause();
    } else if (strcmp(cmd, "ignore-term") == 0) {
      signal(SIGTERM, SIG_IGN);
    } else if (strcmp(cmd, "crash") == 0) {
      signal(SIGSEGV, SIG_DFL);
      raise(SIGSEGV);
    } else if (strcmp(cmd, "spawn-hang") == 0) {
      pid_t pid = fork();
      if (pid == 0) {
        for (;;) pause();
      }
    } else if (strcmp(cmd, "exit") == 0) {
      exit(atoi(need(argc, argv, ++i)));
    } else {
      put_str(2, "fake_tool: unknown command: ");
      put_str(2, cmd);
      put_str(2, "\n");
      return 2;
    }
  }
  return 0;
}
