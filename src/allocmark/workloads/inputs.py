"""Inputs of the application workloads: generated here, deterministic, cached.

Every generator turns `scale` into bytes that are the same on every machine and
with every library version: the random numbers come from a counter-based mixer
(splitmix64) computed with numpy, not from a library's random stream, which may
change between versions. A generated file is cached under the cache directory,
named by generator, its version and scale, and written atomically, so a
half-written input is never used.
"""

from __future__ import annotations

import stat
from collections.abc import Callable
from pathlib import Path
from typing import IO

import numpy as np

from allocmark import files, native
from allocmark.errors import UserError

VERSION = 1  # bump when any generator's output changes


def _mix(start: int, n: int) -> np.ndarray:
    """n pseudo-random uint64 values, a pure function of (start, i)."""
    x = (np.arange(n, dtype=np.uint64) + np.uint64(start)) * np.uint64(0x9E3779B97F4A7C15)
    x ^= x >> np.uint64(30)
    x *= np.uint64(0xBF58476D1CE4E5B9)
    x ^= x >> np.uint64(27)
    x *= np.uint64(0x94D049BB133111EB)
    x ^= x >> np.uint64(31)
    return x


def _uniform(start: int, n: int) -> np.ndarray:
    return (_mix(start, n) >> np.uint64(11)).astype(np.float64) / float(1 << 53)


_WORDS = (
    "the of and to in a is that for it as was with be by on not he this are or his from at "
    "which but have an they you were her she there been one all we their has would when if "
    "so no will more about out up into them can said other then what some time two may only "
    "memory allocator thread arena block page heap free list size class cache span slab "
    "fragmentation throughput latency benchmark measurement kernel process mapping region "
    "allocation deallocation contention scalability locality overhead reuse metadata"
)


def text(scale: int, f: IO[bytes]) -> None:
    """`scale` MiB of word salad with a skewed word frequency (compressible like prose)."""
    vocab = np.array([w.encode() for w in _WORDS.split()], dtype=object)
    want, start = scale << 20, 0
    while want > 0:
        u = _uniform(start, 65536)
        words = vocab[(u * u * len(vocab)).astype(np.int64)]
        lines = [b" ".join(words[i : i + 12]) for i in range(0, len(words), 12)]
        chunk = b"\n".join(lines)[:want] + b"\n"
        f.write(chunk)
        want -= len(chunk)
        start += 65536


def sql(scale: int, f: IO[bytes]) -> None:
    """A SQLite session: inserts, an index, updates, deletes, joins, all in memory."""
    users, orders = 4000 * scale, 12000 * scale
    u = _uniform(1, users * 3)
    o = _uniform(2, orders * 3)
    parts = [
        "CREATE TABLE users(id INTEGER PRIMARY KEY, name TEXT, score REAL, bio TEXT);\n"
        "CREATE TABLE orders(id INTEGER PRIMARY KEY, user_id INTEGER, item TEXT, qty INTEGER);\n"
        "BEGIN;\n"
    ]
    for i in range(users):
        bio = "x" * int(8 + u[3 * i + 2] * 400)
        parts.append(f"INSERT INTO users VALUES({i},'user{i}',{u[3 * i]:.6f},'{bio}');\n")
    for i in range(orders):
        user, item = int(o[3 * i] * users), "item" * int(1 + o[3 * i + 1] * 40)
        parts.append(f"INSERT INTO orders VALUES({i},{user},'{item}',{int(o[3 * i + 2] * 100)});\n")
    parts.append(
        "COMMIT;\n"
        "CREATE INDEX orders_user ON orders(user_id);\n"
        "CREATE INDEX users_score ON users(score);\n"
        "UPDATE users SET bio = bio || bio WHERE id % 3 = 0;\n"
        "UPDATE orders SET item = substr(item, 1, 20) WHERE qty % 4 = 0;\n"
        "DELETE FROM orders WHERE qty % 5 = 0;\n"
        "DELETE FROM users WHERE id % 11 = 0;\n"
        "SELECT u.id % 10, count(*), sum(o.qty), avg(length(u.bio)) FROM users u "
        "JOIN orders o ON o.user_id = u.id GROUP BY u.id % 10 ORDER BY 1;\n"
        "SELECT item, count(*) FROM orders GROUP BY item ORDER BY 2 DESC LIMIT 5;\n"
        "CREATE TABLE summary AS SELECT user_id, group_concat(item) AS items "
        "FROM orders GROUP BY user_id;\n"
        "SELECT count(*), max(length(items)) FROM summary;\n"
        "VACUUM;\n"
    )
    f.write("".join(parts).encode())


