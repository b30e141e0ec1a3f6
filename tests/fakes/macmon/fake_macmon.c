/* fake_macmon: a stand-in for `macmon` (https://github.com/vladkens/macmon) that prints recorded
 * `macmon pipe` lines at an interval, and misbehaves on request.
 *
 * Command line, as macmon:
 *   macmon [-i MS] pipe [-i MS] [-s N] [--soc-info]
 *   macmon --version
 * `-i` is the interval in milliseconds (default 1000); before v0.5 macmon only accepted it before
 * `pipe`, and before v0.7 it had no `--soc-info`: with those schemas the fake refuses them the
 * way clap does (exit 2, "error: unexpected argument ..."). Like macmon, each line is printed
 * after waiting one interval (the first one too); `-s N` exits 0 after N lines.
 *
 * Fake-only options, anywhere on the command line or, whitespace-separated, in the environment
 * variable GPUSTREAM_FAKE_MACMON (read first):
 *   --fake-schema NAME      v0.4 | v0.6 | v0.7 | v0.8.0 | v0.8.1 (default): which recording
 *   --fake-lines FILE       print the lines of FILE instead (cycled)
 *   --fake-stamp            rewrite "timestamp" to the current time (RFC 3339, nanoseconds)
 *   --fake-first-delay MS   wait this long before the first line (default: one interval)
 *   --fake-crash-after N    after N lines, die of SIGSEGV
 *   --fake-exit-after N     after N lines, exit with code 1
 *   --fake-garbage-at N     line N is binary garbage, not JSON
 *   --fake-partial-at N     print the first half of line N without a newline, then exit 1
 *   --fake-long-at N BYTES  line N is a JSON object padded to BYTES bytes
 *   --fake-stop-after N     after N lines, print nothing more (stay alive until killed)
 *   --fake-pause-after N    after N lines, wait for SIGUSR1, then go on
 *   --fake-pid-file PATH    write the pid to PATH first
 *   --fake-stderr TEXT      print TEXT and a newline on stderr first
 * Line numbers count from 1 in each run. Recordings live in FAKE_MACMON_LINES_DIR as
 * <schema>.jsonl, with the `soc` object of `--soc-info` in <schema>.soc.json.
 *
 * Output is written with write(2), one call per line, so a reader sees each line at once
 * (fake_cli_common.h, shared with the other fakes).
 */
#include "../fake_cli_common.h"

#ifndef FAKE_MACMON_LINES_DIR
#define FAKE_MACMON_LINES_DIR "."
#endif

enum { kMaxLines = 64, kMaxArgs = 128 };

struct Settings {
  long interval_ms;
  long first_delay_ms; /* -1: one interval */
  long samples;
  int soc_info;
  int pipe;
  int interval_after_pipe;
  const char* schema;
  const char* lines_file;
  int stamp;
  long crash_after, exit_after, garbage_at, partial_at, long_at, long_bytes, stop_after,
      pause_after;
  const char* pid_file;
  const char* stderr_text;
};

static volatile sig_atomic_t g_resume = 0;
static void on_usr1(int sig) { (void)sig; g_resume = 1; }

static void die_usage(const char* what, const char* arg) {
  fake_put_str(2, "error: ");
  fake_put_str(2, what);
  fake_put_str(2, " '");
  fake_put_str(2, arg);
  fake_put_str(2, "' found\n\nUsage: macmon pipe [OPTIONS]\n\n"
                  "For more information, try '--help'.\n");
  exit(2);
}

static long number(const char* s, const char* flag) {
  char* end = NULL;
  long v = strtol(s ? s : "", &end, 10);
  if (!s || *s == '\0' || *end != '\0' || v < 0) die_usage("invalid value for", flag);
  return v;
}

static int schema_at_least(const struct Settings* st, const char* version) {
  /* The schema names sort in release order as plain strings: v0.4 < v0.6 < v0.7 < v0.8.0 ... */
  return strcmp(st->schema, version) >= 0;
}

