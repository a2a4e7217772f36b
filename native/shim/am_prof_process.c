// libamprof.so — process start, fork and exit (where the record is written).
// See am_prof.h.
#include "am_prof.h"

void am_fork_child(void) {
  // The child starts clean: its record holds only what it does itself, the
  // parent's other threads do not exist in it, and the blocks it inherited
  // are not tracked (their frees count, their bytes do not).
  for (int i = 0; i < AM_LIVING; i++) atomic_store(&am_living[i], NULL);
  atomic_store(&am_unlisted, 0);
  for (int s = 0; s < AM_STRIPES; s++) {
    pthread_mutex_init(&am_tab[s].lock, NULL);
    am_tab_drop(s);
    memset(am_tab_first[s], 0, sizeof am_tab_first[s]);
    am_tab[s].e = NULL;
    am_tab[s].cap = am_tab[s].n = 0;
  }
  memset(&am_g.c, 0, sizeof am_g.c);
  memset(am_g.threads, 0, sizeof am_g.threads);
  am_g.threads_seen = am_g.threads_cycles = am_g.threads_alloc_cycles = 0;
  for (int k = 0; k < 3; k++) {
    atomic_store(&am_g.part_live[k], 0);
    atomic_store(&am_g.part_var[k], 0);
  }
  for (int h = 0; h < 2; h++) {
    am_g.picked[h] = am_g.told[h] = 0;
    am_g.told_var[h] = am_g.told_shared_var[h] = 0;
  }
  atomic_store(&am_g.live_blocks, 0);
  atomic_store(&am_g.untracked, 0);
  am_g.peak_live = am_g.last_rss_check = 0;
  am_g.peak_blocks = am_g.rss_at_peak_kib = 0;
  memset(&am_g.layout, 0, sizeof am_g.layout);
  am_g.layout_taking = 0;  // a taking in another thread is not in this process
  pthread_mutex_init(&am_g.lock, NULL);
  memset(&am_me.c, 0, sizeof am_me.c);
  am_me.slot = 0;
  am_stop(&am_me);  // registers again at its next call
  am_me.state = 0;
  memset(am_me.part_delta, 0, sizeof am_me.part_delta);
  memset(am_me.part_var_delta, 0, sizeof am_me.part_var_delta);
  am_me.blocks_delta = 0;
  am_me.pending = 0;
  atomic_store(&am_g.interval, am_g.base_interval);
  am_me.start_tsc = am_tsc();
  am_g.tsc0 = am_tsc();
  am_g.ns0 = am_now_ns();
}

void am_init(void) {
  const char *s = getenv("AM_PROF_SAMPLE");
  if (s && *s) {
    uint64_t n = 0;
    for (; *s >= '0' && *s <= '9'; s++) n = n * 10 + (uint64_t)(*s - '0');
    am_g.sample = n == 0 ? 1 : n > (1u << 30) ? (1u << 30) : n;  // windows fit 32 bits
  }
  // One tracked block per 32 x sample bytes on average (32 KiB by default: a
  // tracked block costs some 400 ns of cold misses); sample 1: every block.
  am_g.base_interval = am_g.sample == 1 ? 0 : 32 * am_g.sample;
  am_map_shadow();
  atomic_store(&am_g.interval, am_g.base_interval);
  am_find_allocator_code();
  pthread_key_create(&am_key, am_thread_end);
  pthread_atfork(NULL, NULL, am_fork_child);
  am_g.tsc0 = am_tsc();
  am_g.ns0 = am_now_ns();
  am_me.start_tsc = am_g.tsc0;  // the thread that starts us is (almost always) main
  // Hardware counters: can this process open one? (This VM: no.)
  struct perf_event_attr pe;
  memset(&pe, 0, sizeof pe);
  pe.type = PERF_TYPE_HARDWARE;
  pe.size = sizeof pe;
  pe.config = PERF_COUNT_HW_INSTRUCTIONS;
  pe.disabled = 1;
  pe.exclude_kernel = 1;
  long fd = syscall(SYS_perf_event_open, &pe, 0, -1, -1, 0);
  am_g.hw_errno = fd < 0 ? errno : 0;
  if (fd >= 0) syscall(SYS_close, fd);
}

// A program that never allocates still gets its record (and its clock).
__attribute__((constructor)) static void am_begin(void) { am_ready(); }

__attribute__((destructor)) static void am_exit(void) {
  if (atomic_load(&am_state) != 2) return;
  const char *path = getenv("AM_PROF_OUT");
  am_thread *t = &am_me;
  am_own_begin(t);  // whatever runs from here on is not the program's
  if (t->state != 0) am_flush(t);
  // Threads still alive: merged as they are (they may be idle in a pool, or
  // still running, in which case their last few calls may be missed).
  for (int i = 0; i < AM_LIVING; i++) {
    am_thread *other = atomic_exchange(&am_living[i], NULL);
    if (other != NULL && other != t) am_flush(other);
  }
  if (path == NULL || *path == '\0') return;
  am_real.mutex_lock(&am_g.lock);
  am_write_record();
  int fd = (int)syscall(SYS_open, path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd >= 0) {
    flock(fd, LOCK_EX);  // several processes (fork, exec) append their records
    for (size_t done = 0; done < am_len;) {
      long w = syscall(SYS_write, fd, am_out + done, am_len - done);
      if (w <= 0) break;
      done += (size_t)w;
    }
    flock(fd, LOCK_UN);
    syscall(SYS_close, fd);
  }
  am_real.mutex_unlock(&am_g.lock);
}