def c_source(scale: int, f: IO[bytes]) -> None:
    """A C file of 40 x scale functions, each with loops, a switch and a table:
    cc1 at -O2 allocates for every statement, basic block and pass."""
    parts = [
        "#include <stddef.h>\n#include <string.h>\n",
        "struct am_rec { int key; double w; char tag[16]; struct am_rec *next; };\n",
    ]
    r = _mix(3, 40 * scale)
    for i in range(40 * scale):
        k = int(r[i] % 7) + 3
        cases = "".join(
            f"      case {c}: acc += v[i] * {c + k} - (acc >> {c % 5 + 1}); break;\n"
            for c in range(k * 2)
        )
        table = ", ".join(str((i * 31 + j * 17) % 1000) for j in range(k * 4))
        parts.append(
            f"static const int am_t{i}[] = {{{table}}};\n"
            f"long am_f{i}(const int *v, size_t n, struct am_rec *r) {{\n"
            f"  long acc = {i};\n"
            f"  for (size_t i = 0; i < n; i++) {{\n"
            f"    switch ((v[i] + am_t{i}[i % {k * 4}]) % {k * 2}) {{\n{cases}"
            f"      default: acc ^= v[i];\n    }}\n"
            f"    if (r && r->key == (int)i) {{ r->w += acc * 0.5; memcpy(r->tag, &acc, 8); }}\n"
            f"  }}\n"
            f"  for (struct am_rec *p = r; p; p = p->next) acc += p->key * {k};\n"
            f"  return acc;\n}}\n"
        )
    f.write("".join(parts).encode())


def image(scale: int, f: IO[bytes]) -> None:
    """A (1024 x scale)-square colour PPM: gradients, rings and noise. Integer
    arithmetic only, so that no platform's float rounding changes a pixel."""
    side = 1024 * scale
    y, x = np.mgrid[0:side, 0:side].astype(np.int64)
    noise = (_mix(4, side * side) % np.uint64(64)).astype(np.int64).reshape(side, side)
    rings = ((x - side // 2) ** 2 + (y - side // 2) ** 2) // (side // 32) % 160
    rgb = np.stack([x * 200 // side + noise, rings + noise // 2, y * 150 // side + rings // 2], -1)
    f.write(f"P6\n{side} {side}\n255\n".encode())
    f.write(np.clip(rgb, 0, 255).astype(np.uint8).tobytes())


FRAME_W, FRAME_H = 640, 360  # the x264 workload's --input-res


def frames(scale: int, f: IO[bytes]) -> None:
    """20 x scale raw YUV 4:2:0 frames: a moving disc and gradient over noise."""
    y, x = np.mgrid[0:FRAME_H, 0:FRAME_W].astype(np.int64)
    for t in range(20 * scale):
        noise = _mix(5 + t * FRAME_W * FRAME_H, FRAME_W * FRAME_H) % np.uint64(24)
        disc = (x - 8 * t % FRAME_W) ** 2 + (y - FRAME_H // 2) ** 2 < 3600
        luma = (x + 3 * t) % 256 // 2 + 60 * disc
        luma = luma + noise.reshape(FRAME_H, FRAME_W).astype(np.int64)
        f.write(np.clip(luma, 0, 255).astype(np.uint8).tobytes())
        chroma = np.full((FRAME_H // 2, FRAME_W // 2), 128 + t % 32, dtype=np.uint8)
        f.write(chroma.tobytes() * 2)  # U and V planes


GENERATORS: dict[str, tuple[Callable[[int, IO[bytes]], None], str]] = {
    "text": (text, "txt"),
    "sql": (sql, "sql"),
    "c_source": (c_source, "c"),
    "image": (image, "ppm"),
    "frames": (frames, "yuv"),
}


def inputs_dir() -> Path:
    return native.cache_root() / "inputs"


# The measured program reads its input, and may run as another user (run/runas.py).
READABLE = 0o644


def ensure(generator: str, scale: int) -> Path:
    """The cached input, generated first if missing."""
    if generator not in GENERATORS:
        raise UserError(f"unknown input generator {generator!r}; known: {', '.join(GENERATORS)}")
    make, ext = GENERATORS[generator]
    path = inputs_dir() / f"{generator}-v{VERSION}-scale{scale}.{ext}"
    if path.is_file():
        if not path.stat().st_mode & stat.S_IROTH:  # made private by an earlier allocmark
            path.chmod(READABLE)
        return path
    files.directory(path.parent, parents=True)
    with files.writing(path, READABLE, "the input", binary=True) as f:
        make(scale, f)  # renamed in whole: readers see all of it or nothing
    return path
