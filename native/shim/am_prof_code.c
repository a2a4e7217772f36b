// libamprof.so — whose call is it? The allocator's code and the libraries it needs.
// See am_prof.h.
#include "am_prof.h"

am_code_t am_code[AM_CODE_MAX];
int am_ncode;
uintptr_t am_alloc_base;
const char *am_needed[32];
int am_nneeded;

int am_system_library(const char *name) {
  static const char *const system[] = {"libc.so",   "libm.so",      "libdl.so",  "libpthread.so",
                                       "librt.so",  "libgcc_s.so",  "ld-linux",  "libstdc++.so",
                                       "libatomic.so"};
  for (size_t i = 0; i < sizeof system / sizeof system[0]; i++)
    if (strncmp(name, system[i], strlen(system[i])) == 0) return 1;
  return 0;
}

int am_code_of(struct dl_phdr_info *info, size_t size, void *arg) {
  (void)size, (void)arg;
  const char *slash = strrchr(info->dlpi_name, '/');
  const char *name = slash ? slash + 1 : info->dlpi_name;
  int wanted = info->dlpi_addr == am_alloc_base && info->dlpi_addr != 0;
  for (int i = 0; !wanted && i < am_nneeded; i++) wanted = strcmp(name, am_needed[i]) == 0;
  for (int i = 0; wanted && i < info->dlpi_phnum && am_ncode < AM_CODE_MAX; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X)) continue;
    am_code[am_ncode].lo = info->dlpi_addr + ph->p_vaddr;
    am_code[am_ncode].hi = am_code[am_ncode].lo + ph->p_memsz;
    am_ncode++;
  }
  return 0;
}

void am_find_allocator_code(void) {
  Dl_info info;
  struct link_map *lm = NULL;
  if (!am_real.malloc || !dladdr1((void *)am_real.malloc, &info, (void **)&lm, RTLD_DL_LINKMAP) ||
      lm == NULL)
    return;
  am_alloc_base = lm->l_addr;
  uintptr_t strtab = 0;
  for (const ElfW(Dyn) *d = lm->l_ld; d->d_tag != DT_NULL; d++)
    if (d->d_tag == DT_STRTAB) strtab = d->d_un.d_ptr;
  if (strtab != 0 && strtab < lm->l_addr) strtab += lm->l_addr;  // not relocated in place
  for (const ElfW(Dyn) *d = lm->l_ld; strtab && d->d_tag != DT_NULL; d++) {
    const char *name = (const char *)strtab + d->d_un.d_val;
    if (d->d_tag == DT_NEEDED && am_nneeded < 32 && !am_system_library(name))
      am_needed[am_nneeded++] = name;
  }
  dl_iterate_phdr(am_code_of, NULL);
}
