//! Kernel argument structs (mirrors of kernels/common.cuh) and launch planning, shared by
//! the backend and the emulator tests. Device addresses are plain `u64`s here.

use qkern_formats::Format;

/// Jobs per launch (`QK_MAX_JOBS`).
pub const MAX_JOBS: usize = 16;
/// Tokens per job (the largest `NTM` instantiated).
pub const MAX_NT: usize = 8;
/// Threads per matmul CTA.
pub const MM_BLOCK: u32 = 256;

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct MmJob {
    pub w: u64,
    pub wd: u64,
    pub a_qs: u64,
    pub a_d: u64,
    pub a_x: u64,
    pub out: u64,
    pub rows: u32,
    pub nt: u32,
    pub cta0: u32,
    /// Token stride of the activation regions.
    pub capw: u32,
    /// The activation buffer address whose bytes the module's constant bank (`qk_cact`)
    /// holds for the `qk_mmc_*` kernels (0 otherwise).
    pub a_cb: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct MmArgs {
    pub njobs: u32,
    pub cols: u32,
    pub nb: u32,
    /// Weight-body bytes per row to prefetch into L2 first (small launches), or 0.
    pub pf: u32,
    /// The shared-memory row kernels: the launch's dynamic shared bytes ([`MmLaunch::shared`];
    /// mm_common.cuh `mmc_body` runs its global-memory body where its copy would not fit), else 0.
    pub alen: u32,
    pub pad0: u32,
    pub tab: u64,
    pub jobs: [MmJob; MAX_JOBS],
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct QuantArgs {
    pub x: u64,
    pub qs: u64,
    pub d16: u64,
    pub d32: u64,
    pub x16: u64,
    pub x32: u64,
    pub cols: u32,
    pub tokens: u32,
    pub capw: u32,
    pub pad: u32,
}

/// The most quantizes one grouped launch runs (common.cuh `QK_QGROUP`).
pub const QGROUP: usize = 16;

/// Up to [`QGROUP`] quantizes of one activation format in one launch (quant.cu `quant_group`):
/// job j's units (blocks, `tokens * cols / block`) end at `end[j]` of their concatenation.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct QuantGroupArgs {
    pub job: [QuantArgs; QGROUP],
    pub end: [u32; QGROUP],
    pub n: u32,
    pub pad: [u32; 3],
}

impl QuantGroupArgs {
    /// A group of `jobs` (1..=[`QGROUP`] of one activation format), or `None` where there are none or too many.
    pub fn new(act: Format, jobs: &[QuantArgs]) -> Option<QuantGroupArgs> {
        if jobs.is_empty() || jobs.len() > QGROUP {
            return None;
        }
        let mut g =
            QuantGroupArgs { job: [QuantArgs::default(); QGROUP], end: [0; QGROUP], n: jobs.len() as u32, pad: [0; 3] };
        let mut end = 0u32;
        for (j, a) in jobs.iter().enumerate() {
            g.job[j] = *a;
            end += quant_units(act, a.cols as usize, a.tokens as usize);
            g.end[j] = end;
        }
        Some(g)
    }
}

/// Blocks of `act` in `tokens` rows of `cols`: a quantize's units (a thread each for q8_0 and
/// q8_1, a warp for q8_K).
pub fn quant_units(act: Format, cols: usize, tokens: usize) -> u32 {
    (tokens * (cols / act.block_elems())) as u32
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct DeqArgs {
    pub w: u64,
    pub wd: u64,
    pub out: u64,
    pub tab: u64,
    pub rows: u32,
    pub cols: u32,
    pub kind: u32,
    pub pad: u32,
}

const _: () = assert!(core::mem::size_of::<MmJob>() == 72);
const _: () = assert!(core::mem::size_of::<MmArgs>() == 32 + 72 * MAX_JOBS);
const _: () = assert!(core::mem::size_of::<QuantArgs>() == 64);
const _: () = assert!(core::mem::size_of::<QuantGroupArgs>() == 64 * QGROUP + 4 * QGROUP + 16);
const _: () = assert!(core::mem::size_of::<DeqArgs>() == 48);

unsafe impl cudarc::driver::DeviceRepr for MmArgs {}
unsafe impl cudarc::driver::DeviceRepr for QuantArgs {}
unsafe impl cudarc::driver::DeviceRepr for DeqArgs {}

/// Dequantize output element type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeqKind {
    F32 = 0,
    F16 = 1,
    Bf16 = 2,
}

/// The kernel-name stem of a weight format (`q4_k`, `iq2_xxs`, ...).
pub fn stem(format: Format) -> String {
    format.name().to_ascii_lowercase()
}

/// Whether the format has `S = 4` lane-split kernels (the 256-element super-block formats).
pub fn has_split(format: Format) -> bool {
    format.block_elems() == 256
}

/// Threads per weight row: 2 for the 32-element formats (4 lanes each), 2 * S for the
/// 256-element ones (mm_common.cuh `MmCtxW`: iq4_xs's word pairs, `MM_KERNELS_L4` for the
/// others; 4 lanes each).
pub fn threads_per_row(format: Format, s: u32) -> u32 {
    match format {
        f if has_split(f) => 2 * s,
        _ => 2,
    }
}

/// Whether the format has a tensor-core matmul kernel (`qk_mma_*`, mm_common.cuh "Tensor-core
/// kernels": a warp per 16 rows and 8 token slots, integer lane sums by `mma.sync` m16n8k32).
/// Every 256-element format has one, and q5_1 (off by default, [`mma_default_mask`]).
pub fn has_mma(format: Format) -> bool {
    has_split(format) || format == Format::Q5_1
}

/// The token counts (bit `ntm - 1`) at which a format runs its tensor-core kernel by default
/// (0: none): where it measured faster than the lane kernels (H200, 1 GiB, kernel-only GB/s
/// without / with, benches/results/2026-12-04-h200-session10 run3 to run5; the tensor-core
/// kernels cost the same at every NT, the lane kernels slow down with NT): q4_K NT 2 2409 / 2265, NT 4 1300 / 2230;
/// q5_K NT 2 2589 / 2591, NT 4 1489 / 2559; q6_K NT 4 1968 / 1998, NT 8 1118 / 1949; iq2_xxs NT 2
/// 909 / 836, NT 4 614 / 836; iq2_xs NT 2 788 / 833; iq2_s NT 2 1046 / 922, NT 4 723 / 922;
/// iq3_xxs NT 2 1162 / 857, NT 4 834 / 857; iq3_s NT 2 976 / 1206; iq4_xs NT 4 1624 / 1161, NT 8
/// 902 / 1159 (from 6: interpolated, NT 5..7 not measured); iq4_xs again after its tensor-core
/// kernel took two products a lane (session 15, H100, benches/results/2026-12-05-h100-session15
/// run1): NT 2 2108 / 1564, NT 3 939 / 1561, NT 4 1673 / 1556, NT 5 1372 / 1554, NT 8 757 / 1547,
/// so from 3 (NT 4 loses 7 %, NT 3 gains 66 %). q5_1's is off: bit-equal on the H200
/// but slower, NT 8 786 against 1065 (run7; its float chains, not its integer sums, bound it);
/// `QKERN_CUDA_MMA_NT` turns it on.
///
/// Since session 19 q6_K and iq4_xs are tiled (layout.rs), which sped up their lane kernels
/// and slowed their tensor-core kernels (H100, kernel-only GB/s, lanes / tensor cores,
/// benches/results/2026-12-05-h200-session19 run4 `mmant.md`): q6_K NT 4 1790 / 1269, NT 5
/// 1467 / 1270, NT 6 1287 / 1263, NT 7 1064 / 1265, NT 8 1158 / 1264, and its tensor-core
/// kernel with per-row pointers again 1340 at every NT (run5), so from 6; iq4_xs NT 3 1099 /
/// 1493, NT 4 1951 / 1490, NT 5 1483 / 1487, NT 8 730 / 1479, so at 3 and from 5 (its
/// three-token lane kernel spills), not at 4.
///
/// Session 20 retuned those two tensor-core kernels for the tiled layout: q6_K's on one
/// 256-thread CTA an SM without the L2 prefetch (`QK_MINB_MMA_Q6K` 1, `QK_PF_MMA_Q6K` 0),
/// iq4_xs's without the prefetch (H100, benches/results/2026-12-05-session20 run3
/// `ntsweep.md`, lanes / tensor cores): q6_K NT 2 2533 / 1907, NT 3 1500 / 1895, NT 4 1801 /
/// 1877, NT 5 1469 / 1871, NT 8 1160 / 1847, so from 3; iq4_xs NT 3 1103 / 1576, NT 4 1943 /
/// 1569, NT 5 1485 / 1565, NT 8 731 / 1558, as before.
///
/// Session 21 gave iq4_xs's lane threads 4 consecutive lanes (nibbles in element order) and the
/// q8_K activations in quads, which made its tensor cores faster and its lanes from 2 tokens
/// slower (H100, benches/results/2026-12-05-session21 run2 `cq8k.md`, quads, lanes / tensor
/// cores): NT 2 2194 / 2029, NT 3 1787 / 2026, NT 4 1496 / 2023, NT 8 808 / 2011, so from 3.
///
/// Session 28 moved the IQ2/IQ3 tensor-core kernels to fp16 tensor cores (mm_common.cuh
/// `QK_IQ_HMMA`), 4-54 % faster at every NT (H100, benches/results/2026-12-06-session28
/// run1-hmma `ntsweep.md`, lanes / fp16 tensor cores): iq2_xxs NT 2 1014 / 1104, so from 2;
/// iq2_xs NT 1 1145 / 1155 (within the noise; from 2 as before); iq2_s NT 2 1016 / 977, NT 3
/// 864 / 978, so from 3 as before; iq3_xxs NT 1 1646 / 1518, NT 2 1237 / 1514, so from 2;
/// iq3_s NT 1 1256 / 1309, so at every NT.
///
/// With the int8 products (`-DQK_IQ_HMMA=0`, [`crate::kernels::iq_hmma`]) the IQ formats keep
/// the token counts measured for them before.
///
/// Session 31 tiled the IQ2/IQ3 formats (layout.rs, [`crate::layout::iq_tile`], the default
/// since), which sped up their lane kernels more than their tensor cores (H100,
/// benches/results/2026-12-06-session31 run1-ciqtile `ciqtile.md`, kernel-only GB/s, two
/// interleaved rounds alike; lanes / fp16 tensor cores, tiled): iq2_xxs NT 1 1934 / 1172, NT 2
/// 1249 / 1167, NT 3 972 / 1167, so from 3; iq2_xs NT 2 1207 / 1234, so from 2 as before; iq2_s
/// NT 2 1232 / 1288, so from 2; iq3_xxs NT 2 1590 / 1520, NT 3 1245 / 1508, so from 3; iq3_s NT 1
/// 1955 / 1439, NT 2 1465 / 1436, NT 3 1209 / 1435, so from 3. Row-major
/// (`QKERN_CUDA_IQ_TILE=0`) they keep session 28's token counts.
pub fn mma_default_mask(format: Format) -> u32 {
    let int8 = format.is_iq_grid() && crate::kernels::iq_hmma() == 0;
    let tiled = format.is_iq_grid() && crate::layout::iq_tile() && !int8; // fp16 products, tiled
    let nts: &[u32] = match format {
        Format::IQ2_XS | Format::IQ3_S if int8 => &[2, 3, 4, 5, 6, 7, 8],
        Format::IQ2_XXS if int8 => &[3, 4, 5, 6, 7, 8],
        Format::IQ3_XXS if int8 => &[4, 5, 6, 7, 8],
        Format::IQ2_XXS | Format::IQ3_XXS | Format::IQ3_S if tiled => &[3, 4, 5, 6, 7, 8],
        Format::IQ2_XS | Format::IQ2_S if tiled => &[2, 3, 4, 5, 6, 7, 8],
        Format::IQ3_S => &[1, 2, 3, 4, 5, 6, 7, 8],
        Format::IQ2_XXS | Format::IQ2_XS | Format::IQ3_XXS => &[2, 3, 4, 5, 6, 7, 8],
        Format::Q4_K | Format::Q5_K | Format::Q6_K | Format::IQ2_S | Format::IQ4_XS => &[3, 4, 5, 6, 7, 8],
        _ => &[],
    };
    mask_of(nts)
}

/// Index of the tensor-core kernel in [`mm_kernel_names`].
pub const MMA_KERNEL: usize = 24;

/// Index of the one-thread-per-row kernel (32-element formats, mm_common.cuh `mmr_body`) for
/// `ntm` tokens in [`mm_kernel_names`].
pub fn row_kernel_index(ntm: u32) -> usize {
    MMA_KERNEL + ntm.clamp(1, 8) as usize
}

/// Whether the format has one-thread-per-row kernels (`qk_mmr_*`): the 32-element formats.
pub fn has_row(format: Format) -> bool {
    !has_split(format)
}

/// The token counts (bit `ntm - 1` of the mask) at which a 32-element format runs its
/// one-thread-per-row kernel in large launches (`QKERN_CUDA_ROW_NT=n` overrides: n and above;
/// 0: never). The two-thread kernels at high NT are bound by L1 requests (Nsight Compute: L1
/// 89 % busy for q5_1 at NT 8, 87 % for q8_0, HBM 19-33 %; each warp-wide activation load
/// serves 16 rows); one thread per row halves those per row, at twice the accumulators per
/// thread. Where it measured faster (H200, 1 GiB, kernel-only GB/s, two threads / one,
/// benches/results/2026-12-05-h200-session16 run2 `cact.txt`, the row kernels copying their
/// job and with their per-format L2 prefetch, mm_common.cuh `mmr_pf`): q5_1 at every NT (NT 1
/// 3459 / 3742, NT 4 1926 / 2468, NT 7 1152 / 1388, NT 8 1056 / 1192); q8_0 NT 4-8 (NT 4 2767 /
/// 3356, NT 8 1718 / 2094; NT 1-3 slower: 4196 / 3716, 3602 / 3522 at NT 3); iq4_nl NT 1-4 (NT
/// 2 1900 / 2474, NT 4 1583 / 1705; from NT 5 slower: its even and odd accumulators double the
/// registers); nvfp4 NT 2 and 4-7 (NT 2 2259 / 2365, NT 7 1077 / 1196; NT 1, 3, 8 slower),
/// and since session 20's one-ahead weight loads (mm_common.cuh `MMR_PIPE`) also NT 1 (H100,
/// benches/results/2026-12-05-session20 run3 / run4, two machine sessions: NT 1 2469 / 2581,
/// 2562 / 2592; NT 3 went both ways, 1698 / 1878 and 2053 / 1893, and stays with two threads).
/// Session 13 (run3) had q5_1 slower on one thread at NT 7-8 and nvfp4 at NT 6-7, before the
/// job copy.
pub fn row_default_mask(format: Format) -> u32 {
    let nts: &[u32] = match format {
        Format::Q5_1 => &[1, 2, 3, 4, 5, 6, 7, 8],
        Format::Q8_0 => &[4, 5, 6, 7, 8],
        Format::IQ4_NL => &[1, 2, 3, 4],
        Format::NVFP4 => &[1, 2, 4, 5, 6, 7],
        _ => &[],
    };
    mask_of(nts)
}

/// Whether token-count mask `mask` (bit `n - 1` for each n, as [`mask_of`]) holds `n` (1..=8).
fn in_mask(mask: u32, n: u32) -> bool {
    mask >> (n - 1) & 1 == 1
}

/// A token-count mask (bit `n - 1` for each n) from its token counts.
fn mask_of(nts: &[u32]) -> u32 {
    nts.iter().fold(0, |m, &n| m | 1 << (n - 1))
}

/// The token counts (a mask as [`row_default_mask`]) at which a 32-element format runs its
/// one-thread-per-row kernel on a staged copy of the activations (`qk_mmc_*`,
/// `QKERN_CUDA_CACT_NT=n`: n and above). Since session 23 the copy is the kernel's own shared
/// memory (mm_common.cuh `QK_CACT_SMEM`, [`PlanKnobs::cact_smem`]): each CTA copies its job's
/// tokens once (where they fit 48 KiB, [`sact_bytes`]) and its warps read the words by
/// broadcast LDS, which leaves the L1 to the weights. With the bank every job of the launch
/// must use one activation buffer of at most [`CACT_BYTES`].
/// Where it measured faster than the default kernels (H100, kernel-only GB/s, default / shared
/// memory at every NT, benches/results/2026-12-06-session23 run4 `sweep.md`): q5_1 NT 4 2143 /
/// 2563, NT 8 1110 / 1828 (NT 1 2826 / 2716, NT 2 2629 / 2584: slower); q8_0 NT 4 2691 / 2713,
/// NT 8 2089 (in the bank) / 2275 (NT 1-2 slower: 2931 / 2266, 2913 / 2510); iq4_nl NT 2 2398 /
/// 2498, NT 4 1878 / 2263 (NT 8 slower, 919 / 741: its accumulators spill); nvfp4 at every NT
/// measured (NT 1 2572 / 2639, NT 2 2407 / 2554, NT 4 1798 / 2003, NT 8 969 / 1326). Session
/// 24 (H100, benches/results/2026-12-06-session24 run3 `ntsweep.md`, every NT, default kernel /
/// shared memory) added q5_1 NT 3 (2283 / 2717) and iq4_nl NT 5-6 (two threads a row, 1377 /
/// 1817 and 1093 / 1306; NT 7 1038 / 1075 is within the noise and stays); the rest of that
/// sweep agreed with the masks (q8_0 NT 3: two threads 2993, shared memory 2899; nvfp4 NT 5
/// 1635 / 1624). Session 27 added iq4_nl NT 7-8 and q5_1 NT 2, where their staged kernels run
/// two threads a row ([`pair_default_mask`]).
///
/// Before, the staged copy was the module's constant bank (mm_common.cuh `ActC` with
/// `QK_CACT_SMEM=0`, the default on devices with less shared memory): in sm_90 SASS the words
/// arrive by uniform loads (ULDC.64) as the IDP operands. Only q8_0 at NT 8 took it (2103
/// against 2057 GB/s on the H200, benches/results/2026-12-05-h200-session16 run2 `cact.txt`;
/// 2090 / 2125 against 1851 / 1884 on H100s, session 20); elsewhere it went both ways between
/// the cards (q5_1 NT 8: 990 against 1183 on the H200, 1462 against 1107 on an H100) or lost.
/// With the bank, the copy into it before a launch whose activations changed, ordered on the
/// stream, is part of the call; so is the bank mask below.
pub fn cact_default_mask(format: Format, smem: bool) -> u32 {
    match format {
        Format::Q5_1 if smem => mask_of(&[2, 3, 4, 5, 6, 7, 8]),
        Format::Q8_0 if smem => mask_of(&[4, 5, 6, 7, 8]),
        Format::IQ4_NL if smem => mask_of(&[2, 3, 4, 5, 6, 7, 8]),
        Format::NVFP4 if smem => mask_of(&[1, 2, 3, 4, 5, 6, 7, 8]),
        Format::Q8_0 => mask_of(&[8]),
        _ => 0,
    }
}

/// Whether the format has staged row kernels with two threads per row (`qk_mmp_*`,
/// mm_common.cuh `mmr_body` TPR 2), each with half the one-thread kernel's accumulators:
/// iq4_nl and q5_1, where they are the default at some token counts ([`pair_default_mask`]).
/// iq4_nl's split by block parity: its one-thread kernels keep its even and odd chains (ggml's
/// accum1 and accum2) in one thread, 16 floats a token, and spill from NT 4 on 128 registers
/// (792 bytes at NT 8, ptxas 13.0). q5_1's split by lane (lanes 0-3 and 4-7 of its one
/// chain). q8_0's and nvfp4's lane splits measured slower at every NT (session 27 run7) and
/// are not built: they added about 1.3 s to the NVRTC compile of q8_0's module (to be
/// tried again, add `MM_KERNELS_P` to its .cu file and the format here).
pub fn has_pair(format: Format) -> bool {
    matches!(format, Format::IQ4_NL | Format::Q5_1)
}

/// The token counts (a mask as [`row_default_mask`]) at which a format with
/// [`has_pair`] runs the staged launches on its two-threads-a-row kernels (`qk_mmp_*`,
/// `QKERN_CUDA_PAIR_NT=n`: n and above) instead of `qk_mmc_*`. H100, session 27 run5
/// (benches/results/2026-12-06-session27, `cuda_bench --mma-sweep`, kernel-only GB/s, twice,
/// one thread / two threads a row, both staged), NT 5..8: 1855, 1853 / 1736, 1735; 1540, 1537 /
/// 1568, 1568; 1073, 1070 / 1282, 1282; 723, 722 / 1220, 1220. NT 8 also beats its two chunks
/// of 4 (NT 4 2313, 2311: 1156 for 8 tokens, [`split8_default`]) and NT 7 the two-thread lane
/// kernels it ran on before (1039, 1038). NT 1-4 slower (NT 3 2432 / 1959).
/// The pair kernels take their one-ahead weight loads from the staged kernels' masks
/// (mm_common.cuh `U::PIPE_C`: iq4_nl at NT 6 but not 7-8, q5_1 not at NT 2), as timed here;
/// those were not swept for them separately.
///
/// The lane split (run7, the same sweep, the four formats twice, and twice more with 3 CTAs,
/// `-DQK_MINB_P=3`): only q5_1 at NT 2 gains, 2774, 2784 against its default one-thread
/// kernel's 2647, 2647 (3 CTAs: 2532, 2533). Everywhere else it loses to each NT's default,
/// with either budget: q5_1 NT 1 2774 / 2822, NT 8 1372 (1352) / 1851; q8_0 NT 1 2605 (2838)
/// / 2934, NT 8 1899 (2019) / 2535; nvfp4 NT 1 2355 / 2678, NT 8 1128 (1147) / 1427. iq4_nl's
/// block-parity kernels with 3 CTAs spill at NT 8 (144 bytes) and lose at NT 3-5 too.
pub fn pair_default_mask(format: Format) -> u32 {
    match format {
        Format::IQ4_NL => mask_of(&[6, 7, 8]),
        Format::Q5_1 => mask_of(&[2]),
        _ => 0,
    }
}

/// The mask of [`row_default_mask`] for "from `n` tokens on" (0: never).
pub fn row_mask_from(n: u32) -> u32 {
    if n == 0 { 0 } else { (0xffu32 << (n.min(8) - 1)) & 0xff }
}

/// The NTM values instantiated.
pub const NTMS: [u32; 8] = [1, 2, 3, 4, 5, 6, 7, 8];

/// Whether large launches of the format run an 8-token chunk as two of 4 tokens
/// ([`PlanKnobs::split8`], `QKERN_CUDA_SPLIT8=0|1`): iq4_nl, whose 8-token kernels lose the
/// most to their registers (NT 8 in 3.8x the time of NT 1 on the H200). Kernel-only GB/s, NT 4
/// against NT 8 (two chunks of 4 run at half the NT 4 figure): H200, session 22 `cuda_bench.md`,
/// 1922 against 922 (961 > 922); H100, session 23 run4, 2263 (on the shared-memory kernel, the
/// default at NT 4) against 919 (1131 > 919). Each token's result is the same in any chunk.
/// Since session 27 not where the 8-token chunk runs on the staged two-thread kernel
/// ([`pair_default_mask`], faster than two chunks of 4): only where its copy does not fit.
pub fn split8_default(format: Format) -> bool {
    format == Format::IQ4_NL
}

/// Index of a matmul kernel of a format: `ntm_index * 2 + (S == 4)`.
pub fn mm_kernel_index(ntm: u32, s: u32) -> usize {
    (ntm.clamp(1, 8) as usize - 1) * 2 + usize::from(s == 4)
}

/// Every matmul kernel of a format, in `mm_kernel_index` order (`None` where not built).
pub fn mm_kernel_names(format: Format) -> Vec<Option<String>> {
    let st = stem(format);
    let mut v = Vec::new();
    for ntm in NTMS {
        v.push(Some(format!("qk_mm_{st}_n{ntm}_s1")));
        v.push(has_split(format).then(|| format!("qk_mm_{st}_n{ntm}_s4")));
    }
    for ntm in NTMS {
        v.push(has_mmk(format).then(|| format!("qk_mmk_{st}_n{ntm}")));
    }
    v.push(has_mma(format).then(|| format!("qk_mma_{st}")));
    debug_assert_eq!(v.len(), MMA_KERNEL + 1);
    for ntm in NTMS {
        v.push(has_row(format).then(|| format!("qk_mmr_{st}_n{ntm}")));
    }
    debug_assert_eq!(v.len(), row_kernel_index(8) + 1);
    for ntm in NTMS {
        v.push(has_row(format).then(|| format!("qk_mmc_{st}_n{ntm}")));
    }
    debug_assert_eq!(v.len(), cact_kernel_index(8) + 1);
    for ntm in NTMS {
        v.push(has_pair(format).then(|| format!("qk_mmp_{st}_n{ntm}")));
    }
    debug_assert_eq!(v.len(), pair_kernel_index(8) + 1);
    v
}

/// Whether the format has two-phase small-K kernels (`qk_mmk_*`, mm_common.cuh `mmk_body`):
/// the 32-element formats, and q4_K (q4_k.cu `mmk_q4_k_body`, a MoE expert's gate and up
/// projections; [`KQ_MMK_DEFAULT`], `QKERN_CUDA_KQ_MMK=0|1`).
pub fn has_mmk(format: Format) -> bool {
    !has_split(format) || format == Format::Q4_K
}

/// Whether small q4_K launches take its two-phase kernel by default ([`PlanKnobs::kq_mmk`]):
/// on the H200 a 640 x 2560 gate/up expert at NT 4 took 7.3 us in it against 9.3 us with S = 4,
/// 15.9 against 16.7 us launch to result (benches/results/2026-12-05-h200-session16 run4).
pub const KQ_MMK_DEFAULT: bool = true;

/// The most weight units (blocks; nvfp4's half blocks) per row the two-phase kernel takes.
pub fn mmk_max_units(format: Format) -> u32 {
    if has_split(format) { KQ_MMK_BMAX } else { MMK_UMAX }
}

/// q4_k.cu `KQK_BMAX`: the two-phase q4_K kernel's most super-blocks per row (K <= 4096).
pub const KQ_MMK_BMAX: u32 = 16;

/// Threads per CTA of a two-phase launch with `nb` blocks per row: q4_K's phase 1 has
/// `MMK_R * nb * 8` items (block, row, half, pair), one round of them (at most 512 threads,
/// q4_k.cu `KQK_BLOCK_MAX`); the 32-element formats' `MMK_R * units * 2` items fit in
/// [`MM_BLOCK`]. A 640 x 2560 gate expert (10 blocks) took two rounds of 256 threads, the
/// second with 64 items: 37 % of phase 1's thread work idle, and a second round of loads
/// (H100, benches/results/2026-12-07-session34 run4: 160 CTAs, 15 % occupancy, 71 % of the
/// cycles without an eligible warp).
pub fn mmk_block(format: Format, nb: u32) -> u32 {
    if format == Format::Q4_K { (MMK_R * nb * 8).next_multiple_of(32).clamp(MM_BLOCK, KQK_BLOCK_MAX) } else { MM_BLOCK }
}

/// q4_k.cu `KQK_BLOCK_MAX`: the launch bound of q4_K's two-phase kernel, one round of its
/// largest phase 1.
pub const KQK_BLOCK_MAX: u32 = MMK_R * KQ_MMK_BMAX * 8;

/// Index of the two-phase small-K kernel for `ntm` tokens.
pub fn mmk_kernel_index(ntm: u32) -> usize {
    16 + ntm.clamp(1, 8) as usize - 1
}

/// Rows per CTA of the two-phase kernel (`MMK_R`) and its largest units per row (`MMK_UMAX`).
pub const MMK_R: u32 = 4;
pub const MMK_UMAX: u32 = 32;

pub fn deq_kernel_name(format: Format) -> String {
    format!("qk_deq_{}", stem(format))
}

pub fn quant_kernel_name(act: Format) -> &'static str {
    match act {
        Format::Q8_1 => "qk_quant_q8_1",
        Format::Q8_K => "qk_quant_q8_k",
        _ => "qk_quant_q8_0",
    }
}

