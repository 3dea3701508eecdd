"""Run the generated CUDA on the CPU, with CUDA's execution model emulated (target "cuda-emu").

The CUDA text is compiled as C++ with a small shim: every thread of a block is an OS
thread, ``__syncthreads`` is a block-wide barrier, ``__shfl_xor_sync`` exchanges values
through a per-warp barrier, ``__shared__`` variables are shared by the block's threads
(blocks run one after another). So block reductions, shared buffers and the thread/block
mappings of :mod:`.emit_cuda` execute, and can be checked against the reference, on
machines and CI runners without a GPU. It is slow (a thread per CUDA thread): meant for
small tests. A barrier that waits too long (a ``__syncthreads`` not reached by every
thread) fails the launch instead of hanging (after $FUSIONLANG_EMU_TIMEOUT seconds, 20 by
default).
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import time
from pathlib import Path

import numpy as np

from fusionlang.backend.ccompile import link_libraries
from fusionlang.backend.kernel_cache import cached_build, entry_key, entry_path
from fusionlang.backend.failures import RECORD, failure
from fusionlang.backend.memory import ALIGN
from fusionlang.backend.outputs import gather_outputs
from fusionlang.backend.kernel_build import KernelBuild
from fusionlang.backend.runtime_cuda import build_cuda_program, kernel_infos
from fusionlang.errors import CodegenError

#: threads per block in emulation (kernels read blockDim, so any multiple of 32 is valid)
EMU_BLOCK = int(os.environ.get("FUSIONLANG_EMU_BLOCK", "64"))

SHIM = r"""
#include <cmath>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>
#include <memory>
#include <mutex>
#include <condition_variable>
#include <chrono>
#include <atomic>
struct fl_dim3 { unsigned x, y, z; };
struct float4 { float x, y, z, w; };  // CUDA's, without its 16-byte alignment: the emulator reads the caller's arrays
static thread_local fl_dim3 threadIdx, blockIdx;
static fl_dim3 blockDim, gridDim;
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(x)
#define __align__(n) __attribute__((aligned(n)))
#define __shared__ static
namespace fl_emu {
std::atomic<bool> failed{false};
struct Barrier {
  explicit Barrier(unsigned n) : count(n), waiting(0), phase(0) {}
  void wait() {
    if (failed) return;
    std::unique_lock<std::mutex> lock(m);
    unsigned my = phase;
    if (++waiting == count) { waiting = 0; ++phase; cv.notify_all(); return; }
    const long limit = std::getenv("FUSIONLANG_EMU_TIMEOUT") ? std::atol(std::getenv("FUSIONLANG_EMU_TIMEOUT")) : 20;
    if (!cv.wait_for(lock, std::chrono::seconds(limit), [&] { return phase != my || failed; })) {
      failed = true; cv.notify_all();
    }
  }
  unsigned count, waiting, phase;
  std::mutex m;
  std::condition_variable cv;
};
static Barrier* block_barrier;
struct Warp {
  std::unique_ptr<Barrier> bar; float f[32]; double d[32]; float a[32][4]; float b[32][2]; float a16[32][8];
  float b16[32][4];
};
static std::vector<Warp>* warps;
template <class F> int launch(unsigned grid, unsigned block, F f) {
  // one OS thread per CUDA thread of a block; the same threads run the blocks in turn
  failed = false;
  gridDim = {grid, 1, 1};
  blockDim = {block, 1, 1};
  Barrier bar(block), between(block);
  block_barrier = &bar;
  std::vector<Warp> ws((block + 31) / 32);
  for (unsigned w = 0; w < ws.size(); w++) ws[w].bar.reset(new Barrier(std::min(32u, block - 32 * w)));
  warps = &ws;
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < block; t++)
    threads.emplace_back([&, t] {
      for (unsigned b = 0; b < grid && !failed; b++) {
        threadIdx = {t, 0, 0};
        blockIdx = {b, 0, 0};
        f();
        between.wait();
      }
    });
  for (auto& t : threads) t.join();
  return failed ? 1 : 0;
}
}  // namespace fl_emu
static inline void __syncthreads() { fl_emu::block_barrier->wait(); }
static inline void __syncwarp() { (*fl_emu::warps)[threadIdx.x / 32].bar->wait(); }
static inline float __shfl_xor_sync(unsigned, float v, int o) {
  fl_emu::Warp& w = (*fl_emu::warps)[threadIdx.x / 32];
  unsigned lane = threadIdx.x % 32;
  w.f[lane] = v; w.bar->wait(); float r = w.f[lane ^ o]; w.bar->wait(); return r;
}
static inline double __shfl_xor_sync(unsigned, double v, int o) {
  fl_emu::Warp& w = (*fl_emu::warps)[threadIdx.x / 32];
  unsigned lane = threadIdx.x % 32;
  w.d[lane] = v; w.bar->wait(); double r = w.d[lane ^ o]; w.bar->wait(); return r;
}
template <class T> static inline T fl_emu_shfl_bits(T v, int o) {  // 64-bit integers, through the double slots
  fl_emu::Warp& w = (*fl_emu::warps)[threadIdx.x / 32];
  unsigned lane = threadIdx.x % 32;
  std::memcpy(&w.d[lane], &v, 8); w.bar->wait(); T r; std::memcpy(&r, &w.d[lane ^ o], 8); w.bar->wait(); return r;
}
static inline long long __shfl_xor_sync(unsigned, long long v, int o) { return fl_emu_shfl_bits(v, o); }
static inline unsigned long long __shfl_xor_sync(unsigned, unsigned long long v, int o) {
  return fl_emu_shfl_bits(v, o);
}
static inline float fl_emu_tf32(float x) {  // cvt.rna.tf32.f32: 10 mantissa bits, ties away from zero
  unsigned u; std::memcpy(&u, &x, 4);
  if ((u & 0x7f800000u) != 0x7f800000u) u = (u + 0x1000u) & 0xffffe000u;
  std::memcpy(&x, &u, 4); return x;
}
// mma.sync.m16n8k8 (tf32 in, fp32 accumulate) across the emulated warp: every lane posts its
// fragments, then computes the four elements of d it owns from the whole A and B
static inline void fl_emu_mma_tf32(float* d, const float* a, const float* b) {
  fl_emu::Warp& w = (*fl_emu::warps)[threadIdx.x / 32];
  unsigned lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  for (int r = 0; r < 4; r++) w.a[lane][r] = fl_emu_tf32(a[r]);
  for (int r = 0; r < 2; r++) w.b[lane][r] = fl_emu_tf32(b[r]);
  w.bar->wait();
  for (int r = 0; r < 4; r++) {
    unsigned row = g + 8 * (r / 2), col = 2 * t + r % 2;
    float sum = d[r];
    for (unsigned k = 0; k < 8; k++)
      sum += w.a[(row % 8) * 4 + k % 4][row / 8 + 2 * (k / 4)] * w.b[col * 4 + k % 4][k / 4];
    d[r] = sum;
  }
  w.bar->wait();
}
// mma.sync.m16n8k16 (16-bit in, fp32 accumulate), the fragments already widened: lane l posts
// a[g + 8(r%2)][2t + 8(r/2) + h] as a[2r + h] and b[2t + 8r + h][g] as b[2r + h]
static inline void fl_emu_mma_k16(float* d, const float* a, const float* b) {
  fl_emu::Warp& w = (*fl_emu::warps)[threadIdx.x / 32];
  unsigned lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  for (int r = 0; r < 8; r++) w.a16[lane][r] = a[r];
  for (int r = 0; r < 4; r++) w.b16[lane][r] = b[r];
  w.bar->wait();
  for (int r = 0; r < 4; r++) {
    unsigned row = g + 8 * (r / 2), col = 2 * t + r % 2;
    float sum = d[r];
    for (unsigned k = 0; k < 16; k++) {
      unsigned ka = (k % 8) / 2, reg = row / 8 + 2 * (k / 8), half = k % 2;
      sum += w.a16[(row % 8) * 4 + ka][2 * reg + half] * w.b16[col * 4 + ka][2 * (k / 8) + half];
    }
    d[r] = sum;
  }
  w.bar->wait();
}
static inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }
static inline double __longlong_as_double(long long i) { double d; std::memcpy(&d, &i, 8); return d; }
static inline unsigned long long atomicCAS(unsigned long long* p, unsigned long long expected, unsigned long long v) {
  __atomic_compare_exchange_n(p, &expected, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
  return expected;
}
"""


def _launcher(name: str, types: list[str]) -> str:
    casts = ", ".join(f"({t})a[{k}]" for k, t in enumerate(types + ["unsigned char*", "long long*"]))
    return (f'extern "C" int fl_emu_{name}(unsigned grid, unsigned block, void** a) {{\n'
            f"  return fl_emu::launch(grid, block, [&] {{ {name}({casts}); }});\n}}\n")


def _build(source: str) -> Path:
    cxx = os.environ.get("CXX", "c++")
    key = entry_key("emulated cuda", cxx, source)

    def build(out: Path, tmp: Path) -> None:
        src = tmp / "emu.cpp"
        src.write_text(source)
        proc = subprocess.run([cxx, "-std=c++20", "-O1", "-fPIC", "-shared", "-pthread", "-w", str(src), "-o",
                               str(out), *link_libraries()], capture_output=True, text=True)
        if proc.returncode != 0:
            log = proc.stderr.strip().splitlines()
            raise CodegenError("C++ compiler failed on the emulated CUDA: " + " | ".join(log[:12]))

    return cached_build(entry_path(key, "libemu", ".so"), build, key)


class EmuRuntime:
    """The CUDA kernels of a :class:`.kernel_build.KernelBuild` built for the CPU with the
    emulation shim: ``kernels`` and ``source`` say what was built, ``run`` runs it."""

    def __init__(self, build: KernelBuild):
        self.graph, self.buffers, self.constants = build.graph, build.buffers, build.constants
        self.program = build_cuda_program(build.plan, build.lowered, build.check_indices, build.templates,
                                          build.precision)
        self.kernels = kernel_infos(build, self.program)
        self.source = self.program.source
        launchers: dict[str, str] = {}
        for la in self.program.launches:
            launchers.setdefault(la.kernel, _launcher(la.kernel, la.types(self.program)))
        # FUSIONLANG_EMU_TENSOR_CORES=1: the GEMM template's tensor-core path, with mma.sync
        # emulated across the warp, instead of its FMA path
        mma = "#define FL_EMU_MMA 1\n" if os.environ.get("FUSIONLANG_EMU_TENSOR_CORES") == "1" else ""
        compiler_started = time.perf_counter()
        self.lib = ctypes.CDLL(str(_build(mma + SHIM + self.source + "\n" + "\n".join(launchers.values()))))
        #: seconds the C++ compiler took on the emulated kernels (0 when the kernel cache held them)
        self.compiler_seconds = time.perf_counter() - compiler_started
        buffers = build.buffers
        self.arena = np.zeros(buffers.arena_bytes + ALIGN, np.uint8)
        self.base = (-self.arena.ctypes.data) % ALIGN
        self.scratch = np.zeros(max(self.program.scratch_bytes, 16), np.uint8)
        self.errors = np.zeros(RECORD, np.int64)
        self.keep: list[np.ndarray] = []  # the arrays the launches' pointers point into
        self.calls = []
        for la in self.program.launches:
            fn = getattr(self.lib, f"fl_emu_{la.kernel}")
            fn.restype = ctypes.c_int
            fn.argtypes = [ctypes.c_uint, ctypes.c_uint, ctypes.c_void_p]
            self.calls.append((la, fn, la.arrays(self.program)))

    def _address(self, array, feeds) -> int:
        if array.data is not None:
            data = np.ascontiguousarray(array.data)
            self.keep.append(data)
            return data.ctypes.data
        root = self.buffers.root(array.value)
        b = self.buffers.buffers[root]
        if b.kind == "input":
            return feeds[root].ctypes.data
        if b.kind == "const":
            data = np.ascontiguousarray(self.constants[root])
            self.keep.append(data)
            return data.ctypes.data
        return self.arena.ctypes.data + self.base + b.offset

    def execute(self, feeds) -> None:
        self.errors[:] = 0
        for la, fn, arrays in self.calls:
            table = (ctypes.c_void_p * (len(arrays) + 2))(*[self._address(a, feeds) for a in arrays],
                                                            self.scratch.ctypes.data, self.errors.ctypes.data)
            block = la.block if la.exact_block else min(la.block, EMU_BLOCK)
            if fn(la.grid, block, ctypes.cast(table, ctypes.c_void_p)) != 0:
                raise CodegenError(f"emulated kernel {la.kernel}: a barrier was not reached by every thread")
            if self.errors[0]:
                raise failure(self.errors, self.program.sites, la.kernel)

    def run(self, feeds) -> dict:
        self.execute(feeds)

        def read(name, b, t):
            start = self.base + b.offset
            return np.frombuffer(self.arena, np.dtype(t.dtype), t.size, start).reshape(t.shape).copy()
        return gather_outputs(self.graph, self.buffers, self.constants, feeds, read)


__all__ = ["EMU_BLOCK", "EmuRuntime"]
