/* fake_nvidia_smi: stands in for nvidia-smi in the tests and the benchmark. It prints recorded
 * CSV for the two queries the NVIDIA probe's fallback makes, and misbehaves on request. Its
 * folder is named by GPUSTREAM_FAKE_NVIDIA_SMI_DIR:
 *
 *   query-gpu.csv           printed for --query-gpu=...  (missing: "No devices were found",
 *                           exit 6, as nvidia-smi does without a GPU)
 *   query-compute-apps.csv  printed for --query-compute-apps=...  (missing: nothing, exit 0)
 *   reject                  a field name: a query naming it fails like an old driver
 *                           ('Field "x" is not a valid field to query.', exit 2)
 *   mode                    one word (and a number), applied before printing:
 *                             hang            sleep forever
 *                             hang-apps       hang only on --query-compute-apps
 *                             crash           die of SIGSEGV
 *                             exit N          print nothing, exit N (stderr: "fake failure")
 *                             garbage         print binary junk instead of the file
 *                             partial         print the first 10 bytes of the file only
 *                             sleep MS        sleep, then behave normally
 *   calls.log               appended: one line per run, the arguments separated by spaces
 *
 * Output is written unbuffered with write(2). A plain program (no sanitizer runtime), so it
 * starts fast and dies of its own signals. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char* g_dir;

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

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

static void path_of(char* out, size_t size, const char* name) {
  snprintf(out, size, "%s/%s", g_dir, name);
}

/* Reads a small file of the folder; returns its length, -1 when missing. */
static long slurp(const char* name, char* buf, size_t size) {
  char path[4096];
  path_of(path, sizeof path, name);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  size_t n = 0;
  while (n + 1 < size) {
    ssize_t r = read(fd, buf + n, size - 1 - n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    n += (size_t)r;
  }
  close(fd);
  buf[n] = '\0';
  return (long)n;
}

static void log_call(int argc, char** argv) {
  char path[4096];
  path_of(path, sizeof path, "calls.log");
  int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return;
  char line[8192];
  size_t n = 0;
  for (int i = 1; i < argc && n < sizeof line - 2; ++i)
    n += (size_t)snprintf(line + n, sizeof line - n, "%s%s", i > 1 ? " " : "", argv[i]);
  if (n > sizeof line - 2) n = sizeof line - 2;
  line[n++] = '\n';
  put(fd, line, n);
  close(fd);
}

static char g_file[1 << 20];

int main(int argc, char** argv) {
  g_dir = getenv("GPUSTREAM_FAKE_NVIDIA_SMI_DIR");
  if (!g_dir || !*g_dir) g_dir = ".";
  log_call(argc, argv);

  const char* query = NULL;
  int apps = 0;
  for (int i = 1; i < argc; ++i) {
    if (strncmp(argv[i], "--query-gpu=", 12) == 0) query = argv[i] + 12;
    if (strncmp(argv[i], "--query-compute-apps=", 21) == 0) {
      query = argv[i] + 21;
      apps = 1;
    }
  }

  char mode[256];
  if (slurp("mode", mode, sizeof mode) > 0) {
    char word[64] = "";
    long number = 0;
    sscanf(mode, "%63s %ld", word, &number);
    if (strcmp(word, "hang") == 0 || (strcmp(word, "hang-apps") == 0 && apps)) {
      for (;;) pause();
    } else if (strcmp(word, "crash") == 0) {
      signal(SIGSEGV, SIG_DFL);
      raise(SIGSEGV);
    } else if (strcmp(word, "exit") == 0) {
      put(2, "fake failure\n", 13);
      return (int)number;
    } else if (strcmp(word, "sleep") == 0) {
      sleep_ms(number);
    } else if (strcmp(word, "garbage") == 0) {
      static const char junk[] = "\x01\xff\xfe garbage \x00\x7f,,,\n\x80\x81";
      put(1, junk, sizeof junk - 1);
      return 0;
    }
    if (strcmp(word, "partial") == 0) {
      long n = slurp(apps ? "query-compute-apps.csv" : "query-gpu.csv", g_file, sizeof g_file);
      if (n > 10) n = 10;
      if (n > 0) put(1, g_file, (size_t)n);
      return 0;
    }
  }

  if (!query) {
    static const char usage[] = "fake nvidia-smi: only --query-gpu and --query-compute-apps\n";
    put(1, usage, sizeof usage - 1);
    return 0;
  }

  char reject[256];
  if (slurp("reject", reject, sizeof reject) > 0) {
    reject[strcspn(reject, "\r\n")] = '\0';
    if (*reject && strstr(query, reject)) {
      char msg[512];
      int n = snprintf(msg, sizeof msg, "Field \"%s\" is not a valid field to query.\n\n", reject);
      put(1, msg, (size_t)n);
      return 2;
    }
  }

  long n = slurp(apps ? "query-compute-apps.csv" : "query-gpu.csv", g_file, sizeof g_file);
  if (n < 0) {
    if (apps) return 0;
    static const char none[] = "No devices were found\n";
    put(1, none, sizeof none - 1);
    return 6;
  }
  put(1, g_file, (size_t)n);
  return 0;
}
