"""Verification against the real allocators on this machine and broken libraries."""

from __future__ import annotations

from pathlib import Path

import pytest

from allocmark import allocators
from allocmark.errors import UserError
from allocmark.model import AllocatorSpec, Status, Verified
from tests.conftest import build_so, cli

pytestmark = pytest.mark.integration

NO_MALLOC = "int am_not_an_allocator(void) { return 42; }\n"
CRASH_AT_LOAD = """
#include <signal.h>
__attribute__((constructor)) static void am_boom(void) { raise(SIGSEGV); }
void *malloc(unsigned long n) { (void)n; return 0; }
"""
I386_SCUDO = Path("/usr/lib/llvm-16/lib/clang/16/lib/linux/libclang_rt.scudo_standalone-i386.so")


def test_glibc_is_ok_and_served_by_libc(installed: dict[str, Verified]) -> None:
    g = installed["glibc"]
    assert g.status is Status.OK
    assert g.library is not None and "libc.so" in g.library
    assert g.malloc_object == g.library
    assert g.version and g.version[0].isdigit()


def test_every_installed_allocator_really_serves_malloc(
    verified_catalog: list[Verified],
) -> None:
    found = [v for v in verified_catalog if v.status is not Status.MISSING]
    assert len(found) >= 2, "at least glibc and one preloadable allocator must be installed"
    # bullseye's glibc runs no program built here (they need GLIBC_2.34): refused as broken
    old = [v for v in found if v.spec.base == "glibc@2.31"]
    assert all("need GLIBC_2.34" in v.reason and not v.usable for v in old), old
    for v in (v for v in found if v not in old):
        assert v.usable, f"{v.spec.name}: {v.reason}"
        served = dict(v.served)
        for func in allocators.CORE:
            assert served[func] == v.library, f"{v.spec.name}: {func} from {served[func]}"
        assert v.sha256 and len(v.sha256) == 64


def test_partial_allocators_list_what_glibc_still_serves(installed: dict[str, Verified]) -> None:
    if "jemalloc" not in installed:
        pytest.skip("Debian jemalloc is not installed")
    je = installed["jemalloc"]
    # Debian's libjemalloc.so.2 exports neither reallocarray nor pvalloc.
    assert je.status is Status.PARTIAL
    assert {"reallocarray", "pvalloc"} <= set(je.lacks)
    assert "mixes two heaps" in je.reason


def test_variant_inherits_library_and_adds_env(installed: dict[str, Verified]) -> None:
    if "jemalloc:nodecay" not in installed:
        pytest.skip("Debian jemalloc is not installed")
    v = installed["jemalloc:nodecay"]
    assert v.library == installed["jemalloc"].library
    assert v.child_env()["MALLOC_CONF"] == "dirty_decay_ms:0,muzzy_decay_ms:0"
    assert v.child_env()["LD_PRELOAD"] == v.library


def test_missing_library_says_how_to_install() -> None:
    spec = AllocatorSpec(name="ghost", paths=("/nonexistent/libghost.so",), package="libghost1")
    v = allocators.verify(spec)
    assert v.status is Status.MISSING
    assert "apt-get install -y libghost1" in v.reason


def test_library_without_malloc_is_broken(tmp_path: Path) -> None:
    so = build_so(tmp_path, "nomalloc", NO_MALLOC)
    v = allocators.verify(AllocatorSpec(name="nm", paths=(str(so),)))
    assert v.status is Status.BROKEN
    assert "does not export malloc" in v.reason


def test_library_that_crashes_at_load_is_broken(tmp_path: Path) -> None:
    so = build_so(tmp_path, "crash", CRASH_AT_LOAD)
    v = allocators.verify(AllocatorSpec(name="cr", paths=(str(so),)))
    assert v.status is Status.BROKEN
    assert v.reason == "crashes at load (SIGSEGV)"


def test_preload_ignored_by_ld_so_is_broken() -> None:
    if not I386_SCUDO.exists():
        pytest.skip("no 32-bit shared object to preload")
    v = allocators.verify(AllocatorSpec(name="i386", paths=(str(I386_SCUDO),)))
    assert v.status is Status.BROKEN
    assert v.reason.startswith("preload ignored by ld.so (wrong ELF class")


def test_text_file_is_not_a_shared_object(tmp_path: Path) -> None:
    fake = tmp_path / "libfake.so"
    fake.write_text("not elf")
    v = allocators.verify(AllocatorSpec(name="f", paths=(str(fake),)))
    assert v.status is Status.BROKEN and "not an ELF file" in v.reason


def test_user_allocator_that_is_unusable_is_a_usage_error(tmp_path: Path) -> None:
    so = build_so(tmp_path, "nomalloc", NO_MALLOC)
    adhoc = allocators.parse_selection([f"mine={so}"]).adhoc
    with pytest.raises(UserError, match="allocator 'mine': does not export malloc"):
        allocators.verify_all(adhoc)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda d: d / "nope.so", "does not exist"),
        (lambda d: (d / "text.so").write_text("hello") and d / "text.so", "not an ELF file"),
        (lambda d: build_so(d, "nomalloc", NO_MALLOC), "does not export malloc"),
    ],
)
def test_cli_refuses_bad_user_library_with_exit_2(tmp_path: Path, make, message: str) -> None:  # type: ignore[no-untyped-def]
    path = make(tmp_path)
    result = cli("allocators", "-a", f"mine={path}")
    assert result.returncode == 2, result.stderr
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_cli_lists_user_library_that_works(installed: dict[str, Verified]) -> None:
    if "mimalloc" not in installed:
        pytest.skip("Debian mimalloc is not installed")
    lib = installed["mimalloc"].library
    result = cli("allocators", "-a", f"mine={lib}:MIMALLOC_VERBOSE=0")
    assert result.returncode == 0, result.stderr
    assert "mine" in result.stdout and "ok" in result.stdout


def test_catalog_file_errors_name_file_and_key(tmp_path: Path) -> None:
    bad = tmp_path / "cat.toml"
    bad.write_text('[allocator.x]\nlibrary = "/x.so"\nversoin = "dpkg"\n')
    result = cli("allocators", "--catalog", str(bad))
    assert result.returncode == 2
    assert "cat.toml: key 'allocator.x.versoin': unknown key" in result.stderr