/* Parses argv[0..argc). Fake options may come from the environment too. */
static void parse(struct Settings* st, int argc, char** argv) {
  for (int i = 0; i < argc; ++i) {
    const char* a = argv[i];
    const char* next = i + 1 < argc ? argv[i + 1] : NULL;
#define TAKE(field) (st->field = number(next, a), ++i)
    if (strcmp(a, "-i") == 0 || strcmp(a, "--interval") == 0) {
      if (st->pipe) st->interval_after_pipe = 1;
      TAKE(interval_ms);
    } else if (strcmp(a, "pipe") == 0 || strcmp(a, "raw") == 0) {
      st->pipe = 1;
    } else if (strcmp(a, "-s") == 0 || strcmp(a, "--samples") == 0) {
      TAKE(samples);
    } else if (strcmp(a, "--soc-info") == 0) {
      st->soc_info = 1;
    } else if (strcmp(a, "--version") == 0 || strcmp(a, "-V") == 0) {
      fake_put_str(1, "macmon 0.8.1 (fake)\n");
      exit(0);
    } else if (strcmp(a, "--fake-schema") == 0 && next) {
      st->schema = next, ++i;
    } else if (strcmp(a, "--fake-lines") == 0 && next) {
      st->lines_file = next, ++i;
    } else if (strcmp(a, "--fake-stamp") == 0) {
      st->stamp = 1;
    } else if (strcmp(a, "--fake-first-delay") == 0) {
      TAKE(first_delay_ms);
    } else if (strcmp(a, "--fake-crash-after") == 0) {
      TAKE(crash_after);
    } else if (strcmp(a, "--fake-exit-after") == 0) {
      TAKE(exit_after);
    } else if (strcmp(a, "--fake-garbage-at") == 0) {
      TAKE(garbage_at);
    } else if (strcmp(a, "--fake-partial-at") == 0) {
      TAKE(partial_at);
    } else if (strcmp(a, "--fake-long-at") == 0) {
      TAKE(long_at);
      next = i + 1 < argc ? argv[i + 1] : NULL;
      TAKE(long_bytes);
    } else if (strcmp(a, "--fake-stop-after") == 0) {
      TAKE(stop_after);
    } else if (strcmp(a, "--fake-pause-after") == 0) {
      TAKE(pause_after);
    } else if (strcmp(a, "--fake-pid-file") == 0 && next) {
      st->pid_file = next, ++i;
    } else if (strcmp(a, "--fake-stderr") == 0 && next) {
      st->stderr_text = next, ++i;
    } else {
      die_usage("unexpected argument", a);
    }
#undef TAKE
  }
}

/* Splits `text` into its non-empty lines (in place). */
static int split_lines(char* text, char** lines) {
  int n = 0;
  for (char* p = strtok(text, "\n"); p && n < kMaxLines; p = strtok(NULL, "\n"))
    if (*p != '\0' && *p != '\r') lines[n++] = p;
  return n;
}

static void now_rfc3339(char* out, size_t cap) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  struct tm tm;
  gmtime_r(&ts.tv_sec, &tm);
  char head[32];
  strftime(head, sizeof head, "%Y-%m-%dT%H:%M:%S", &tm);
  snprintf(out, cap, "%s.%09ld+00:00", head, ts.tv_nsec);
}

/* Writes one line: the recording, with the soc object and a fresh timestamp when asked. */
static void emit(const struct Settings* st, const char* line, const char* soc, int cut_half) {
  size_t cap = strlen(line) + (soc ? strlen(soc) : 0) + 128;
  char* out = malloc(cap);
  if (!out) exit(3);
  size_t len = 0;
  const char* rest = line;
  if (soc && line[0] == '{') {
    len += (size_t)snprintf(out + len, cap - len, "{\"soc\":%s,", soc);
    rest = line + 1;
  }
  const char* key = st->stamp ? strstr(rest, "\"timestamp\":\"") : NULL;
  if (key) {
    const char* value = key + strlen("\"timestamp\":\"");
    const char* end = strchr(value, '"');
    char stamp[64];
    now_rfc3339(stamp, sizeof stamp);
    len += (size_t)snprintf(out + len, cap - len, "%.*s%s%s", (int)(value - rest), rest, stamp,
                            end ? end : "\"}");
  } else {
    len += (size_t)snprintf(out + len, cap - len, "%s", rest);
  }
  if (cut_half) {
    fake_put(1, out, len / 2);
  } else {
    out[len++] = '\n';
    fake_put(1, out, len);
  }
  free(out);
}