/// The grouped quantize kernel of `act` (args [`QuantGroupArgs`]).
pub fn quant_group_kernel_name(act: Format) -> &'static str {
    match act {
        Format::Q8_1 => "qk_quant_group_q8_1",
        Format::Q8_K => "qk_quant_group_q8_k",
        _ => "qk_quant_group_q8_0",
    }
}

/// A matmul to run: one weight matrix against `tokens` activation rows.
#[derive(Clone, Copy, Debug)]
pub struct MmJobDesc {
    pub w: u64,
    pub wd: u64,
    pub a_qs: u64,
    pub a_d: u64,
    pub a_x: u64,
    pub out: u64,
    pub rows: u32,
    pub tokens: u32,
    /// Token stride of the activation buffer (`ActLayout::capw`).
    pub capw: u32,
    /// Activation blocks per token (`ActLayout::blocks`).
    pub act_blocks: u32,
    /// The whole activation buffer (`a_base .. a_base + a_len`, every region above inside):
    /// what the constant-bank kernels mirror ([`cact_kernel_index`]).
    pub a_base: u64,
    pub a_len: u64,
}

/// One planned launch.
#[derive(Clone, Copy, Debug)]
pub struct MmLaunch {
    pub kernel: usize,
    pub grid: u32,
    pub block: u32,
    /// `(src, bytes)`: before this launch, copy `bytes` from device address `src` to the start
    /// of the module's constant bank `qk_cact` (the `qk_mmc_*` kernels; stream-ordered, so the
    /// launch sees them).
    pub stage: Option<(u64, u64)>,
    /// Dynamic shared memory bytes of the launch: with [`PlanKnobs::cact_smem`], what the
    /// staged row kernels copy their tokens into ([`sact_bytes`], at most [`SACT_BYTES`]); else 0.
    pub shared: u32,
}

