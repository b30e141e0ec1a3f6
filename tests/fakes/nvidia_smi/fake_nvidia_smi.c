/* fake_nvidia_smi: stands in for nvidia-smi in the tests and the benchmark. It prints recorded
 * CSV for the two queries the NVIDIA probe's fallback makes, and misbehaves on request. Its
 * folder is named by GPUSTREAM_FAKE_NVIDIA_SMI_DIR:
 *
 *   query-gpu.csv           printed for --query-gpu=...  (missing: "No devices were found",
 *                           exit 6, as nvidia-smi does without a GPU)
 *   gpus.csv                instead of query-gpu.csv: a table whose first line names the
 *                           fields this driver knows ("index, power.draw.instant, ..."), one
 *                           line per GPU after it. --query-gpu prints the requested columns, in
 *                           the requested order, one line per GPU; a field the table does not
 *                           name is rejected as nvidia-smi does ('Field "x" is not a valid
 *                           field to query.', exit 2): a table without power.draw.instant is
 *                           a driver before R535. At most 64 columns and 64 GPUs.
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
 *   version.txt             printed for --version (missing: the text of a real R535
 *                           nvidia-smi --version)
 *   calls.log               appended: one line per run, the arguments separated by spaces
 *
 * Output is written unbuffered with write(2) (fake_cli_common.h, shared with the other fakes).
 * A plain program (no sanitizer runtime), so it starts fast and dies of its own signals. */
#include <fcntl.h>

#include "../fake_cli_common.h"

static const char* g_dir;

/* A file of the folder, NUL-terminated and malloc'd (free it); NULL when missing. */
static char* folder_file(const char* name, size_t* len) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", g_dir, name);
  return fake_read_file(path, len);
}

static void log_call(int argc, char** argv) {
  char path[4096];
  snprintf(path, sizeof path, "%s/calls.log", g_dir);
  int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return;
  char line[8192];
  size_t n = 0;
  for (int i = 1; i < argc && n < sizeof line - 2; ++i)
    n += (size_t)snprintf(line + n, sizeof line - n, "%s%s", i > 1 ? " " : "", argv[i]);
  if (n > sizeof line - 2) n = sizeof line - 2;
  line[n++] = '\n';
  fake_put(fd, line, n);
  close(fd);
}

/* Prints the recorded output for the query (at most `limit` bytes); -1 when there is none. */
static long print_recording(int apps, size_t limit) {
  size_t n = 0;
  char* text = folder_file(apps ? "query-compute-apps.csv" : "query-gpu.csv", &n);
  if (!text) return -1;
  fake_put(1, text, n < limit ? n : limit);
  free(text);
  return (long)n;
}

#define MAX_CELLS 64

/* Splits line at commas (cells trimmed of spaces) into at most MAX_CELLS cells, in place. */
static int split_cells(char* line, char** cells) {
  int n = 0;
  for (char* p = line; n < MAX_CELLS;) {
    while (*p == ' ') ++p;
    cells[n++] = p;
    char* comma = strchr(p, ',');
    char* end = comma ? comma : p + strlen(p);
    while (end > p && (end[-1] == ' ' || end[-1] == '\r')) --end;
    if (!comma) {
      *end = '\0';
      break;
    }
    *end = '\0';
    p = comma + 1;
  }
  return n;
}

/* Prints the columns of gpus.csv that `query` names; -1 when there is no gpus.csv, otherwise
 * the exit code. */
static int print_table(const char* query) {
  char* text = folder_file("gpus.csv", NULL);
  if (!text) return -1;
  char* lines[MAX_CELLS + 1];
  int nlines = 0;
  for (char *save = NULL, *l = strtok_r(text, "\n", &save); l && nlines <= MAX_CELLS;
       l = strtok_r(NULL, "\n", &save))
    lines[nlines++] = l;
  char* header[MAX_CELLS];
  const int columns = nlines > 0 ? split_cells(lines[0], header) : 0;
  char* wanted = strdup(query);
  int pick[MAX_CELLS];
  int npick = 0;
  for (char *save = NULL, *f = strtok_r(wanted, ",", &save); f && npick < MAX_CELLS;
       f = strtok_r(NULL, ",", &save)) {
    int found = -1;
    for (int c = 0; c < columns; ++c)
      if (strcmp(header[c], f) == 0) found = c;
    if (found < 0) {
      char msg[512];
      int n = snprintf(msg, sizeof msg, "Field \"%s\" is not a valid field to query.\n\n", f);
      fake_put(1, msg, (size_t)n);
      free(wanted);
      free(text);
      return 2;
    }
    pick[npick++] = found;
  }
  for (int r = 1; r < nlines; ++r) {
    char* cells[MAX_CELLS];
    const int n = split_cells(lines[r], cells);
    for (int k = 0; k < npick; ++k) {
      if (k) fake_put_str(1, ", ");
      if (pick[k] < n) fake_put_str(1, cells[pick[k]]);
    }
    fake_put(1, "\n", 1);
  }
  free(wanted);
  free(text);
  return 0;
}

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

  char* mode = folder_file("mode", NULL);
  if (mode) {
    char word[64] = "";
    long number = 0;
    sscanf(mode, "%63s %ld", word, &number);
    free(mode);
    if (strcmp(word, "hang") == 0 || (strcmp(word, "hang-apps") == 0 && apps)) {
      fake_hang();
    } else if (strcmp(word, "crash") == 0) {
      fake_crash();
    } else if (strcmp(word, "exit") == 0) {
      fake_put_str(2, "fake failure\n");
      return (int)number;
    } else if (strcmp(word, "sleep") == 0) {
      fake_sleep_ms(number);
    } else if (strcmp(word, "garbage") == 0) {
      static const char junk[] = "\x01\xff\xfe garbage \x00\x7f,,,\n\x80\x81";
      fake_put(1, junk, sizeof junk - 1);
      return 0;
    } else if (strcmp(word, "partial") == 0) {
      print_recording(apps, 10);
      return 0;
    }
  }

  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--version") != 0) continue;
    size_t n = 0;
    char* text = folder_file("version.txt", &n);
    if (text) {
      fake_put(1, text, n);
      free(text);
    } else {
      fake_put_str(1,
                   "NVIDIA-SMI version  : 535.183.01\n"
                   "NVML version        : 535.183\n"
                   "DRIVER version      : 535.183.01\n"
                   "CUDA Version        : 12.2\n");
    }
    return 0;
  }

  if (!query) {
    fake_put_str(1, "fake nvidia-smi: only --query-gpu and --query-compute-apps\n");
    return 0;
  }

  char* reject = folder_file("reject", NULL);
  if (reject) {
    reject[strcspn(reject, "\r\n")] = '\0';
    if (*reject && strstr(query, reject)) {
      char msg[512];
      int n = snprintf(msg, sizeof msg, "Field \"%s\" is not a valid field to query.\n\n", reject);
      fake_put(1, msg, (size_t)n);
      free(reject);
      return 2;
    }
    free(reject);
  }

  if (!apps) {
    const int rc = print_table(query);
    if (rc >= 0) return rc;
  }
  if (print_recording(apps, (size_t)-1) < 0) {
    if (apps) return 0;
    fake_put_str(1, "No devices were found\n");
    return 6;
  }
  return 0;
}
