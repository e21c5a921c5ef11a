/* Run-time loader for a user-installed libsmctrl (nothing of it is shipped or built here). */
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>

#include "sgl_duet_kernel.h"

int sgld_fail(int code, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

typedef void (*mask64_fn)(void* stream, uint64_t mask);
typedef void (*mask128_fn)(void* stream, unsigned __int128 mask);

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static mask64_fn g_mask64;
static mask128_fn g_mask128;

SGLD_API int sgld_smctrl_open(const char* path) {
  const char* name = path && path[0] ? path : "libsmctrl.so";
  pthread_mutex_lock(&g_lock);
  int rc = SGLD_OK;
  if (g_mask64 == NULL && g_mask128 == NULL) {
    void* lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
      const char* why = dlerror();
      rc = sgld_fail(SGLD_E_NO_LIBSMCTRL, "dlopen(%s) failed: %s", name, why ? why : "?");
    } else {
      g_mask128 = (mask128_fn)dlsym(lib, "libsmctrl_set_stream_mask_ext");
      g_mask64 = (mask64_fn)dlsym(lib, "libsmctrl_set_stream_mask");
      if (g_mask64 == NULL && g_mask128 == NULL) {
        dlclose(lib);
        rc = sgld_fail(SGLD_E_NO_LIBSMCTRL,
                       "%s has neither libsmctrl_set_stream_mask_ext nor "
                       "libsmctrl_set_stream_mask",
                       name);
      }
    }
  }
  pthread_mutex_unlock(&g_lock);
  return rc;
}

SGLD_API int sgld_smctrl_has_ext(void) { return g_mask128 != NULL; }

SGLD_API int sgld_smctrl_set_stream_mask(void* stream, uint64_t lo, uint64_t hi) {
  if (stream == NULL) return sgld_fail(SGLD_E_INVALID, "stream is NULL (use a created stream)");
  if (g_mask128 != NULL) {
    g_mask128(stream, ((unsigned __int128)hi << 64) | lo);
    return SGLD_OK;
  }
  if (g_mask64 == NULL) return sgld_fail(SGLD_E_NO_LIBSMCTRL, "libsmctrl is not loaded");
  /* NOTE: a 64-bit-only libsmctrl cannot address TPC 64+; refuse rather than drop bits. */
  if (hi != 0)
    return sgld_fail(SGLD_E_INVALID,
                     "mask needs TPC bits >= 64 but libsmctrl lacks set_stream_mask_ext");
  g_mask64(stream, lo);
  return SGLD_OK;
}
