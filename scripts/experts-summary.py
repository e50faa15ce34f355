#!/usr/bin/env python3
# Medians of the MoE expert rows of gpu-run.sh experts' files (experts_<variant><round>.md in DIR):
# kernel us / launch to result, device out / to host out / grouped x8 us an expert, per variant.
#   python3 scripts/experts-summary.py DIR
import sys,glob,re,statistics,os
d=sys.argv[1]
res={}
for f in sorted(glob.glob(os.path.join(d,'experts_*.md'))):
    v=re.sub(r'\d$','',os.path.basename(f)[8:-3])
    for line in open(f):
        m=re.match(r'\| (gate/up 640x2560|down 2560x640) \| (\w+) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \|',line)
        if m:
            res.setdefault((m.group(2),v),[]).append(tuple(float(m.group(i)) for i in range(3,7)))
vs=[]
for (_,v) in res:
    if v not in vs: vs.append(v)
print("| expert | "+" | ".join(vs)+" |")
print("|---|"+"---|"*len(vs))
for f in ['q4_K','q5_1','q8_0','iq4_nl']:
    cells=[]
    for v in vs:
        r=res.get((f,v))
        if not r: cells.append('-'); continue
        med=[statistics.median(x[i] for x in r) for i in range(4)]
        cells.append(f"{med[0]:.2f} / {med[1]:.2f} / {med[2]:.2f} / {med[3]:.2f}")
    print(f"| {f} | "+" | ".join(cells)+" |")
