#!/usr/bin/env bash
# Spill evidence for the AVX2 dot kernels (issue 3): disassemble the built qkern-cpu library
# and show, for each kernel specialisation (format x NT), its loops and whether they touch
# the stack with vector instructions (a spilled or reloaded accumulator is a `vmovups`/
# `vmovaps`/`vfmadd...` with an `(%rsp)` operand, or `(%rbp)` where the function keeps a frame
# pointer, inside a loop).
#
# Usage: scripts/spill-check.sh [--no-build] [--avx512] [-v] [NT...]        (default NT: 1 4 8)
#   -v        print every loop's instructions, not only the summary and offending lines
#   --avx512  the AVX-512 path's entry points instead (qkern_cpu::x86::avx512::<format>::...,
#             see cpu/src/x86/avx512.rs), and also check that each calls no qkern kernel
#             function out of line (everything inlined into the AVX-512 entry point) and
#             count its EVEX-only registers (%ymm16-31, %zmm) and VNNI instructions (vpdp*)
#
# Each kernel is a symbol of its own: qkern_cpu::x86::<format>::<nt-module>::nt<N> (see the
# `avx2_chunk_fn!` macro in cpu/src/x86/mod.rs). A loop is a backward branch inside the
# function; the "hot" loops are the innermost loops that contain fused multiply-adds (the
# float accumulation), with any fma-free loops nested in them. For each hot loop the script
# finds the accumulator registers (those the fmas add into and write) and counts vector
# instructions with a stack operand, and among them those that name an accumulator
# register or are fmas themselves (accumulator spills and reloads). Exit status: 0 when no
# hot loop of the requested kernels spills or reloads an accumulator (but those accepted
# below), 1 otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."

build=1
verbose=0
avx512=0
nts=()
for a in "$@"; do
    case "$a" in
        --no-build) build=0 ;;
        --avx512) avx512=1 ;;
        -v) verbose=1 ;;
        -h|--help) sed -n '2,23p' "$0"; exit 0 ;;
        *) nts+=("$a") ;;
    esac
