"""Why ours and do_bench differ by ~1 us on the smallest kernels: the same calls timed by our
timer with the device-side pad after the L2 flush at 0, 20 and 100 us, and by do_bench; then
(``--inputs``) both with one input set reused and with fresh inputs per call.

    python benchmarks/gpu_timer_ablation.py [--inputs]   (on the device, after setup)
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))


def inputs_table() -> None:
    """Ours and do_bench, each with the same input set every call and with fresh ones."""
    import itertools

    import triton.testing
    from gpu_validate import warm_kernel  # type: ignore[import-not-found]

    from sandboxharness.inputs.tensorgen import make_outputs
    from sandboxharness.worker import gputimer as gpu

    print("| kernel | ours same | ours fresh | do_bench same | do_bench fresh |")
    print("| --- | --- | --- | --- | --- |")
    timer = gpu.GpuTimer()
    for label, dname, axes in [("axpy_f32/cuda_tvmffi_honest", "axpy_f32", {"n": 1048573}),
                               ("axpy_f32/triton_honest", "axpy_f32", {"n": 1048573})]:
        fn, payload, inputs, _ = warm_kernel(label, dname, axes, 50)
        sets = [(a, make_outputs(payload, "cuda")) for a in inputs]
        a0, o0 = sets[0]
        same = statistics.median(timer.time_calls(
            [lambda f=fn, a=a0, o=o0: f(*a, *o)] * 50)[1]) * 1e3
        fresh = statistics.median(timer.time_calls(
            [lambda f=fn, a=a, o=o: f(*a, *o) for a, o in sets])[1]) * 1e3
        db_same = triton.testing.do_bench(lambda f=fn, a=a0, o=o0: f(*a, *o),
                                          return_mode="median")
        cyc = itertools.cycle(sets)

        def rotating(f: object = fn, c: object = cyc) -> None:
            a, o = next(c)  # type: ignore[call-overload]
            f(*a, *o)  # type: ignore[operator]

        db_fresh = triton.testing.do_bench(rotating, return_mode="median")
        print(f"| {label} | {same:.5f} | {fresh:.5f} | {db_same:.5f} | {db_fresh:.5f} |",
              flush=True)
    print(f"timer: {timer.method}")


def main() -> None:
    if "--inputs" in sys.argv:
        inputs_table()
        return
    import triton.testing
    from gpu_validate import warm_kernel  # type: ignore[import-not-found]

    from sandboxharness.inputs.tensorgen import make_outputs
    from sandboxharness.worker import gputimer as gpu

    print("| kernel | axes | pad us | ours ms | do_bench ms | ours/do_bench |")
    print("| --- | --- | --- | --- | --- | --- |")
    for label, dname, axes in [("axpy_f32/cuda_tvmffi_honest", "axpy_f32", {"n": 1048573}),
                               ("axpy_f32/triton_honest", "axpy_f32", {"n": 1048573}),
                               ("rmsnorm_h4096/triton_honest", "rmsnorm_h4096",
                                {"batch_size": 170})]:
        fn, payload, sets, outs = warm_kernel(label, dname, axes, 50)
        db = triton.testing.do_bench(lambda f=fn, s=sets[0], o=outs: f(*s, *o),
                                     return_mode="median")
        for pad in (0.0, 20e-6, 100e-6):
            gpu.PAD_S = pad
            timer = gpu.GpuTimer()
            timer.time_calls([lambda: None])  # PAD_S 0: a 1-cycle spin, i.e. none
            fresh = [(a, make_outputs(payload, "cuda")) for a in sets]
            _, times, _ = timer.time_calls([lambda a=a, o=o, f=fn: f(*a, *o)
                                            for a, o in fresh])
            med = statistics.median(times) * 1e3
            print(f"| {label} | {axes} | {pad * 1e6:.0f} | {med:.5f} | {db:.5f} | "
                  f"{med / db:.3f} |", flush=True)


if __name__ == "__main__":
    main()