/// The choices of [`plan_matmul`] that the backend's knobs set.
#[derive(Clone, Copy, Debug, Default)]
pub struct PlanKnobs {
    /// Launches with fewer rows in all than this use the S = 4 kernels (where built), which
    /// put 4x more threads on each row (0 forces S = 1).
    pub s4_rows: u64,
    /// Launches that would have fewer 256-thread CTAs than this use 64-thread CTAs.
    pub min_ctas: u64,
    /// Launches whose largest job's token count has its bit (`tokens - 1`) set and that would
    /// run S = 1 use the format's tensor-core kernel where it has one ([`has_mma`],
    /// [`mma_default_mask`]).
    pub mma_mask: u32,
    /// Launches of at least `s4_rows` rows whose NTM has its bit (`ntm - 1`) set and that
    /// would run the two-thread kernels of a 32-element format run its one-thread-per-row
    /// kernel instead ([`has_row`], [`row_default_mask`]).
    pub row_mask: u32,
    /// Small launches of q4_K with at most [`KQ_MMK_BMAX`] blocks per row run its two-phase
    /// kernel ([`has_mmk`]; the 32-element formats' small launches always do).
    pub kq_mmk: bool,
    /// Like `row_mask`, for the one-thread-per-row kernels that read a staged copy of the
    /// activations ([`cact_kernel_index`]: shared memory or the constant bank, `cact_smem`),
    /// where the copy fits (shared memory: [`sact_bytes`] at most [`SACT_BYTES`]; the bank: one
    /// activation buffer for every job, of at most [`CACT_BYTES`]); before `row_mask`.
    pub cact_mask: u32,
    /// Staged launches (`cact_mask`) whose NTM has its bit set run the format's kernels with two
    /// threads per row ([`has_pair`], [`pair_kernel_index`]) where it has them.
    pub pair_mask: u32,
    /// Jobs of at least `s4_rows` rows run an 8-token chunk as two chunks of 4 (in the same
    /// launch, each reading the weights): where the format's 4-token kernel is more than twice
    /// as fast as its 8-token one ([`split8_default`]). Not where the 8-token chunk would run on
    /// the staged two-threads-a-row kernel (`pair_mask` and `cact_mask` with NT 8, shared
    /// memory, and its copy fits): that one is faster than two chunks of 4.
    pub split8: bool,
    /// Those kernels read the activations from their shared memory, where each CTA copies its
    /// job's tokens itself (mm_common.cuh `QK_CACT_SMEM`), not from the constant bank: then
    /// the jobs may use different buffers of any size, and the copy of `ntm` tokens must fit
    /// [`SACT_BYTES`] ([`sact_bytes`]).
    pub cact_smem: bool,
}

