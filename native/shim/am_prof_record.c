// libamprof.so — the record: one JSON line, built in a static buffer without stdio.
// See am_prof.h.
#include "am_prof.h"

// The record: one JSON line (a "prof" record, see records.py), built in a
// static buffer without stdio.
char am_out[1 << 20];
size_t am_len;
static int am_cut;  // something did not fit

static void am_s(const char *s) {
  size_t n = strlen(s);
  if (am_len + n < sizeof am_out) {
    memcpy(am_out + am_len, s, n);
    am_len += n;
  } else {
    am_cut = 1;
  }
}

static void am_u(uint64_t v) {
  char digits[24];
  int i = 0;
  do digits[i++] = (char)('0' + v % 10);
  while ((v /= 10) != 0);
  digits[i] = 0;
  for (int j = 0; j < i / 2; j++) {
    char t = digits[j];
    digits[j] = digits[i - 1 - j];
    digits[i - 1 - j] = t;
  }
  am_s(digits);
}

static void am_i(int64_t v) {
  if (v < 0) {
    am_s("-");
    am_u((uint64_t)(-v));
  } else {
    am_u((uint64_t)v);
  }
}

// A JSON string: a program's path may hold quotes, backslashes or controls.
void am_js(const char *s) {
  static const char hex[] = "0123456789abcdef";
  am_s("\"");
  for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
    char esc[7] = {(char)*c, 0};
    if (*c == '"' || *c == '\\') {
      esc[0] = '\\';
      esc[1] = (char)*c;
      esc[2] = 0;
    } else if (*c < 0x20) {
      memcpy(esc, "\\u00", 4);
      esc[4] = hex[*c >> 4];
      esc[5] = hex[*c & 15];
      esc[6] = 0;
    }
    am_s(esc);
  }
  am_s("\"");
}

// `sep` then "key": — sep is "{" for an object's first key, else ",".
void am_k(const char *sep, const char *key) {
  am_s(sep);
  am_js(key);
  am_s(":");
}

static void am_kv(const char *sep, const char *key, uint64_t v) {
  am_k(sep, key);
  am_u(v);
}

// "name":[v0,v1,...] without the trailing zeros.
void am_list(const char *sep, const char *name, const uint64_t *v, int n) {
  int last = n - 1;
  while (last > 0 && v[last] == 0) last--;
  am_k(sep, name);
  for (int i = 0; i <= last; i++) {
    am_s(i ? "," : "[");
    am_u(v[i]);
  }
  am_s("]");
}

// An object closes with "}" or, when nothing was in it, is "{}".
void am_close(const char *sep) { am_s(*sep == '{' ? "{}" : "}"); }

// "key":{"name":[...],...}: row i of `rows` (`width` values each) under names[i],
// for the rows whose `present` count is not zero.
void am_lists(const char *key, const char *const *names, int n, const uint64_t *present,
                     const uint64_t *rows, int width) {
  const char *sep = "{";
  am_k(",", key);
  for (int i = 0; i < n; i++) {
    if (!present[i]) continue;
    am_list(sep, names[i], rows + (size_t)i * (size_t)width, width);
    sep = ",";
  }
  am_close(sep);
}

static void am_write_threads(void) {
  am_k(",", "threads");
  am_kv("{", "count", am_g.threads_seen);
  am_kv(",", "cycles", am_g.threads_cycles);
  am_kv(",", "alloc_cycles", am_g.threads_alloc_cycles);
  am_s("}");
  am_k(",", "threads_list");
  am_s("[");
  for (uint64_t i = 0; i < am_g.threads_seen && i < AM_MAX_THREADS; i++) {
    am_kv(i ? ",{" : "{", "tid", am_g.threads[i].tid);
    am_kv(",", "cycles", am_g.threads[i].cycles);
    am_kv(",", "alloc_cycles", am_g.threads[i].alloc_cycles);
    am_s("}");
  }
  am_s("]");
}

// "key":{"name":{"field":v,...},...}: entry i holds columns[f][i] under
// fields[f], for the entries whose first column is not zero.
void am_counters(const char *key, const char *const *names, int n,
                        const char *const *fields, const uint64_t *const *columns, int nfields) {
  const char *sep = "{";
  am_k(",", key);
  for (int i = 0; i < n; i++) {
    if (!columns[0][i]) continue;
    am_k(sep, names[i]);
    for (int f = 0; f < nfields; f++) am_kv(f ? "," : "{", fields[f], columns[f][i]);
    am_s("}");
    sep = ",";
  }
  am_close(sep);
}

static void am_write_api(const am_counts *c) {
  static const char *const fields[] = {"calls", "bytes", "sampled_new", "sampled_reuse"};
  const uint64_t *const columns[] = {c->calls, c->bytes, c->fresh, c->reused};
  am_counters("api", am_api_names, AM_API_N, fields, columns, 4);
  am_lists("sizes", am_api_names, AM_API_N, c->calls, &c->sizes[0][0], AM_SIZE_BUCKETS);
  am_k(",", "sizes_sampled");
  if (c->calls[AM_MALLOC]) {
    am_list("{", am_api_names[AM_MALLOC], c->sizes_sampled, AM_SIZE_BUCKETS);
    am_s("}");
  } else {
    am_s("{}");
  }
}

