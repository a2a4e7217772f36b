// C-level checks of am_trace.h: varints and zigzag steps round-trip at every width,
// and a reader never reads past its buffer (a varint cut short or of more than
// ten bytes sets `bad`). Prints "N passed, N failed"; exits non-zero on failure.
#include "am_trace.h"

#include "am_check.h"

static void test_round_trip(void) {
  static const uint64_t values[] = {0, 1, 127, 128, 16383, 16384, (1ull << 35) - 1, 1ull << 56,
                                    UINT64_MAX - 1, UINT64_MAX};
  uint8_t buf[16 * 10];
  uint8_t *p = buf;
  for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) p = am_put(p, values[i]);
  am_reader r = {buf, p, 0};
  int same = 1;
  for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) same &= am_get(&r) == values[i];
  CHECK("varints round-trip", same && !r.bad && r.p == r.end);
  CHECK("a reader at its end is bad", am_get(&r) == 0 && r.bad);
  uint8_t one[10];
  CHECK("2^64-1 takes ten bytes", am_put(one, UINT64_MAX) - one == 10);
}

static void test_zigzag(void) {
  static const int64_t steps[] = {0, 1, -1, 4096, -4096, INT64_MAX, INT64_MIN};
  int same = 1;
  for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) same &= am_unzigzag(am_zigzag(steps[i])) == steps[i];
  CHECK("zigzag steps round-trip", same);
  CHECK("small steps stay small", am_zigzag(-1) == 1 && am_zigzag(1) == 2);
}

static void test_bounds(void) {
  uint8_t cut[3] = {0x80, 0x80, 0x80};  // continues past its end
  am_reader r = {cut, cut + 3, 0};
  CHECK("a varint cut short is bad", am_get(&r) == 0 && r.bad && r.p == cut + 3);
  uint8_t long_one[12];
  memset(long_one, 0xff, sizeof long_one);
  am_reader l = {long_one, long_one + sizeof long_one, 0};
  am_get(&l);
  CHECK("more than ten bytes is bad", l.bad && l.p <= long_one + 10);
  am_reader e = {cut, cut, 0};
  CHECK("no byte to read is bad", am_get_byte(&e) == 0 && e.bad);
}

static void test_layout(void) {
  CHECK("a recording's chunk header is 40 bytes", sizeof(am_chunk) == 40);
  CHECK("a trace's header is 56 bytes", sizeof(am_trace_head) == 56);
  CHECK("a trace's chunk header is 16 bytes", sizeof(am_trace_chunk) == 16);
  CHECK("an event fits its room", 1 + 10 * 5 <= AM_REC_EVENT_MAX);
}

int main(void) {
  test_round_trip();
  test_zigzag();
  test_bounds();
  test_layout();
  return am_checked();
}