/// Bytes of the constant bank `qk_cact` (mm_common.cuh `QK_CACT_BYTES`).
pub const CACT_BYTES: u64 = 61440;

/// The most bytes of activations the shared-memory row kernels copy (mm_common.cuh
/// `QK_SACT_BYTES`: the dynamic shared memory a launch gets without opting in).
pub const SACT_BYTES: u64 = 49152;

/// The shared memory a CTA of the shared-memory row kernels takes for `ntm` tokens of `cols`
/// columns (mm_common.cuh `ActS`: per 32-element activation block its two quads, its scale and
/// q8_1's sum for every token, 40 * ntm bytes rounded up to 16). The emulator test
/// `shared_copy_sizes_agree_with_the_kernels` holds this and [`SACT_BYTES`] to the kernels'.
pub fn sact_bytes(cols: usize, ntm: u32) -> u64 {
    (cols as u64 / 32) * (5 * ntm as u64).div_ceil(2) * 16
}

/// Index of the one-thread-per-row kernel whose activations come from a staged copy (shared
/// memory or the constant bank: mm_common.cuh `ActC`, `mmc_body`, `qk_mmc_*`) for `ntm` tokens
/// in [`mm_kernel_names`].
pub fn cact_kernel_index(ntm: u32) -> usize {
    row_kernel_index(8) + ntm.clamp(1, 8) as usize
}

