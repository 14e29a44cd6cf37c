/* libcoil_runtime's debug printer API: the launches of a loaded model and hooks of one's own
 * (coil verify captures every launch's outputs through them). The hooks' ABI is
 * include/coil/debug_abi.h. */
#ifndef COIL_DEBUG_H
#define COIL_DEBUG_H

#include <coil/coil.h>
#include <coil/debug_abi.h>

#ifdef __cplusplus
extern "C" {
#endif

/* libcoil_runtime. Launches of a loaded model (metadata.json "launches"): count and names
 * (valid while the model is loaded; NULL for an index out of range). */
int64_t coil_model_num_launches(const coil_model *model);
const char *coil_model_launch_name(const coil_model *model, int64_t index);
/* Installs `hooks` for the model's later runs (NULL: back to what the environment chose at
 * load time). The hooks must outlive those runs; their num_launches must be the model's. */
coil_status coil_model_set_debug_hooks(coil_model *model, const coil_debug_hooks *hooks);
/* From inside a hook: copies the `bytes` bytes of TENSOR value `value` of `launch` into host
 * memory at `dst`. Host data is copied; device data (CUDA packages: value->on_device) is read
 * after the run's stream (launch->device_ctx) is synchronized, through the CUDA runtime's
 * reader. COIL_OK, or COIL_ERROR_INVALID_ARGUMENT (not a tensor, NULL data with bytes > 0) /
 * COIL_ERROR_RUNTIME (no device reader, a driver error) with coil_last_error(). */
coil_status coil_debug_read_value(const coil_debug_launch *launch, const coil_debug_value *value,
                                  void *dst, size_t bytes);

#ifdef __cplusplus
}
#endif

#endif /* COIL_DEBUG_H */
