"""Why ours and do_bench differ by ~1 us on the smallest kernels: the same calls timed by our
timer with the device-side pad after the L2 flush at 0, 20 and 100 us, and by do_bench.

    python benchmarks/gpu_timer_ablation.py     (on the device, after gpu_device_setup.sh)
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))


def main() -> None:
    import torch
    import triton.testing
    from gpu_validate import _load_callable, _Random  # type: ignore[import-not-found]

    from sandboxharness.stages.cases import _payload
    from sandboxharness.worker import gpu
    from sandboxharness.worker.tensorgen import make_inputs, make_outputs

    print("| kernel | axes | pad us | ours ms | do_bench ms | ours/do_bench |")
    print("| --- | --- | --- | --- | --- | --- |")
    for label, dname, axes in [("axpy_f32/cuda_tvmffi_honest", "axpy_f32", {"n": 1048573}),
                               ("axpy_f32/triton_honest", "axpy_f32", {"n": 1048573}),
                               ("rmsnorm_h4096/triton_honest", "rmsnorm_h4096",
                                {"batch_size": 170})]:
        defn, fn = _load_callable(label, dname)
        payload = _payload(defn, axes, {k: _Random() for k in defn.inputs})
        sets = [make_inputs(payload, 1000 + i, "cuda", "") for i in range(50)]
        outs = make_outputs(payload, "cuda")
        for _ in range(5):
            fn(*sets[0], *outs)
        torch.cuda.synchronize()
        db = triton.testing.do_bench(lambda f=fn, s=sets[0], o=outs: f(*s, *o),
                                     return_mode="median")
        for pad in (0.0, 20e-6, 100e-6):
            gpu.PAD_S = pad
            timer = gpu.GpuTimer()
            timer.time_calls([lambda: None])
            if pad == 0.0:
                timer._pad_cycles = 0  # no spin at all, as do_bench
            fresh = [(a, make_outputs(payload, "cuda")) for a in sets]
            _, times, _ = timer.time_calls([lambda a=a, o=o, f=fn: f(*a, *o)
                                            for a, o in fresh])
            med = statistics.median(times) * 1e3
            print(f"| {label} | {axes} | {pad * 1e6:.0f} | {med:.5f} | {db:.5f} | "
                  f"{med / db:.3f} |", flush=True)


if __name__ == "__main__":
    main()