/// Index of the staged kernel with two threads per row (`qk_mmp_*`,
/// [`has_pair`]) for `ntm` tokens in [`mm_kernel_names`].
pub fn pair_kernel_index(ntm: u32) -> usize {
    cact_kernel_index(8) + ntm.clamp(1, 8) as usize
}

/// Split `jobs` into launches of at most [`MAX_JOBS`] jobs of at most [`MAX_NT`] tokens
/// each (larger jobs become several token chunks), choose NTM, S and the kernel by `k`
/// ([`PlanKnobs`]), and call `f` for each launch with its arguments. Allocates nothing.
pub fn plan_matmul<E>(
    format: Format,
    cols: usize,
    tab: u64,
    jobs: impl IntoIterator<Item = MmJobDesc>,
    k: PlanKnobs,
    mut f: impl FnMut(MmLaunch, &MmArgs) -> Result<(), E>,
) -> Result<(), E> {
    let act = format.vec_dot_type().unwrap_or(Format::Q8_0);
    let nb = (cols / format.block_elems()) as u32;
    let body = crate::layout::WeightLayout::of(format).map(|l| l.body).unwrap_or(0) as u32;
    let mut args =
        MmArgs { njobs: 0, cols: cols as u32, nb, pf: 0, alen: 0, pad0: 0, tab, jobs: [MmJob::default(); MAX_JOBS] };
    // Per launch: the largest job's tokens, the rows of all jobs, and the one activation
    // buffer all jobs use (None: none yet; Some(None): several).
    struct Acc {
        max_nt: u32,
        rows_total: u64,
        abuf: Option<Option<(u64, u64)>>,
    }
    let mut acc = Acc { max_nt: 0, rows_total: 0, abuf: None };

    let mut flush = |args: &mut MmArgs, acc: &mut Acc| -> Result<(), E> {
        if args.njobs == 0 {
            return Ok(());
        }
        let (max_nt, rows_total) = (acc.max_nt, acc.rows_total);
        let abuf = acc.abuf.flatten();
        *acc = Acc { max_nt: 0, rows_total: 0, abuf: None };
        let ntm = NTMS.into_iter().find(|&n| n >= max_nt).unwrap_or(8);
        let units = nb * if format == Format::NVFP4 { 2 } else { 1 };
        let mma_nt = has_mma(format) && in_mask(k.mma_mask, max_nt.clamp(1, 8));
        // A grouped launch (several jobs: a layer's routed experts) of q4_K at a tensor-core
        // token count runs on the tensor cores with S = 1, not the two-phase kernel nor S = 4:
        // 8 experts of 640 x 2560 at NT 4 took 2.15 against 3.79 us an expert on the H200
        // (benches/results/2026-12-06-session22 run2 `cuda_bench.md`), 1.99 against 3.62 on the
        // H100 (session 21 run3). One expert stays on the two-phase kernel (7.4 us against 8.8).
        let grouped_mma = args.njobs > 1 && has_split(format) && has_mmk(format) && mma_nt;
        if has_mmk(format)
            && (k.kq_mmk || !has_split(format))
            && !grouped_mma
            && units <= mmk_max_units(format)
            && rows_total < k.s4_rows
        {
            // small K: the two-phase kernel, MMK_R rows per 256-thread CTA
            let mut cta = 0u32;
            for j in &mut args.jobs[..args.njobs as usize] {
                j.cta0 = cta;
                cta += j.rows.div_ceil(MMK_R);
            }
            args.pf = 0;
            args.alen = 0;
            let block = mmk_block(format, nb);
            f(MmLaunch { kernel: mmk_kernel_index(ntm), grid: cta, block, stage: None, shared: 0 }, args)?;
            args.njobs = 0;
            return Ok(());
        }
        // (iq4_xs at one token took S = 4 at every size until its kernels got a register budget,
        // QK_MINB_W: then S = 1 measured 2172 GB/s against 1839 with S = 4 at 1 GiB, H200,
        // benches/results/2026-12-04-h200-session9 run5.)
        let s = if has_split(format) && rows_total < k.s4_rows && !grouped_mma { 4 } else { 1 };
        // The tensor-core kernel: a warp per 16 rows, i.e. 2 threads per row like S = 1.
        let mma = s == 1 && mma_nt;
        let large_row = !mma && has_row(format) && rows_total >= k.s4_rows;
        let staged_nt = large_row && in_mask(k.cact_mask, ntm);
        // shared memory: each CTA copies its own job's tokens; the bank: one buffer for all
        let sact = sact_bytes(cols, ntm);
        let shared = if k.cact_smem && staged_nt && sact <= SACT_BYTES { sact as u32 } else { 0 };
        let stage = abuf.filter(|&(base, len)| !k.cact_smem && staged_nt && base != 0 && len > 0 && len <= CACT_BYTES);
        let staged = stage.is_some() || shared > 0;
        let row = staged || (large_row && in_mask(k.row_mask, ntm));
        let pair = staged && has_pair(format) && in_mask(k.pair_mask, ntm);
        let tpr = if pair {
            2
        } else if row {
            1
        } else {
            threads_per_row(format, s)
        };
        // Small launches get 64-thread CTAs, so that more SMs share the rows.
        let ctas =
            |block: u32| args.jobs[..args.njobs as usize].iter().map(|j| j.rows.div_ceil(block / tpr)).sum::<u32>();
        let block = if (ctas(MM_BLOCK) as u64) < k.min_ctas { 64 } else { MM_BLOCK };
        let rpc = block / tpr;
        // Prefetch when the launch's weights fit well within L2 (less than 16 MiB).
        let wbytes: u64 =
            args.jobs[..args.njobs as usize].iter().map(|j| j.rows as u64).sum::<u64>() * (nb * body) as u64;
        args.pf = if wbytes < (16 << 20) { nb * body } else { 0 };
        let mut cta = 0u32;
        for j in &mut args.jobs[..args.njobs as usize] {
            j.cta0 = cta;
            j.a_cb = stage.map_or(0, |(base, _)| base);
            cta += j.rows.div_ceil(rpc);
        }
        args.alen = shared;
        let kernel = if mma {
            MMA_KERNEL
        } else if pair {
            pair_kernel_index(ntm)
        } else if staged {
            cact_kernel_index(ntm)
        } else if row {
            row_kernel_index(ntm)
        } else {
            mm_kernel_index(ntm, s)
        };
        f(MmLaunch { kernel, grid: cta, block, stage, shared }, args)?;
        args.njobs = 0;
        Ok(())
    };

    // An 8-token chunk that would run on the staged two-threads-a-row kernel stays whole (not
    // where 8 tokens take the tensor cores, which come first).
    let pair8 = has_pair(format)
        && !(has_mma(format) && in_mask(k.mma_mask, 8))
        && in_mask(k.pair_mask, 8)
        && in_mask(k.cact_mask, 8)
        && k.cact_smem
        && sact_bytes(cols, 8) <= SACT_BYTES;
    for j in jobs {
        let mut t0 = 0u32;
        while t0 < j.tokens {
            let mut nt = (j.tokens - t0).min(MAX_NT as u32);
            if nt == MAX_NT as u32 && k.split8 && !pair8 && j.rows as u64 >= k.s4_rows {
                nt = 4;
            }
            if args.njobs as usize == MAX_JOBS {
                flush(&mut args, &mut acc)?;
            }
            // Token-interleaved regions: token t0's quants start 16*t0 bytes in (q8_0 / q8_1
            // quads) or 4*t0 (q8_K words), its scales 4*t0; q8_K bsums are per token (32
            // bytes per block).
            let t = t0 as u64;
            args.jobs[args.njobs as usize] = MmJob {
                w: j.w,
                wd: j.wd,
                a_qs: j.a_qs + crate::layout::ActLayout::quant_unit(act) as u64 * t,
                a_d: j.a_d + 4 * t,
                a_x: match act {
                    Format::Q8_1 => j.a_x + 4 * t,
                    Format::Q8_K => j.a_x + 32 * j.act_blocks as u64 * t,
                    _ => 0,
                },
                out: j.out + t * 4 * j.rows as u64,
                rows: j.rows,
                nt,
                cta0: 0,
                capw: j.capw,
                a_cb: 0,
            };
            args.njobs += 1;
            acc.max_nt = acc.max_nt.max(nt);
            acc.rows_total += j.rows as u64;
            let buf = (j.a_base, j.a_len);
            acc.abuf = Some(match acc.abuf {
                None => Some(buf),
                Some(prev) => prev.filter(|&p| p == buf),
            });
            t0 += nt;
        }
    }
    flush(&mut args, &mut acc)
}