done
[ ${#nts[@]} -eq 0 ] && nts=(1 4 8)

if [ $build = 1 ]; then
    cargo build --release -p qkern-cpu >&2
fi
lib=target/release/libqkern_cpu.rlib
[ -f "$lib" ] || { echo "no $lib (build first)" >&2; exit 2; }

# Kernels whose hot loop spills accumulators and is still the faster loop, as measured:
# q4_K, q6_K and iq4_xs at 2 tokens and q6_K at 4 run one group of tokens without the segment
# buffer (superblocks_g's DIRECT_G in cpu/src/x86/mod.rs), which spills a little and beat the
# spill-free buffered loop by 18-35 % (benches/results/2026-12-05-amd-epyc-2cpu-session12).
# (AVX2 only: the AVX-512 copies have 32 registers.)
accepted=("q4_K:2" "q6_K:2" "q6_K:4" "iq4_xs:2")
[ $avx512 = 1 ] && accepted=()

# format label -> symbol prefix
kernels=(
    "q8_0    qkern_cpu::x86::q8_0::nt"
    "q5_1    qkern_cpu::x86::q5_1::nt"
    "q4_K    qkern_cpu::x86::q4_k::nt"
    "q5_K    qkern_cpu::x86::q5_k::nt"
    "q6_K    qkern_cpu::x86::q6_k::nt"
    "iq2_xxs qkern_cpu::x86::iq::iq2_xxs_nt"
    "iq2_xs  qkern_cpu::x86::iq::iq2_xs_nt"
    "iq2_s   qkern_cpu::x86::iq::iq2_s_nt"
    "iq3_xxs qkern_cpu::x86::iq::iq3_xxs_nt"
    "iq3_s   qkern_cpu::x86::iq::iq3_s_nt"
    "iq4_nl  qkern_cpu::x86::iq4_nl::nt"
    "iq4_xs  qkern_cpu::x86::iq::iq4_xs_nt"
    "nvfp4   qkern_cpu::x86::nvfp4::nt"
)

if [ $avx512 = 1 ]; then
    # Only the formats whose AVX-512 build the AVX-512 path dispatches, as cpu/src/matmul.rs's
    # `kernels!` table says (`avx512 dot Some(crate::x86::avx512::...)`); the others run their
    # AVX2 builds there (checked without --avx512) and their AVX-512 copies are not emitted.
    table=cpu/src/matmul.rs
    avx512_kernels=()
    for k in "${kernels[@]}"; do
        read -r label prefix <<< "$k"
        part=${prefix#qkern_cpu::x86::}; part=${part%nt}   # q8_0:: or iq::iq2_xs_
        grep -qF "avx512 dot Some(crate::x86::avx512::$part" "$table" || continue
        avx512_kernels+=("$label ${prefix/qkern_cpu::x86::/qkern_cpu::x86::avx512::}")
    done
    kernels=("${avx512_kernels[@]}")
    labels=$(for k in "${kernels[@]}"; do echo "${k%% *}"; done | paste -sd' ')
    echo "AVX-512 path: its own builds of ${#kernels[@]} formats ($labels), the AVX2 builds of the others"
fi

dis=$(mktemp)
trap 'rm -f "$dis" "$dis.r"' EXIT
objdump -d -C --no-show-raw-insn "$lib" > "$dis" 2>/dev/null

if [ $avx512 = 1 ]; then
    # Out-of-line calls from the AVX-512 entry points (relocations name the callee in an rlib).
    objdump -dr -C --no-show-raw-insn "$lib" > "$dis.r" 2>/dev/null
    echo "qkern-cpu AVX-512 entry points: out-of-line calls into qkern code, EVEX-only registers, VNNI"
    printf '%-8s %-3s %-7s %-6s %-5s %s\n' format NT y16-31 zmm vpdp calls-into-qkern
    for k in "${kernels[@]}"; do
        read -r label prefix <<< "$k"
        for nt in "${nts[@]}"; do
            sym="$prefix::nt$nt"
            awk -v sym="<$sym>:" -v label="$label" -v nt="$nt" '
                $0 ~ /^[0-9a-f]+ </ { infn = (index($0, sym) > 0); next }
                infn && /R_X86_64_PLT32|R_X86_64_PC32/ && prev ~ /call/ {
                    t = $NF; sub(/-0x4$/, "", t)
                    # panics, bounds checks, OnceLock init, core::array::from_fn (slice refs, as AVX2)
                    if (t ~ /qkern_cpu/ && t !~ /from_fn|OnceLock|panic|f16_table/) { bad++; calls = calls " " t }
                }
                infn && /^ *[0-9a-f]+:/ {
                    prev = $0; found = 1
                    if ($0 ~ /%ymm(1[6-9]|2[0-9]|3[01])/) y16++
                    if ($0 ~ /%zmm/) z++
                    if ($0 ~ /vpdp/) vn++
                }
                END {
                    if (!found) { printf "%-8s %-3s symbol %s not found\n", label, nt, sym; exit 2 }
                    printf "%-8s %-3s %-7d %-6d %-5d %s\n", label, nt, y16, z, vn, (bad ? "OUT OF LINE:" calls : "none")
                    exit (bad ? 1 : 0)
                }' "$dis.r" || fail_calls=1
        done
    done
    echo
fi

fail_calls=${fail_calls:-0}
echo "qkern-cpu $([ $avx512 = 1 ] && echo AVX-512 || echo AVX2) kernels: $lib ($(objdump --version | head -1))"
printf '%-8s %-3s %-6s %-6s %-5s %-9s %-9s %s\n' format NT loops insns accs acc-stack other-stk verdict
fail=$fail_calls
for k in "${kernels[@]}"; do
    read -r label prefix <<< "$k"
    for nt in "${nts[@]}"; do
        sym="$prefix::nt$nt"
        out=$(awk -v sym="<$sym>:" -v verbose="$verbose" '
            function hex(s,   i, c, v) {
                v = 0; s = tolower(s)
                for (i = 1; i <= length(s); i++) { c = index("0123456789abcdef", substr(s, i, 1)); if (c == 0) break; v = v * 16 + c - 1 }
                return v
            }
            # whether instruction k mentions vector register number r
            function mentions(k, r) { return text[k] ~ ("%[xy]mm" r "([^0-9]|$)") }
            # whether instruction k is an fma whose added operand is register r
            function fma_adds(k, r,   ops, o, m, ai) {
                if (text[k] !~ /^vfn?m(add|sub)/) return 0
                ops = text[k]; sub(/^[a-z0-9]+[ \t]+/, "", ops); m = split(ops, o, /,/)
                ai = (text[k] ~ /^vfn?m(add|sub)213/) ? 1 : (text[k] ~ /^vfn?m(add|sub)132/) ? 2 : m
                return o[ai] == ("%ymm" r) || o[ai] == ("%xmm" r)
            }
            # the next instruction after j in the loop [lo, hi] (wrapping) that mentions r: an fma adding r?
            function next_is_fma_add(j, r, lo, hi,   k, pass) {
                for (pass = 0; pass < 2; pass++)
                    for (k = (pass ? 0 : j + 1); k < n; k++) {
                        if (addr[k] < lo || addr[k] > hi) continue
                        if (pass && k >= j) return 0
                        if (mentions(k, r)) return fma_adds(k, r)
                    }
                return 0
            }
            # the last instruction before j in the loop (wrapping) that mentions r: an fma writing r?
            function prev_is_fma_write(j, r, lo, hi,   k, pass, ops, o, m) {
                for (pass = 0; pass < 2; pass++)
                    for (k = (pass ? n - 1 : j - 1); k >= 0; k--) {
                        if (addr[k] < lo || addr[k] > hi) continue
                        if (pass && k <= j) return 0
                        if (mentions(k, r)) {
                            if (text[k] !~ /^vfn?m(add|sub)/) return 0
                            ops = text[k]; sub(/^[a-z0-9]+[ \t]+/, "", ops); m = split(ops, o, /,/)
                            return o[m] == ("%ymm" r) || o[m] == ("%xmm" r)
                        }
                    }
                return 0
            }
            $0 ~ /^[0-9a-f]+ </ { infn = (index($0, sym) > 0); next }
            infn && /^ *[0-9a-f]+:/ {
                line[n] = $0
                a = $1; sub(":", "", a); addr[n] = hex(a)
                ins = $0; sub(/^ *[0-9a-f]+:[ \t]*/, "", ins); text[n] = ins
                n++
            }
            END {
                if (n == 0) { print "MISSING"; exit }
                # %rbp addresses the stack only where the function keeps a frame pointer;
                # elsewhere LLVM uses it as one more general register
                fp = 0; for (k = 0; k < n; k++) if (text[k] ~ /^mov[ \t]+%rsp,%rbp/) fp = 1
                stackre = fp ? "\\(%r[sb]p[),]" : "\\(%rsp[),]"
                loops = 0; bad = 0; bufacc = 0; hot_insns = 0; accs = ""
                # all loops: backward branches [lt, lb]
                nl = 0
                for (i = 0; i < n; i++) {
                    split(text[i], f, /[ \t]+/)
                    if (f[1] !~ /^j/) continue
                    tgt = f[2]; if (tgt !~ /^[0-9a-f]+$/) continue
                    t = hex(tgt); if (t > addr[i]) continue
                    nl++; lt[nl] = t; lb[nl] = addr[i]; li[nl] = i
                }
                # loops holding float accumulators: containing an fma
                for (L = 1; L <= nl; L++) {
                    hasfma[L] = 0
                    for (j = 0; j < n; j++) if (addr[j] >= lt[L] && addr[j] <= lb[L] && text[j] ~ /^vfn?m(add|sub)/) hasfma[L] = 1
                }
                for (L = 1; L <= nl; L++) {
                    t = lt[L]; i = li[L]
                    if (!hasfma[L]) continue
                    # the innermost such loops: skip one that contains another loop with an fma
                    inner = 1
                    for (M = 1; M <= nl; M++) if (M != L && hasfma[M] && lt[M] >= t && lb[M] <= addr[i] && !(lt[M] == t && lb[M] == addr[i])) inner = 0
                    if (!inner) continue
                    # loop body: [t, addr[i]] (nested loops without fmas included)
                    loops++
                    delete acc
                    body = ""; sv = 0; sa = 0
                    # pass 1: the accumulators = destinations of vfmadd231ps/ss (acc += a*b)
                    for (j = 0; j < n; j++) {
                        if (addr[j] < t || addr[j] > addr[i]) continue
                        # AT&T operand order: 231 `a, b, ACC`; 213 `ADD, b, DST`; 132 `b, ADD, DST`:
                        # the added operand and the result register both carry the accumulator.
                        if (text[j] ~ /^vfn?m(add|sub)/) {
                            ops = text[j]; sub(/^[a-z0-9]+[ \t]+/, "", ops); m = split(ops, o, /,/)
                            r = o[m]; sub(/%[xy]mm/, "", r); acc[r] = 1
                            ai = (text[j] ~ /^vfn?m(add|sub)213/) ? 1 : (text[j] ~ /^vfn?m(add|sub)132/) ? 2 : 0
                            if (ai && o[ai] ~ /^%[xy]mm[0-9]+$/) { r = o[ai]; sub(/%[xy]mm/, "", r); acc[r] = 1 }
                        }
                    }
                    # pass 2: vector stack accesses; those naming an accumulator register, and
                    # any fma with a stack operand, are accumulator spills/reloads
                    for (j = 0; j < n; j++) {
                        if (addr[j] < t || addr[j] > addr[i]) continue
                        hot_insns++
                        tag = "    "
                        if (text[j] ~ /^v/ && text[j] ~ stackre) {
                            sv++; tag = "  S "
                            isacc = (text[j] ~ /^vfn?m(add|sub)/)
                            ops = text[j]; sub(/^[a-z0-9]+[ \t]+/, "", ops)
                            m = split(ops, o, /,/)
                            # The register operand: for a store (memory last) the source, for
                            # a load the destination. A register that is an accumulator
                            # somewhere in the loop may also serve as a temporary elsewhere
                            # (vfmadd213 rotates the accumulator through registers), so follow
                            # the value: a store spills an accumulator when the register was
                            # last written by an fma; a load reloads one when the next use of the
                            # register is as the added operand of an fma.
                            if (!isacc) {
                                r = ""
                                if (text[j] ~ /\)$/) { for (q = 1; q <= m; q++) if (o[q] ~ /^%[xy]mm[0-9]+$/) { r = o[q]; break } }
                                else if (o[m] ~ /^%[xy]mm[0-9]+$/) r = o[m]
                                if (r != "") {
                                    sub(/%[xy]mm/, "", r)
                                    if (r in acc) {
                                        if (text[j] ~ /\)$/) isacc = prev_is_fma_write(j, r, t, addr[i])
                                        else isacc = next_is_fma_add(j, r, t, addr[i])
                                    }
                                }
                            }
                            if (isacc) { sa++; tag = "  A " }
                            if (!verbose) body = body "    " tag line[j] "\n"
                        }
                        if (verbose) body = body "    " tag line[j] "\n"
                    }
                    bad += sa; bufacc += sv - sa
                    s = ""; for (r in acc) s = s (s == "" ? "" : " ") "ymm" r
                    accs = accs (accs == "" ? "" : " ") s
                    printf "  loop %x..%x: accumulators %s; %d vector stack accesses, %d of them on accumulators (A)\n%s", t, addr[i], s, sv, sa, body > "/dev/stderr"
                }
                nacc = split(accs, tmp, / /)
                printf "%d %d %d %d %d\n", loops, hot_insns, nacc, bufacc, bad
            }' "$dis" 2>"$dis.loops")
        if [ "$out" = "MISSING" ]; then
            printf '%-8s %-3s %s\n' "$label" "$nt" "symbol $sym not found"
            fail=1
            continue
        fi
        read -r loops insns naccs other bad <<< "$out"
        if [ "$loops" = 0 ]; then verdict="no hot loop?"; fail=1
        elif [ "$bad" = 0 ]; then verdict="accumulators in registers"
        elif [[ " ${accepted[*]} " == *" $label:$nt "* ]]; then verdict="accumulator spills (accepted: measured faster)"
        else verdict="ACCUMULATOR SPILLS"; fail=1; fi
        printf '%-8s %-3s %-6s %-6s %-5s %-9s %-9s %s\n' "$label" "$nt" "$loops" "$insns" "$naccs" "$bad" "$other" "$verdict"
        if [ "$bad" != 0 ] || [ "$verbose" = 1 ]; then sed 's/^/        /' "$dis.loops"; fi
    done
done
rm -f "$dis.loops"
echo
echo "loops: hot loops (innermost loops with fmas, nested fma-free loops included); insns: instructions in them;"
echo "accs: float accumulator registers (results and added operands of the vfmadds) in them; acc-stack: vector"
echo "stack accesses (an (%rsp)/(%rbp) operand) naming an accumulator register, or fmas with a"
echo "stack operand (= accumulator spills/reloads; must be 0); other-stk: other vector stack"
echo "accesses (the K-quant/IQ kernels' per-super-block weight buffer, read once per token)."
exit $fail