static void emit_long(long bytes) {
  if (bytes < 16) bytes = 16;
  char* out = malloc((size_t)bytes + 1);
  if (!out) exit(3);
  memcpy(out, "{\"pad\":\"", 8);
  memset(out + 8, 'x', (size_t)bytes - 8);
  memcpy(out + bytes - 3, "\"}\n", 3);
  fake_put(1, out, (size_t)bytes);
  free(out);
}

int main(int argc, char** argv) {
  struct Settings st = {1000, -1, 0, 0, 0, 0, "v0.8.1", NULL, 0, 0, 0, 0, 0, 0, 0, 0, 0, NULL,
                        NULL};
  char* env_args[kMaxArgs];
  int env_argc = 0;
  const char* env = getenv("GPUSTREAM_FAKE_MACMON");
  char* env_copy = env ? strdup(env) : NULL;
  for (char* p = env_copy ? strtok(env_copy, " \t") : NULL; p && env_argc < kMaxArgs;
       p = strtok(NULL, " \t"))
    env_args[env_argc++] = p;
  parse(&st, env_argc, env_args);
  parse(&st, argc - 1, argv + 1);

  if (st.stderr_text) fake_put_line(2, st.stderr_text);
  if (st.pid_file) fake_write_pid_file(st.pid_file);
  if (!st.pipe) {
    fake_put_str(2, "fake macmon: only `pipe` is implemented\n");
    return 2;
  }
  if (st.interval_after_pipe && !schema_at_least(&st, "v0.5"))
    die_usage("unexpected argument", "-i");
  if (st.soc_info && !schema_at_least(&st, "v0.7")) die_usage("unexpected argument", "--soc-info");

  char path[4096];
  if (st.lines_file) {
    snprintf(path, sizeof path, "%s", st.lines_file);
  } else {
    snprintf(path, sizeof path, "%s/%s.jsonl", FAKE_MACMON_LINES_DIR, st.schema);
  }
  char* text = fake_read_file(path, NULL);
  char* lines[kMaxLines];
  int count = text ? split_lines(text, lines) : 0;
  if (count == 0) {
    fake_put_str(2, "fake macmon: no lines in ");
    fake_put_str(2, path);
    fake_put_str(2, "\n");
    return 4;
  }
  char* soc = NULL;
  if (st.soc_info) {
    snprintf(path, sizeof path, "%s/%s.soc.json", FAKE_MACMON_LINES_DIR, st.schema);
    soc = fake_read_file(path, NULL);
    if (soc) soc[strcspn(soc, "\r\n")] = '\0';
  }

  /* SIGUSR1 stays blocked except inside sigsuspend, so a resume sent early is not lost. */
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_usr1;
  sigaction(SIGUSR1, &sa, NULL);
  sigset_t usr1, unblocked;
  sigemptyset(&usr1);
  sigaddset(&usr1, SIGUSR1);
  sigprocmask(SIG_BLOCK, &usr1, &unblocked);
  sigdelset(&unblocked, SIGUSR1);

  fake_sleep_ms(st.first_delay_ms >= 0 ? st.first_delay_ms : st.interval_ms);
  for (long n = 1;; ++n) {
    const char* line = lines[(n - 1) % count];
    if (n == st.garbage_at) {
      fake_put_str(1, "\x01\x02\xff not json {{{ \x7f\n");
    } else if (n == st.partial_at) {
      emit(&st, line, soc, 1);
      return 1;
    } else if (n == st.long_at) {
      emit_long(st.long_bytes);
    } else {
      emit(&st, line, soc, 0);
    }
    if (st.samples > 0 && n >= st.samples) return 0;
    if (n == st.crash_after) fake_crash();
    if (n == st.exit_after) return 1;
    if (n == st.stop_after) fake_hang();
    if (n == st.pause_after) {
      while (!g_resume) sigsuspend(&unblocked);
      g_resume = 0;
    }
    fake_sleep_ms(st.interval_ms);
  }
}
