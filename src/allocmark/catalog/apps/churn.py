"""allocmark's python workload: dicts, lists, strings and small objects churned
by THREADS threads over SCALE units of work (run with PYTHONMALLOC=malloc, so
that every object comes from the allocator under test). Prints one JSON line."""

import json
import sys
import threading

threads = int(sys.argv[1]) if len(sys.argv) > 1 else 1
scale = int(sys.argv[2]) if len(sys.argv) > 2 else 10
per_thread = 40_000 * scale // threads
WINDOW = 20_000
sums = [0] * threads


class Rec:
    __slots__ = ("key", "meta", "vals")

    def __init__(self, key: str, vals: list[str], meta: dict[str, object]) -> None:
        self.key, self.vals, self.meta = key, vals, meta


def work(t: int) -> None:
    live: list[Rec | None] = [None] * WINDOW
    total = 0
    for i in range(per_thread):
        s = f"k{t}-{i}-" * (1 + i % 13)
        meta: dict[str, object] = {s: i, "up": s.upper(), f"r{i % 97}": s[::-1]}
        vals = [f"{j}:{i}" for j in range(i % 40)]
        live[i % WINDOW] = Rec(s, vals, meta)
        if i % 2000 == 0:
            total += sum(len(r.vals) for r in live if r is not None) + len(",".join(sorted(vals)))
    sums[t] = total


workers = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
for w in workers:
    w.start()
for w in workers:
    w.join()
print(json.dumps({"ops": per_thread * threads, "checksum": sum(sums)}))
