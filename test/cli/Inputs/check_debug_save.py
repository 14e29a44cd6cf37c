"""Checks the .npy files of COIL_DEBUG_PRINTER=save for the example MLP.

usage: check_debug_save.py DIR INPUTS.npz OUTPUTS.npz

numpy must load every file; the saved model input and each launch's view of it must equal the
input; the last kernel's written output must equal the model's output; a buffer written by one
launch must be what the next launch reads (after_k0_sum layernormalization == before of the
first GEMM's in0). The GEMM launches are coil_cpu_gemm_bias_f32_* or coil_cuda_gemm_bias_f32_* (CPU or
CUDA package). Prints the sorted file names.
"""
import os
import sys

import numpy as np


def main():
    d, inputs, outputs = sys.argv[1:4]
    x = np.load(inputs)["x"]
    probs = np.load(outputs)["probs"]
    files = sorted(f for f in os.listdir(d) if f.endswith(".npy"))
    arrays = {f: np.load(os.path.join(d, f)) for f in files}
    gemm = [f[len("before_"):-len("_0_in0.npy")] for f in files
            if f.startswith("before_coil_") and f.endswith("_gemm_bias_f32_0_in0.npy")]
    assert len(gemm) == 1, files
    gemm = gemm[0]
    for f, a in arrays.items():
        assert a.dtype == np.float32, (f, a.dtype)
    assert np.array_equal(arrays["input_x.npy"], x)
    assert np.array_equal(arrays["before_k0_sum_x.npy"], x)
    assert np.array_equal(arrays["after_k0_sum_x.npy"], x)
    assert np.array_equal(arrays["after_k1_max_softmax.npy"], probs)
    assert np.array_equal(arrays["after_k0_sum_layernormalization.npy"],
                          arrays[f"before_{gemm}_0_in0.npy"])
    assert arrays[f"after_{gemm}_0_out0.npy"].shape == (x.shape[0], 32)
    for f in files:
        print(f)


if __name__ == "__main__":
    main()
