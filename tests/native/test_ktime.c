// C-level checks of am_run_ktime.c's pairing: a thread's entry and its next exit are one
// call, in time order across the CPUs' rings; an exit with no entry (a futex wake) is
// dropped; an entry with no exit is counted unpaired; a drain keeps back what is too
// young to pair. Prints "N passed, N failed"; exits non-zero on failure.
#include "../../native/run/am_run_ktime.c"

// The counting events' attributes are am_run_kcount.c's: not opened here.
int am_tracepoint_attr(struct perf_event_attr *attr, const char *tracepoint) {
  (void)attr;
  (void)tracepoint;
  return -1;
}

#include "am_check.h"

#define MADVISE 5

static void am_reset(void) {
  memset(am_kt.ns, 0, sizeof am_kt.ns);
  memset(am_kt.calls, 0, sizeof am_kt.calls);
  memset(am_kt.tids, 0, AM_TIDS * sizeof am_kt.tids[0]);
  am_kt.unpaired = 0;
  am_kt.held = 0;
}

// Samples as a drain reads them: in ring order, not time order.
static void am_give(const struct am_sample *s, size_t n) {
  for (size_t i = 0; i < n; i++) am_kt.batch[am_kt.held++] = s[i];
}

static uint64_t am_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void test_pairs_in_time_order(void) {
  am_reset();
  // Thread 7's madvise moved CPUs: its exit's ring was read first.
  const struct am_sample s[] = {
      {150, 7, AM_EXIT},      {110, 8, AM_FUTEX_LOCK}, {100, 7, MADVISE},
      {300, 8, AM_EXIT},      {400, 8, AM_EXIT},  // a wake's exit: no entry
  };
  am_give(s, sizeof s / sizeof s[0]);
  am_kt_drain(1);
  CHECK("madvise timed", am_kt.ns[MADVISE] == 50 && am_kt.calls[MADVISE] == 1);
  CHECK("wait timed", am_kt.ns[AM_FUTEX_LOCK] == 190 && am_kt.calls[AM_FUTEX_LOCK] == 1);
  CHECK("a wake's exit is no loss", am_kt.unpaired == 0);
}

static void test_an_entry_without_exit_is_unpaired(void) {
  am_reset();
  const struct am_sample s[] = {{100, 9, MADVISE}, {200, 9, MADVISE}, {260, 9, AM_EXIT}};
  am_give(s, sizeof s / sizeof s[0]);
  am_kt_drain(1);
  CHECK("the later call timed", am_kt.ns[MADVISE] == 60 && am_kt.calls[MADVISE] == 1);
  CHECK("the lost one counted", am_kt.unpaired == 1);
}

static void test_a_young_sample_waits_for_the_next_drain(void) {
  am_reset();
  uint64_t now = am_now();
  // An old call, then one too young: its entry may have an older sample still unread.
  const struct am_sample s[] = {{now - 10000000, 5, MADVISE},
                                {now - 9000000, 5, AM_EXIT},
                                {now + 1000000000, 6, AM_EXIT},
                                {now + 999999000, 6, MADVISE}};
  am_give(s, sizeof s / sizeof s[0]);
  am_kt_drain(0);
  CHECK("the old call paired", am_kt.calls[MADVISE] == 1 && am_kt.ns[MADVISE] == 1000000);
  CHECK("the young one kept", am_kt.held == 2);
  am_kt_drain(1);
  CHECK("paired at the last drain", am_kt.calls[MADVISE] == 2 && am_kt.ns[MADVISE] == 1001000);
  CHECK("nothing kept", am_kt.held == 0);
}

int main(void) {
  am_kt.batch_cap = 64;
  am_kt.batch = calloc(am_kt.batch_cap, sizeof am_kt.batch[0]);
  am_kt.tids = calloc(AM_TIDS, sizeof am_kt.tids[0]);
  if (!am_kt.batch || !am_kt.tids) return 2;
  am_kt.cpus = 0;  // no rings: the batch is what a drain read
  test_pairs_in_time_order();
  test_an_entry_without_exit_is_unpaired();
  test_a_young_sample_waits_for_the_next_drain();
  return am_checked();
}
