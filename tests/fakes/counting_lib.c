/* A fake vendor library with process-wide init/shutdown that counts its calls and records
 * every misuse: an init while initialized, an init or shutdown while another init or shutdown
 * is running, a shutdown while not initialized, or a "vendor call" (fake_use) while not
 * initialized. The LibrarySession tests
 * load it with dlopen, exactly like a probe loads NVML. */
#include <stdatomic.h>
#include <time.h>

static atomic_int g_initialized;
static atomic_int g_in_init;
static atomic_int g_in_shutdown;
static atomic_int g_init_count;
static atomic_int g_shutdown_count;
static atomic_int g_violations;
static atomic_int g_fail_next;
static atomic_int g_delay_us;
static atomic_int g_uses;

static void fake_delay(void) {
  const int us = atomic_load(&g_delay_us);
  if (us <= 0) return;
  struct timespec ts = {us / 1000000, (long)(us % 1000000) * 1000L};
  nanosleep(&ts, 0);
}

/* Returns 0 on success, 1 when told to fail (the library is then not initialized). */
int fake_init(void) {
  if (atomic_fetch_add(&g_in_init, 1) != 0) atomic_fetch_add(&g_violations, 1);
  if (atomic_load(&g_in_shutdown) != 0) atomic_fetch_add(&g_violations, 1);
  fake_delay();
  int fail = atomic_load(&g_fail_next);
  while (fail > 0 && !atomic_compare_exchange_weak(&g_fail_next, &fail, fail - 1)) {
  }
  if (fail > 0) {
    atomic_fetch_sub(&g_in_init, 1);
    return 1;
  }
  if (atomic_exchange(&g_initialized, 1) != 0) atomic_fetch_add(&g_violations, 1);
  atomic_fetch_add(&g_init_count, 1);
  atomic_fetch_sub(&g_in_init, 1);
  return 0;
}

void fake_shutdown(void) {
  if (atomic_fetch_add(&g_in_shutdown, 1) != 0) atomic_fetch_add(&g_violations, 1);
  if (atomic_load(&g_in_init) != 0) atomic_fetch_add(&g_violations, 1);
  fake_delay();
  if (atomic_exchange(&g_initialized, 0) != 1) atomic_fetch_add(&g_violations, 1);
  atomic_fetch_add(&g_shutdown_count, 1);
  atomic_fetch_sub(&g_in_shutdown, 1);
}

/* A vendor call: only legal while initialized. */
int fake_use(void) {
  atomic_fetch_add(&g_uses, 1);
  if (atomic_load(&g_initialized) != 1) {
    atomic_fetch_add(&g_violations, 1);
    return 1;
  }
  return 0;
}

int fake_init_count(void) { return atomic_load(&g_init_count); }
int fake_shutdown_count(void) { return atomic_load(&g_shutdown_count); }
int fake_is_initialized(void) { return atomic_load(&g_initialized); }
int fake_violations(void) { return atomic_load(&g_violations); }
int fake_use_count(void) { return atomic_load(&g_uses); }

/* The next `n` fake_init() calls fail. */
void fake_set_fail_next(int n) { atomic_store(&g_fail_next, n); }
/* fake_init() and fake_shutdown() sleep this long, to widen race windows. */
void fake_set_delay_us(int us) { atomic_store(&g_delay_us, us); }

void fake_reset(void) {
  atomic_store(&g_initialized, 0);
  atomic_store(&g_in_init, 0);
  atomic_store(&g_in_shutdown, 0);
  atomic_store(&g_init_count, 0);
  atomic_store(&g_shutdown_count, 0);
  atomic_store(&g_violations, 0);
  atomic_store(&g_fail_next, 0);
  atomic_store(&g_delay_us, 0);
  atomic_store(&g_uses, 0);
}
