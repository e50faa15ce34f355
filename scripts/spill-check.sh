#!/usr/bin/env bash
# Spill evidence for the AVX2 dot kernels (issue 3): disassemble the built qkern-cpu library
# and show, for each kernel specialisation (format x NT), its loops and whether they touch
# the stack with vector instructions (a spilled or reloaded accumulator is a `vmovups`/
# `vmovaps`/`vfmadd...` with an `(%rsp)` or `(%rbp)` operand inside a loop).
#
# Usage: scripts/spill-check.sh [--no-build] [-v] [NT...]        (default NT: 1 4 8)
#   -v   print every loop's instructions, not only the summary and offending lines
#
# Each kernel is a symbol of its own: qkern_cpu::x86::<format>::<nt-module>::nt<N> (see the
# `avx2_chunk_fn!` macro in cpu/src/x86/mod.rs). A loop is a backward branch inside the
# function; "hot" loops are those containing the kernel's multiply instructions
# (vpmaddubsw / vpmaddwd / vfmadd*). For each hot loop the script lists the registers that
# are fma destinations (the float accumulators) and counts vector instructions with a stack
# operand. Exit status: 0 when no hot loop of the requested kernels touches the stack with
# vector instructions, 1 otherwise (the table says which).
set -euo pipefail
cd "$(dirname "$0")/.."

build=1
verbose=0
nts=()
for a in "$@"; do
    case "$a" in
        --no-build) build=0 ;;
        -v) verbose=1 ;;
        -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
        *) nts+=("$a") ;;
    esac
done
[ ${#nts[@]} -eq 0 ] && nts=(1 4 8)

if [ $build = 1 ]; then
    cargo build --release -p qkern-cpu >&2
fi
lib=target/release/libqkern_cpu.rlib
[ -f "$lib" ] || { echo "no $lib (build first)" >&2; exit 2; }

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

dis=$(mktemp)
trap 'rm -f "$dis"' EXIT
objdump -d -C --no-show-raw-insn "$lib" > "$dis" 2>/dev/null

echo "qkern-cpu AVX2 kernels: $lib ($(objdump --version | head -1))"
printf '%-8s %-3s %-6s %-6s %-5s %-9s %-9s %s\n' format NT loops insns accs acc-stack other-stk verdict
fail=0
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
            $0 ~ /^[0-9a-f]+ </ { infn = (index($0, sym) > 0); next }
            infn && /^ *[0-9a-f]+:/ {
                line[n] = $0
                a = $1; sub(":", "", a); addr[n] = hex(a)
                ins = $0; sub(/^ *[0-9a-f]+:[ \t]*/, "", ins); text[n] = ins
                n++
            }
            END {
                if (n == 0) { print "MISSING"; exit }
                loops = 0; bad = 0; bufacc = 0; hot_insns = 0; accs = ""
                for (i = 0; i < n; i++) {
                    split(text[i], f, /[ \t]+/)
                    if (f[1] !~ /^j/) continue
                    tgt = f[2]; if (tgt !~ /^[0-9a-f]+$/) continue
                    t = hex(tgt); if (t > addr[i]) continue
                    # loop body: [t, addr[i]]
                    hot = 0
                    for (j = 0; j < n; j++) if (addr[j] >= t && addr[j] <= addr[i] && text[j] ~ /vpmaddubsw|vpmaddwd|vfmadd/) hot = 1
                    if (!hot) continue
                    loops++
                    delete acc
                    body = ""; sv = 0; sa = 0
                    # pass 1: the accumulators = destinations of vfmadd231ps/ss (acc += a*b)
                    for (j = 0; j < n; j++) {
                        if (addr[j] < t || addr[j] > addr[i]) continue
                        if (text[j] ~ /^vfmadd231/) { r = text[j]; sub(/.*,/, "", r); sub(/%[xy]mm/, "", r); acc[r] = 1 }
                    }
                    # pass 2: vector stack accesses; those naming an accumulator register, and
                    # any fma with a stack operand, are accumulator spills/reloads
                    for (j = 0; j < n; j++) {
                        if (addr[j] < t || addr[j] > addr[i]) continue
                        hot_insns++
                        tag = "    "
                        if (text[j] ~ /^v/ && text[j] ~ /\(%r[sb]p\)|\(%r[sb]p,/) {
                            sv++; tag = "  S "
                            isacc = (text[j] ~ /^vfmadd/)
                            ops = text[j]; sub(/^[a-z0-9]+[ \t]+/, "", ops)
                            m = split(ops, o, /,/)
                            for (q = 1; q <= m; q++) if (o[q] ~ /^%[xy]mm[0-9]+$/) { r = o[q]; sub(/%[xy]mm/, "", r); if (r in acc) isacc = 1 }
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
        else verdict="ACCUMULATOR SPILLS"; fail=1; fi
        printf '%-8s %-3s %-6s %-6s %-5s %-9s %-9s %s\n' "$label" "$nt" "$loops" "$insns" "$naccs" "$bad" "$other" "$verdict"
        if [ "$bad" != 0 ] || [ "$verbose" = 1 ]; then sed 's/^/        /' "$dis.loops"; fi
    done
done
rm -f "$dis.loops"
echo
echo "loops: hot loops (containing vpmaddubsw/vpmaddwd/vfmadd); insns: instructions in them;"
echo "accs: float accumulator registers (vfmadd231 destinations) in them; acc-stack: vector"
echo "stack accesses (an (%rsp)/(%rbp) operand) naming an accumulator register, or fmas with a"
echo "stack operand (= accumulator spills/reloads; must be 0); other-stk: other vector stack"
echo "accesses (the K-quant/IQ kernels' per-super-block weight buffer, read once per token)."
exit $fail
