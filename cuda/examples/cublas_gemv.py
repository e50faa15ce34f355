# Dense bf16 GEMV/GEMM of the same logical shapes through cuBLAS (torch.matmul), beside
# qkern's numbers: K = 4096 with 1 GiB of bf16 weights at NT = 1 and 8, and the MoE expert
# shapes at NT = 4. GB/s = weight bytes / time (CUDA events, back to back).
import sys, torch
dev = torch.device("cuda")
print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, {torch.cuda.get_device_name(0)}")
def bench(rows, k, nt, iters=50):
    w = torch.randn(rows, k, device=dev, dtype=torch.bfloat16)
    x = torch.randn(k, nt, device=dev, dtype=torch.bfloat16)
    for _ in range(5): y = w @ x
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(iters): y = w @ x
    e.record(); torch.cuda.synchronize()
    ms = s.elapsed_time(e) / iters
    return ms, w.numel() * 2 / (ms * 1e-3) / 1e9
rows = (1 << 30) // (2 * 4096)
print("| shape | NT | us | GB/s |\n|---|---|---|---|")
for nt in (1, 8):
    ms, gbs = bench(rows, 4096, nt)
    print(f"| {rows}x4096 bf16 (1 GiB) | {nt} | {ms*1e3:.1f} | {gbs:.0f} |")
for (r, k) in ((640, 2560), (2560, 640)):
    ms, gbs = bench(r, k, 4, 500)
    print(f"| {r}x{k} bf16 expert | 4 | {ms*1e3:.2f} | {gbs:.0f} |")