static void am_write_paths(const am_counts *c) {
  static const char *const fields[] = {"samples", "cycles"};
  const uint64_t *const columns[] = {c->samples, c->cycles};
  am_counters("path", am_path_names, AM_PATH_N, fields, columns, 2);
  am_lists("hist", am_path_names, AM_PATH_N, c->samples, &c->hist[0][0], AM_HIST);
}

static void am_write_sys(const am_counts *c) {
  am_k(",", "sys");
  for (int k = 0; k < AM_SYS_N; k++) {
    am_k(k ? "," : "{", am_sys_names[k]);
    am_kv("{", "in_calls", c->sys_calls[k][1]);
    am_kv(",", "in_cycles", c->sys_cycles[k][1]);
    am_kv(",", "in_bytes", c->sys_bytes[k][1]);
    am_kv(",", "out_calls", c->sys_calls[k][0]);
    am_kv(",", "out_cycles", c->sys_cycles[k][0]);
    am_kv(",", "out_bytes", c->sys_bytes[k][0]);
    am_s("}");
  }
  am_s("}");
  am_k(",", "locks");
  am_kv("{", "lock_calls", c->lock_calls);
  am_kv(",", "contended", c->lock_contended);
  am_kv(",", "wait_cycles", c->lock_wait);
  am_kv(",", "trylock_calls", c->try_calls);
  am_kv(",", "trylock_failed", c->try_failed);
  am_kv(",", "unlock_calls", c->unlock_calls);
  am_s("}");
}

// "peak_layout_*": taken from the record with the highest peak when records merge.
static void am_write_layout(const am_layout_t *l) {
  am_kv(",", "peak_layout_bytes", l->bytes);
  am_kv(",", "peak_layout_blocks", l->blocks);
  am_kv(",", "peak_layout_pages", l->pages);
  am_kv(",", "peak_layout_lines", l->lines);
  am_kv(",", "peak_layout_shared_lines", l->shared_lines);
  am_kv(",", "layout_missed", l->missed);
}

static void am_write_memory(const am_counts *c) {
  int64_t peak;
  uint64_t var;
  am_peak(&peak, &var);
  am_k(",", "memory");
  am_kv("{", "peak_requested", (uint64_t)(peak > 0 ? peak : 0));
  am_kv(",", "peak_requested_sd", (uint64_t)sqrt((double)var));
  am_kv(",", "peak_tracked_blocks", am_g.peak_blocks);
  am_kv(",", "rss_at_peak_kib", am_g.rss_at_peak_kib);
  am_k(",", "final_requested");
  am_i(atomic_load(&am_g.part_live[0]) + atomic_load(&am_g.part_live[1]) +
       atomic_load(&am_g.part_live[2]));
  am_kv(",", "track_interval", atomic_load(&am_g.interval));
  am_kv(",", "sampled_requested", c->sampled_req);
  am_kv(",", "sampled_usable", c->sampled_usable);
  am_kv(",", "untracked", atomic_load(&am_g.untracked));
  am_kv(",", "bitmap_full", (uint64_t)am_g.bitmap_full);
  am_kv(",", "threads_unmerged", atomic_load(&am_unlisted));
  if (am_g.sample == 1) am_write_layout(&am_g.layout);
  am_s("}");
}

void am_write_record(void) {
  const am_counts *c = &am_g.c;
  char exe[1024];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  exe[n > 0 ? n : 0] = '\0';
  Dl_info next;
  const char *served = am_real.malloc && dladdr((void *)am_real.malloc, &next) ? next.dli_fname : "";
  uint64_t ns = am_now_ns() - am_g.ns0, tsc = am_tsc() - am_g.tsc0;
  am_len = 0;
  am_cut = 0;
  am_k("{", "am");
  am_js("prof");
  am_kv(",", "v", AM_PROF_VERSION);
  am_kv(",", "pid", (uint64_t)getpid());
  am_kv(",", "ppid", (uint64_t)getppid());
  am_k(",", "exe");
  am_js(exe);
  am_k(",", "next_malloc");
  am_js(served);
  am_kv(",", "sample", am_g.sample);
  am_kv(",", "fast_bytes", AM_FAST_BYTES);
  am_kv(",", "tsc_per_us", ns ? tsc * 1000 / ns : 0);
  am_kv(",", "hw_errno", (uint64_t)am_g.hw_errno);
  am_write_threads();
  am_write_api(c);
  am_write_paths(c);
  am_write_sys(c);
  am_write_memory(c);
  am_s("}\n");
  // A record that did not fit is not written: half a line would not parse, and
  // the run then says it has no profile rather than a wrong one.
  if (am_cut) am_len = 0;
}