/// Grid and block of an activation quantize launch.
pub fn quant_launch(act: Format, cols: usize, tokens: usize) -> (u32, u32) {
    quant_group_launch(act, quant_units(act, cols, tokens))
}

/// Grid and block of a (grouped) quantize launch of `units` blocks in all.
pub fn quant_group_launch(act: Format, units: u32) -> (u32, u32) {
    let block = 128u32;
    let grid = match act {
        Format::Q8_K => units.div_ceil(block / 32),
        _ => units.div_ceil(block),
    };
    (grid.clamp(1, 1 << 20), block)
}

/// Grid and block of a dequantize launch.
pub fn deq_launch(elems: u64) -> (u32, u32) {
    let block = 256u32;
    (elems.div_ceil(block as u64).clamp(1, 65536) as u32, block)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(rows: u32, tokens: u32) -> MmJobDesc {
        MmJobDesc {
            w: 0,
            wd: 0,
            a_qs: 0x1000,
            a_d: 0x9000,
            a_x: 0,
            out: 0,
            rows,
            tokens,
            capw: 8,
            act_blocks: 16,
            a_base: 0x1000,
            a_len: 0xa000,
        }
    }

    /// The kernels `plan_matmul` picks for one job of `rows` x `tokens` (4096 columns).
    fn kernels(f: Format, rows: u32, tokens: u32, s4_rows: u64, mma_nt: u32) -> Vec<(usize, u32, u32)> {
        kernels_r(f, rows, tokens, s4_rows, mma_nt, 0)
    }

    fn kernels_r(f: Format, rows: u32, tokens: u32, s4_rows: u64, mma_nt: u32, row_nt: u32) -> Vec<(usize, u32, u32)> {
        let mut v = Vec::new();
        let k = PlanKnobs {
            s4_rows,
            mma_mask: row_mask_from(mma_nt),
            row_mask: row_mask_from(row_nt),
            ..Default::default()
        };
        plan_matmul::<()>(f, 4096, 0, [job(rows, tokens)], k, |l, a| {
            v.push((l.kernel, l.grid, a.jobs[0].nt));
            Ok(())
        })
        .unwrap();
        v
    }

    #[test]
    fn tensor_core_kernels_are_named_and_defaults_have_one() {
        for f in Format::WEIGHTS {
            let names = mm_kernel_names(f);
            assert_eq!(names.len(), pair_kernel_index(8) + 1);
            for ntm in NTMS {
                let n = &names[row_kernel_index(ntm)];
                assert_eq!(n.is_some(), has_row(f), "{f}");
                assert!(n.as_ref().is_none_or(|n| n == &format!("qk_mmr_{}_n{ntm}", stem(f))));
                let n = &names[cact_kernel_index(ntm)];
                assert_eq!(n.is_some(), has_row(f), "{f}");
                assert!(n.as_ref().is_none_or(|n| n == &format!("qk_mmc_{}_n{ntm}", stem(f))));
                let n = &names[pair_kernel_index(ntm)];
                assert_eq!(n.is_some(), has_pair(f), "{f}");
                assert!(n.as_ref().is_none_or(|n| n == &format!("qk_mmp_{}_n{ntm}", stem(f))));
            }
            assert!(pair_default_mask(f) == 0 || has_pair(f));
            assert!(!has_pair(f) || has_row(f));
            assert!(row_default_mask(f) == 0 || has_row(f));
            assert!(row_default_mask(f) <= 0xff);
            assert_eq!(names[MMA_KERNEL].is_some(), has_mma(f), "{f}");
            if let Some(n) = &names[MMA_KERNEL] {
                assert_eq!(n, &format!("qk_mma_{}", stem(f)));
            }
            let m = mma_default_mask(f);
            assert!(m == 0 || has_mma(f), "{f}: default mask {m:#x}");
            assert!(m <= 0xff, "{f}: default mask {m:#x}");
        }
    }

    #[test]
    fn iq_token_counts_follow_the_products() {
        // fp16 products (the default) from fewer tokens than int8 (-DQK_IQ_HMMA=0); tiled (the
        // default) the lane kernels keep one and two tokens of iq3_s, two of iq2_xxs and
        // iq3_xxs, and the tensor cores take two of iq2_s
        let fp16 = crate::kernels::iq_hmma() != 0;
        let tiled = crate::layout::iq_tile();
        assert_eq!(in_mask(mma_default_mask(Format::IQ3_S), 1), fp16 && !tiled);
        assert_eq!(in_mask(mma_default_mask(Format::IQ3_S), 2), !fp16 || !tiled);
        assert_eq!(in_mask(mma_default_mask(Format::IQ3_XXS), 2), fp16 && !tiled);
        assert_eq!(in_mask(mma_default_mask(Format::IQ2_XXS), 2), fp16 && !tiled);
        assert!(in_mask(mma_default_mask(Format::IQ2_XS), 2));
        assert_eq!(in_mask(mma_default_mask(Format::IQ2_S), 2), fp16 && tiled);
        for f in [Format::IQ2_XXS, Format::IQ2_XS, Format::IQ2_S, Format::IQ3_XXS, Format::IQ3_S] {
            assert!((4..=8).all(|n| in_mask(mma_default_mask(f), n)), "{f}");
            assert!(!in_mask(mma_default_mask(f), 1) || (f == Format::IQ3_S && fp16 && !tiled), "{f}");
        }
    }

    #[test]
    fn plan_picks_the_row_kernel_from_its_token_count_in_large_launches() {
        let rows = 100_000;
        // two threads per row below row_nt: 128 rows per 256-thread CTA; one from it: 256
        assert_eq!(kernels_r(Format::Q5_1, rows, 3, 0, 0, 4), vec![(mm_kernel_index(3, 1), rows.div_ceil(128), 3)]);
        assert_eq!(kernels_r(Format::Q5_1, rows, 4, 0, 0, 4), vec![(row_kernel_index(4), rows.div_ceil(256), 4)]);
        assert_eq!(kernels_r(Format::Q8_0, rows, 8, 0, 0, 1)[0].0, row_kernel_index(8));
        // launches under s4_rows rows keep the two-thread kernels; the tensor cores go first;
        // the 256-element formats have none
        assert_eq!(kernels_r(Format::Q8_0, rows, 8, rows as u64 + 1, 0, 1)[0].0, mm_kernel_index(8, 1));
        assert_eq!(kernels_r(Format::Q5_1, rows, 8, 0, 5, 4)[0].0, MMA_KERNEL);
        assert_eq!(kernels_r(Format::Q4_K, rows, 8, 0, 0, 1)[0].0, mm_kernel_index(8, 1));
        assert_eq!((row_mask_from(0), row_mask_from(1), row_mask_from(8)), (0, 0xff, 0x80));
    }

    /// Staged launches at the pair mask's token counts run two threads a row (128 rows a
    /// 256-thread CTA); launches that are not staged, and the formats without such kernels,
    /// ignore the mask.
    #[test]
    fn plan_picks_the_pair_kernel_only_for_staged_launches() {
        let rows = 100_000;
        let plan = |f: Format, nt: u32, cact: u32, pair: u32| {
            let k = PlanKnobs {
                cact_mask: row_mask_from(cact),
                pair_mask: row_mask_from(pair),
                cact_smem: true,
                ..Default::default()
            };
            let mut v = Vec::new();
            plan_matmul::<()>(f, 4096, 0, [job(rows, nt)], k, |l, _| {
                v.push((l.kernel, l.grid, l.shared));
                Ok(())
            })
            .unwrap();
            v
        };
        let s8 = sact_bytes(4096, 8) as u32;
        assert_eq!(plan(Format::IQ4_NL, 8, 1, 5), vec![(pair_kernel_index(8), rows.div_ceil(128), s8)]);
        assert_eq!(plan(Format::IQ4_NL, 4, 1, 5)[0].0, cact_kernel_index(4));
        assert_eq!(plan(Format::IQ4_NL, 8, 1, 0), vec![(cact_kernel_index(8), rows.div_ceil(256), s8)]);
        assert_eq!(plan(Format::IQ4_NL, 8, 0, 1)[0].0, mm_kernel_index(8, 1));
        assert_eq!(plan(Format::Q5_1, 8, 1, 1), vec![(pair_kernel_index(8), rows.div_ceil(128), s8)]);
        assert_eq!(plan(Format::Q8_0, 8, 1, 1)[0].0, cact_kernel_index(8));
        assert_eq!(plan(Format::Q4_K, 8, 1, 1)[0].0, mm_kernel_index(8, 1));
        // a copy over the shared-memory budget is not staged, so not paired either
        let k = PlanKnobs { cact_mask: 0xff, pair_mask: 0xff, cact_smem: true, ..Default::default() };
        let mut v = Vec::new();
        plan_matmul::<()>(Format::IQ4_NL, 5120, 0, [job(rows, 8)], k, |l, _| {
            v.push(l.kernel);
            Ok(())
        })
        .unwrap();
        assert_eq!(v, vec![mm_kernel_index(8, 1)]);
    }

    #[test]
    fn plan_stages_the_constant_bank_only_for_one_small_buffer_in_large_row_launches() {
        let rows = 100_000;
        let plan = |f: Format, jobs: &[MmJobDesc], cact: u32, row: u32, s4: u64| {
            let mut v = Vec::new();
            let k = PlanKnobs {
                s4_rows: s4,
                cact_mask: row_mask_from(cact),
                row_mask: row_mask_from(row),
                ..Default::default()
            };
            plan_matmul::<()>(f, 4096, 0, jobs.iter().copied(), k, |l, a| {
                let cb: Vec<u64> = a.jobs[..a.njobs as usize].iter().map(|j| j.a_cb).collect();
                v.push((l.kernel, l.grid, l.stage, cb));
                Ok(())
            })
            .unwrap();
            v
        };
        let one = job(rows, 8);
        // from the mask's token count on: the constant-bank kernel, one thread per row, the
        // whole buffer staged, every job pointing at it
        assert_eq!(
            plan(Format::Q8_0, &[one], 8, 0, 0),
            vec![(cact_kernel_index(8), rows.div_ceil(256), Some((0x1000, 0xa000)), vec![0x1000])]
        );
        assert_eq!(plan(Format::Q8_0, &[job(rows, 3)], 4, 1, 0)[0].0, row_kernel_index(3));
        assert_eq!(plan(Format::Q8_0, &[job(rows, 3)], 4, 0, 0)[0].0, mm_kernel_index(3, 1));
        // 11 tokens of one buffer: two chunks of one launch, both on the staged buffer
        let k = plan(Format::Q5_1, &[job(rows, 11)], 1, 0, 0);
        assert_eq!(
            (k.len(), k[0].0, k[0].2, k[0].3.clone()),
            (1, cact_kernel_index(8), Some((0x1000, 0xa000)), vec![0x1000, 0x1000])
        );
        // two buffers, a buffer over the bank, small launches, the 256-element formats: never
        let mut other = one;
        other.a_base = 0x20000;
        let k = plan(Format::Q8_0, &[one, other], 8, 1, 0);
        assert_eq!((k[0].0, k[0].2, k[0].3.clone()), (row_kernel_index(8), None, vec![0, 0]));
        let mut big = one;
        big.a_len = CACT_BYTES + 16;
        assert_eq!(plan(Format::Q8_0, &[big], 8, 0, 0)[0].2, None);
        big.a_len = CACT_BYTES;
        assert!(plan(Format::Q8_0, &[big], 8, 0, 0)[0].2.is_some());
        assert_eq!(plan(Format::Q8_0, &[one], 8, 0, rows as u64 + 1)[0].2, None);
        // the defaults (kernel, dynamic shared bytes): with the bank q8_0 stages it at 8 tokens
        // alone, no other format at any; with shared memory the staged kernels where measured
        // faster, each launch given the buffer's bytes
        let dflt = |f: Format, nt: u32, smem: bool| {
            let k = PlanKnobs {
                cact_mask: cact_default_mask(f, smem),
                row_mask: row_default_mask(f),
                mma_mask: mma_default_mask(f),
                cact_smem: smem,
                ..Default::default()
            };
            let mut v = Vec::new();
            plan_matmul::<()>(f, 4096, 0, [job(rows, nt)], k, |l, _| {
                v.push((l.kernel, l.shared));
                Ok(())
            })
            .unwrap();
            v[0]
        };
        assert_eq!(dflt(Format::Q8_0, 8, false), (cact_kernel_index(8), 0));
        assert_eq!(dflt(Format::Q8_0, 7, false).0, row_kernel_index(7));
        for f in [Format::Q5_1, Format::IQ4_NL, Format::NVFP4] {
            assert!((1..=8).all(|nt| dflt(f, nt, false).0 != cact_kernel_index(nt)), "{f:?}");
        }
        // (4096 columns: 128 activation blocks of 40 * NT bytes, rounded up to 16)
        assert_eq!([1, 2, 3, 8].map(|n| sact_bytes(4096, n)), [6144, 10240, 16384, 40960]);
        let staged = |f: Format| {
            (1..=8u32).filter(|&nt| dflt(f, nt, true) == (cact_kernel_index(nt), sact_bytes(4096, nt) as u32)).count()
        };
        assert_eq!(
            [Format::Q5_1, Format::Q8_0, Format::IQ4_NL, Format::NVFP4].map(staged),
            [7, 5, 7, 8],
            "token counts on the shared-memory kernels"
        );
        assert_eq!(dflt(Format::Q5_1, 1, true), (row_kernel_index(1), 0));
        assert_eq!(dflt(Format::Q8_0, 2, true), (mm_kernel_index(2, 1), 0));
        // with shared memory, each CTA copies its own job's tokens: jobs on different buffers,
        // and buffers of any size, are staged; copies over the budget are not (no bank copy
        // either way)
        let smem = |f: Format, cols: usize, jobs: &[MmJobDesc]| {
            let k = PlanKnobs { cact_mask: 0xff, cact_smem: true, ..Default::default() };
            let mut v = Vec::new();
            plan_matmul::<()>(f, cols, 0, jobs.iter().copied(), k, |l, a| {
                v.push((l.kernel, l.stage, l.shared, a.alen));
                Ok(())
            })
            .unwrap();
            v
        };
        let mut big = one;
        big.a_len = 1 << 30;
        let s8 = sact_bytes(4096, 8) as u32;
        assert_eq!(smem(Format::Q5_1, 4096, &[one, other, big]), vec![(cact_kernel_index(8), None, s8, s8)]);
        // 5120 columns at 8 tokens: 51200 bytes, over the budget; at 7 tokens 45280 fit
        assert_eq!(smem(Format::Q5_1, 5120, &[one]), vec![(mm_kernel_index(8, 1), None, 0, 0)]);
        let mut seven = one;
        seven.tokens = 7;
        let s7 = sact_bytes(5120, 7) as u32;
        assert_eq!(smem(Format::Q5_1, 5120, &[seven]), vec![(cact_kernel_index(7), None, s7, s7)]);
        assert_eq!(plan(Format::Q4_K, &[one], 8, 0, 0)[0].2, None);
    }

    /// iq4_nl's 8-token chunks of large jobs run as two chunks of 4 in the one launch (tokens
    /// 4..8 at their offsets); small jobs and the other formats keep 8; 11 tokens: 4 + 7.
    #[test]
    fn split8_runs_two_chunks_of_four() {
        let plan = |f: Format, rows: u32, tokens: u32, s4_rows: u64| {
            let k = PlanKnobs { s4_rows, split8: split8_default(f), ..Default::default() };
            let mut v = Vec::new();
            plan_matmul::<()>(f, 4096, 0, [job(rows, tokens)], k, |l, a| {
                v.push((
                    l.kernel,
                    a.jobs[..a.njobs as usize].iter().map(|j| (j.nt, j.a_qs, j.a_d, j.out)).collect::<Vec<_>>(),
                ));
                Ok(())
            })
            .unwrap();
            v
        };
        let rows = 1000u32;
        let r = rows as u64;
        assert_eq!(
            plan(Format::IQ4_NL, rows, 8, 0),
            vec![(mm_kernel_index(4, 1), vec![(4, 0x1000, 0x9000, 0), (4, 0x1000 + 64, 0x9000 + 16, 16 * r)])]
        );
        let eleven = plan(Format::IQ4_NL, rows, 11, 0);
        assert_eq!(eleven.len(), 1);
        assert_eq!(eleven[0].1.iter().map(|j| j.0).collect::<Vec<_>>(), vec![4, 7]);
        // a small job (under the S = 4 row threshold), and q8_0: one chunk of 8
        assert_eq!(plan(Format::IQ4_NL, rows, 8, r + 1)[0].1.iter().map(|j| j.0).collect::<Vec<_>>(), vec![8]);
        assert_eq!(plan(Format::Q8_0, rows, 8, 0)[0].1.iter().map(|j| j.0).collect::<Vec<_>>(), vec![8]);
        // the defaults with shared memory: 8 tokens whole on the two-thread staged kernel where
        // its copy fits (4096 columns), two chunks of 4 where it does not (5120)
        let dflt = |cols: usize| {
            let f = Format::IQ4_NL;
            let k = PlanKnobs {
                cact_mask: cact_default_mask(f, true),
                pair_mask: pair_default_mask(f),
                row_mask: row_default_mask(f),
                cact_smem: true,
                split8: split8_default(f),
                ..Default::default()
            };
            let mut v = Vec::new();
            plan_matmul::<()>(f, cols, 0, [job(100_000, 8)], k, |l, a| {
                v.push((l.kernel, a.jobs[..a.njobs as usize].iter().map(|j| j.nt).collect::<Vec<_>>()));
                Ok(())
            })
            .unwrap();
            v
        };
        assert_eq!(dflt(4096), vec![(pair_kernel_index(8), vec![8])]);
        assert_eq!(dflt(5120), vec![(cact_kernel_index(4), vec![4, 4])]);
        // q5_1 with the split forced: 8 tokens whole on its pair kernel, but two chunks of 4
        // where 8 tokens would take the tensor cores instead (the pair kernel never runs there)
        let q51 = |mma_nt: u32| {
            let k = PlanKnobs {
                cact_mask: 0xff,
                pair_mask: 0xff,
                mma_mask: row_mask_from(mma_nt),
                cact_smem: true,
                split8: true,
                ..Default::default()
            };
            let mut v = Vec::new();
            plan_matmul::<()>(Format::Q5_1, 4096, 0, [job(100_000, 8)], k, |l, a| {
                v.push((l.kernel, a.jobs[..a.njobs as usize].iter().map(|j| j.nt).collect::<Vec<_>>()));
                Ok(())
            })
            .unwrap();
            v
        };
        assert_eq!(q51(0), vec![(pair_kernel_index(8), vec![8])]);
        assert_eq!(q51(8), vec![(pair_kernel_index(4), vec![4, 4])]);
    }

    /// A grouped launch of q4_K experts at a tensor-core token count takes the tensor cores
    /// (S = 1); one expert, and token counts off the mask, keep the two-phase kernel; the
    /// 32-element formats' and the other K-quants' grouped launches are unchanged.
    #[test]
    fn grouped_q4_k_experts_take_the_tensor_cores() {
        let pick = |f: Format, cols: usize, experts: usize, nt: u32| {
            let mut v = Vec::new();
            let k = PlanKnobs { s4_rows: 132 * 64, kq_mmk: true, mma_mask: mma_default_mask(f), ..Default::default() };
            plan_matmul::<()>(f, cols, 0, (0..experts).map(|_| job(640, nt)), k, |l, a| {
                v.push((l.kernel, l.grid, a.njobs));
                Ok(())
            })
            .unwrap();
            v
        };
        // 8 gate experts of 640 x 2560 at NT 4: one launch, 40 CTAs of 128 rows
        assert_eq!(pick(Format::Q4_K, 2560, 8, 4), vec![(MMA_KERNEL, 40, 8)]);
        assert_eq!(pick(Format::Q4_K, 2560, 2, 8), vec![(MMA_KERNEL, 10, 2)]);
        // one expert: the two-phase kernel; NT 2 (lanes there): the two-phase kernel too
        assert_eq!(pick(Format::Q4_K, 2560, 1, 4), vec![(mmk_kernel_index(4), 160, 1)]);
        assert_eq!(pick(Format::Q4_K, 2560, 8, 2)[0].0, mmk_kernel_index(2));
        // q8_0's grouped experts (2560 x 640): the two-phase kernel; q5_K's: S = 4 lanes
        assert_eq!(pick(Format::Q8_0, 640, 8, 4)[0].0, mmk_kernel_index(4));
        assert_eq!(pick(Format::Q5_K, 2560, 8, 4)[0].0, mm_kernel_index(4, 4));
    }

    #[test]
    fn q4_k_two_phase_kernel_only_when_asked_small_and_short() {
        let pick = |cols: usize, rows: u32, on: bool| {
            let mut v = Vec::new();
            let k = PlanKnobs { s4_rows: 1 << 20, kq_mmk: on, ..Default::default() };
            plan_matmul::<()>(Format::Q4_K, cols, 0, [job(rows, 4)], k, |l, _| {
                v.push((l.kernel, l.grid));
                Ok(())
            })
            .unwrap();
            v
        };
        // an expert's gate: 640 x 2560 (10 blocks), MMK_R rows per CTA
        assert_eq!(pick(2560, 640, true), vec![(mmk_kernel_index(4), 160)]);
        // one round of phase 1: 4 rows x 10 blocks x 8 items on 320 threads; at least 256, at
        // most 512 (16 blocks); the 32-element formats keep 256
        assert_eq!(mmk_block(Format::Q4_K, 10), 320);
        assert_eq!(mmk_block(Format::Q4_K, 2), MM_BLOCK);
        assert_eq!(mmk_block(Format::Q4_K, KQ_MMK_BMAX), 512);
        assert_eq!(mmk_block(Format::Q8_0, 20), MM_BLOCK);
        assert_eq!(pick(2560, 640, false)[0].0, mm_kernel_index(4, 4));
        // 17 blocks per row: more than the kernel holds
        assert_eq!(pick(17 * 256, 640, true)[0].0, mm_kernel_index(4, 4));
        assert_eq!(pick(16 * 256, 640, true)[0].0, mmk_kernel_index(4));
        assert!(has_mmk(Format::Q4_K) && !has_mmk(Format::Q5_K) && has_mmk(Format::Q8_0));
    }

    #[test]
    fn plan_picks_the_tensor_core_kernel_from_its_token_count() {
        // large launch (S = 1): from mma_nt tokens on, the tensor-core kernel, 2 threads per row
        // (a warp per 16 rows: 128 rows per 256-thread CTA)
        let rows = 100_000;
        assert_eq!(kernels(Format::Q4_K, rows, 2, 0, 3), vec![(mm_kernel_index(2, 1), rows.div_ceil(128), 2)]);
        assert_eq!(kernels(Format::Q4_K, rows, 3, 0, 3), vec![(MMA_KERNEL, rows.div_ceil(128), 3)]);
        // 0: never; a format without one: never
        assert_eq!(kernels(Format::Q4_K, rows, 8, 0, 0)[0].0, mm_kernel_index(8, 1));
        assert_eq!(kernels(Format::Q8_0, rows, 8, 0, 1)[0].0, mm_kernel_index(8, 1));
        // small launches take S = 4, not the tensor cores
        assert_eq!(kernels(Format::Q4_K, 640, 8, u64::MAX, 1)[0].0, mm_kernel_index(8, 4));
        // 11 tokens: an 8-token chunk on the tensor cores, then 3 tokens (still >= 3)
        let k = kernels(Format::Q5_K, rows, 11, 0, 3);
        assert_eq!(k.len(), 1, "both chunks are jobs of one launch");
        assert_eq!(k[0].0, MMA_KERNEL);
        let k = kernels(Format::Q5_K, rows, 10, 0, 3);
        assert_eq!(k[0].0, MMA_KERNEL, "the launch's largest job decides");
    }

    #[test]
    fn default_tensor_core_masks_from_three_tokens() {
        let pick = |f: Format, nt: u32| {
            let k = PlanKnobs { mma_mask: mma_default_mask(f), ..Default::default() };
            let mut v = Vec::new();
            plan_matmul::<()>(f, 4096, 0, [job(100_000, nt)], k, |l, _| {
                v.push(l.kernel);
                Ok(())
            })
            .unwrap();
            v[0]
        };
        let iq4: Vec<usize> = (1..=8).map(|n| pick(Format::IQ4_XS, n)).collect();
        assert_eq!(iq4[..2], [mm_kernel_index(1, 1), mm_kernel_index(2, 1)]);
        assert!(iq4[2..].iter().all(|&k| k == MMA_KERNEL));
        assert_eq!(pick(Format::Q6_K, 2), mm_kernel_index(2, 1));
        assert_eq!(pick(Format::Q6_K, 3), MMA_KERNEL);
        assert_eq!(pick(Format::Q4_K, 4), MMA_KERNEL);
    }
}
