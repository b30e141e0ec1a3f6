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
 *   fds               its open file descriptors ("0 1 2") and a newline: what it inherited
 *   pid-file PATH     write its own pid to PATH (atomically: PATH.tmp, then rename)
 *   sleep MS          sleep
 *   hang              sleep forever
 *   ignore-term       ignore SIGTERM from here on
 *   crash             die of SIGSEGV
 *   spawn-hang        start a grandchild that keeps stdout/stderr open and sleeps forever
 *   exit K            exit with code K
 *
 * Output is written with write(2), unbuffered, so the reader sees it as soon as it is printed
 * (fake_cli_common.h, shared with the other fakes).
 */
#include <fcntl.h>

#include "fake_cli_common.h"

static void fill_lines(int fd, long n, char c) {
  char line[64];
  memset(line, c, sizeof line);
  line[63] = '\n';
  while (n > 0) {
    size_t chunk = n < 64 ? (size_t)n : 64;
    fake_put(fd, line, chunk);
    n -= (long)chunk;
  }
}

static const char* need(int argc, char** argv, int i) {
  if (i >= argc) {
    fake_put_str(2, "fake_tool: missing argument\n");
    exit(2);
  }
  return argv[i];
}

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const char* cmd = argv[i];
    if (strcmp(cmd, "print") == 0) {
      fake_put_line(1, need(argc, argv, ++i));
    } else if (strcmp(cmd, "partial") == 0) {
      fake_put_str(1, need(argc, argv, ++i));
    } else if (strcmp(cmd, "stderr") == 0) {
      fake_put_line(2, need(argc, argv, ++i));
    } else if (strcmp(cmd, "lines") == 0) {
      long n = atol(need(argc, argv, ++i));
      long ms = atol(need(argc, argv, ++i));
      for (long k = 1; k <= n; ++k) {
        char buf[64];
        snprintf(buf, sizeof buf, "line %ld\n", k);
        fake_put_str(1, buf);
        if (k < n) fake_sleep_ms(ms);
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
        fake_put(1, buf, chunk);
        n -= (long)chunk;
      }
      fake_put_str(1, "\n");
    } else if (strcmp(cmd, "garbage") == 0) {
      fake_put_garbage(1, atol(need(argc, argv, ++i)));
    } else if (strcmp(cmd, "env") == 0) {
      const char* v = getenv(need(argc, argv, ++i));
      fake_put_line(1, v ? v : "(unset)");
    } else if (strcmp(cmd, "pid") == 0) {
      char buf[32];
      snprintf(buf, sizeof buf, "%ld\n", (long)getpid());
      fake_put_str(1, buf);
    } else if (strcmp(cmd, "fds") == 0) {
      /* fcntl on every possible number: opens nothing itself, unlike a listing of /proc/self/fd */
      long max = sysconf(_SC_OPEN_MAX);
      if (max < 0 || max > 65536) max = 65536;
      char buf[32];
      int first = 1;
      for (long fd = 0; fd < max; ++fd) {
        if (fcntl((int)fd, F_GETFD) < 0) continue;
        snprintf(buf, sizeof buf, first ? "%ld" : " %ld", fd);
        fake_put_str(1, buf);
        first = 0;
      }
      fake_put_str(1, "\n");
    } else if (strcmp(cmd, "pid-file") == 0) {
      if (fake_write_pid_file(need(argc, argv, ++i)) != 0) return 4;
    } else if (strcmp(cmd, "sleep") == 0) {
      fake_sleep_ms(atol(need(argc, argv, ++i)));
    } else if (strcmp(cmd, "hang") == 0) {
      fake_hang();
    } else if (strcmp(cmd, "ignore-term") == 0) {
      signal(SIGTERM, SIG_IGN);
    } else if (strcmp(cmd, "crash") == 0) {
      fake_crash();
    } else if (strcmp(cmd, "spawn-hang") == 0) {
      if (fork() == 0) fake_hang();
    } else if (strcmp(cmd, "exit") == 0) {
      exit(atoi(need(argc, argv, ++i)));
    } else {
      fake_put_str(2, "fake_tool: unknown command: ");
      fake_put_line(2, cmd);
      return 2;
    }
  }
  return 0;
}
